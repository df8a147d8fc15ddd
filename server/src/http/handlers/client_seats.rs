//! Client seat handlers: checkout, heartbeat and release of a license's
//! seats, each behind the license key of the license in the path.

use std::time::Duration;

use bytes::Bytes;
use leasehold_common::api::{CheckoutRequest, MAX_IDLE_S};
use leasehold_common::text::{FINGERPRINT_MAX_CHARS, HOLDER_MAX_CHARS, check_text};
use serde::de::{Deserialize, Deserializer, IgnoredAny, MapAccess, Visitor};
use warp::http::StatusCode;
use warp::reply::{Reply, Response};

use super::common::{Result, json, parse_json, signed, store_err};
use super::outcomes;
use crate::AppState;
use crate::http::auth::client_license;
use crate::http::error::ApiError;
use crate::http::query::{self, Query};
use crate::line::{self, MAX_WAIT_S};
use crate::metrics::Metrics;
use crate::store::{self, CheckoutOutcome, HeartbeatOutcome};

const IDEMPOTENCY_KEY_MAX: usize = 128;
/// A version is a few dotted numbers; anything longer is not one.
const VERSION_MAX_CHARS: usize = 64;

pub async fn checkout(
    state: &AppState,
    license_id: String,
    authorization: Option<String>,
    idempotency_key: Option<String>,
    query: Query,
    body: Bytes,
) -> Result<Response> {
    client_license(state, &license_id, authorization.as_deref())?;
    let req = checkout_request(license_id, idempotency_key, &body)?;
    let wait = Duration::from_secs(
        query::int(&query, "wait")?
            .unwrap_or(0)
            .min(MAX_WAIT_S as i64) as u64,
    );
    let license_id = req.license_id.clone();
    // Signed while the batch commits; sent only once it has.
    let (answer, outcome) =
        line::checkout_in_line(&state.store, &state.lines, req, wait, |outcome| {
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
        CheckoutOutcome::NotEntitled | CheckoutOutcome::VersionNotEntitled { .. } => {
            &state.metrics.denials_entitlement
        }
        CheckoutOutcome::UnknownLicense
        | CheckoutOutcome::BorrowTooLong { .. }
        | CheckoutOutcome::InvalidVersion => return answer,
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
    if let Some(version) = &req.version {
        check_text("version", version, VERSION_MAX_CHARS, false)
            .map_err(|e| ApiError::invalid(e.to_string()))?;
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
        version: req.version,
    })
}

/// The answer to a checkout's outcome (the caller counts it): `201` with
/// the signed lease, or the denial of [`outcomes::checkout`].
fn checkout_reply(
    state: &AppState,
    license_id: &str,
    outcome: &CheckoutOutcome,
) -> Result<Response> {
    let (lease, overage) = outcomes::checkout(state, license_id, outcome)?;
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
    let answer = outcomes::heartbeat(&applied.value, idle_timeout)
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
    // Not UTF-8 is not JSON; checked up front because skipped members'
    // strings are not decoded.
    let Ok(text) = std::str::from_utf8(body) else {
        return Ok(None);
    };
    let Ok(ReportBody(Some(idle_s))) = serde_json::from_str(text) else {
        return Ok(None);
    };
    match idle_s.as_u64().filter(|s| *s <= MAX_IDLE_S) {
        Some(s) => Ok(Some(Duration::from_secs(s))),
        None => Err(ApiError::invalid(format!(
            "idle_s must be a whole number of seconds from 0 to {MAX_IDLE_S}, got {idle_s}"
        ))),
    }
}

/// A heartbeat body read as an object for its `idle_s` alone (the last
/// one, if repeated), the other members skipped rather than built: a
/// report costs one small parse, not a map of the whole body.
struct ReportBody(Option<serde_json::Value>);

impl<'de> Deserialize<'de> for ReportBody {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        // A map, never a sequence: `[5]` is not a report.
        d.deserialize_map(ReportBodyVisitor)
    }
}

