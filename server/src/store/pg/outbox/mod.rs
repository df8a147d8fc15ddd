//! PostgreSQL's answers: the webhook outbox (deliveries queued in the writer's
//! transaction, claimed, attempted) and the alert states, as the rules ask
//! for them ([`LeaseTx`](crate::store::rules::LeaseTx)).
//!
//! - **Queued at the commit.** Events are numbered only at the commit
//!   (`pg/pending.rs`: `PendingEvents::write`), and a forwarded event's
//!   body carries its id, so the batch keeps its deliveries (`Outbox` (`pg/outbox_batch.rs`),
//!   each with its event's place among the batch's events) and renders and
//!   inserts them in one statement at the commit: after the numbering if
//!   one of them names an event (`before + place + 1`), else before it,
//!   so the cluster row's lock is held no longer. A command that fails
//!   forgets its deliveries with its events.
//! - **Claimed once.** `FOR UPDATE SKIP LOCKED` under the claim: two
//!   replicas claiming at once take disjoint sets, never wait on each
//!   other, and a claim is kept off for `CLAIM_FOR` (a replica that dies
//!   leaves its claims to the others after that).
//! - **Each transition once.** Alert evaluation holds [`ALERTS_LOCK`], a
//!   transaction-level advisory lock, taken with the batch's license locks
//!   in key order at `BEGIN` (`pg/writer.rs`: `BatchLocks`), so no batch
//!   ever waits for it while holding a row lock, and again (re-entrant)
//!   before the states are read, should a policy change have brought the
//!   first alerts mid-batch. Evaluations of all replicas are therefore
//!   serialized, and each reads, in a statement begun after the lock was
//!   granted (READ COMMITTED: after the previous holder's commit), the
//!   state the previous one committed: a transition, its event and its
//!   deliveries happen once. Row locks (`FOR UPDATE`) would not do: the
//!   first state of an alert is a row nobody can lock yet, and two
//!   replicas would both insert it and both fire.

pub mod read;

use leasehold_common::Timestamp;
use leasehold_common::api::DenialReason;
use postgres::Client;

use super::batch_state::BatchState;
use super::statements::Statements;
use crate::store::denials::second_of;
use crate::store::outbox::{AlertState, AttemptRecord, Content, DueDelivery};
use crate::store::rules::Result;

/// The advisory lock (single-bigint key space) that serializes alert
/// evaluation across replicas: "lease_al". License locks are SHA-256
/// prefixes (`pg::advisory_key`), the migration lock another constant.
pub const ALERTS_LOCK: i64 = 0x6c65_6173_655f_616c;

/// The parts of the writer's transaction the outbox uses (`PgTx`'s).
pub(super) struct OutboxTx<'a> {
    pub client: &'a mut Client,
    pub statements: &'a Statements,
    pub state: &'a mut BatchState,
}

/// Before a statement: the batch's kept writes sent, the command's
/// savepoint open (as every `PgTx` query does).
fn ready(tx: &mut OutboxTx<'_>) -> Result<()> {
    tx.state.before_statement(tx.client, tx.statements)?;
    Ok(())
}

