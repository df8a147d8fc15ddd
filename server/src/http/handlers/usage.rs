//! `GET /v1/admin/usage` and `GET /v1/admin/sessions`: the usage history
//! (issue 12). Reads on the store's read pool, so they never hold up the
//! writer; bad input is a 400 `invalid_request` (a license not configured:
//! 404 `unknown_license`) before anything is read. The range, the page,
//! the `tolerance` and the choice of CSV are read by [`crate::http::query`],
//! as `GET /v1/admin/denials` and the what-if read them.

use std::sync::Arc;

use leasehold_common::api::{SessionView, SessionsResponse, UsageResponse};
use leasehold_common::policy::parse_duration;
use leasehold_common::time::duration_millis;
use warp::http::StatusCode;
use warp::reply::Response;

use super::common::{CSV_PAGE, CsvFile, Result, json, store_err, stream_csv};
use crate::AppState;
use crate::http::csv;
use crate::http::error::ApiError;
use crate::http::query::{self, PageLimit, Query};
use crate::store::history::{SessionCursor, SessionsQuery, UsageQuery};
use crate::usage::{Usage, UsageRange};

/// The rows of one JSON page of the history (sessions, denials).
pub(super) const HISTORY_PAGE: PageLimit = PageLimit {
    default: 100,
    max: 10_000,
};

/// `GET /v1/admin/usage`: the pool's use over the window, in `step`s.
pub async fn admin_usage(state: &AppState, query: Query) -> Result<Response> {
    let w = query::window(state, &query)?;
    let step_ms = match query.get("step") {
        None => None,
        Some(v) => Some(duration_millis(parse_duration(v).map_err(|_| {
            ApiError::invalid(format!(
                "step must be a duration such as 60s, 5m or 1h, not {:?}",
                query::short(v)
            ))
        })?)),
    };
    let tolerance = query::tolerance(&query)?;
    let (range, usage) = usage_of(state, &w, step_ms, tolerance).await?;
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

/// The usage history of `w`'s license over its range, in `step_ms`
/// buckets (`None`: the default), with its summary: what the usage view
/// and its attestation both answer.
pub(super) async fn usage_of(
    state: &AppState,
    w: &query::Window,
    step_ms: Option<i64>,
    tolerance: std::time::Duration,
) -> Result<(UsageRange, Usage)> {
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
    Ok((range, usage))
}

/// `GET /v1/admin/sessions`: one JSON page, or the whole window as CSV.
pub async fn admin_sessions(
    state: Arc<AppState>,
    accept: Option<String>,
    query: Query,
) -> Result<Response> {
    let w = query::window(&state, &query)?;
    let csv = query::wants_csv(&query, accept.as_deref())?;
    let limit = query::limit(&query, HISTORY_PAGE)?;
    let after = query::cursor(&query, SessionCursor::decode)?;
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
