//! Usage-history reads (SQLite; `pg/history.rs` asks PostgreSQL the same):
//! one license's sessions, newest first and keyset-paged, and its usage
//! over a range, swept from the sessions as they stream out of the query.
//!
//! A session whose lease is still in the table has no `ended_at` even if it
//! lapsed; it is read as ended (a lapse at `expires_at + skew`) from the
//! moment the one predicate stops counting it. SQL binds
//! `live_threshold(now, skew)` for that and writes no rule of its own;
//! [`resolve`] decides with `is_live`.

use std::time::Duration;

use leasehold_common::api::{SessionEnd, SessionView};
use leasehold_common::{Timestamp, is_live, live_threshold};
use rusqlite::{Connection, OptionalExtension, Row, params};

use super::StoreError;
use crate::usage::{PoolTimeline, Sweep, Usage, UsageRange};

/// `GET /v1/admin/usage` as the store needs it.
#[derive(Debug, Clone)]
pub struct UsageQuery {
    pub license_id: String,
    pub range: UsageRange,
    /// The license's current skew, for sessions of lapsed, unreaped leases.
    pub skew: Duration,
}

/// One page of `GET /v1/admin/sessions`: sessions of the license (and
/// holder) overlapping `[from, to)`, newest first, after `after`.
#[derive(Debug, Clone)]
pub struct SessionsQuery {
    pub license_id: String,
    pub holder: Option<String>,
    pub from: Timestamp,
    pub to: Timestamp,
    pub now: Timestamp,
    pub skew: Duration,
    pub after: Option<SessionCursor>,
    pub limit: usize,
}

/// Where a page ended: the last session's `(started_at, seat_id)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionCursor {
    pub started_at: Timestamp,
    pub seat_id: String,
}

/// A cursor the server did not hand out.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("after is not a cursor this server handed out")]
pub struct BadCursor;

impl SessionCursor {
    pub fn of(session: &SessionView) -> SessionCursor {
        SessionCursor {
            started_at: session.started_at,
            seat_id: session.seat_id.clone(),
        }
    }

    /// Opaque to clients: hex of `<started_at ms>:<seat_id>`, so it survives
    /// any query string unescaped.
    pub fn encode(&self) -> String {
        hex::encode(format!("{}:{}", self.started_at.as_millis(), self.seat_id))
    }

    pub fn decode(text: &str) -> Result<SessionCursor, BadCursor> {
        if text.len() > 512 {
            return Err(BadCursor);
        }
        let bytes = hex::decode(text).map_err(|_| BadCursor)?;
        let text = String::from_utf8(bytes).map_err(|_| BadCursor)?;
        let (ms, seat_id) = text.split_once(':').ok_or(BadCursor)?;
        let started_at = ms.parse::<i64>().map_err(|_| BadCursor)?;
        if seat_id.is_empty() {
            return Err(BadCursor);
        }
        Ok(SessionCursor {
            started_at: Timestamp::from_millis(started_at),
            seat_id: seat_id.to_string(),
        })
    }
}

/// A `sessions` row with the `expires_at` of its lease, if still held.
#[derive(Debug, Clone)]
pub struct RawSession {
    pub seat_id: String,
    pub license_id: String,
    pub holder: String,
    pub fingerprint: Option<String>,
    pub started_at: Timestamp,
    pub ended_at: Option<Timestamp>,
    pub end_kind: Option<String>,
    pub expires_at: Option<Timestamp>,
}

/// The session as read at `now`: a lapsed, unreaped lease's session has
/// ended (a lapse at `expires_at + skew`); an open one's duration is its
/// time so far.
pub fn resolve(raw: RawSession, now: Timestamp, skew: Duration) -> Result<SessionView, StoreError> {
    let (ended_at, end) = match (raw.ended_at, raw.end_kind.as_deref()) {
        (Some(at), Some(kind)) => (
            Some(at),
            Some(
                SessionEnd::parse(kind)
                    .ok_or_else(|| StoreError::UnknownSessionEnd(kind.into()))?,
            ),
        ),
        (Some(_), None) => return Err(StoreError::UnknownSessionEnd(String::new())),
        (None, _) => match raw.expires_at {
            Some(e) if !is_live(e, now, skew) => {
                (Some(e.saturating_add(skew)), Some(SessionEnd::Lapse))
            }
            // Live, or (never written: every lease deletion ends its
            // session) no lease left: open.
            _ => (None, None),
        },
    };
    let duration_ms = ended_at.unwrap_or(now).millis_since(raw.started_at).max(0);
    Ok(SessionView {
        seat_id: raw.seat_id,
        license_id: raw.license_id,
        holder: raw.holder,
        fingerprint: raw.fingerprint,
        started_at: raw.started_at,
        ended_at,
        end,
        duration_s: duration_ms as f64 / 1000.0,
    })
}

