//! Handlers: turn one parsed request into one reply. Authentication and input
//! validation happen here, before anything reaches the store, so bad input
//! changes nothing.

use std::collections::HashMap;
use std::time::Duration;

use bytes::Bytes;
use leasehold_common::api::{
    self, CheckoutRequest, EventsResponse, Lease, LicenseSummary, LicensesResponse, RevokeRequest,
    SeatState, SeatView, SeatsResponse, code,
};
use leasehold_common::text::{
    FINGERPRINT_MAX_CHARS, HOLDER_MAX_CHARS, REASON_MAX_CHARS, check_text,
};
use leasehold_common::token::LeaseClaims;
use leasehold_common::{LicenseConfig, is_live};
use warp::http::StatusCode;
use warp::reply::{Reply, Response};

use super::error::ApiError;
use crate::AppState;
use crate::keys::key_matches;
use crate::metrics::Metrics;
use crate::queue::{MAX_WAIT_S, Ticket};
use crate::store::{self, CheckoutOutcome, HeartbeatOutcome, LeaseRow};

pub type Result<T> = std::result::Result<T, ApiError>;

/// Events per page by default, and the most one page may hold.
const EVENTS_DEFAULT_LIMIT: usize = 100;
const EVENTS_MAX_LIMIT: usize = 10_000;
/// Longest re-checkout block an admin may set.
const MAX_BLOCK_S: u64 = 30 * 24 * 3600;
const IDEMPOTENCY_KEY_MAX: usize = 128;

/// `Authorization: Bearer <secret>` → the secret.
fn bearer(authorization: Option<&str>) -> Option<&str> {
    let value = authorization?.trim();
    let (scheme, secret) = value.split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| secret.trim())
        .filter(|s| !s.is_empty())
}

/// A client of `license_id`: its key must match (in constant time).
fn client_license(
    state: &AppState,
    license_id: &str,
    authorization: Option<&str>,
) -> Result<LicenseConfig> {
    let Some(presented) = bearer(authorization) else {
        return Err(ApiError::unauthorized(
            "send the license key as 'Authorization: Bearer <key>'",
        ));
    };
    let licenses = state.licenses.current();
    let lic = licenses
        .get(license_id)
        .ok_or_else(|| ApiError::unknown_license(license_id))?;
    if !key_matches(&lic.key, presented) {
        return Err(ApiError::unauthorized(format!(
            "the key is not valid for license {license_id:?}"
        )));
    }
    Ok(lic.clone())
}

fn admin(state: &AppState, authorization: Option<&str>) -> Result<()> {
    match bearer(authorization) {
        Some(t) if state.admin_token.matches(t) => Ok(()),
        _ => Err(ApiError::unauthorized(
            "admin endpoints need 'Authorization: Bearer <admin token>'",
        )),
    }
}

/// The lease as the client sees it, with a fresh signature.
fn signed(state: &AppState, row: LeaseRow) -> Lease {
    let mut lease = Lease {
        license_id: row.license_id,
        seat_id: row.seat_id,
        holder: row.holder,
        fingerprint: row.fingerprint,
        issued_at: row.issued_at,
        expires_at: row.expires_at,
        token: String::new(),
    };
    lease.token = state.signer.sign(&LeaseClaims::for_lease(&lease));
    lease
}

fn json(status: StatusCode, body: &impl serde::Serialize) -> Response {
    warp::reply::with_status(warp::reply::json(body), status).into_response()
}

fn parse_json<T: serde::de::DeserializeOwned>(body: &Bytes, what: &str) -> Result<T> {
    // serde would also read a struct from a JSON array (`["bob"]`); the
    // contract is an object.
    if body.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'{') {
        return Err(ApiError::invalid(format!(
            "request body must be a JSON object ({what})"
        )));
    }
    serde_json::from_slice(body)
        .map_err(|e| ApiError::invalid(format!("request body is not a valid {what}: {e}")))
}

fn store_err(state: &AppState) -> impl Fn(store::StoreError) -> ApiError + '_ {
    |e| {
        Metrics::inc(&state.metrics.store_errors);
        ApiError::store(e)
    }
}

