//! The demand of a what-if on PostgreSQL: the same questions, in the same
//! words, as SQLite's `sqlite/what_if.rs` (which documents them), on the
//! read pool, in one snapshot, the sessions streamed out of the query
//! (`query_raw`) into the builder, never collected as rows.

use std::collections::HashMap;

use futures_util::{TryStreamExt, pin_mut};
use leasehold_common::Timestamp;
use leasehold_common::time::duration_millis;
use tokio_postgres::types::ToSql;
use tokio_postgres::{GenericClient, IsolationLevel, Row};

use super::denials::true_denials;
use super::pool::PgPool;
use crate::store::StoreError;
use crate::store::history::lapsed_at;
use crate::usage::PoolTimeline;
use crate::usage::what_if::{Demand, DemandBuilder, WhatIfQuery};

/// Each seat's idle periods that cut: `(from, to)`.
type IdleBySeat = HashMap<String, Vec<(Timestamp, Timestamp)>>;

/// The demand of `q`, read in one snapshot.
pub async fn what_if_demand(pool: &PgPool, q: &WhatIfQuery) -> Result<Demand, StoreError> {
    let mut loan = pool.client().await?;
    let client: &mut tokio_postgres::Client = &mut loan;
    let tx = client
        .build_transaction()
        .isolation_level(IsolationLevel::RepeatableRead)
        .read_only(true)
        .start()
        .await?;
    let covered_from = covered_from(&tx, q).await?;
    let (from, to) = (covered_from.as_millis(), q.to.as_millis());
    let idle = match q.idle_timeout {
        Some(t) => idle_periods(&tx, q, from, duration_millis(t)).await?,
        None => IdleBySeat::new(),
    };
    let mut demand = DemandBuilder::new(covered_from, q.to, q.idle_timeout);
    let ended = |row: &Row| Some(Timestamp::from_millis(row.get(2)));
    stream(
        &tx,
        "SELECT seat_id, started_at, ended_at FROM sessions
         WHERE license_id = $1 AND ended_at > $2 AND started_at < $2",
        &[&q.license_id, &from],
        ended,
        &idle,
        &mut demand,
    )
    .await?;
    stream(
        &tx,
        "SELECT seat_id, started_at, ended_at FROM sessions
         WHERE license_id = $1 AND started_at >= $2 AND started_at < $3",
        &[&q.license_id, &from, &to],
        ended,
        &idle,
        &mut demand,
    )
    .await?;
    stream(
        &tx,
        "SELECT seat_id, checked_out_at, expires_at FROM leases
         WHERE license_id = $1 AND checked_out_at < $2",
        &[&q.license_id, &to],
        |row| lapsed_at(Some(Timestamp::from_millis(row.get(2))), q.now, q.skew),
        &idle,
        &mut demand,
    )
    .await?;
    let denials = true_denials(&tx, &q.license_id, covered_from, q.to, q.tolerance).await?;
    tx.commit().await?;
    Ok(demand.finish(denials.into_values(), q.tolerance, q.ttl))
}

/// Each row of `sql` (`seat_id`, start, and what `ended_at` reads the end
/// from) into the builder, with its seat's idle periods.
async fn stream(
    tx: &impl GenericClient,
    sql: &str,
    params: &[&(dyn ToSql + Sync)],
    ended_at: impl Fn(&Row) -> Option<Timestamp>,
    idle: &IdleBySeat,
    demand: &mut DemandBuilder,
) -> Result<(), StoreError> {
    let rows = tx.query_raw(sql, params.iter().copied()).await?;
    pin_mut!(rows);
    while let Some(row) = rows.try_next().await? {
        let periods = idle
            .get(row.get::<_, &str>(0))
            .map_or(&[][..], Vec::as_slice);
        demand.session(Timestamp::from_millis(row.get(1)), ended_at(&row), periods);
    }
    Ok(())
}

/// The later of `from` and the license's first pool-size record.
async fn covered_from(tx: &impl GenericClient, q: &WhatIfQuery) -> Result<Timestamp, StoreError> {
    let first: Option<i64> = tx
        .query_one(
            "SELECT min(at) FROM pool_sizes WHERE license_id = $1",
            &[&q.license_id],
        )
        .await?
        .get(0);
    let records = first.map(|at| (Timestamp::from_millis(at), 0)).into_iter();
    let covered =
        PoolTimeline::new(records.collect()).covered_from(q.from.as_millis(), q.to.as_millis());
    Ok(Timestamp::from_millis(covered))
}

/// The license's recorded idle periods at least `min_ms` long that overlap
/// `[from, to)` (`idle_periods_by_license_time`), by seat.
async fn idle_periods(
    tx: &impl GenericClient,
    q: &WhatIfQuery,
    from: i64,
    min_ms: i64,
) -> Result<IdleBySeat, StoreError> {
    let to = q.to.as_millis();
    let params: [&(dyn ToSql + Sync); 4] = [&q.license_id, &from, &to, &min_ms];
    let rows = tx
        .query_raw(
            "SELECT seat_id, from_ms, to_ms FROM idle_periods
             WHERE license_id = $1 AND to_ms > $2 AND from_ms < $3 AND to_ms - from_ms >= $4",
            params,
        )
        .await?;
    pin_mut!(rows);
    let mut by_seat = IdleBySeat::new();
    while let Some(row) = rows.try_next().await? {
        by_seat.entry(row.get(0)).or_default().push((
            Timestamp::from_millis(row.get(1)),
            Timestamp::from_millis(row.get(2)),
        ));
    }
    Ok(by_seat)
}
