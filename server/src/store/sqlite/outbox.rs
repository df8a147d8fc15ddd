//! SQLite's answers: the webhook outbox (deliveries queued in the writer's
//! transaction, claimed, attempted) and the alert states, as the rules ask
//! for them ([`LeaseTx`](crate::store::rules::LeaseTx)); and the reads of
//! the admin views, `/metrics` and the delivery worker.
//!
//! SQLite has one owner process, so a claim only keeps this process's own
//! worker off a delivery; at open the claims of a process that died are
//! released ([`release_claims`]), so its deliveries are tried at once.

use leasehold_common::Timestamp;
use leasehold_common::alerts::{DeliveryStatus, DeliveryType, DeliveryView};
use leasehold_common::api::DenialReason;
use rusqlite::types::Type;
use rusqlite::{Connection, Row, params};

use crate::store::denials::{DenialRow, second_of};
use crate::store::outbox::{
    AlertState, AttemptRecord, Content, DeliveriesQuery, DeliveryRow, DueDelivery, WebhookStats,
};
use crate::store::rules::Result;

/// `limit` as SQLite binds it (signed).
fn sql_limit(limit: usize) -> i64 {
    i64::try_from(limit).unwrap_or(i64::MAX)
}

pub(super) fn queue_deliveries(tx: &Connection, deliveries: Vec<Content>) -> Result<()> {
    let mut insert = tx.prepare_cached(
        "INSERT INTO deliveries (id, webhook, type, license_id, created_at, body, status,
                                 attempts, next_attempt_at, claimed_until)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, 'pending', 0, ?5, 0)",
    )?;
    for content in deliveries {
        // The event was numbered when it was appended: its id is known now.
        let event_id = content.event.as_ref().map(|e| e.id);
        let d = content.render(event_id);
        insert.execute(params![
            d.id,
            d.webhook,
            d.kind.as_str(),
            d.license_id,
            d.created_at.as_millis(),
            d.body,
        ])?;
    }
    Ok(())
}

pub(super) fn claim_deliveries(
    tx: &Connection,
    now: Timestamp,
    claim_until: Timestamp,
    limit: usize,
) -> Result<Vec<DueDelivery>> {
    if limit == 0 {
        return Ok(Vec::new());
    }
    let mut due = tx.prepare_cached(
        "SELECT seq, id, webhook, body, attempts, created_at
         FROM deliveries INDEXED BY deliveries_due
         WHERE status = 'pending' AND next_attempt_at <= ?1 AND claimed_until <= ?1
         ORDER BY next_attempt_at, seq LIMIT ?2",
    )?;
    let rows = due.query_map(params![now.as_millis(), sql_limit(limit)], |r| {
        Ok((
            r.get::<_, i64>(0)?,
            DueDelivery {
                id: r.get(1)?,
                webhook: r.get(2)?,
                body: r.get(3)?,
                attempts: r.get(4)?,
                created_at: Timestamp::from_millis(r.get(5)?),
            },
        ))
    })?;
    let claimed = rows.collect::<rusqlite::Result<Vec<_>>>()?;
    let mut claim = tx.prepare_cached("UPDATE deliveries SET claimed_until = ?2 WHERE seq = ?1")?;
    for (seq, _) in &claimed {
        claim.execute(params![seq, claim_until.as_millis()])?;
    }
    Ok(claimed.into_iter().map(|(_, d)| d).collect())
}

pub(super) fn record_attempt(tx: &Connection, attempt: &AttemptRecord) -> Result<bool> {
    let changed = tx
        .prepare_cached(
            "UPDATE deliveries
             SET status = ?2, attempts = ?3, next_attempt_at = ?4, last_attempt_at = ?5,
                 last_error = ?6, claimed_until = 0
             WHERE id = ?1 AND status = 'pending'",
        )?
        .execute(params![
            attempt.id,
            attempt.status.as_str(),
            attempt.attempts,
            attempt.next_attempt_at.as_millis(),
            attempt.attempted_at.as_millis(),
            attempt.error,
        ])?;
    Ok(changed > 0)
}

pub(super) fn prune_deliveries(tx: &Connection, before: Timestamp, limit: usize) -> Result<usize> {
    Ok(tx
        .prepare_cached(
            "DELETE FROM deliveries WHERE seq IN (
                 SELECT seq FROM deliveries INDEXED BY deliveries_by_status
                 WHERE status IN ('delivered', 'failed') AND created_at < ?1 LIMIT ?2)",
        )?
        .execute(params![before.as_millis(), sql_limit(limit)])?)
}

