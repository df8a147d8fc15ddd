//! Usage-history reads on PostgreSQL: the same questions, in the same words,
//! as SQLite's `store/history.rs` (which documents them), on the read pool.
//! Sessions for the usage sweep stream out of the query (`query_raw`), so a
//! long range is never collected.

use futures_util::{TryStreamExt, pin_mut};
use leasehold_common::api::SessionView;
use leasehold_common::{Timestamp, live_threshold};
use tokio_postgres::types::ToSql;
use tokio_postgres::{GenericClient, IsolationLevel, Row};

use super::super::history::{
    RawSession, SessionsQuery, UsageQuery, ended_columns, lapsed_at, open_columns, ran_past,
    resolve,
};
use super::pool::PgPool;
use crate::store::{SeatMode, StoreError};
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
        group: r.get(8),
        mode: SeatMode::from_code(r.get(9)).unwrap_or_default(),
        idle_ms: r.get(10),
    }
}

/// A session's recorded idle time (ms), the column after its own: `sum`
/// of its periods where it is shown (`idle_periods_by_seat`), `none` where
/// the usage sweep reads the periods by time instead (`sweep_idle`).
macro_rules! idle_ms {
    (sum, $table:literal) => {
        concat!(
            ", (SELECT coalesce(sum(p.to_ms - p.from_ms), 0)::bigint FROM idle_periods p
                WHERE p.license_id = ",
            $table,
            ".license_id AND p.seat_id = ",
            $table,
            ".seat_id)"
        )
    };
    (none, $table:literal) => {
        ", 0::bigint"
    };
}

/// The spanning part of a range, as SQLite's `history.rs` explains: the
/// sessions that started before `from` (`$2`) and ran into it, ended after
/// it or still held and not lapsed by it. `$1` license, `$3`
/// `live_threshold`, `$4` [`ran_past`] `from`; `$ended` and `$open` are further conditions
/// on each table's rows; `$idle` says whether the rows carry their idle
/// time ([`idle_ms!`]).
macro_rules! spanning {
    ($idle:ident $(, $ended:literal, $open:literal)?) => {
        concat!(
            "SELECT ",
            ended_columns!(),
            idle_ms!($idle, "sessions"),
            " FROM sessions
             WHERE license_id = $1 AND ended_at > $2 AND started_at < $2 ",
            $($ended,)?
            " UNION ALL SELECT ",
            open_columns!(),
            idle_ms!($idle, "leases"),
            " FROM leases
             WHERE license_id = $1 AND checked_out_at < $2
               AND (expires_at >= $3 OR expires_at >= $4) ",
            $($open,)?
        )
    };
}

async fn any_started_before(
    client: &impl GenericClient,
    license_id: &str,
    t: i64,
) -> Result<bool, StoreError> {
    Ok(client
        .query_one(
            "SELECT EXISTS (SELECT 1 FROM sessions WHERE license_id = $1 AND started_at < $2)
                 OR EXISTS (SELECT 1 FROM leases WHERE license_id = $1 AND checked_out_at < $2)",
            &[&license_id, &t],
        )
        .await?
        .get(0))
}

