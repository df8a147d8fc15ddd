//! The lease rules, written once and run over any store.
//!
//! One file per family: [`checkout`] (the checkout rule as named steps, top
//! to bottom: a blocked holder is refused, a retried request gets its seat
//! again, the same machine re-claims its live seat, a full pool is refused,
//! and otherwise a seat is granted), [`seat`] (heartbeat, release, revoke,
//! and when a seat's session ends), [`borrow`] (the checkout steps of a
//! borrow request: its terms, and turning the machine's own seat into the
//! borrow), [`reap`] (the reaper, the outage rule,
//! live counts) and [`history`] (pool sizes, pruning). [`scope`] decides
//! which leases count, and [`lease_tx`] is the queries the rules ask of a
//! store, with every choice passed as a value. [`idle`] is idle reclaim:
//! a heartbeat's report, the reaper's sweep, the idle periods kept in the
//! history. [`alerts`] evaluates the file's alerts each tick, and
//! [`webhooks`] queues deliveries (the outbox) in the transaction of what
//! caused them. This file holds what they share: the command's view of the
//! world and its events.
//!
//! The rules decide; a store only answers the queries of [`LeaseTx`] inside
//! the transaction its writer opened. Every liveness question binds the one
//! predicate from `leasehold_common::liveness`.

use std::collections::HashMap;

use leasehold_common::api::{Event, EventKind};
use leasehold_common::{Licenses, Timestamp};

use super::{LeaseRow, SeatMode, StoreError};

#[cfg(test)]
mod alert_tests;
mod alerts;
mod borrow;
mod checkout;
mod entitled;
#[cfg(test)]
mod entitled_tests;
mod history;
mod idle;
mod lease_tx;
mod reap;
mod repeat;
mod scope;
mod seat;
mod tally;
mod webhooks;

pub use checkout::waits_in_line;
pub use entitled::{Effective, effective};
pub use idle::{IdleReport, MIN_RECORDED_IDLE, after_report};
pub use lease_tx::{Denial, EndedSession, IdlePeriod, LeaseTx, NewEvent, Result};
pub use scope::Scope;

/// A machine takes back another holder's seat kept this way only when it
/// holds no other (a machine may hold a seat of its own besides another
/// holder's lingering one).
const TAKE_LAST: SeatMode = SeatMode::Linger;

/// Denied checkouts and heartbeats on lapsed seats can arrive thousands of
/// times a second from a misbehaving client; the log keeps one per key per
/// this window (the metrics count them all).
const EVENT_THROTTLE_MS: i64 = 10_000;

/// Keys seen within the last [`EVENT_THROTTLE_MS`]; lives as long as the
/// writer, across batches.
#[derive(Debug, Default)]
pub struct EventThrottle {
    seen: HashMap<String, i64>,
}

impl EventThrottle {
    /// True once per key per [`EVENT_THROTTLE_MS`].
    fn first_in_window(&mut self, key: String, now: Timestamp) -> bool {
        let now = now.as_millis();
        if self.seen.len() > 10_000 {
            self.seen.retain(|_, at| now - *at < EVENT_THROTTLE_MS);
        }
        match self.seen.get(&key) {
            Some(at) if now - *at < EVENT_THROTTLE_MS && now >= *at => false,
            _ => {
                self.seen.insert(key, now);
                true
            }
        }
    }

    /// When `key`'s current window ends (`None`: it has none open).
    fn window_end(&self, key: &str) -> Option<Timestamp> {
        let at = *self.seen.get(key)?;
        Some(Timestamp::from_millis(at.saturating_add(EVENT_THROTTLE_MS)))
    }
}

/// The throttle key of a holder's `denied` events on a license.
fn denied_key(license_id: &str, holder: &str) -> String {
    format!("denied\0{license_id}\0{holder}")
}

/// The text of a `reap` event.
pub fn reap_detail(expired: Timestamp) -> String {
    format!("expired {expired} unrenewed")
}

