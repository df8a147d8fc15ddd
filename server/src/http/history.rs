//! `GET /v1/admin/usage` and `GET /v1/admin/sessions`: the usage history
//! (issue 12), and what `GET /v1/admin/denials` (`denials.rs`) shares with
//! them: the range, the page limit, the `tolerance` of a true denial and the
//! CSV stream. They run only behind the admin auth filter; all are reads on
//! the store's read pool, so they never hold up the writer. Bad input is a
//! 400 `invalid_request` (a license not configured: 404 `unknown_license`)
//! before anything is read.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use leasehold_common::api::{SessionView, SessionsResponse, UsageResponse};
use leasehold_common::policy::parse_duration;
use leasehold_common::time::duration_millis;
use leasehold_common::{LicenseConfig, Timestamp};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use warp::http::{HeaderValue, StatusCode, header};
use warp::reply::{Reply, Response};

use super::csv;
use super::error::ApiError;
use super::handlers::{Result, json, query_int, store_err};
use crate::AppState;
use crate::store::StoreError;
use crate::store::denials::{DEFAULT_TOLERANCE, MAX_TOLERANCE};
use crate::store::history::{SessionCursor, SessionsQuery, UsageQuery};
use crate::usage::UsageRange;

/// The range when the request names none: the last 24 hours.
const DEFAULT_RANGE: Duration = Duration::from_secs(24 * 3600);
const DEFAULT_LIMIT: usize = 100;
const MAX_LIMIT: i64 = 10_000;
/// Rows per store read while streaming CSV: memory stays at one page
/// (and the channel's two) however long the range.
pub(super) const CSV_PAGE: usize = 1000;

/// The license and `[from, to)` a request is about, judged at `now`.
pub(super) struct Window {
    pub license: LicenseConfig,
    pub from: Timestamp,
    pub to: Timestamp,
    pub now: Timestamp,
}

/// `license` (required, configured), `from` and `to` (RFC 3339; default the
/// 24 hours up to now, rounded up to a whole second so per-second denial
/// counts fall wholly inside or outside the range).
pub(super) fn window(state: &AppState, query: &HashMap<String, String>) -> Result<Window> {
    let Some(license_id) = query.get("license").filter(|l| !l.is_empty()) else {
        return Err(ApiError::invalid(
            "license is required (?license=<license id>)",
        ));
    };
    let license = state
        .licenses
        .current()
        .get(license_id)
        .cloned()
        .ok_or_else(|| ApiError::unknown_license(license_id))?;
    let now = state.clock.now();
    let to = match time_param(query, "to")? {
        Some(t) => t,
        None => Timestamp::from_millis(now.as_millis().div_euclid(1000) * 1000 + 1000),
    };
    let from = time_param(query, "from")?.unwrap_or(to.saturating_sub(DEFAULT_RANGE));
    if from >= to {
        return Err(ApiError::invalid(format!(
            "from ({from}) must be before to ({to})"
        )));
    }
    Ok(Window {
        license,
        from,
        to,
        now,
    })
}

fn time_param(query: &HashMap<String, String>, name: &str) -> Result<Option<Timestamp>> {
    query
        .get(name)
        .map(|v| {
            Timestamp::parse_rfc3339(v).ok_or_else(|| {
                ApiError::invalid(format!(
                    "{name} must be an RFC 3339 time such as 2027-01-15T08:00:00Z, not {:?}",
                    short(v)
                ))
            })
        })
        .transpose()
}

/// A value quoted back in a message, cut short.
pub(super) fn short(v: &str) -> String {
    v.chars().take(64).collect()
}

/// `limit`: the most rows of a JSON page, 1 to 10000, default 100.
pub(super) fn page_limit(query: &HashMap<String, String>) -> Result<usize> {
    match query_int(query, "limit")? {
        None => Ok(DEFAULT_LIMIT),
        Some(n) if (1..=MAX_LIMIT).contains(&n) => Ok(n as usize),
        Some(n) => Err(ApiError::invalid(format!(
            "limit must be 1 to {MAX_LIMIT}, not {n}"
        ))),
    }
}

/// `tolerance`: a duration from `0s` to `1h`, default `60s`. Only digits and
/// a unit, as the contract's pattern says (no spaces, no sign).
pub(super) fn tolerance(query: &HashMap<String, String>) -> Result<Duration> {
    let Some(v) = query.get("tolerance") else {
        return Ok(DEFAULT_TOLERANCE);
    };
    let parsed = v
        .chars()
        .all(|c| c.is_ascii_alphanumeric())
        .then(|| parse_duration(v).ok())
        .flatten();
    match parsed {
        Some(d) if d <= MAX_TOLERANCE => Ok(d),
        _ => Err(ApiError::invalid(format!(
            "tolerance must be a duration from 0s to 1h such as 0s, 60s or 5m, not {:?}",
            short(v)
        ))),
    }
}