fn alert_state(r: &Row<'_>) -> rusqlite::Result<AlertState> {
    Ok(AlertState {
        alert: r.get(0)?,
        license_id: r.get(1)?,
        holding_since: r.get::<_, Option<i64>>(2)?.map(Timestamp::from_millis),
        firing_since: r.get::<_, Option<i64>>(3)?.map(Timestamp::from_millis),
    })
}

pub(super) fn alert_states(tx: &Connection) -> Result<Vec<AlertState>> {
    read_alert_states(tx)
}

pub(super) fn set_alert_state(tx: &Connection, state: &AlertState) -> Result<()> {
    tx.prepare_cached(
        "INSERT INTO alert_states (alert, license_id, holding_since, firing_since)
         VALUES (?1, ?2, ?3, ?4)
         ON CONFLICT (alert) DO UPDATE SET license_id = excluded.license_id,
             holding_since = excluded.holding_since, firing_since = excluded.firing_since",
    )?
    .execute(params![
        state.alert,
        state.license_id,
        state.holding_since.map(Timestamp::as_millis),
        state.firing_since.map(Timestamp::as_millis),
    ])?;
    Ok(())
}

pub(super) fn delete_alert_state(tx: &Connection, alert: &str) -> Result<()> {
    tx.prepare_cached("DELETE FROM alert_states WHERE alert = ?1")?
        .execute([alert])?;
    Ok(())
}

/// The denials at `since` or later, exactly: the whole seconds after
/// `since`'s by their counts, and in `since`'s own second the packed
/// instants (`store/denials.rs`) at or after it.
pub(super) fn denials_since(
    tx: &Connection,
    license_id: &str,
    reason: DenialReason,
    since: Timestamp,
) -> Result<u64> {
    let second = second_of(since);
    let after: i64 = tx
        .prepare_cached(
            "SELECT coalesce(sum(count), 0) FROM denials
             WHERE license_id = ?1 AND second_ms > ?2 AND reason = ?3",
        )?
        .query_row(
            params![license_id, second.as_millis(), reason.as_str()],
            |r| r.get(0),
        )?;
    let mut first = tx.prepare_cached(
        "SELECT holder, fingerprint, offsets FROM denials
         WHERE license_id = ?1 AND second_ms = ?2 AND reason = ?3",
    )?;
    let rows = first.query_map(
        params![license_id, second.as_millis(), reason.as_str()],
        |r| {
            Ok(DenialRow {
                license_id: license_id.to_string(),
                second,
                holder: r.get(0)?,
                fingerprint: r.get(1)?,
                reason,
                offsets: r.get(2)?,
            })
        },
    )?;
    let mut within = 0u64;
    for row in rows {
        within += row?.instants().filter(|at| *at >= since).count() as u64;
    }
    Ok(u64::try_from(after).unwrap_or(0) + within)
}

/// At open: the claims of a process that is gone (SQLite has one owner,
/// and this one has just started) are let go, so a delivery claimed before
/// a kill -9 is tried at once, not after its claim runs out.
pub(super) fn release_claims(conn: &Connection) -> rusqlite::Result<usize> {
    conn.execute(
        "UPDATE deliveries SET claimed_until = 0
         WHERE status = 'pending' AND claimed_until <> 0",
        [],
    )
}

// The reads of the admin views, on a read connection.