pub async fn checkout(
    state: &AppState,
    license_id: String,
    authorization: Option<String>,
    idempotency_key: Option<String>,
    query: HashMap<String, String>,
    body: Bytes,
) -> Result<Response> {
    client_license(state, &license_id, authorization.as_deref())?;
    if body.iter().all(u8::is_ascii_whitespace) {
        return Err(ApiError::invalid(
            "send a JSON body: {\"holder\": \"...\", \"fingerprint\": \"...\"}",
        ));
    }
    let req: CheckoutRequest = parse_json(&body, "checkout request")?;
    check_text("holder", &req.holder, HOLDER_MAX_CHARS, false)
        .map_err(|e| ApiError::invalid(e.to_string()))?;
    let fingerprint = req.fingerprint.filter(|f| !f.is_empty());
    if let Some(fp) = &fingerprint {
        check_text("fingerprint", fp, FINGERPRINT_MAX_CHARS, false)
            .map_err(|e| ApiError::invalid(e.to_string()))?;
    }
    if let Some(key) = &idempotency_key
        && (key.is_empty()
            || key.len() > IDEMPOTENCY_KEY_MAX
            || !key.chars().all(|c| c.is_ascii_graphic()))
    {
        return Err(ApiError::invalid(format!(
            "Idempotency-Key must be 1 to {IDEMPOTENCY_KEY_MAX} printable ASCII characters"
        )));
    }

    let wait = Duration::from_secs(
        query_int(&query, "wait")?
            .unwrap_or(0)
            .min(MAX_WAIT_S as i64) as u64,
    );
    let req = store::CheckoutRequest {
        license_id: license_id.clone(),
        holder: req.holder,
        fingerprint,
        idempotency_key,
    };
    let deadline = tokio::time::Instant::now() + wait;
    let mut ticket = None;
    loop {
        // Armed before the attempt, so a seat freed during it still wakes us.
        let notified = state.queues.changed.notified();
        let mut notified = std::pin::pin!(notified);
        notified.as_mut().enable();
        let ahead = match &ticket {
            Some(t) => Ticket::ahead(t),
            None => state.queues.waiting(&license_id),
        };
        let applied = state
            .store
            .checkout_applied(req.clone(), u32::try_from(ahead).unwrap_or(u32::MAX))
            .await
            .map_err(store_err(state))?;
        match applied.value {
            CheckoutOutcome::Full { retry_after, .. } if tokio::time::Instant::now() < deadline => {
                applied.committed().await.map_err(store_err(state))?;
                if ticket.is_none() {
                    ticket = Some(state.queues.join(&license_id));
                }
                // Wake on a freed seat, on the earliest lease lapsing, or at
                // the end of the wait (one last try, then 409).
                let recheck = tokio::time::Instant::now() + retry_after;
                tokio::select! {
                    _ = notified => {}
                    _ = tokio::time::sleep_until(recheck.min(deadline)) => {}
                }
            }
            _ => {
                // Signed while the batch commits; sent only once it has.
                let answer = checkout_reply(state, &license_id, &applied.value);
                let outcome = applied.committed().await.map_err(store_err(state))?;
                let counter = match outcome {
                    CheckoutOutcome::Granted { reused: true, .. } => {
                        &state.metrics.checkouts_reused
                    }
                    CheckoutOutcome::Granted { reused: false, .. } => &state.metrics.checkouts,
                    CheckoutOutcome::Full { .. } => &state.metrics.denials_full,
                    CheckoutOutcome::Blocked { .. } => &state.metrics.denials_blocked,
                    CheckoutOutcome::UnknownLicense => return answer,
                };
                Metrics::inc(counter);
                return answer;
            }
        }
    }
}

/// The answer to a checkout's outcome (the caller counts it).
fn checkout_reply(
    state: &AppState,
    license_id: &str,
    outcome: &CheckoutOutcome,
) -> Result<Response> {
    match outcome {
        CheckoutOutcome::Granted { lease, .. } => {
            Ok(json(StatusCode::CREATED, &signed(state, lease.clone())))
        }
        CheckoutOutcome::Full {
            seats,
            live,
            retry_after,
        } => {
            let mut err = ApiError::new(
                StatusCode::CONFLICT,
                code::NO_SEATS_AVAILABLE,
                format!("all {seats} seats of {license_id:?} are in use; retry later"),
            )
            .with_retry_after(ceil_secs(*retry_after));
            err.seats = Some(*seats);
            err.live = Some(*live);
            Err(err)
        }
        CheckoutOutcome::Blocked { until } => {
            let now = state.clock.now();
            Err(ApiError::new(
                StatusCode::FORBIDDEN,
                code::BLOCKED,
                format!("an admin revoked this seat and blocked re-checkout until {until}"),
            )
            .with_retry_after(ceil_secs(Duration::from_millis(
                until.millis_since(now).max(0) as u64,
            ))))
        }
        CheckoutOutcome::UnknownLicense => Err(ApiError::unknown_license(license_id)),
    }
}

