//! The demand of a what-if on SQLite (`usage/what_if.rs` replays it;
//! `pg/what_if.rs` asks PostgreSQL the same): the license's sessions
//! overlapping the covered range, each with its recorded idle periods that
//! an idle timeout would cut at, and its true denials.
//!
//! Rows stream into the [`DemandBuilder`], which keeps two numbers per
//! session (its requests and its clipped duration, about 24 bytes), so a
//! year of 1,000,000 sessions holds some 40 MB however the rows arrive.
//! The idle periods are read first and only when a timeout is asked, and
//! only those at least that long (the rest cut nothing), keyed by seat.

use std::collections::HashMap;

use leasehold_common::Timestamp;
use rusqlite::{Connection, Row, params};

use super::denials::true_denials;
use crate::store::StoreError;
use crate::store::history::lapsed_at;
use crate::usage::PoolTimeline;
use crate::usage::what_if::{Demand, DemandBuilder, WhatIfQuery};

/// Each seat's idle periods that cut: `(from, to)`.
type IdleBySeat = HashMap<String, Vec<(Timestamp, Timestamp)>>;

/// The demand of `q`, read in one snapshot: a session that ends while it
/// is read moves from `leases` to `sessions` and must be seen once.
pub(super) fn what_if_demand(c: &Connection, q: &WhatIfQuery) -> Result<Demand, StoreError> {
    let tx = c.unchecked_transaction()?;
    let covered_from = covered_from(&tx, q)?;
    let (from, to) = (covered_from.as_millis(), q.to.as_millis());
    let idle = match q.idle_timeout {
        Some(t) => idle_periods(&tx, q, from, leasehold_common::time::duration_millis(t))?,
        None => IdleBySeat::new(),
    };
    let mut demand = DemandBuilder::new(covered_from, q.to, q.idle_timeout);
    let mut feed = |row: &Row<'_>, ended_at: Option<Timestamp>| -> rusqlite::Result<()> {
        let seat = row.get_ref(0)?.as_str().map_err(rusqlite::Error::from)?;
        let periods = idle.get(seat).map_or(&[][..], Vec::as_slice);
        demand.session(Timestamp::from_millis(row.get(1)?), ended_at, periods);
        Ok(())
    };
    let ended = |row: &Row<'_>| Ok(Some(Timestamp::from_millis(row.get(2)?)));
    // Ended sessions that ran into the range from before it, then those
    // that started in it: each a range of one index.
    stream(
        &tx,
        "SELECT seat_id, started_at, ended_at FROM sessions INDEXED BY sessions_by_license_end
         WHERE license_id = ?1 AND ended_at > ?2 AND started_at < ?2",
        params![q.license_id, from],
        ended,
        &mut feed,
    )?;
    stream(
        &tx,
        "SELECT seat_id, started_at, ended_at FROM sessions INDEXED BY sessions_by_license_time
         WHERE license_id = ?1 AND started_at >= ?2 AND started_at < ?3",
        params![q.license_id, from, to],
        ended,
        &mut feed,
    )?;
    // Open sessions are lease rows (at most the pool and the lapsed ones
    // not yet reaped); a lapsed one ended where the history says.
    stream(
        &tx,
        "SELECT seat_id, checked_out_at, expires_at FROM leases
         INDEXED BY leases_by_license_checkout
         WHERE license_id = ?1 AND checked_out_at < ?2",
        params![q.license_id, to],
        |row| {
            let expires_at = Timestamp::from_millis(row.get(2)?);
            Ok(lapsed_at(Some(expires_at), q.now, q.skew))
        },
        &mut feed,
    )?;
    let denials = true_denials(&tx, &q.license_id, covered_from, q.to, q.tolerance)?;
    tx.finish()?;
    Ok(demand.finish(denials.into_values(), q.tolerance, q.ttl))
}

/// Each row of `sql`, with its session's end, into `feed`.
fn stream(
    c: &Connection,
    sql: &str,
    params: &[&dyn rusqlite::ToSql],
    ended_at: impl Fn(&Row<'_>) -> rusqlite::Result<Option<Timestamp>>,
    feed: &mut impl FnMut(&Row<'_>, Option<Timestamp>) -> rusqlite::Result<()>,
) -> rusqlite::Result<()> {
    let mut stmt = c.prepare_cached(sql)?;
    let mut rows = stmt.query(params)?;
    while let Some(row) = rows.next()? {
        feed(row, ended_at(row)?)?;
    }
    Ok(())
}

/// The later of `from` and the license's first pool-size record, as the
/// usage summary says it (`to` with no record).
fn covered_from(c: &Connection, q: &WhatIfQuery) -> rusqlite::Result<Timestamp> {
    let first: Option<i64> = c
        .prepare_cached("SELECT min(at) FROM pool_sizes WHERE license_id = ?1")?
        .query_row(params![q.license_id], |r| r.get(0))?;
    let records = first.map(|at| (Timestamp::from_millis(at), 0)).into_iter();
    let covered =
        PoolTimeline::new(records.collect()).covered_from(q.from.as_millis(), q.to.as_millis());
    Ok(Timestamp::from_millis(covered))
}

/// The license's recorded idle periods at least `min_ms` long that overlap
/// `[from, to)`, by seat: those that began in it (by start) and those that
/// began before it and ran into it (by end).
fn idle_periods(
    c: &Connection,
    q: &WhatIfQuery,
    from: i64,
    min_ms: i64,
) -> rusqlite::Result<IdleBySeat> {
    let mut stmt = c.prepare_cached(
        "SELECT seat_id, from_ms, to_ms FROM idle_periods INDEXED BY idle_periods_by_license_from
         WHERE license_id = ?1 AND from_ms >= ?2 AND from_ms < ?3 AND to_ms - from_ms >= ?4
         UNION ALL
         SELECT seat_id, from_ms, to_ms FROM idle_periods INDEXED BY idle_periods_by_license_to
         WHERE license_id = ?1 AND to_ms > ?2 AND from_ms < ?2 AND to_ms - from_ms >= ?4",
    )?;
    let mut by_seat = IdleBySeat::new();
    let mut rows = stmt.query(params![q.license_id, from, q.to.as_millis(), min_ms])?;
    while let Some(row) = rows.next()? {
        by_seat.entry(row.get(0)?).or_default().push((
            Timestamp::from_millis(row.get(1)?),
            Timestamp::from_millis(row.get(2)?),
        ));
    }
    Ok(by_seat)
}
