//! PostgreSQL's answers: the webhook outbox (deliveries queued in the writer's
//! transaction, claimed, attempted) and the alert states, as the rules ask
//! for them ([`LeaseTx`](crate::store::rules::LeaseTx)).
//!
//! - **Queued at the commit.** Events are numbered only at the commit
//!   (`pg/pending.rs`: `PendingEvents::write`), and a forwarded event's
//!   body carries its id, so the batch keeps its deliveries ([`Outbox`],
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

use leasehold_common::Timestamp;
use leasehold_common::api::DenialReason;
use postgres::{Client, Statement};

use super::statements::Statements;
use super::tx::PgTx;
use crate::store::deliveries::{AlertState, AttemptRecord, Content, DueDelivery};
use crate::store::denials::second_of;
use crate::store::rules::Result;

/// The advisory lock (single-bigint key space) that serializes alert
/// evaluation across replicas: "lease_al". License locks are SHA-256
/// prefixes (`pg::advisory_key`), the migration lock another constant.
pub const ALERTS_LOCK: i64 = 0x6c65_6173_655f_616c;

/// The outbox's statements, prepared once per writer connection.
pub struct OutboxStatements {
    insert: Statement,
    claim: Statement,
    record_attempt: Statement,
    prune: Statement,
    lock_alerts: Statement,
    alert_states: Statement,
    set_alert_state: Statement,
    delete_alert_state: Statement,
    denials_since: Statement,
}

impl OutboxStatements {
    pub fn prepare(client: &mut Client) -> std::result::Result<Self, postgres::Error> {
        let mut p = |sql: &str| client.prepare(sql);
        Ok(OutboxStatements {
            // In the order queued: `seq` follows it.
            insert: p(
                "INSERT INTO deliveries (id, webhook, type, license_id, created_at, body,
                                          status, next_attempt_at)
                 SELECT d.id, d.webhook, d.type, d.license_id, d.created_at, d.body,
                        'pending', d.created_at
                 FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::bigint[],
                             $6::text[])
                     WITH ORDINALITY AS d(id, webhook, type, license_id, created_at, body, n)
                 ORDER BY d.n",
            )?,
            claim: p("UPDATE deliveries SET claimed_until = $2
                 WHERE seq IN (
                     SELECT seq FROM deliveries
                     WHERE status = 'pending' AND next_attempt_at <= $1 AND claimed_until <= $1
                     ORDER BY next_attempt_at, seq LIMIT $3
                     FOR UPDATE SKIP LOCKED)
                 RETURNING id, webhook, body, attempts, created_at, next_attempt_at, seq")?,
            record_attempt: p("UPDATE deliveries
                 SET status = $2, attempts = $3, last_attempt_at = $4, next_attempt_at = $5,
                     last_error = $6, claimed_until = 0
                 WHERE id = $1 AND status = 'pending'")?,
            prune: p("DELETE FROM deliveries WHERE seq IN (
                     SELECT seq FROM deliveries
                     WHERE status IN ('delivered', 'failed') AND created_at < $1 LIMIT $2)")?,
            lock_alerts: p("SELECT pg_advisory_xact_lock($1::bigint)")?,
            alert_states: p(
                "SELECT alert, license_id, holding_since, firing_since FROM alert_states
                 ORDER BY alert",
            )?,
            set_alert_state: p(
                "INSERT INTO alert_states (alert, license_id, holding_since, firing_since)
                 VALUES ($1, $2, $3, $4)
                 ON CONFLICT (alert) DO UPDATE
                 SET license_id = excluded.license_id, holding_since = excluded.holding_since,
                     firing_since = excluded.firing_since",
            )?,
            delete_alert_state: p("DELETE FROM alert_states WHERE alert = $1")?,
            // Whole seconds after `$3` by their counts; `$3`'s own rows by
            // their offsets (the caller keeps those at or after `since`).
            denials_since: p(
                "SELECT coalesce(sum(count) FILTER (WHERE second_ms > $3), 0)::bigint,
                        coalesce(string_agg(offsets, ''::bytea) FILTER (WHERE second_ms = $3),
                                 ''::bytea)
                 FROM denials WHERE license_id = $1 AND reason = $2 AND second_ms >= $3",
            )?,
        })
    }
}

/// A batch's deliveries, kept for its commit, each with its event's place
/// among the batch's events (0: the first), if it forwards one.
#[derive(Default)]
pub struct Outbox {
    kept: Vec<(Content, Option<usize>)>,
}

