//! Usage-history reads on SQLite (the questions and their shared answers
//! are in `store/history.rs`; `pg/history.rs` asks PostgreSQL the same).

use leasehold_common::api::SessionView;
use leasehold_common::{Timestamp, live_threshold};
use rusqlite::{Connection, OptionalExtension, Row, params};

use super::rows::mode_from;
use crate::store::history::{
    RawSession, SessionsQuery, UsageQuery, ended_columns, lapsed_at, open_columns, ran_past,
    resolve,
};
use crate::store::{SeatMode, StoreError};
use crate::usage::{PoolTimeline, Sweep, Usage};

fn raw_from_row(r: &Row<'_>) -> rusqlite::Result<RawSession> {
    Ok(RawSession {
        seat_id: r.get(0)?,
        license_id: r.get(1)?,
        holder: r.get(2)?,
        fingerprint: r.get(3)?,
        started_at: Timestamp::from_millis(r.get(4)?),
        ended_at: r.get::<_, Option<i64>>(5)?.map(Timestamp::from_millis),
        end_kind: r.get(6)?,
        expires_at: r.get::<_, Option<i64>>(7)?.map(Timestamp::from_millis),
        group: r.get(8)?,
        mode: mode_from(r.get(9)?)?,
        idle_ms: r.get(10)?,
    })
}

/// The column after [`ended_columns!`] or [`open_columns!`] that
/// [`raw_from_row`] reads as `idle_ms`: the session's recorded idle periods
/// (one seat's, by `idle_periods_by_seat`), summed for each row read.
macro_rules! idle_ms {
    ($table:literal) => {
        concat!(
            ", (SELECT coalesce(sum(i.to_ms - i.from_ms), 0)
               FROM idle_periods i INDEXED BY idle_periods_by_seat
               WHERE i.seat_id = ",
            $table,
            ".seat_id)"
        )
    };
}

/// The sessions of a range come from two places, so that a query costs the
/// sessions of the range and not the license's whole history before it:
/// those that started inside `[from, to)` (a range of
/// `sessions_by_license_time` merged with one of
/// `leases_by_license_checkout`), and those that started before `from` and
/// were still running at `from` (the `spanning!` part: ended after `from`,
/// from `sessions_by_license_end`, or still held and not lapsed by `from`).
/// Every spanning session starts before every session of the first part, so
/// the two read one after the other are in order of start. A session is in
/// exactly one table at any instant, and each part is one statement (one
/// snapshot), so none is read twice or missed while it ends.
///
/// `?1` license, `?2` from, `?4` `live_threshold`, `?5` [`ran_past`] `from`; `$ended` and
/// `$open` are further conditions on each table's rows.
macro_rules! spanning {
    ($($ended:literal, $open:literal)?) => {
        concat!(
            "SELECT ",
            ended_columns!(),
            idle_ms!("sessions"),
            " FROM sessions INDEXED BY sessions_by_license_end
             WHERE license_id = ?1 AND ended_at > ?2 AND started_at < ?2 ",
            $($ended,)?
            " UNION ALL SELECT ",
            open_columns!(),
            idle_ms!("leases"),
            " FROM leases INDEXED BY leases_by_license_checkout
             WHERE license_id = ?1 AND checked_out_at < ?2
               AND (expires_at >= ?4 OR expires_at >= ?5) ",
            $($open,)?
        )
    };
}

/// Did any session of the license start before `t`? If not, no session
/// spans `t` and the spanning part is not asked.
fn any_started_before(c: &Connection, license_id: &str, t: i64) -> rusqlite::Result<bool> {
    c.prepare_cached(
        "SELECT EXISTS (SELECT 1 FROM sessions WHERE license_id = ?1 AND started_at < ?2)
             OR EXISTS (SELECT 1 FROM leases WHERE license_id = ?1 AND checked_out_at < ?2)",
    )?
    .query_row(params![license_id, t], |r| r.get(0))
}