struct ReportBodyVisitor;

impl<'de> Visitor<'de> for ReportBodyVisitor {
    type Value = ReportBody;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> std::result::Result<ReportBody, A::Error> {
        let mut idle_s = None;
        while let Some(IsIdleS(is)) = map.next_key()? {
            if is {
                idle_s = Some(map.next_value()?);
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(ReportBody(idle_s))
    }
}

/// A member's name, decoded: whether it is `idle_s`.
struct IsIdleS(bool);

impl<'de> Deserialize<'de> for IsIdleS {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        d.deserialize_str(IsIdleSVisitor)
    }
}

struct IsIdleSVisitor;

impl Visitor<'_> for IsIdleSVisitor {
    type Value = IsIdleS;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a member name")
    }

    fn visit_str<E>(self, name: &str) -> std::result::Result<IsIdleS, E> {
        Ok(IsIdleS(name == "idle_s"))
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

#[cfg(test)]
mod tests {
    use super::*;

    fn idle(body: &str) -> Option<u64> {
        heartbeat_idle(&Bytes::from(body.to_string()))
            .unwrap_or_else(|e| panic!("{body:?} refused: {e:?}"))
            .map(|d| d.as_secs())
    }

    fn refused(body: &str) -> String {
        match heartbeat_idle(&Bytes::from(body.to_string())) {
            Ok(r) => panic!("{body:?} accepted as {r:?}"),
            Err(e) => e.message,
        }
    }

    #[test]
    fn a_report_is_read_from_an_object_whatever_else_it_holds() {
        assert_eq!(idle(r#"{"idle_s":0}"#), Some(0));
        assert_eq!(idle(r#" { "idle_s" : 31536000 } "#), Some(MAX_IDLE_S));
        assert_eq!(
            idle(r#"{"a":[1,{"b":null}],"idle_s":7,"c":"\u00e9\"x"}"#),
            Some(7)
        );
        // As a JSON map reads it: an escaped key is the key, the last of
        // a repeated member counts.
        assert_eq!(idle(r#"{"idle\u005fs":9}"#), Some(9));
        assert_eq!(idle(r#"{"idle_s":"x","idle_s":3}"#), Some(3));
    }

    #[test]
    fn any_other_body_reports_nothing() {
        for body in [
            "",
            "  ",
            "null",
            "5",
            "[5]",
            "[1, 2]",
            "\"idle_s\"",
            "{}",
            "{\"idle\": 5}",
            "{\"IDLE_S\": 5}",
            "not json",
            "{\"idle_s\"",
            "{\"idle_s\": 5",
            "{\"idle_s\": 5} x",
        ] {
            assert_eq!(idle(body), None, "{body:?}");
        }
        assert_eq!(
            heartbeat_idle(&Bytes::from_static(b"{\"x\":\"\xff\",\"idle_s\":5}")).unwrap(),
            None,
            "not UTF-8, so not JSON"
        );
    }

    #[test]
    fn a_bad_idle_s_is_refused_naming_it_and_what_came() {
        for (body, got) in [
            (r#"{"idle_s": null}"#, "got null"),
            (r#"{"idle_s": -1}"#, "got -1"),
            (r#"{"idle_s": 1.5}"#, "got 1.5"),
            (r#"{"idle_s": 60.0}"#, "got 60.0"),
            (r#"{"idle_s": "60"}"#, r#"got "60""#),
            (r#"{"idle_s": 31536001}"#, "got 31536001"),
            (r#"{"idle_s": [1]}"#, "got [1]"),
            (r#"{"idle_s": 5, "idle_s": {}}"#, "got {}"),
        ] {
            let e = refused(body);
            assert!(e.contains("idle_s must be a whole number"), "{body}: {e}");
            assert!(e.contains(got), "{body}: {e}");
        }
    }
}