/// Per webhook with stored deliveries: its counts by status, its last
/// success, and the error of its newest attempt (by `last_attempt_at`) if
/// that one failed (a delivered attempt stores no error).
pub(super) fn webhook_stats(c: &Connection) -> Result<Vec<WebhookStats>> {
    let mut stmt = c.prepare_cached(
        "SELECT webhook,
                sum(status = 'pending'), sum(status = 'delivered'), sum(status = 'failed'),
                max(CASE WHEN status = 'delivered' THEN last_attempt_at END),
                (SELECT n.last_error FROM deliveries n
                 WHERE n.webhook = d.webhook AND n.last_attempt_at IS NOT NULL
                 ORDER BY n.last_attempt_at DESC, n.seq DESC LIMIT 1)
         FROM deliveries d GROUP BY webhook ORDER BY webhook",
    )?;
    let rows = stmt.query_map([], |r| {
        let n = |i: usize| r.get::<_, i64>(i).map(|v| u64::try_from(v).unwrap_or(0));
        Ok(WebhookStats {
            webhook: r.get(0)?,
            pending: n(1)?,
            delivered: n(2)?,
            failed: n(3)?,
            last_success_at: r.get::<_, Option<i64>>(4)?.map(Timestamp::from_millis),
            last_error: r.get(5)?,
        })
    })?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

/// A text column that must parse as one of a fixed set of words.
fn parsed<T>(r: &Row<'_>, i: usize, parse: fn(&str) -> Option<T>) -> rusqlite::Result<T> {
    let text: String = r.get(i)?;
    parse(&text).ok_or_else(|| {
        rusqlite::Error::FromSqlConversionFailure(
            i,
            Type::Text,
            format!("the deliveries table holds an unknown value {text:?}").into(),
        )
    })
}

fn delivery_row(r: &Row<'_>) -> rusqlite::Result<DeliveryRow> {
    let status = parsed(r, 4, DeliveryStatus::parse)?;
    let next_attempt_at = match status {
        DeliveryStatus::Pending => Some(Timestamp::from_millis(r.get(9)?)),
        _ => None,
    };
    Ok(DeliveryRow {
        seq: r.get(0)?,
        view: DeliveryView {
            id: r.get(1)?,
            webhook: r.get(2)?,
            kind: parsed(r, 3, DeliveryType::parse)?,
            status,
            attempts: r.get(5)?,
            created_at: Timestamp::from_millis(r.get(6)?),
            last_attempt_at: r.get::<_, Option<i64>>(7)?.map(Timestamp::from_millis),
            last_error: r.get(8)?,
            next_attempt_at,
            license_id: r.get(10)?,
        },
    })
}

/// Newest first (by `seq`), of one webhook and one status if asked, below
/// the cursor `after` (exclusive), at most `limit`. Only the filters asked
/// are in the statement, so one webhook's page walks `deliveries_by_webhook`.
pub(super) fn deliveries_page(c: &Connection, query: &DeliveriesQuery) -> Result<Vec<DeliveryRow>> {
    if query.limit == 0 {
        return Ok(Vec::new());
    }
    let mut filters = Vec::new();
    if query.webhook.is_some() {
        filters.push("webhook = :webhook");
    }
    if query.status.is_some() {
        filters.push("status = :status");
    }
    if query.after.is_some() {
        filters.push("seq < :after");
    }
    let filter = if filters.is_empty() {
        String::new()
    } else {
        format!("WHERE {}", filters.join(" AND "))
    };
    let mut stmt = c.prepare_cached(&format!(
        "SELECT seq, id, webhook, type, status, attempts, created_at, last_attempt_at,
                last_error, next_attempt_at, license_id
         FROM deliveries {filter} ORDER BY seq DESC LIMIT :limit"
    ))?;
    let status = query.status.map(DeliveryStatus::as_str);
    let limit = sql_limit(query.limit);
    let mut named: Vec<(&str, &dyn rusqlite::ToSql)> = vec![(":limit", &limit)];
    if let Some(w) = &query.webhook {
        named.push((":webhook", w));
    }
    if let Some(s) = &status {
        named.push((":status", s));
    }
    if let Some(a) = &query.after {
        named.push((":after", a));
    }
    let rows = stmt.query_map(named.as_slice(), delivery_row)?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

pub(super) fn read_alert_states(c: &Connection) -> Result<Vec<AlertState>> {
    let mut stmt = c.prepare_cached(
        "SELECT alert, license_id, holding_since, firing_since FROM alert_states ORDER BY alert",
    )?;
    let rows = stmt.query_map([], alert_state)?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

/// Whether a claim now would find anything: a `pending` delivery due by
/// `now` that nobody holds a claim on (the partial index `deliveries_due`).
pub(super) fn deliveries_due(c: &Connection, now: Timestamp) -> Result<bool> {
    Ok(c.prepare_cached(
        "SELECT EXISTS (SELECT 1 FROM deliveries INDEXED BY deliveries_due
             WHERE status = 'pending' AND next_attempt_at <= ?1 AND claimed_until <= ?1)",
    )?
    .query_row([now.as_millis()], |r| r.get(0))?)
}