/// One page of sessions, newest first (`started_at`, then `seat_id`,
/// descending), after the cursor: first those that started in the range,
/// then (if the page is not full) those that started before it and ran
/// into it (see `spanning!`). The cursor and `to` make one upper bound on
/// `(started_at, seat_id)`, a range of each index, merged, so a page costs
/// what it holds however deep into the range it is.
pub(super) fn sessions_page(
    c: &Connection,
    q: &SessionsQuery,
) -> Result<Vec<SessionView>, StoreError> {
    let (from, to) = (q.from.as_millis(), q.to.as_millis());
    // `(to, '')`: every seat id is longer, so this is `started_at < to`.
    let (below_at, below_seat) = match &q.after {
        Some(a) if a.started_at.as_millis() < to => (a.started_at.as_millis(), a.seat_id.as_str()),
        _ => (to, ""),
    };
    let limit = i64::try_from(q.limit).unwrap_or(i64::MAX);
    let threshold = live_threshold(q.now, q.skew).as_millis();
    let ran_past_from = ran_past(q.from, q.skew);
    let mut page = Vec::new();
    let mut in_range = c.prepare_cached(concat!(
        "SELECT ",
        ended_columns!(),
        idle_ms!("sessions"),
        " FROM sessions INDEXED BY sessions_by_license_time
         WHERE license_id = ?1 AND started_at >= ?2
           AND (started_at, seat_id) < (?3, ?4) AND (?5 IS NULL OR holder = ?5)
         UNION ALL SELECT ",
        open_columns!(),
        idle_ms!("leases"),
        " FROM leases INDEXED BY leases_by_license_checkout
         WHERE license_id = ?1 AND checked_out_at >= ?2
           AND (checked_out_at, seat_id) < (?3, ?4) AND (?5 IS NULL OR holder = ?5)
         ORDER BY 5 DESC, 1 DESC
         LIMIT ?6"
    ))?;
    for raw in in_range.query_map(
        params![q.license_id, from, below_at, below_seat, q.holder, limit],
        raw_from_row,
    )? {
        page.push(resolve(raw?, q.now, q.skew)?);
    }
    if page.len() >= q.limit || !any_started_before(c, &q.license_id, from)? {
        return Ok(page);
    }
    let mut spanning = c.prepare_cached(concat!(
        spanning!(
            "AND (started_at, seat_id) < (?3, ?6) AND (?7 IS NULL OR holder = ?7)",
            "AND (checked_out_at, seat_id) < (?3, ?6) AND (?7 IS NULL OR holder = ?7)"
        ),
        " ORDER BY 5 DESC, 1 DESC LIMIT ?8"
    ))?;
    let left = i64::try_from(q.limit - page.len()).unwrap_or(i64::MAX);
    for raw in spanning.query_map(
        params![
            q.license_id,
            from,
            below_at,
            threshold,
            ran_past_from,
            below_seat,
            q.holder,
            left
        ],
        raw_from_row,
    )? {
        page.push(resolve(raw?, q.now, q.skew)?);
    }
    Ok(page)
}

/// The usage of one license over the range: pool sizes and denials
/// first (few rows; a retry storm's a row a second), then the sessions streamed into the sweep in order of
/// start, never collected: those that ran into the range from before it
/// (few: at most the seats in use at `from`), then those that started in
/// it (see `spanning!`).
pub(super) fn usage(c: &Connection, q: &UsageQuery) -> Result<Usage, StoreError> {
    let r = &q.range;
    let (from, to, now) = (r.from.as_millis(), r.to.as_millis(), r.now);
    let pool = pool_records(c, &q.license_id, r.from, r.to)?;
    let mut sweep = Sweep::new(*r, PoolTimeline::new(pool));

    super::denials::sweep_denials(c, q, &mut sweep)?;

    let threshold = live_threshold(now, q.skew).as_millis();
    let ran_past_from = ran_past(Timestamp::from_millis(from), q.skew);
    if any_started_before(c, &q.license_id, from)? {
        let mut spanning = c.prepare_cached(concat!(spanning!(), " ORDER BY 5"))?;
        let mut rows = spanning.query(params![q.license_id, from, to, threshold, ran_past_from])?;
        while let Some(row) = rows.next()? {
            let s = resolve(raw_from_row(row)?, now, q.skew)?;
            sweep.session(s.started_at, s.ended_at, &s.holder, s.borrowed);
        }
    }
    // Only what the sweep needs: the ended sessions all from the index, the
    // open ones (at most the pool) with their expiry; merged in start order.
    let mut in_range = c.prepare_cached(
        "SELECT started_at, ended_at, holder, NULL, mode
         FROM sessions INDEXED BY sessions_by_license_time
         WHERE license_id = ?1 AND started_at >= ?2 AND started_at < ?3
         UNION ALL
         SELECT checked_out_at, NULL, holder, expires_at, mode
         FROM leases INDEXED BY leases_by_license_checkout
         WHERE license_id = ?1 AND checked_out_at >= ?2 AND checked_out_at < ?3
         ORDER BY 1",
    )?;
    let mut rows = in_range.query(params![q.license_id, from, to])?;
    while let Some(row) = rows.next()? {
        let started_at = Timestamp::from_millis(row.get(0)?);
        let ended_at = match row.get::<_, Option<i64>>(1)? {
            Some(at) => Some(Timestamp::from_millis(at)),
            None => lapsed_at(
                row.get::<_, Option<i64>>(3)?.map(Timestamp::from_millis),
                now,
                q.skew,
            ),
        };
        let holder = row.get_ref(2)?.as_str().map_err(rusqlite::Error::from)?;
        let borrowed = mode_from(row.get(4)?)? == SeatMode::Borrow;
        sweep.session(started_at, ended_at, holder, borrowed);
    }
    idle_periods(c, &q.license_id, r.from, r.to, &mut sweep)?;
    Ok(sweep.finish())
}