/// One page of sessions, newest first: those that started in the range,
/// then the spanning ones, after the cursor (one upper bound with `to`).
pub async fn sessions_page(
    reads: &PgPool,
    q: &SessionsQuery,
) -> Result<Vec<SessionView>, StoreError> {
    let client = reads.client().await?;
    let (from, to) = (q.from.as_millis(), q.to.as_millis());
    let (below_at, below_seat) = match &q.after {
        Some(a) if a.started_at.as_millis() < to => (a.started_at.as_millis(), a.seat_id.as_str()),
        _ => (to, ""),
    };
    let limit = i64::try_from(q.limit).unwrap_or(i64::MAX);
    let mut page = Vec::new();
    let rows = client
        .query(
            concat!(
                "(SELECT ",
                ended_columns!(),
                idle_ms!(sum, "sessions"),
                " FROM sessions
                 WHERE license_id = $1 AND started_at >= $2 AND started_at <= $3
                   AND (started_at, seat_id) < ($3, $4) AND ($5::text IS NULL OR holder = $5)
                 ORDER BY started_at DESC, seat_id DESC LIMIT $6)
                 UNION ALL (SELECT ",
                open_columns!(),
                idle_ms!(sum, "leases"),
                " FROM leases
                 WHERE license_id = $1 AND checked_out_at >= $2 AND checked_out_at <= $3
                   AND (checked_out_at, seat_id) < ($3, $4) AND ($5::text IS NULL OR holder = $5)
                 ORDER BY checked_out_at DESC, seat_id DESC LIMIT $6)
                 ORDER BY 5 DESC, 1 DESC LIMIT $6"
            ),
            &[
                &q.license_id,
                &from,
                &below_at,
                &below_seat,
                &q.holder,
                &limit,
            ],
        )
        .await?;
    for r in &rows {
        page.push(resolve(raw_from_row(r), q.now, q.skew)?);
    }
    if page.len() < q.limit && any_started_before(&**client, &q.license_id, from).await? {
        let left = i64::try_from(q.limit - page.len()).unwrap_or(i64::MAX);
        let threshold = live_threshold(q.now, q.skew).as_millis();
        let ran_past_from = ran_past(q.from, q.skew);
        let rows = client
            .query(
                concat!(
                    spanning!(
                        sum,
                        "AND started_at <= $5 AND (started_at, seat_id) < ($5, $6)
                         AND ($7::text IS NULL OR holder = $7)",
                        "AND checked_out_at <= $5 AND (checked_out_at, seat_id) < ($5, $6)
                         AND ($7::text IS NULL OR holder = $7)"
                    ),
                    " ORDER BY 5 DESC, 1 DESC LIMIT $8"
                ),
                &[
                    &q.license_id,
                    &from,
                    &threshold,
                    &ran_past_from,
                    &below_at,
                    &below_seat,
                    &q.holder,
                    &left,
                ],
            )
            .await?;
        for r in &rows {
            page.push(resolve(raw_from_row(r), q.now, q.skew)?);
        }
    }
    Ok(page)
}

/// The usage of one license over the range.
pub async fn usage(pool: &PgPool, q: &UsageQuery) -> Result<Usage, StoreError> {
    let mut loan = pool.client().await?;
    let client: &mut tokio_postgres::Client = &mut loan;
    // One snapshot for every part: a session that ends while the usage is
    // read moves from `leases` to `sessions` and must be seen once.
    let tx = client
        .build_transaction()
        .isolation_level(IsolationLevel::RepeatableRead)
        .read_only(true)
        .start()
        .await?;
    let pool_sizes = pool_records(&tx, q).await?;
    let mut sweep = Sweep::new(q.range, PoolTimeline::new(pool_sizes));
    super::denials::sweep_denials(&tx, q, &mut sweep).await?;
    sweep_spanning(&tx, q, &mut sweep).await?;
    sweep_in_range(&tx, q, &mut sweep).await?;
    sweep_idle(&tx, q, &mut sweep).await?;
    tx.commit().await?;
    Ok(sweep.finish())
}

/// The pool sizes that judge the range: the one in force at `from` (or,
/// before the first record, the first) and every later one up to `to`.
async fn pool_records(
    tx: &impl GenericClient,
    q: &UsageQuery,
) -> Result<Vec<(Timestamp, u32)>, StoreError> {
    let (from, to) = (q.range.from.as_millis(), q.range.to.as_millis());
    let pool_row = |row: &Row| (Timestamp::from_millis(row.get(0)), row.get::<_, i32>(1));
    let mut pool: Vec<(Timestamp, u32)> = tx
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
            tx.query_opt(
                "SELECT at, seats FROM pool_sizes WHERE license_id = $1 ORDER BY at LIMIT 1",
                &[&q.license_id],
            )
            .await?
            .as_ref()
            .map(pool_row)
            .map(|(at, seats)| (at, seats.max(0) as u32)),
        );
    }
    Ok(pool)
}

