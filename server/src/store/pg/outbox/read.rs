//! PostgreSQL's reads of the webhook outbox and the alert states, for the
//! admin views, `/metrics` and the delivery worker (on the read pool, each
//! statement prepared once per pooled connection).

use leasehold_common::Timestamp;
use leasehold_common::alerts::{DeliveryStatus, DeliveryType, DeliveryView};
use tokio_postgres::Row;

use super::super::pool::PgPool;
use super::alert_state;
use crate::store::StoreError;
use crate::store::outbox::{AlertState, DeliveriesQuery, DeliveryRow, WebhookStats};

/// Per webhook with stored deliveries: its counts by status, its last
/// success, and the error of its newest attempt (by `last_attempt_at`) if
/// that one failed (a delivered attempt stores no error).
pub(crate) async fn webhook_stats(reads: &PgPool) -> Result<Vec<WebhookStats>, StoreError> {
    let client = reads.client().await?;
    let statement = client
        .prepare_cached(
            "SELECT webhook,
                    count(*) FILTER (WHERE status = 'pending'),
                    count(*) FILTER (WHERE status = 'delivered'),
                    count(*) FILTER (WHERE status = 'failed'),
                    max(last_attempt_at) FILTER (WHERE status = 'delivered'),
                    (array_agg(last_error ORDER BY last_attempt_at DESC, seq DESC)
                        FILTER (WHERE last_attempt_at IS NOT NULL))[1]
             FROM deliveries GROUP BY webhook ORDER BY webhook COLLATE \"C\"",
        )
        .await?;
    let rows = client.query(&statement, &[]).await?;
    let n = |r: &Row, i: usize| u64::try_from(r.get::<_, i64>(i)).unwrap_or(0);
    Ok(rows
        .iter()
        .map(|r| WebhookStats {
            webhook: r.get(0),
            pending: n(r, 1),
            delivered: n(r, 2),
            failed: n(r, 3),
            last_success_at: r.get::<_, Option<i64>>(4).map(Timestamp::from_millis),
            last_error: r.get(5),
        })
        .collect())
}

/// Newest first (by `seq`), of one webhook and one status if asked, below
/// the cursor `after` (exclusive), at most `limit`.
pub(crate) async fn deliveries_page(
    reads: &PgPool,
    query: &DeliveriesQuery,
) -> Result<Vec<DeliveryRow>, StoreError> {
    let client = reads.client().await?;
    let statement = client
        .prepare_cached(
            "SELECT seq, id, webhook, type, status, attempts, created_at, last_attempt_at,
                    last_error, next_attempt_at, license_id
             FROM deliveries
             WHERE ($1::text IS NULL OR webhook = $1) AND ($2::text IS NULL OR status = $2)
               AND ($3::bigint IS NULL OR seq < $3)
             ORDER BY seq DESC LIMIT $4",
        )
        .await?;
    let status = query.status.map(DeliveryStatus::as_str);
    let limit = i64::try_from(query.limit).unwrap_or(i64::MAX);
    let rows = client
        .query(&statement, &[&query.webhook, &status, &query.after, &limit])
        .await?;
    rows.iter().map(delivery_row).collect()
}

fn delivery_row(r: &Row) -> Result<DeliveryRow, StoreError> {
    let kind: String = r.get(3);
    let status: String = r.get(4);
    let unknown = |what: &str, value: &str| {
        StoreError::Unavailable(format!(
            "the deliveries table holds an unknown {what} {value:?}"
        ))
    };
    let attempts: i32 = r.get(5);
    let status = DeliveryStatus::parse(&status).ok_or_else(|| unknown("status", &status))?;
    let next_attempt_at =
        (status == DeliveryStatus::Pending).then(|| Timestamp::from_millis(r.get(9)));
    Ok(DeliveryRow {
        seq: r.get(0),
        view: DeliveryView {
            id: r.get(1),
            webhook: r.get(2),
            kind: DeliveryType::parse(&kind).ok_or_else(|| unknown("type", &kind))?,
            status,
            attempts: u32::try_from(attempts).unwrap_or(0),
            created_at: Timestamp::from_millis(r.get(6)),
            last_attempt_at: r.get::<_, Option<i64>>(7).map(Timestamp::from_millis),
            last_error: r.get(8),
            next_attempt_at,
            license_id: r.get(10),
        },
    })
}

/// As committed (no lock: a view of the states, not an evaluation).
pub(crate) async fn alert_states(reads: &PgPool) -> Result<Vec<AlertState>, StoreError> {
    let client = reads.client().await?;
    let statement = client
        .prepare_cached(
            "SELECT alert, license_id, holding_since, firing_since FROM alert_states
             ORDER BY alert",
        )
        .await?;
    let rows = client.query(&statement, &[]).await?;
    Ok(rows.iter().map(alert_state).collect())
}

/// Whether a claim now would find anything: a `pending` delivery due by
/// `now` that nobody holds a claim on (the partial index `deliveries_due`).
pub(crate) async fn deliveries_due(reads: &PgPool, now: Timestamp) -> Result<bool, StoreError> {
    let client = reads.client().await?;
    let statement = client
        .prepare_cached(
            "SELECT EXISTS (SELECT 1 FROM deliveries
                 WHERE status = 'pending' AND next_attempt_at <= $1 AND claimed_until <= $1)",
        )
        .await?;
    let now = now.as_millis();
    Ok(client.query_one(&statement, &[&now]).await?.get(0))
}
