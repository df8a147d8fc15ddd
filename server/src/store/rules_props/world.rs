//! A world the rules run in: the in-memory store, the licenses, the
//! writer's throttle and the time; and the small helpers the named tests
//! of the rule steps share.

use leasehold_common::api::Event;
use leasehold_common::{Licenses, Timestamp};

use super::super::memory::MemoryStore;
use super::super::model::{at, ms};
use super::super::rules::{EventThrottle, Rules};
use super::super::{CheckoutOutcome, CheckoutRequest, HeartbeatOutcome, LeaseRow, Waiter};

/// Events kept by a reap's prune: more than any test appends.
pub const RETENTION: i64 = 1_000_000;

pub struct World {
    pub store: MemoryStore,
    pub licenses: Licenses,
    pub throttle: EventThrottle,
    pub now: Timestamp,
}

impl World {
    pub fn new(toml: &str) -> Self {
        World {
            store: MemoryStore::default(),
            licenses: Licenses::parse(toml).expect("test policy"),
            throttle: EventThrottle::default(),
            now: at(0),
        }
    }

    /// One command: the rules over the store at `now`; its answer and the
    /// events the rules say they wrote.
    pub fn run<R>(&mut self, f: impl FnOnce(&mut Rules<'_, MemoryStore>) -> R) -> (R, Vec<Event>) {
        let mut rules = Rules::new(
            &mut self.store,
            self.now,
            &self.licenses,
            &mut self.throttle,
        );
        let r = f(&mut rules);
        (r, rules.events)
    }

    pub fn checkout(&mut self, req: &CheckoutRequest, ahead: &[Waiter]) -> CheckoutOutcome {
        self.run(|r| r.checkout(req, ahead, true)).0.unwrap()
    }

    pub fn heartbeat(&mut self, license: &str, seat: &str) -> HeartbeatOutcome {
        self.run(|r| r.heartbeat(license, seat, None)).0.unwrap()
    }

    pub fn advance(&mut self, d: u64) {
        self.now = self.now.saturating_add(ms(d));
    }
}

pub fn req(license: &str, holder: &str, fp: Option<&str>, key: Option<&str>) -> CheckoutRequest {
    CheckoutRequest {
        license_id: license.into(),
        holder: holder.into(),
        fingerprint: fp.map(str::to_string),
        idempotency_key: key.map(str::to_string),
        borrow: None,
        version: None,
    }
}

pub fn waiter(holder: &str, fp: Option<&str>) -> Waiter {
    Waiter {
        holder: holder.into(),
        fingerprint: fp.map(str::to_string),
    }
}

pub fn granted(outcome: CheckoutOutcome) -> (LeaseRow, bool) {
    match outcome {
        CheckoutOutcome::Granted {
            lease,
            reused,
            overage: false,
        } => (lease, reused),
        other => panic!("expected a grant, got {other:?}"),
    }
}