/// The sessions that started before the range and ran into it.
async fn sweep_spanning(
    tx: &impl GenericClient,
    q: &UsageQuery,
    sweep: &mut Sweep,
) -> Result<(), StoreError> {
    let r = &q.range;
    let from = r.from.as_millis();
    let threshold = live_threshold(r.now, q.skew).as_millis();
    let ran_past_from = ran_past(Timestamp::from_millis(from), q.skew);
    if any_started_before(tx, &q.license_id, from).await? {
        let params: [&(dyn ToSql + Sync); 4] = [&q.license_id, &from, &threshold, &ran_past_from];
        let rows = tx
            .query_raw(concat!(spanning!(none), " ORDER BY 5"), params)
            .await?;
        pin_mut!(rows);
        while let Some(row) = rows.try_next().await? {
            let s = resolve(raw_from_row(&row), r.now, q.skew)?;
            sweep.session(s.started_at, s.ended_at, &s.holder, s.borrowed);
        }
    }
    Ok(())
}

/// The sessions that started in the range, in order of start.
async fn sweep_in_range(
    tx: &impl GenericClient,
    q: &UsageQuery,
    sweep: &mut Sweep,
) -> Result<(), StoreError> {
    let r = &q.range;
    let (from, to) = (r.from.as_millis(), r.to.as_millis());
    // The open sessions that started in the range (at most the pool), then
    // the ended ones streamed in start order, the open ones merged in
    // here. PostgreSQL 15 plans a UNION ALL under ORDER BY as a sort of
    // the whole range (measured: 0.9 s for a year of 1,000,000 sessions,
    // spilling to disk) where one table's index is already in order.
    let borrowed = |mode: i32| SeatMode::from_code(mode) == Some(SeatMode::Borrow);
    let mut open: std::collections::VecDeque<(i64, i64, String, bool)> = tx
        .query(
            "SELECT checked_out_at, expires_at, holder, mode FROM leases
             WHERE license_id = $1 AND checked_out_at >= $2 AND checked_out_at < $3
             ORDER BY checked_out_at",
            &[&q.license_id, &from, &to],
        )
        .await?
        .iter()
        .map(|row| (row.get(0), row.get(1), row.get(2), borrowed(row.get(3))))
        .collect();
    let mut sweep_open_until = |sweep: &mut Sweep, until: i64| {
        while let Some((start, expires_at, holder, lent)) = open
            .front()
            .is_some_and(|(start, ..)| *start <= until)
            .then(|| open.pop_front())
            .flatten()
        {
            let ended_at = lapsed_at(Some(Timestamp::from_millis(expires_at)), r.now, q.skew);
            sweep.session(Timestamp::from_millis(start), ended_at, &holder, lent);
        }
    };
    let params: [&(dyn ToSql + Sync); 3] = [&q.license_id, &from, &to];
    let rows = tx
        .query_raw(
            "SELECT started_at, ended_at, holder, mode FROM sessions
             WHERE license_id = $1 AND started_at >= $2 AND started_at < $3
             ORDER BY started_at",
            params,
        )
        .await?;
    pin_mut!(rows);
    while let Some(row) = rows.try_next().await? {
        let started_at: i64 = row.get(0);
        sweep_open_until(sweep, started_at);
        let ended_at = Timestamp::from_millis(row.get(1));
        sweep.session(
            Timestamp::from_millis(started_at),
            Some(ended_at),
            row.get::<_, &str>(2),
            borrowed(row.get(3)),
        );
    }
    sweep_open_until(sweep, i64::MAX);
    Ok(())
}

/// The recorded idle periods that overlap the range: those of the license
/// that end after `from` (`idle_periods_by_license_time`) and begin
/// before `to`.
async fn sweep_idle(
    tx: &impl GenericClient,
    q: &UsageQuery,
    sweep: &mut Sweep,
) -> Result<(), StoreError> {
    let r = &q.range;
    let (from, to) = (r.from.as_millis(), r.to.as_millis());
    let params: [&(dyn ToSql + Sync); 3] = [&q.license_id, &from, &to];
    let rows = tx
        .query_raw(
            "SELECT from_ms, to_ms FROM idle_periods
             WHERE license_id = $1 AND to_ms > $2 AND from_ms < $3",
            params,
        )
        .await?;
    pin_mut!(rows);
    while let Some(row) = rows.try_next().await? {
        sweep.idle_period(
            Timestamp::from_millis(row.get(0)),
            Timestamp::from_millis(row.get(1)),
        );
    }
    Ok(())
}