/// Whole seconds, rounded up, at least 1 (a `Retry-After` of 0 invites a
/// busy loop).
fn ceil_secs(d: Duration) -> u64 {
    d.as_millis().div_ceil(1000).max(1) as u64
}

pub async fn heartbeat(
    state: &AppState,
    license_id: String,
    seat_id: String,
    authorization: Option<String>,
) -> Result<Response> {
    client_license(state, &license_id, authorization.as_deref())?;
    let applied = state
        .store
        .heartbeat_applied(&license_id, &seat_id)
        .await
        .map_err(store_err(state))?;
    // Signed while the batch commits; sent only once it has.
    let answer = match &applied.value {
        HeartbeatOutcome::Renewed(row) => Ok(json(StatusCode::OK, &signed(state, row.clone()))),
        HeartbeatOutcome::Lost => Err(ApiError::new(
            StatusCode::GONE,
            code::SEAT_LOST,
            "this seat was released, revoked, reaped or has lapsed; check out again",
        )),
    };
    let outcome = applied.committed().await.map_err(store_err(state))?;
    Metrics::inc(match outcome {
        HeartbeatOutcome::Renewed(_) => &state.metrics.heartbeats,
        HeartbeatOutcome::Lost => &state.metrics.heartbeats_lost,
    });
    answer
}