impl Outbox {
    /// How many are kept: where the next command's begin.
    pub fn len(&self) -> usize {
        self.kept.len()
    }

    /// Forget the deliveries after the first `len` (a command rolled back).
    pub fn truncate(&mut self, len: usize) {
        self.kept.truncate(len);
    }

    /// Keep deliveries; `events`: how many events the batch kept so far
    /// (a delivery's event is among them, counted from the last).
    pub fn push(&mut self, deliveries: Vec<Content>, events: usize) {
        for content in deliveries {
            let place = content
                .event_from_last
                .and_then(|back| events.checked_sub(back + 1));
            debug_assert_eq!(place.is_some(), content.event_from_last.is_some());
            self.kept.push((content, place));
        }
    }

    /// Whether a kept delivery names an event: then they are written after
    /// the events are numbered.
    pub fn needs_event_ids(&self) -> bool {
        self.kept.iter().any(|(_, place)| place.is_some())
    }

    /// Render and insert every kept delivery in one statement (nothing if
    /// none) and forget them. `before`: the id before the batch's first
    /// event, once they are numbered.
    pub fn write(
        &mut self,
        client: &mut Client,
        statements: &Statements,
        before: Option<i64>,
    ) -> std::result::Result<(), postgres::Error> {
        if self.kept.is_empty() {
            return Ok(());
        }
        let rendered: Vec<_> = self
            .kept
            .drain(..)
            .map(|(content, place)| {
                let event_id = before
                    .zip(place)
                    .map(|(before, place)| before + place as i64 + 1);
                content.render(event_id)
            })
            .collect();
        let text = |f: fn(&crate::store::deliveries::NewDelivery) -> &str| {
            rendered.iter().map(f).collect::<Vec<_>>()
        };
        let licenses: Vec<Option<&str>> =
            rendered.iter().map(|d| d.license_id.as_deref()).collect();
        let created: Vec<i64> = rendered.iter().map(|d| d.created_at.as_millis()).collect();
        client.execute(
            &statements.outbox.insert,
            &[
                &text(|d| &d.id),
                &text(|d| &d.webhook),
                &text(|d| d.kind.as_str()),
                &licenses,
                &created,
                &text(|d| &d.body),
            ],
        )?;
        Ok(())
    }
}

/// Before a statement: the batch's kept writes sent, the command's
/// savepoint open (as every `PgTx` query does).
fn ready(tx: &mut PgTx<'_>) -> Result<()> {
    tx.state.before_statement(tx.client, tx.statements)?;
    Ok(())
}

fn limit(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// Kept for the commit (no statement now): see [`Outbox`].
pub(super) fn queue_deliveries(tx: &mut PgTx<'_>, deliveries: Vec<Content>) -> Result<()> {
    tx.state.queue_deliveries(deliveries);
    Ok(())
}

pub(super) fn claim_deliveries(
    tx: &mut PgTx<'_>,
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

pub(super) fn record_attempt(tx: &mut PgTx<'_>, attempt: &AttemptRecord) -> Result<bool> {
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

pub(super) fn prune_deliveries(tx: &mut PgTx<'_>, before: Timestamp, n: usize) -> Result<usize> {
    ready(tx)?;
    let pruned = tx.client.execute(
        &tx.statements.outbox.prune,
        &[&before.as_millis(), &limit(n)],
    )?;
    Ok(usize::try_from(pruned).unwrap_or(usize::MAX))
}

/// Under [`ALERTS_LOCK`] (see the module's words): held until the batch
/// ends, so the states read here stay the cluster's until its commit.
pub(super) fn alert_states(tx: &mut PgTx<'_>) -> Result<Vec<AlertState>> {
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

pub(super) fn set_alert_state(tx: &mut PgTx<'_>, state: &AlertState) -> Result<()> {
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

pub(super) fn delete_alert_state(tx: &mut PgTx<'_>, alert: &str) -> Result<()> {
    ready(tx)?;
    tx.client
        .execute(&tx.statements.outbox.delete_alert_state, &[&alert])?;
    Ok(())
}

/// Exact to the millisecond: the seconds after `since`'s by their counts,
/// its own by their offsets; and the refusals this batch counted and keeps
/// for its commit (`pg/denial_batch.rs`).
pub(super) fn denials_since(
    tx: &mut PgTx<'_>,
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
