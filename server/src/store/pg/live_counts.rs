//! The live counts a PostgreSQL writer batch read, per scope and threshold,
//! kept exact by its own writes ([`LiveCounts`]), so each is read once per
//! batch, not once per checkout.
//!
//! Only counts of the licenses whose exclusive advisory lock the batch
//! holds (those it checks out from) are kept. No other batch changes those
//! licenses' leases until it commits: every heartbeat, release and checkout
//! of them takes the lock, and a revoke or reap waits for their
//! `lease_rows` rows, which the batch holds too. So a count read once, then
//! moved by each of the batch's own inserts, renewals and deletes
//! (`Scope::counts`, the test the SQL makes), is what the database would
//! answer again. Changes not followed one by one (a reap, the outage rule,
//! a failed command) forget them.

use std::collections::HashSet;

use leasehold_common::Timestamp;

use crate::store::{LeaseRow, Scope, SeatMode};

/// Live counts the batch read of the licenses whose exclusive lock it holds.
#[derive(Default)]
pub struct LiveCounts {
    locked: HashSet<String>,
    known: Vec<KnownCount>,
}

struct KnownCount {
    license_id: String,
    of: CountOf,
    threshold: Timestamp,
    live: u32,
}

enum CountOf {
    License,
    Group(String),
    Holder(String),
    Mode(SeatMode),
}

impl KnownCount {
    fn new(scope: Scope<'_>, threshold: Timestamp, live: u32) -> KnownCount {
        let of = match scope {
            Scope::License(_) => CountOf::License,
            Scope::Group { group, .. } => CountOf::Group(group.to_string()),
            Scope::Holder { holder, .. } => CountOf::Holder(holder.to_string()),
            Scope::Mode { mode, .. } => CountOf::Mode(mode),
        };
        KnownCount {
            license_id: scope.license_id().to_string(),
            of,
            threshold,
            live,
        }
    }

    fn scope(&self) -> Scope<'_> {
        let license_id = &self.license_id;
        match &self.of {
            CountOf::License => Scope::License(license_id),
            CountOf::Group(group) => Scope::Group { license_id, group },
            CountOf::Holder(holder) => Scope::Holder { license_id, holder },
            CountOf::Mode(mode) => Scope::Mode {
                license_id,
                mode: *mode,
            },
        }
    }
}

impl LiveCounts {
    /// The batch holds these licenses' exclusive locks.
    pub fn lock_held(&mut self, license_ids: &[&str]) {
        self.locked = license_ids.iter().map(|id| (*id).to_string()).collect();
    }

    pub fn known(&self, scope: Scope<'_>, threshold: Timestamp) -> Option<u32> {
        self.known
            .iter()
            .find(|k| k.threshold == threshold && k.scope() == scope)
            .map(|k| k.live)
    }

    /// A count the database answered (with the batch's writes sent): kept
    /// if no other batch can change it meanwhile.
    pub fn read(&mut self, scope: Scope<'_>, threshold: Timestamp, live: u32) {
        if self.locked.contains(scope.license_id()) {
            self.known.push(KnownCount::new(scope, threshold, live));
        }
    }

    /// The batch changed a lease from `old` to `new` (`None`: not in the
    /// table).
    pub fn changed(&mut self, old: Option<&LeaseRow>, new: Option<&LeaseRow>) {
        for k in &mut self.known {
            let counts =
                |lease: Option<&LeaseRow>| lease.is_some_and(|l| k.scope().counts(l, k.threshold));
            let (was, is) = (counts(old), counts(new));
            if was && !is {
                k.live = k.live.saturating_sub(1);
            } else if is && !was {
                k.live = k.live.saturating_add(1);
            }
        }
    }

    /// Forget every count (the locks held stay).
    pub fn forget(&mut self) {
        self.known.clear();
    }
}