pub async fn release(
    state: &AppState,
    license_id: String,
    seat_id: String,
    authorization: Option<String>,
) -> Result<Response> {
    client_license(state, &license_id, authorization.as_deref())?;
    if state
        .store
        .release(&license_id, &seat_id)
        .await
        .map_err(store_err(state))?
    {
        Metrics::inc(&state.metrics.releases);
    }
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// Every configured license with its live seats (from the writer's index).
async fn pools(
    state: &AppState,
) -> std::result::Result<Vec<(LicenseConfig, u32)>, store::StoreError> {
    let live: HashMap<String, u32> = state.store.live_counts().await?.into_iter().collect();
    Ok(state
        .licenses
        .current()
        .iter()
        .map(|l| (l.clone(), live.get(&l.id).copied().unwrap_or(0)))
        .collect())
}

pub async fn admin_licenses(state: &AppState, authorization: Option<String>) -> Result<Response> {
    admin(state, authorization.as_deref())?;
    let now = state.clock.now();
    let licenses = pools(state)
        .await
        .map_err(store_err(state))?
        .into_iter()
        .map(|(l, live)| LicenseSummary {
            seats: l.policy.seats,
            live,
            ttl_s: api::seconds(l.policy.ttl),
            skew_s: api::seconds(l.policy.skew),
            reap_grace_s: api::seconds(l.policy.reap_grace),
            id: l.id,
        })
        .collect();
    Ok(json(StatusCode::OK, &LicensesResponse { now, licenses }))
}

/// `GET /metrics`. A store that cannot answer shows as no pool gauges rather
/// than a failed scrape.
pub async fn metrics(state: &AppState) -> Response {
    let pools: Vec<(String, u32, u32)> = pools(state)
        .await
        .unwrap_or_default()
        .into_iter()
        .map(|(l, live)| (l.id, l.policy.seats, live))
        .collect();
    warp::reply::with_header(
        state.metrics.render(&pools, state.store.writer_stats()),
        "content-type",
        "text/plain; version=0.0.4",
    )
    .into_response()
}

pub async fn admin_seats(
    state: &AppState,
    authorization: Option<String>,
    query: HashMap<String, String>,
) -> Result<Response> {
    admin(state, authorization.as_deref())?;
    let licenses = state.licenses.current();
    let filter = query.get("license").map(String::as_str);
    if let Some(id) = filter
        && licenses.get(id).is_none()
    {
        return Err(ApiError::unknown_license(id));
    }
    let rows = state.store.seats(filter).await.map_err(store_err(state))?;
    let now = state.clock.now();
    let seats = rows
        .into_iter()
        .map(|r| {
            // A lease of a license removed from the file keeps no skew.
            let skew = licenses
                .get(&r.license_id)
                .map(|l| l.policy.skew)
                .unwrap_or_default();
            SeatView {
                state: if is_live(r.expires_at, now, skew) {
                    SeatState::Live
                } else {
                    SeatState::Lapsed
                },
                license_id: r.license_id,
                seat_id: r.seat_id,
                holder: r.holder,
                fingerprint: r.fingerprint,
                checked_out_at: r.checked_out_at,
                issued_at: r.issued_at,
                expires_at: r.expires_at,
            }
        })
        .collect();
    Ok(json(StatusCode::OK, &SeatsResponse { now, seats }))
}

pub async fn admin_revoke(
    state: &AppState,
    seat_id: String,
    authorization: Option<String>,
    body: Bytes,
) -> Result<Response> {
    admin(state, authorization.as_deref())?;
    let req: RevokeRequest = if body.iter().all(u8::is_ascii_whitespace) {
        RevokeRequest::default()
    } else {
        parse_json(&body, "revoke request")?
    };
    let reason = req.reason.filter(|r| !r.is_empty());
    if let Some(r) = &reason {
        check_text("reason", r, REASON_MAX_CHARS, true)
            .map_err(|e| ApiError::invalid(e.to_string()))?;
    }
    let block = match req.block_s {
        Some(s) if s > MAX_BLOCK_S => {
            return Err(ApiError::invalid(format!(
                "block_s must be at most {MAX_BLOCK_S} (30 days)"
            )));
        }
        other => other.map(Duration::from_secs),
    };
    match state
        .store
        .revoke(&seat_id, reason, block)
        .await
        .map_err(store_err(state))?
    {
        Some(_) => {
            Metrics::inc(&state.metrics.revokes);
            Ok(StatusCode::NO_CONTENT.into_response())
        }
        None => Err(ApiError::new(
            StatusCode::NOT_FOUND,
            code::UNKNOWN_SEAT,
            format!("no seat {seat_id:?} is held (already released, revoked or reaped?)"),
        )),
    }
}

/// Parse an optional non-negative integer query parameter.
fn query_int(query: &HashMap<String, String>, name: &str) -> Result<Option<i64>> {
    match query.get(name) {
        None => Ok(None),
        Some(v) => match v.parse::<i64>() {
            Ok(n) if n >= 0 => Ok(Some(n)),
            _ => Err(ApiError::invalid(format!(
                "{name} must be a non-negative integer, not {v:?}"
            ))),
        },
    }
}

pub async fn admin_events(
    state: &AppState,
    authorization: Option<String>,
    query: HashMap<String, String>,
) -> Result<Response> {
    admin(state, authorization.as_deref())?;
    let after = query_int(&query, "after")?.unwrap_or(0);
    let limit = query_int(&query, "limit")?
        .map(|l| (l as usize).min(EVENTS_MAX_LIMIT))
        .unwrap_or(EVENTS_DEFAULT_LIMIT);
    let events = state
        .store
        .events_after(after, limit)
        .await
        .map_err(store_err(state))?;
    Ok(json(StatusCode::OK, &EventsResponse { events }))
}

pub async fn admin_events_stream(
    state: std::sync::Arc<AppState>,
    authorization: Option<String>,
    last_event_id: Option<String>,
    query: HashMap<String, String>,
) -> Result<Response> {
    admin(&state, authorization.as_deref())?;
    let from_header = match last_event_id.as_deref().map(str::trim) {
        None | Some("") => None,
        Some(v) => Some(
            v.parse::<i64>()
                .ok()
                .filter(|id| *id >= 0 && v.bytes().all(|b| b.is_ascii_digit()))
                .ok_or_else(|| {
                    ApiError::invalid(format!("Last-Event-ID must be an event id, not {v:?}"))
                })?,
        ),
    };
    let after = from_header.or(query_int(&query, "after")?).unwrap_or(0);
    Ok(super::sse::stream(state, after).into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bearer_parsing() {
        assert_eq!(bearer(Some("Bearer abc")), Some("abc"));
        assert_eq!(bearer(Some("bearer   abc ")), Some("abc"));
        assert_eq!(bearer(Some("Basic abc")), None);
        assert_eq!(bearer(Some("Bearer ")), None);
        assert_eq!(bearer(Some("abc")), None);
        assert_eq!(bearer(None), None);
    }

    #[test]
    fn retry_after_rounds_up_and_is_never_zero() {
        assert_eq!(ceil_secs(Duration::ZERO), 1);
        assert_eq!(ceil_secs(Duration::from_millis(1)), 1);
        assert_eq!(ceil_secs(Duration::from_millis(1001)), 2);
        assert_eq!(ceil_secs(Duration::from_secs(60)), 60);
    }
}
