//! Usage-history reads on PostgreSQL: the same questions, in the same words,
//! as SQLite's `store/history.rs` (which documents them), on the read pool.
//! Sessions for the usage sweep stream out of the query (`query_raw`), so a
//! long range is never collected.

use futures_util::{TryStreamExt, pin_mut};
use leasehold_common::api::SessionView;
use leasehold_common::{Timestamp, live_threshold};
use tokio_postgres::Row;
use tokio_postgres::types::ToSql;

use super::super::StoreError;
use super::super::history::{
    RawSession, SessionsQuery, UsageQuery, resolve, session_columns, skew_ms,
};
use super::reads::PgReads;
use crate::usage::{PoolTimeline, Sweep, Usage};

fn raw_from_row(r: &Row) -> RawSession {
    RawSession {
        seat_id: r.get(0),
        license_id: r.get(1),
        holder: r.get(2),
        fingerprint: r.get(3),
        started_at: Timestamp::from_millis(r.get(4)),
        ended_at: r.get::<_, Option<i64>>(5).map(Timestamp::from_millis),
        end_kind: r.get(6),
        expires_at: r.get::<_, Option<i64>>(7).map(Timestamp::from_millis),
    }
}

/// One page of sessions, newest first.
pub async fn sessions_page(
    reads: &PgReads,
    q: &SessionsQuery,
) -> Result<Vec<SessionView>, StoreError> {
    let client = reads.client().await?;
    let (after_at, after_seat) = match &q.after {
        Some(c) => (Some(c.started_at.as_millis()), Some(c.seat_id.as_str())),
        None => (None, None),
    };
    let rows = client
        .query(
            concat!(
                "SELECT ",
                session_columns!(),
                " FROM sessions s LEFT JOIN leases l ON l.seat_id = s.seat_id
                 WHERE s.license_id = $1 AND ($2::text IS NULL OR s.holder = $2)
                   AND s.started_at < $4
                   AND (s.started_at >= $3 OR s.ended_at > $3
                        OR (s.ended_at IS NULL AND (l.expires_at IS NULL OR l.expires_at >= $5
                                                    OR l.expires_at + $6 > $3)))
                   AND ($7::bigint IS NULL OR s.started_at < $7
                        OR (s.started_at = $7 AND s.seat_id < $8))
                 ORDER BY s.started_at DESC, s.seat_id DESC
                 LIMIT $9"
            ),
            &[
                &q.license_id,
                &q.holder,
                &q.from.as_millis(),
                &q.to.as_millis(),
                &live_threshold(q.now, q.skew).as_millis(),
                &skew_ms(q.skew),
                &after_at,
                &after_seat,
                &i64::try_from(q.limit).unwrap_or(i64::MAX),
            ],
        )
        .await?;
    reads.give_back(client);
    rows.iter()
        .map(|r| resolve(raw_from_row(r), q.now, q.skew))
        .collect()
}

/// The usage of one license over the range.
pub async fn usage(reads: &PgReads, q: &UsageQuery) -> Result<Usage, StoreError> {
    let client = reads.client().await?;
    let r = &q.range;
    let (from, to) = (r.from.as_millis(), r.to.as_millis());
    let pool_row = |row: &Row| (Timestamp::from_millis(row.get(0)), row.get::<_, i32>(1));
    let mut pool: Vec<(Timestamp, u32)> = client
        .query(
            "(SELECT at, seats FROM pool_sizes WHERE license_id = $1 AND at <= $2
              ORDER BY at DESC LIMIT 1)
             UNION ALL
             (SELECT at, seats FROM pool_sizes WHERE license_id = $1 AND at > $2 AND at <= $3)",
            &[&q.license_id, &from, &to],
        )
        .await?
        .iter()
        .map(pool_row)
        .map(|(at, seats)| (at, seats.max(0) as u32))
        .collect();
    if pool.is_empty() {
        // Nothing recorded up to `to`: the history starts later.
        pool.extend(
            client
                .query_opt(
                    "SELECT at, seats FROM pool_sizes WHERE license_id = $1 ORDER BY at LIMIT 1",
                    &[&q.license_id],
                )
                .await?
                .as_ref()
                .map(pool_row)
                .map(|(at, seats)| (at, seats.max(0) as u32)),
        );
    }
    let mut sweep = Sweep::new(*r, PoolTimeline::new(pool));

    let denials = client
        .query(
            "SELECT min(second_ms), sum(count)::bigint FROM denials
             WHERE license_id = $1 AND second_ms >= $2 AND second_ms < $3
             GROUP BY (second_ms - $2) / $4",
            &[&q.license_id, &from, &to, &r.step_ms],
        )
        .await?;
    for row in &denials {
        let count: i64 = row.get(1);
        sweep.denials(Timestamp::from_millis(row.get(0)), count.max(0) as u64);
    }

    let threshold = live_threshold(r.now, q.skew).as_millis();
    let skew = skew_ms(q.skew);
    let params: [&(dyn ToSql + Sync); 5] = [&q.license_id, &from, &to, &threshold, &skew];
    let rows = client
        .query_raw(
            concat!(
                "SELECT ",
                session_columns!(),
                " FROM sessions s LEFT JOIN leases l ON l.seat_id = s.seat_id
                 WHERE s.license_id = $1 AND s.started_at < $3
                   AND (s.started_at >= $2 OR s.ended_at > $2
                        OR (s.ended_at IS NULL AND (l.expires_at IS NULL OR l.expires_at >= $4
                                                    OR l.expires_at + $5 > $2)))
                 ORDER BY s.started_at"
            ),
            params,
        )
        .await?;
    pin_mut!(rows);
    while let Some(row) = rows.try_next().await? {
        let s = resolve(raw_from_row(&row), r.now, q.skew)?;
        sweep.session(s.started_at, s.ended_at, &s.holder);
    }
    reads.give_back(client);
    Ok(sweep.finish())
}
