//! Usage-history reads (SQLite; `pg/history.rs` asks PostgreSQL the same):
//! one license's sessions, newest first and keyset-paged, and its usage
//! over a range, swept from the sessions as they stream out of the query.
//!
//! A session is written to `sessions` when its seat leaves the table; until
//! then its lease row is the session. A lease that lapsed is read as an
//! ended session (a lapse at [`live_until`]) from the moment the one
//! predicate stops counting it. SQL binds `live_threshold(now, skew)` and
//! [`ran_past`] for that and writes no rule of its own; [`resolve`] decides
//! with `is_live`.

use std::time::Duration;

use leasehold_common::api::{SessionEnd, SessionView};
use leasehold_common::liveness::live_until;
use leasehold_common::{Timestamp, is_live, live_threshold};

use super::{SeatMode, StoreError};
use crate::usage::UsageRange;

/// `GET /v1/admin/usage` as the store needs it.
#[derive(Debug, Clone)]
pub struct UsageQuery {
    pub license_id: String,
    pub range: UsageRange,
    /// The license's current skew, for sessions of lapsed, unreaped leases.
    pub skew: Duration,
    /// A `full` denial followed by a grant to the same holder within this
    /// is not a true denial (`store::denials::DEFAULT_TOLERANCE` unless
    /// asked).
    pub tolerance: Duration,
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

/// A session as stored: an ended one from `sessions`, or an open one from
/// its lease (with the lease's `expires_at`).
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
    pub group: Option<String>,
    /// How the seat was kept: an open session's lease is lingering
    /// (released, still counting) or borrowed; an ended one's when it ended.
    pub mode: SeatMode,
    /// The sum of its recorded idle periods, in milliseconds.
    pub idle_ms: i64,
}

/// The session as read at `now`: a lapsed, unreaped lease's session has
/// ended (a lapse at [`live_until`]); an open one's duration is its time so
/// far.
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
        (None, _) => match lapsed_at(raw.expires_at, now, skew) {
            // A lingering seat was released; it stopped counting then.
            Some(at) if raw.mode == SeatMode::Linger => (Some(at), Some(SessionEnd::Release)),
            Some(at) => (Some(at), Some(SessionEnd::Lapse)),
            None => (None, None),
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
        idle_s: raw.idle_ms as f64 / 1000.0,
        group: raw.group,
        borrowed: raw.mode == SeatMode::Borrow,
    })
}

/// Where a session without `ended_at` ended: when its lease stopped being
/// live ([`live_until`]) if it lapsed; `None` (open) if the lease is live.
pub fn lapsed_at(
    expires_at: Option<Timestamp>,
    now: Timestamp,
    skew: Duration,
) -> Option<Timestamp> {
    expires_at
        .filter(|e| !is_live(*e, now, skew))
        .map(|e| live_until(e, skew))
}

/// The columns [`raw_from_row`] reads, for both stores' queries: an ended
/// session from `sessions`, and an open one from its lease (its row is the
/// session until the seat leaves the table).
macro_rules! ended_columns {
    () => {
        "seat_id, license_id, holder, fingerprint, started_at, ended_at, end_kind,
         CAST(NULL AS BIGINT), grp, mode"
    };
}
macro_rules! open_columns {
    () => {
        "seat_id, license_id, holder, fingerprint, checked_out_at, CAST(NULL AS BIGINT),
         CAST(NULL AS TEXT), expires_at, grp, mode"
    };
}
pub(crate) use {ended_columns, open_columns};

/// The least `expires_at` of a lease whose session ran past `t`: it was
/// still live a millisecond after `t` (so [`live_until`] is after `t`).
/// Bound as a parameter, so the SQL that finds sessions spanning `t` has
/// no liveness arithmetic of its own.
pub fn ran_past(t: Timestamp, skew: Duration) -> i64 {
    live_threshold(t.saturating_add(Duration::from_millis(1)), skew).as_millis()
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