fn limit(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// Kept for the commit (no statement now): see `Outbox` (`pg/outbox_batch.rs`).
pub(super) fn queue_deliveries(tx: &mut OutboxTx<'_>, deliveries: Vec<Content>) -> Result<()> {
    tx.state.queue_deliveries(deliveries);
    Ok(())
}

pub(super) fn claim_deliveries(
    tx: &mut OutboxTx<'_>,
    now: Timestamp,
    claim_until: Timestamp,
    n: usize,
) -> Result<Vec<DueDelivery>> {
    ready(tx)?;
    let rows = tx.client.query(
        &tx.statements.outbox.claim,
        &[&now.as_millis(), &claim_until.as_millis(), &limit(n)],
    )?;
    let mut claimed: Vec<((i64, i64), DueDelivery)> = rows
        .iter()
        .map(|r| {
            let attempts: i32 = r.get(3);
            let due = DueDelivery {
                id: r.get(0),
                webhook: r.get(1),
                body: r.get(2),
                attempts: u32::try_from(attempts).unwrap_or(0),
                created_at: Timestamp::from_millis(r.get(4)),
            };
            ((r.get(5), r.get(6)), due)
        })
        .collect();
    // RETURNING has no order of its own: the earliest due first.
    claimed.sort_by_key(|(order, _)| *order);
    Ok(claimed.into_iter().map(|(_, due)| due).collect())
}

pub(super) fn record_attempt(tx: &mut OutboxTx<'_>, attempt: &AttemptRecord) -> Result<bool> {
    ready(tx)?;
    let attempts = i32::try_from(attempt.attempts).unwrap_or(i32::MAX);
    let n = tx.client.execute(
        &tx.statements.outbox.record_attempt,
        &[
            &attempt.id,
            &attempt.status.as_str(),
            &attempts,
            &attempt.attempted_at.as_millis(),
            &attempt.next_attempt_at.as_millis(),
            &attempt.error,
        ],
    )?;
    Ok(n > 0)
}

pub(super) fn prune_deliveries(
    tx: &mut OutboxTx<'_>,
    before: Timestamp,
    n: usize,
) -> Result<usize> {
    ready(tx)?;
    let pruned = tx.client.execute(
        &tx.statements.outbox.prune,
        &[&before.as_millis(), &limit(n)],
    )?;
    Ok(usize::try_from(pruned).unwrap_or(usize::MAX))
}

/// Under [`ALERTS_LOCK`] (see the module's words): held until the batch
/// ends, so the states read here stay the cluster's until its commit.
pub(super) fn alert_states(tx: &mut OutboxTx<'_>) -> Result<Vec<AlertState>> {
    ready(tx)?;
    tx.client
        .execute(&tx.statements.outbox.lock_alerts, &[&ALERTS_LOCK])?;
    let rows = tx.client.query(&tx.statements.outbox.alert_states, &[])?;
    Ok(rows.iter().map(alert_state).collect())
}

pub(super) fn alert_state(r: &postgres::Row) -> AlertState {
    AlertState {
        alert: r.get(0),
        license_id: r.get(1),
        holding_since: r.get::<_, Option<i64>>(2).map(Timestamp::from_millis),
        firing_since: r.get::<_, Option<i64>>(3).map(Timestamp::from_millis),
    }
}

pub(super) fn set_alert_state(tx: &mut OutboxTx<'_>, state: &AlertState) -> Result<()> {
    ready(tx)?;
    tx.client.execute(
        &tx.statements.outbox.set_alert_state,
        &[
            &state.alert,
            &state.license_id,
            &state.holding_since.map(Timestamp::as_millis),
            &state.firing_since.map(Timestamp::as_millis),
        ],
    )?;
    Ok(())
}

pub(super) fn delete_alert_state(tx: &mut OutboxTx<'_>, alert: &str) -> Result<()> {
    ready(tx)?;
    tx.client
        .execute(&tx.statements.outbox.delete_alert_state, &[&alert])?;
    Ok(())
}

/// Exact to the millisecond: the seconds after `since`'s by their counts,
/// its own by their offsets; and the denials this batch counted and keeps
/// for its commit (`pg/denial_batch.rs`).
pub(super) fn denials_since(
    tx: &mut OutboxTx<'_>,
    license_id: &str,
    reason: DenialReason,
    since: Timestamp,
) -> Result<u64> {
    ready(tx)?;
    let second = second_of(since).as_millis();
    let row = tx.client.query_one(
        &tx.statements.outbox.denials_since,
        &[&license_id, &reason.as_str(), &second],
    )?;
    let later: i64 = row.get(0);
    let offsets: Vec<u8> = row.get(1);
    let from_ms = since.as_millis() - second;
    let same_second = offsets
        .chunks_exact(2)
        .filter(|b| i64::from(u16::from_be_bytes([b[0], b[1]])) >= from_ms)
        .count();
    let kept = tx.state.denials_since(license_id, reason, since);
    Ok(u64::try_from(later).unwrap_or(0) + same_second as u64 + kept)
}
