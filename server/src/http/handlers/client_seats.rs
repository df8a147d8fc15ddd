//! Client seat handlers: checkout, heartbeat and release of a license's
//! seats, each behind the license key of the license in the path.

use std::collections::HashMap;
use std::time::Duration;

use bytes::Bytes;
use leasehold_common::api::{CheckoutRequest, MAX_IDLE_S};
use leasehold_common::text::{FINGERPRINT_MAX_CHARS, HOLDER_MAX_CHARS, check_text};
use warp::http::StatusCode;
use warp::reply::{Reply, Response};

use super::common::{Result, json, parse_json, query_int, signed, store_err};
use super::refusals;
use crate::AppState;
use crate::http::auth::client_license;
use crate::http::error::ApiError;
use crate::metrics::Metrics;
use crate::queue::{self, MAX_WAIT_S};
use crate::store::{self, CheckoutOutcome, HeartbeatOutcome};

const IDEMPOTENCY_KEY_MAX: usize = 128;

pub async fn checkout(
    state: &AppState,
    license_id: String,
    authorization: Option<String>,
    idempotency_key: Option<String>,
    query: HashMap<String, String>,
    body: Bytes,
) -> Result<Response> {
    client_license(state, &license_id, authorization.as_deref())?;
    let req = checkout_request(license_id, idempotency_key, &body)?;
    let wait = Duration::from_secs(
        query_int(&query, "wait")?
            .unwrap_or(0)
            .min(MAX_WAIT_S as i64) as u64,
    );
    let license_id = req.license_id.clone();
    // Signed while the batch commits; sent only once it has.
    let (answer, outcome) =
        queue::checkout_in_line(&state.store, &state.queues, req, wait, |outcome| {
            checkout_reply(state, &license_id, outcome)
        })
        .await
        .map_err(store_err(state))?;
    let counter = match outcome {
        CheckoutOutcome::Granted { reused: true, .. } => &state.metrics.checkouts_reused,
        CheckoutOutcome::Granted {
            reused: false,
            overage,
            ..
        } => {
            if overage {
                state.metrics.count_overage(&license_id);
            }
            &state.metrics.checkouts
        }
        CheckoutOutcome::Full { .. } => &state.metrics.denials_full,
        CheckoutOutcome::LimitReached { .. } => &state.metrics.denials_limit,
        CheckoutOutcome::NotAllowed(_) => &state.metrics.denials_not_allowed,
        CheckoutOutcome::Blocked { .. } => &state.metrics.denials_blocked,
        CheckoutOutcome::UnknownLicense | CheckoutOutcome::BorrowTooLong { .. } => return answer,
    };
    Metrics::inc(counter);
    answer
}

/// The body and `Idempotency-Key` of a checkout, validated.
fn checkout_request(
    license_id: String,
    idempotency_key: Option<String>,
    body: &Bytes,
) -> Result<store::CheckoutRequest> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Err(ApiError::invalid(
            "send a JSON body: {\"holder\": \"...\", \"fingerprint\": \"...\"}",
        ));
    }
    let req: CheckoutRequest = parse_json(body, "checkout request")?;
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
    if req.borrow_s.is_some() && fingerprint.is_none() {
        return Err(ApiError::invalid(
            "a borrow needs a fingerprint: the machine that takes the seat offline",
        ));
    }
    Ok(store::CheckoutRequest {
        license_id,
        holder: req.holder,
        fingerprint,
        idempotency_key,
        borrow: req.borrow_s.map(Duration::from_secs),
    })
}

/// The answer to a checkout's outcome (the caller counts it): `201` with
/// the signed lease, or the refusal of [`refusals::checkout`].
fn checkout_reply(
    state: &AppState,
    license_id: &str,
    outcome: &CheckoutOutcome,
) -> Result<Response> {
    let (lease, overage) = refusals::checkout(state, license_id, outcome)?;
    Ok(json(
        StatusCode::CREATED,
        &signed(state, lease.clone(), overage),
    ))
}

pub async fn heartbeat(
    state: &AppState,
    license_id: String,
    seat_id: String,
    authorization: Option<String>,
    body: Bytes,
) -> Result<Response> {
    client_license(state, &license_id, authorization.as_deref())?;
    let idle = heartbeat_idle(&body)?;
    let applied = state
        .store
        .heartbeat_applied(&license_id, &seat_id, idle)
        .await
        .map_err(store_err(state))?;
    let idle_timeout = state
        .licenses
        .current()
        .get(&license_id)
        .and_then(|l| l.policy.idle_timeout);
    // Signed while the batch commits; sent only once it has.
    let answer = refusals::heartbeat(&applied.value, idle_timeout)
        .map(|row| json(StatusCode::OK, &signed(state, row.clone(), false)));
    let outcome = applied.committed().await.map_err(store_err(state))?;
    match outcome {
        HeartbeatOutcome::Renewed(_) => Metrics::inc(&state.metrics.heartbeats),
        HeartbeatOutcome::Lost(_) => Metrics::inc(&state.metrics.heartbeats_lost),
        HeartbeatOutcome::Borrowed { .. } => {}
    }
    answer
}

/// A heartbeat's report of idleness: `{"idle_s": N}`, whole seconds in
/// `0..=MAX_IDLE_S`. A body that is not a JSON object with `idle_s` (none,
/// empty, anything else) reports nothing: the seat is active, as before
/// reports existed. An `idle_s` that is not such an integer (`null`
/// included) is refused, so nothing changes.
fn heartbeat_idle(body: &Bytes) -> Result<Option<Duration>> {
    if body.is_empty() {
        return Ok(None);
    }
    let Ok(serde_json::Value::Object(fields)) = serde_json::from_slice(body) else {
        return Ok(None);
    };
    let Some(idle_s) = fields.get("idle_s") else {
        return Ok(None);
    };
    match idle_s.as_u64().filter(|s| *s <= MAX_IDLE_S) {
        Some(s) => Ok(Some(Duration::from_secs(s))),
        None => Err(ApiError::invalid(format!(
            "idle_s must be a whole number of seconds from 0 to {MAX_IDLE_S}, got {idle_s}"
        ))),
    }
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