/// The columns [`raw_from_row`] reads, for both stores' queries.
macro_rules! session_columns {
    () => {
        "s.seat_id, s.license_id, s.holder, s.fingerprint, s.started_at, s.ended_at,
         s.end_kind, l.expires_at"
    };
}
pub(super) use session_columns;

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
    })
}

/// One page of sessions, newest first (`started_at`, then `seat_id`,
/// descending). Overlap with `[from, to)`: started before `to`, and started
/// in the range or ended after `from` (a lapsed, unreaped lease's session
/// ends at `expires_at + skew`; a live one's has not ended).
pub(super) fn sessions_page(
    c: &Connection,
    q: &SessionsQuery,
) -> Result<Vec<SessionView>, StoreError> {
    let mut stmt = c.prepare_cached(concat!(
        "SELECT ",
        session_columns!(),
        " FROM sessions s LEFT JOIN leases l ON l.seat_id = s.seat_id
         WHERE s.license_id = ?1 AND (?2 IS NULL OR s.holder = ?2)
           AND s.started_at < ?4
           AND (s.started_at >= ?3 OR s.ended_at > ?3
                OR (s.ended_at IS NULL AND (l.expires_at IS NULL OR l.expires_at >= ?5
                                            OR l.expires_at + ?6 > ?3)))
           AND (?7 IS NULL OR s.started_at < ?7 OR (s.started_at = ?7 AND s.seat_id < ?8))
         ORDER BY s.started_at DESC, s.seat_id DESC
         LIMIT ?9"
    ))?;
    let (after_at, after_seat) = match &q.after {
        Some(c) => (Some(c.started_at.as_millis()), Some(c.seat_id.as_str())),
        None => (None, None),
    };
    let rows = stmt.query_map(
        params![
            q.license_id,
            q.holder,
            q.from.as_millis(),
            q.to.as_millis(),
            live_threshold(q.now, q.skew).as_millis(),
            skew_ms(q.skew),
            after_at,
            after_seat,
            i64::try_from(q.limit).unwrap_or(i64::MAX),
        ],
        raw_from_row,
    )?;
    rows.map(|raw| resolve(raw?, q.now, q.skew)).collect()
}

/// The usage of one license over the range: pool sizes and denial counts
/// first (few rows), then the sessions streamed into the sweep in order of
/// start, never collected.
pub(super) fn usage(c: &Connection, q: &UsageQuery) -> Result<Usage, StoreError> {
    let r = &q.range;
    let (from, to, now) = (r.from.as_millis(), r.to.as_millis(), r.now);
    let pool = pool_records(c, &q.license_id, r.from, r.to)?;
    let mut sweep = Sweep::new(*r, PoolTimeline::new(pool));

    // One row per bucket: the bucket's first second stands for it.
    let mut denials = c.prepare_cached(
        "SELECT min(second_ms), sum(count) FROM denials
         WHERE license_id = ?1 AND second_ms >= ?2 AND second_ms < ?3
         GROUP BY (second_ms - ?2) / ?4",
    )?;
    let mut rows = denials.query(params![q.license_id, from, to, r.step_ms])?;
    while let Some(row) = rows.next()? {
        let count: i64 = row.get(1)?;
        sweep.denials(Timestamp::from_millis(row.get(0)?), count.max(0) as u64);
    }

    let mut sessions = c.prepare_cached(concat!(
        "SELECT ",
        session_columns!(),
        " FROM sessions s LEFT JOIN leases l ON l.seat_id = s.seat_id
         WHERE s.license_id = ?1 AND s.started_at < ?3
           AND (s.started_at >= ?2 OR s.ended_at > ?2
                OR (s.ended_at IS NULL AND (l.expires_at IS NULL OR l.expires_at >= ?4
                                            OR l.expires_at + ?5 > ?2)))
         ORDER BY s.started_at"
    ))?;
    let mut rows = sessions.query(params![
        q.license_id,
        from,
        to,
        live_threshold(now, q.skew).as_millis(),
        skew_ms(q.skew),
    ])?;
    while let Some(row) = rows.next()? {
        let s = resolve(raw_from_row(row)?, now, q.skew)?;
        sweep.session(s.started_at, s.ended_at, &s.holder);
    }
    Ok(sweep.finish())
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

pub(super) fn skew_ms(skew: Duration) -> i64 {
    i64::try_from(skew.as_millis()).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_round_trip_and_garbage_is_refused() {
        let c = SessionCursor {
            started_at: Timestamp::from_millis(-5),
            seat_id: "ab:cd".into(),
        };
        assert_eq!(SessionCursor::decode(&c.encode()), Ok(c));
        for bad in [
            "",
            "zz",
            "6162",
            &"00".repeat(300),
            &hex::encode("x:y"),
            &hex::encode("1:"),
        ] {
            assert_eq!(SessionCursor::decode(bad), Err(BadCursor), "{bad:?}");
        }
    }
}
