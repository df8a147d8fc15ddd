//! The queries the lease rules ask of one store transaction ([`LeaseTx`]),
//! and the rows they pass. Each store answers them in its own SQL
//! (`sqlite/tx.rs`, `pg/tx.rs`); `memory.rs` answers them from plain maps
//! for the rules' unit and property tests. Where a query carries a choice
//! (which seats count, which seat a machine takes back first, which seats
//! the outage rule extends), the rules pass it as a value: a [`Scope`], a
//! [`SeatMode`]; no store decides one of its own.

use std::collections::HashMap;

use leasehold_common::Timestamp;
use leasehold_common::api::{DenialReason, EventKind, SessionEnd};

use super::scope::Scope;
use crate::store::outbox::{AlertState, AttemptRecord, Content, DueDelivery};
use crate::store::{LeaseRow, SeatMode, StoreError, Waiter};

pub type Result<T> = std::result::Result<T, StoreError>;

/// The queries the rules ask of one store transaction. Nothing here decides:
/// a method reads or writes the rows it names, with the times it is given.
pub trait LeaseTx {
    /// When an admin's block on this holder + fingerprint (`""` for none)
    /// ends, if it is still in force at `now`.
    fn block_until(
        &mut self,
        license_id: &str,
        holder: &str,
        fingerprint: &str,
        now: Timestamp,
    ) -> Result<Option<Timestamp>>;
    /// Record a block until `until` (replacing an earlier one).
    fn set_block(
        &mut self,
        license_id: &str,
        holder: &str,
        fingerprint: &str,
        until: Timestamp,
    ) -> Result<()>;
    /// The lease checked out with this Idempotency-Key, live or not.
    fn lease_by_idempotency_key(&mut self, license_id: &str, key: &str)
    -> Result<Option<LeaseRow>>;
    /// Let a lapsed lease's Idempotency-Key be used for a new seat.
    fn forget_idempotency_key(&mut self, seat_id: &str) -> Result<()>;
    /// The live lease (`expires_at >= threshold`) this fingerprint holds
    /// that `holder` may take back: if several, one that is not kept
    /// `others_last` for another holder first, then the latest-expiring,
    /// then the greatest seat id (so every store picks the same one).
    fn live_lease_by_fingerprint(
        &mut self,
        license_id: &str,
        fingerprint: &str,
        holder: &str,
        threshold: Timestamp,
        others_last: SeatMode,
    ) -> Result<Option<LeaseRow>>;
    /// Leases in `scope` with `expires_at >= threshold`.
    fn live_count(&mut self, scope: Scope<'_>, threshold: Timestamp) -> Result<u32>;
    /// Leases of `lease`'s license live at `threshold` (`expires_at >=
    /// threshold`) checked out after it (by `checked_out_at`, then seat
    /// id): how many seats are newer. Asked only of a license with a vendor.
    fn live_newer_than(&mut self, lease: &LeaseRow, threshold: Timestamp) -> Result<u32>;
    /// The earliest `expires_at >= threshold` in `scope`.
    fn earliest_live_expiry(
        &mut self,
        scope: Scope<'_>,
        threshold: Timestamp,
    ) -> Result<Option<Timestamp>>;
    /// A seat (of `license_id`, when given), live or lapsed-unreaped.
    fn lease(&mut self, license_id: Option<&str>, seat_id: &str) -> Result<Option<LeaseRow>>;
    /// A new seat. Its row is also its open session (started at
    /// `checked_out_at`) until the seat leaves the table.
    fn insert_lease(&mut self, lease: &LeaseRow, idempotency_key: Option<&str>) -> Result<()>;
    /// Store `renewed`'s `issued_at`, `expires_at`, `mode` and `idle_since`
    /// on the seat that was `old`.
    fn renew_lease(&mut self, old: &LeaseRow, renewed: &LeaseRow) -> Result<()>;
    /// Delete a seat (of `license_id`, when given) and return it.
    fn delete_lease(&mut self, seat_id: &str, license_id: Option<&str>)
    -> Result<Option<LeaseRow>>;
    /// Delete up to `limit` leases of the license with `expires_at < cutoff`,
    /// the earliest first (by `expires_at`, then `seat_id`), and return them
    /// in that order.
    fn reap_expired(
        &mut self,
        license_id: &str,
        cutoff: Timestamp,
        limit: usize,
    ) -> Result<Vec<LeaseRow>>;
    /// Drop blocks that ended by `now` and all but the newest
    /// `event_retention` events.
    fn prune(&mut self, now: Timestamp, event_retention: i64) -> Result<()>;
    /// Record the sessions of seats that just left the table: each from its
    /// checkout to `at`, ended the way `end` says.
    fn record_sessions(&mut self, sessions: &[EndedSession<'_>]) -> Result<()>;
    /// Record idle periods that ended (each at least a minute long).
    fn record_idle_periods(&mut self, periods: &[IdlePeriod<'_>]) -> Result<()>;
    /// Up to `limit` leases of the license kept `kept`, live at `threshold`
    /// (`expires_at >= threshold`), whose user has been idle since
    /// `idle_before` or earlier (`idle_since <= idle_before`), the longest
    /// idle first (then by seat id).
    fn idle_seats(
        &mut self,
        license_id: &str,
        kept: SeatMode,
        idle_before: Timestamp,
        threshold: Timestamp,
        limit: usize,
    ) -> Result<Vec<LeaseRow>>;
    /// How the session of a seat of this license that left the table
    /// ended, if it ended at `ended_since` or later and the history still
    /// has it.
    fn ended_session(
        &mut self,
        license_id: &str,
        seat_id: &str,
        ended_since: Timestamp,
    ) -> Result<Option<SessionEnd>>;
    /// Record one counted denial (409 or 403), to the millisecond.
    fn count_denial(&mut self, denial: &Denial<'_>) -> Result<()>;
    /// The pool size each license has had since its last change.
    fn current_pool_sizes(&mut self) -> Result<HashMap<String, u32>>;
    /// The license has `seats` from `at` on.
    fn record_pool_size(&mut self, license_id: &str, at: Timestamp, seats: u32) -> Result<()>;
    /// Delete sessions that ended, denial counts, idle periods that ended
    /// and superseded pool sizes older than `cutoff`: at most `limit` rows
    /// of each. Returns how many.
    fn prune_history(&mut self, cutoff: Timestamp, limit: usize) -> Result<usize>;
    /// Give every lease of the license kept `kept` and live at `was_live`
    /// (`expires_at >= was_live`) an expiry of at least `until`; return how
    /// many changed.
    fn extend_live(
        &mut self,
        license_id: &str,
        was_live: Timestamp,
        until: Timestamp,
        kept: SeatMode,
    ) -> Result<usize>;
    /// The shared waiting line's live waiters of the license (PostgreSQL's
    /// `waiters`), first come first; with `before`, those ahead of that row.
    /// A store whose line lives in the server (SQLite: `line.rs`, sent
    /// with the command as [`super::Ahead::Waiters`]) has none here.
    fn waiting_line(&mut self, license_id: &str, before: Option<i64>) -> Result<Vec<Waiter>>;
    /// Append events in order; the store assigns their ids (increasing) and
    /// returns them in the same order. A store that numbers a batch's
    /// events only when it commits (PostgreSQL, whose subscribers read the
    /// numbered events from its table) returns 0 for each.
    fn append_events(&mut self, events: &[NewEvent<'_>]) -> Result<Vec<i64>>;

    /// Queue deliveries (the webhook outbox) in this transaction, status
    /// `pending`, due at once. A delivery's event is one this transaction
    /// appended; a store that numbers events at commit renders the body
    /// then ([`Content::render`] with the id), any other now.
    fn queue_deliveries(&mut self, deliveries: Vec<Content>) -> Result<()>;
    /// Claim up to `limit` `pending` deliveries due by `now`
    /// (`next_attempt_at <= now`) that nobody holds a claim on at `now`,
    /// the earliest due first, for one attempt: nobody else claims them
    /// before `claim_until`. On PostgreSQL, rows another replica is
    /// claiming are skipped, not waited for.
    fn claim_deliveries(
        &mut self,
        now: Timestamp,
        claim_until: Timestamp,
        limit: usize,
    ) -> Result<Vec<DueDelivery>>;
    /// Store an attempt's outcome and release the claim. False if the
    /// delivery is gone or no longer pending.
    fn record_attempt(&mut self, attempt: &AttemptRecord) -> Result<bool>;
    /// Delete delivered and failed deliveries queued before `before`, at
    /// most `limit`; how many.
    fn prune_deliveries(&mut self, before: Timestamp, limit: usize) -> Result<usize>;
    /// Every stored alert state. On PostgreSQL the rows are locked until
    /// the transaction ends, so replicas evaluating at once decide each
    /// transition once.
    fn alert_states(&mut self) -> Result<Vec<AlertState>>;
    /// Store an alert's state (insert or replace, by `alert`).
    fn set_alert_state(&mut self, state: &AlertState) -> Result<()>;
    /// Forget the state of an alert that is no longer in the file.
    fn delete_alert_state(&mut self, alert: &str) -> Result<()>;
    /// Counted denials of `reason` on the license at `since` or later, to
    /// the millisecond.
    fn denials_since(
        &mut self,
        license_id: &str,
        reason: DenialReason,
        since: Timestamp,
    ) -> Result<u64>;
}

/// A seat that left the table, and how and when its session ended.
#[derive(Debug, Clone, Copy)]
pub struct EndedSession<'a> {
    pub lease: &'a LeaseRow,
    pub end: SessionEnd,
    pub at: Timestamp,
}

/// A span in which a seat's user was idle, as its client reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IdlePeriod<'a> {
    pub license_id: &'a str,
    pub seat_id: &'a str,
    pub from: Timestamp,
    pub to: Timestamp,
}

/// A counted denial: who was refused, why, and when.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Denial<'a> {
    pub license_id: &'a str,
    pub holder: &'a str,
    pub fingerprint: Option<&'a str>,
    pub reason: DenialReason,
    pub at: Timestamp,
}

/// An event before the store numbered it.
#[derive(Debug, Clone, Copy)]
pub struct NewEvent<'a> {
    pub at: Timestamp,
    pub kind: EventKind,
    pub license_id: Option<&'a str>,
    pub seat_id: Option<&'a str>,
    pub holder: Option<&'a str>,
    pub detail: Option<&'a str>,
}