/// Every recorded idle period of the license that overlaps `[from, to)`,
/// into the sweep (which clips them): those that began in the range (by
/// start) and those that began before it and ended inside or after it (by
/// end), each read once.
fn idle_periods(
    c: &Connection,
    license_id: &str,
    from: Timestamp,
    to: Timestamp,
    sweep: &mut Sweep,
) -> rusqlite::Result<()> {
    let mut stmt = c.prepare_cached(
        "SELECT from_ms, to_ms FROM idle_periods INDEXED BY idle_periods_by_license_from
         WHERE license_id = ?1 AND from_ms >= ?2 AND from_ms < ?3
         UNION ALL
         SELECT from_ms, to_ms FROM idle_periods INDEXED BY idle_periods_by_license_to
         WHERE license_id = ?1 AND to_ms > ?2 AND from_ms < ?2",
    )?;
    let mut rows = stmt.query(params![license_id, from.as_millis(), to.as_millis()])?;
    while let Some(row) = rows.next()? {
        sweep.idle_period(
            Timestamp::from_millis(row.get(0)?),
            Timestamp::from_millis(row.get(1)?),
        );
    }
    Ok(())
}

/// The pool sizes that judge `[from, to]`: the one in force at `from` (or,
/// before the first record, the first) and every later one up to `to`.
fn pool_records(
    c: &Connection,
    license_id: &str,
    from: Timestamp,
    to: Timestamp,
) -> rusqlite::Result<Vec<(Timestamp, u32)>> {
    let at_from = c
        .prepare_cached(
            "SELECT at, seats FROM pool_sizes WHERE license_id = ?1 AND at <= ?2
             ORDER BY at DESC LIMIT 1",
        )?
        .query_row(params![license_id, from.as_millis()], pool_row)
        .optional()?;
    let mut later = c.prepare_cached(
        "SELECT at, seats FROM pool_sizes WHERE license_id = ?1 AND at > ?2 AND at <= ?3
         ORDER BY at",
    )?;
    let mut records: Vec<(Timestamp, u32)> = at_from.into_iter().collect();
    for row in later.query_map(
        params![license_id, from.as_millis(), to.as_millis()],
        pool_row,
    )? {
        records.push(row?);
    }
    if records.is_empty() {
        // Nothing recorded up to `to`: the history starts later, with the
        // size it first records.
        let first = c
            .prepare_cached(
                "SELECT at, seats FROM pool_sizes WHERE license_id = ?1 ORDER BY at LIMIT 1",
            )?
            .query_row(params![license_id], pool_row)
            .optional()?;
        records.extend(first);
    }
    Ok(records)
}

fn pool_row(r: &Row<'_>) -> rusqlite::Result<(Timestamp, u32)> {
    Ok((Timestamp::from_millis(r.get(0)?), r.get(1)?))
}