pub async fn usage(state: &AppState, query: HashMap<String, String>) -> Result<Response> {
    let w = window(state, &query)?;
    let step_ms = match query.get("step") {
        None => None,
        Some(v) => Some(duration_millis(parse_duration(v).map_err(|_| {
            ApiError::invalid(format!(
                "step must be a duration such as 60s, 5m or 1h, not {:?}",
                short(v)
            ))
        })?)),
    };
    let tolerance = tolerance(&query)?;
    let range = UsageRange::new(w.from, w.to, step_ms, w.now)
        .map_err(|e| ApiError::invalid(e.to_string()))?;
    let usage = state
        .store
        .usage(UsageQuery {
            license_id: w.license.id.clone(),
            range,
            skew: w.license.policy.skew,
            tolerance,
        })
        .await
        .map_err(store_err(state))?;
    Ok(json(
        StatusCode::OK,
        &UsageResponse {
            license_id: w.license.id,
            from: w.from,
            to: w.to,
            step_s: range.step_ms as f64 / 1000.0,
            points: usage.points,
            summary: usage.summary,
        },
    ))
}

/// JSON (one page) or CSV (the whole range)?
pub(super) fn wants_csv(query: &HashMap<String, String>, accept: Option<&str>) -> Result<bool> {
    match query.get("format").map(String::as_str) {
        Some("csv") => Ok(true),
        Some("json") => Ok(false),
        Some(other) => Err(ApiError::invalid(format!(
            "format must be json or csv, not {:?}",
            short(other)
        ))),
        None => Ok(accept.is_some_and(|a| a.to_ascii_lowercase().contains("text/csv"))),
    }
}

pub async fn sessions(
    state: Arc<AppState>,
    accept: Option<String>,
    query: HashMap<String, String>,
) -> Result<Response> {
    let w = window(&state, &query)?;
    let csv = wants_csv(&query, accept.as_deref())?;
    let limit = page_limit(&query)?;
    let after = query
        .get("after")
        .filter(|a| !a.is_empty())
        .map(|a| SessionCursor::decode(a))
        .transpose()
        .map_err(|e| ApiError::invalid(e.to_string()))?;
    let mut q = SessionsQuery {
        license_id: w.license.id,
        holder: query.get("holder").filter(|h| !h.is_empty()).cloned(),
        from: w.from,
        to: w.to,
        now: w.now,
        skew: w.license.policy.skew,
        after,
        limit: limit + 1,
    };
    if csv {
        // The whole range: no paging.
        q.after = None;
        q.limit = CSV_PAGE;
        let file = CsvFile {
            header: csv::SESSIONS_HEADER,
            record: csv::session,
            what: "sessions",
            disposition: "attachment; filename=\"sessions.csv\"",
        };
        let reader = state.clone();
        return stream_csv(&state, file, move |page: Option<&[SessionView]>| {
            q.after = page.and_then(<[_]>::last).map(SessionCursor::of);
            let (state, q) = (reader.clone(), q.clone());
            async move { state.store.sessions_page(q).await }
        })
        .await;
    }
    let mut page = state
        .store
        .sessions_page(q)
        .await
        .map_err(store_err(&state))?;
    let next = (page.len() > limit).then(|| {
        page.truncate(limit);
        page.last().map(|s| SessionCursor::of(s).encode())
    });
    Ok(json(
        StatusCode::OK,
        &SessionsResponse {
            sessions: page,
            next: next.flatten(),
        },
    ))
}

/// One CSV download: its header row, the record of one row, what it is
/// (for the log) and the `Content-Disposition` that names its file.
pub(super) struct CsvFile<T> {
    pub header: &'static str,
    pub record: fn(&mut String, &T),
    pub what: &'static str,
    pub disposition: &'static str,
}

/// Stream a range as CSV, one store page ([`CSV_PAGE`] rows) at a time:
/// `read` answers the page after the one it is given (`None`: the first). The first
/// page is read before answering, so a store that cannot answer is a 503
/// rather than a 200 cut short; a later failure ends the body unfinished
/// (the client sees a broken transfer, never a short file that looks whole).
pub(super) async fn stream_csv<T, F, Fut>(
    state: &AppState,
    file: CsvFile<T>,
    mut read: F,
) -> Result<Response>
where
    T: Send + 'static,
    F: FnMut(Option<&[T]>) -> Fut + Send + 'static,
    Fut: Future<Output = std::result::Result<Vec<T>, StoreError>> + Send,
{
    let first = read(None).await.map_err(store_err(state))?;
    let (tx, rx) = mpsc::channel::<std::io::Result<Bytes>>(2);
    tokio::spawn(async move {
        let mut body = String::from(file.header);
        let mut page = first;
        loop {
            for row in &page {
                (file.record)(&mut body, row);
            }
            if tx.send(Ok(Bytes::from(body))).await.is_err() {
                return; // The client hung up.
            }
            body = String::new();
            if page.len() < CSV_PAGE {
                return;
            }
            page = match read(Some(&page)).await {
                Ok(page) => page,
                Err(e) => {
                    tracing::warn!("{} CSV: cannot read the next page: {e}", file.what);
                    let _ = tx.send(Err(std::io::Error::other(e.to_string()))).await;
                    return;
                }
            };
        }
    });
    let mut resp = warp::reply::stream(ReceiverStream::new(rx)).into_response();
    let headers = resp.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/csv; charset=utf-8"),
    );
    headers.insert(
        header::CONTENT_DISPOSITION,
        HeaderValue::from_static(file.disposition),
    );
    Ok(resp)
}