/// One command's view of the world: a store transaction, the decision time,
/// the policies, and the events the command wrote (published after commit).
pub struct Rules<'a, T: LeaseTx> {
    pub tx: &'a mut T,
    pub now: Timestamp,
    pub licenses: &'a Licenses,
    pub throttle: &'a mut EventThrottle,
    pub events: Vec<Event>,
    /// Idle time before this instant does not count toward a reclaim: the
    /// end of the last outage, when nobody could report coming back
    /// (outages don't evict).
    pub idle_counted_from: Timestamp,
    /// When the retry time of this command's denial runs out, if it is
    /// the lapse of a seat (set by `retry_after`; a repeat counts it down).
    retry_deadline: Option<Timestamp>,
    /// No lease this command grants or renews expires after this: the end
    /// of its license's entitlements (set by the entitlement steps).
    lease_cap: Option<Timestamp>,
}

impl<'a, T: LeaseTx> Rules<'a, T> {
    /// The rules over `tx`, deciding at `now` by `licenses`.
    pub fn new(
        tx: &'a mut T,
        now: Timestamp,
        licenses: &'a Licenses,
        throttle: &'a mut EventThrottle,
    ) -> Self {
        Rules {
            tx,
            now,
            licenses,
            throttle,
            events: Vec::new(),
            idle_counted_from: Timestamp::from_millis(0),
            retry_deadline: None,
            lease_cap: None,
        }
    }

    /// Append an event that is not tied to a lease change (config reloads).
    /// Its id is known once its batch commits (on PostgreSQL, only then).
    pub fn record_event(
        &mut self,
        kind: EventKind,
        license_id: Option<&str>,
        detail: &str,
    ) -> Result<()> {
        self.event(kind, license_id, None, None, Some(detail))
    }

    /// A denied checkout, logged once per holder per throttle window.
    pub(super) fn denied(
        &mut self,
        license_id: &str,
        holder: &str,
        detail: impl FnOnce() -> String,
    ) -> Result<()> {
        if self
            .throttle
            .first_in_window(denied_key(license_id, holder), self.now)
        {
            let detail = detail();
            self.event(
                EventKind::Denied,
                Some(license_id),
                None,
                Some(holder),
                Some(&detail),
            )?;
        }
        Ok(())
    }

    pub(super) fn event(
        &mut self,
        kind: EventKind,
        license_id: Option<&str>,
        seat_id: Option<&str>,
        holder: Option<&str>,
        detail: Option<&str>,
    ) -> Result<()> {
        self.events_in_order(&[NewEvent {
            at: self.now,
            kind,
            license_id,
            seat_id,
            holder,
            detail,
        }])
    }

    /// One event of `kind` per seat that left, each with its detail, at once.
    pub(super) fn seat_events(
        &mut self,
        kind: EventKind,
        gone: &[LeaseRow],
        details: &[String],
    ) -> Result<()> {
        let events: Vec<NewEvent<'_>> = gone
            .iter()
            .zip(details)
            .map(|(lease, detail)| NewEvent {
                at: self.now,
                kind,
                license_id: Some(&lease.license_id),
                seat_id: Some(&lease.seat_id),
                holder: Some(&lease.holder),
                detail: Some(detail),
            })
            .collect();
        self.events_in_order(&events)
    }

    /// Append events and keep them, numbered, for publishing after commit.
    pub(super) fn events_in_order(&mut self, events: &[NewEvent<'_>]) -> Result<()> {
        let ids = self.tx.append_events(events)?;
        if ids.len() != events.len() {
            // A store bug; roll the command back rather than log half of it.
            return Err(StoreError::EventIds {
                asked: events.len(),
                got: ids.len(),
            });
        }
        let first_new = self.events.len();
        self.events
            .extend(events.iter().zip(ids).map(|(e, id)| Event {
                id,
                at: e.at,
                kind: e.kind,
                license_id: e.license_id.map(str::to_string),
                seat_id: e.seat_id.map(str::to_string),
                holder: e.holder.map(str::to_string),
                detail: e.detail.map(str::to_string),
            }));
        let appended = std::mem::take(&mut self.events);
        let forwarded = self.forward_events(&appended[first_new..]);
        self.events = appended;
        forwarded
    }
}

/// 128 random bits, lowercase hex. Seat ids are capabilities, so they come
/// from a CSPRNG (rand's thread RNG is ChaCha seeded from the OS).
pub(super) fn new_seat_id() -> String {
    hex::encode(rand::random::<[u8; 16]>())
}
