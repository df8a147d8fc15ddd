//! Handlers: turn one parsed request into one reply. Input validation (and
//! the license-key check of client routes) happens here, before anything
//! reaches the store, so bad input changes nothing. Admin handlers run only
//! behind the admin auth filters (see [`super::auth`]).

use std::collections::HashMap;
use std::time::Duration;

use bytes::Bytes;
use leasehold_common::api::{
    self, BorrowSummary, CheckoutRequest, EventsResponse, GroupSummary, Lease, LicenseSummary,
    LicensesResponse, RevokeRequest, SeatState, SeatView, SeatsPage, code,
};
use leasehold_common::text::{
    FINGERPRINT_MAX_CHARS, HOLDER_MAX_CHARS, REASON_MAX_CHARS, check_text,
};
use leasehold_common::token::LeaseClaims;
use leasehold_common::{LicenseConfig, is_live};
use warp::http::StatusCode;
use warp::reply::{Reply, Response};

use super::auth::client_license;
use super::error::{ApiError, Refusal};
use crate::AppState;
use crate::metrics::{Metrics, PoolGauges, StoreGauges};
use crate::queue::{self, MAX_WAIT_S};
use crate::store::{
    self, CheckoutOutcome, HeartbeatOutcome, LeaseRow, NotAllowedBecause, PoolCounts,
    RevokeOutcome, SeatMode,
};

pub type Result<T> = std::result::Result<T, ApiError>;

/// Events per page by default, and the most one page may hold.
const EVENTS_DEFAULT_LIMIT: usize = 100;
const EVENTS_MAX_LIMIT: usize = 10_000;
/// Longest re-checkout block an admin may set.
const MAX_BLOCK_S: u64 = 30 * 24 * 3600;
const IDEMPOTENCY_KEY_MAX: usize = 128;

/// The lease as the client sees it, with a fresh signature.
fn signed(state: &AppState, row: LeaseRow, overage: bool) -> Lease {
    let mut lease = Lease {
        overage,
        borrowed: row.mode == SeatMode::Borrow,
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

pub(super) fn json(status: StatusCode, body: &impl serde::Serialize) -> Response {
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

pub(super) fn store_err(state: &AppState) -> impl Fn(store::StoreError) -> ApiError + '_ {
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

/// The answer to a checkout's outcome (the caller counts it).
fn checkout_reply(
    state: &AppState,
    license_id: &str,
    outcome: &CheckoutOutcome,
) -> Result<Response> {
    match outcome {
        CheckoutOutcome::Granted { lease, overage, .. } => Ok(json(
            StatusCode::CREATED,
            &signed(state, lease.clone(), *overage),
        )),
        CheckoutOutcome::Full {
            seats,
            live,
            reserved,
            retry_after,
        } => {
            let message = if *reserved == 0 {
                format!("all {seats} seats of {license_id:?} are in use; retry later")
            } else {
                format!(
                    "no seat of {license_id:?} is free for you: {live} in use, {reserved} held \
                     back for other groups' reservations; retry later"
                )
            };
            Err(
                ApiError::new(StatusCode::CONFLICT, code::NO_SEATS_AVAILABLE, message)
                    .with_retry_after(ceil_secs(*retry_after))
                    .with_refusal(Refusal {
                        seats: Some(*seats),
                        live: Some(*live),
                        reserved: Some(*reserved),
                        ..Refusal::default()
                    }),
            )
        }
        CheckoutOutcome::LimitReached {
            limit,
            max,
            group,
            retry_after,
        } => {
            let message = match (limit, group) {
                (store::Limit::Borrow, _) => format!(
                    "{max} seat(s) of {license_id:?} are borrowed, the most it lends at once; \
                     retry later"
                ),
                (_, Some(group)) => format!(
                    "group {group:?} already holds its {max} seat(s) of {license_id:?}; retry later"
                ),
                (_, None) => format!(
                    "this holder already has {max} live seat(s) of {license_id:?}, the most \
                     one holder may have; release one or retry later"
                ),
            };
            Err(
                ApiError::new(StatusCode::CONFLICT, code::LIMIT_REACHED, message)
                    .with_retry_after(ceil_secs(*retry_after))
                    .with_refusal(Refusal {
                        limit: Some(limit.as_str()),
                        max: Some(*max),
                        group: group.clone(),
                        ..Refusal::default()
                    }),
            )
        }
        CheckoutOutcome::NotAllowed(because) => Err(ApiError::new(
            StatusCode::FORBIDDEN,
            code::NOT_ALLOWED,
            match because {
                NotAllowedBecause::Lists => format!(
                    "this holder may not use {license_id:?} (the license's allow/deny lists)"
                ),
                NotAllowedBecause::LendsNothing => format!(
                    "{license_id:?} lends no seats for offline use (the license has no \
                     [license.borrow]); check out without borrow_s"
                ),
                NotAllowedBecause::BorrowAllow => format!(
                    "this holder may not borrow from {license_id:?} (the license's \
                     borrow.allow); it may still check out without borrow_s"
                ),
            },
        )),
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
        CheckoutOutcome::BorrowTooLong { max } => Err(ApiError::invalid(format!(
            "borrow_s must be 1 to {} (the license's borrow.max)",
            max.as_secs()
        ))),
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
        HeartbeatOutcome::Renewed(row) => {
            Ok(json(StatusCode::OK, &signed(state, row.clone(), false)))
        }
        HeartbeatOutcome::Lost => Err(ApiError::new(
            StatusCode::GONE,
            code::SEAT_LOST,
            "this seat was released, revoked, reaped or has lapsed; check out again",
        )),
        HeartbeatOutcome::Borrowed { expires_at } => Err(ApiError::new(
            StatusCode::CONFLICT,
            code::BORROWED,
            format!("a borrowed seat is not renewed; return it or let it expire (at {expires_at})"),
        )),
    };
    let outcome = applied.committed().await.map_err(store_err(state))?;
    match outcome {
        HeartbeatOutcome::Renewed(_) => Metrics::inc(&state.metrics.heartbeats),
        HeartbeatOutcome::Lost => Metrics::inc(&state.metrics.heartbeats_lost),
        HeartbeatOutcome::Borrowed { .. } => {}
    }
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

/// One configured license, what counts against it (from the writer's
/// index) and how many `?wait=` checkouts stand in its line.
struct Pool {
    license: LicenseConfig,
    counts: PoolCounts,
    waiting: u32,
}

async fn pools(state: &AppState) -> std::result::Result<Vec<Pool>, store::StoreError> {
    let mut counts: HashMap<String, PoolCounts> =
        state.store.live_counts().await?.into_iter().collect();
    let mut pools = Vec::new();
    for l in state.licenses.current().iter() {
        let waiting = state.queues.waiting(&l.id).await?;
        pools.push(Pool {
            license: l.clone(),
            counts: counts.remove(&l.id).unwrap_or_default(),
            waiting: u32::try_from(waiting).unwrap_or(u32::MAX),
        });
    }
    Ok(pools)
}

/// A pool as `GET /v1/admin/licenses` shows it.
fn license_summary(pool: Pool) -> LicenseSummary {
    let Pool {
        license: l,
        counts,
        waiting,
    } = pool;
    let live_in = |name: &str| {
        counts
            .groups
            .iter()
            .find(|(g, _)| g == name)
            .map_or(0, |(_, n)| *n)
    };
    let groups: Vec<GroupSummary> = l
        .groups
        .iter()
        .map(|g| GroupSummary {
            name: g.name.clone(),
            reserve: g.reserve,
            max: g.max,
            live: live_in(&g.name),
        })
        .collect();
    LicenseSummary {
        seats: l.policy.seats,
        live: counts.live,
        waiting,
        ttl_s: api::seconds(l.policy.ttl),
        skew_s: api::seconds(l.policy.skew),
        reap_grace_s: api::seconds(l.policy.reap_grace),
        overage: l.policy.overage,
        linger_s: l.policy.linger.map(api::seconds),
        max_per_holder: l.policy.max_per_holder,
        borrow: l.borrow.as_ref().map(|b| BorrowSummary {
            max_s: api::seconds(b.max),
            seats: b.seats,
        }),
        borrowed: counts.borrowed,
        lingering: counts.lingering,
        reserved: groups
            .iter()
            .map(|g| g.reserve.saturating_sub(g.live))
            .sum(),
        groups,
        id: l.id,
    }
}

pub async fn admin_licenses(state: &AppState) -> Result<Response> {
    let now = state.clock.now();
    let licenses = pools(state)
        .await
        .map_err(store_err(state))?
        .into_iter()
        .map(license_summary)
        .collect();
    Ok(json(StatusCode::OK, &LicensesResponse { now, licenses }))
}

/// `GET /metrics`. A store that cannot answer shows as no pool gauges rather
/// than a failed scrape.
/// `/healthz`: 200 while the store can take writes, 503 (JSON error) while
/// the database is unreachable, so a load balancer sends clients elsewhere.
pub async fn healthz(state: &AppState) -> Response {
    match state.store.health().await {
        Ok(()) => json(
            StatusCode::OK,
            &leasehold_common::api::Health {
                status: "ok".into(),
            },
        ),
        Err(e) => ApiError::store(e).into_response(),
    }
}

pub async fn metrics(state: &AppState) -> Response {
    let pools: Vec<PoolGauges> = pools(state)
        .await
        .unwrap_or_default()
        .into_iter()
        .map(|p| PoolGauges {
            seats: p.license.policy.seats,
            license: p.license.id,
            live: p.counts.live,
            waiting: p.waiting,
        })
        .collect();
    warp::reply::with_header(
        state.metrics.render(
            &StoreGauges {
                kind: state.store.kind().as_str(),
                read_pool_idle: state.store.read_pool_idle(),
            },
            &pools,
            state.store.writer_stats(),
        ),
        "content-type",
        "text/plain; version=0.0.4",
    )
    .into_response()
}

/// Longest `q` accepted.
const SEATS_Q_MAX_CHARS: usize = 256;

/// The query of `GET /v1/admin/seats`, validated.
fn seat_query(
    licenses: &leasehold_common::Licenses,
    query: &HashMap<String, String>,
) -> Result<store::SeatQuery> {
    let license = query.get("license").cloned();
    if let Some(id) = &license
        && licenses.get(id).is_none()
    {
        return Err(ApiError::unknown_license(id));
    }
    let q = match query.get("q").map(|q| q.trim()) {
        None | Some("") => None,
        Some(q) if q.chars().count() > SEATS_Q_MAX_CHARS => {
            return Err(ApiError::invalid(format!(
                "q must be at most {SEATS_Q_MAX_CHARS} characters"
            )));
        }
        Some(q) => Some(q.to_lowercase()),
    };
    let sort = match query.get("sort") {
        None => store::SeatSort::License,
        Some(s) => store::SeatSort::parse(s).ok_or_else(|| {
            ApiError::invalid(format!(
                "sort must be license, holder, expires_at or checked_out_at, not {s:?}"
            ))
        })?,
    };
    let desc = match query.get("order").map(String::as_str) {
        None | Some("asc") => false,
        Some("desc") => true,
        Some(o) => {
            return Err(ApiError::invalid(format!(
                "order must be asc or desc, not {o:?}"
            )));
        }
    };
    let limit = match query.get("limit") {
        None => None,
        Some(v) => match v.parse::<usize>() {
            Ok(n) if (1..=store::seat_query::MAX_LIMIT).contains(&n) => Some(n),
            _ => {
                return Err(ApiError::invalid(format!(
                    "limit must be an integer from 1 to {}, not {v:?}",
                    store::seat_query::MAX_LIMIT
                )));
            }
        },
    };
    let after = match query.get("after") {
        None => None,
        Some(text) => {
            let cursor = store::seat_query::Cursor::decode(text).ok_or_else(|| {
                ApiError::invalid("after is not a cursor this server handed out (next)")
            })?;
            if cursor.sort != sort || cursor.desc != desc {
                return Err(ApiError::invalid(
                    "after is a cursor of another sort or order; send the same sort and order \
                     as the request that returned it",
                ));
            }
            Some(cursor)
        }
    };
    Ok(store::SeatQuery {
        license,
        q,
        sort,
        desc,
        limit,
        after,
    })
}

/// A seat as admins see it: lapsed by the one predicate, else how it is
/// kept.
fn seat_state(row: &LeaseRow, now: leasehold_common::Timestamp, skew: Duration) -> SeatState {
    if !is_live(row.expires_at, now, skew) {
        return SeatState::Lapsed;
    }
    match row.mode {
        SeatMode::Heartbeat => SeatState::Live,
        SeatMode::Linger => SeatState::Lingering,
        SeatMode::Borrow => SeatState::Borrowed,
    }
}

/// `GET /v1/admin/seats`: filtered (`license`, `q`), sorted (`sort`,
/// `order`) and paged (`limit`, `after`) by the store, in SQL.
pub async fn admin_seats(state: &AppState, query: HashMap<String, String>) -> Result<Response> {
    let licenses = state.licenses.current();
    let seat_query = seat_query(&licenses, &query)?;
    let page = state
        .store
        .seats_page(seat_query)
        .await
        .map_err(store_err(state))?;
    let now = state.clock.now();
    let seats = page
        .rows
        .into_iter()
        .map(|r| {
            // A lease of a license removed from the file keeps no skew.
            let skew = licenses
                .get(&r.license_id)
                .map(|l| l.policy.skew)
                .unwrap_or_default();
            SeatView {
                state: seat_state(&r, now, skew),
                group: r.group,
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
    Ok(json(
        StatusCode::OK,
        &SeatsPage {
            now,
            seats,
            total: page.total,
            next: page.next.map(|c| c.encode()),
        },
    ))
}

pub async fn admin_revoke(state: &AppState, seat_id: String, body: Bytes) -> Result<Response> {
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
        .revoke(&seat_id, reason, block, req.force)
        .await
        .map_err(store_err(state))?
    {
        RevokeOutcome::Revoked(_) => {
            Metrics::inc(&state.metrics.revokes);
            Ok(StatusCode::NO_CONTENT.into_response())
        }
        RevokeOutcome::Borrowed(row) => Err(ApiError::new(
            StatusCode::CONFLICT,
            code::BORROWED,
            format!(
                "seat {seat_id:?} is borrowed until {}: its holder's token stays valid offline \
                 until then, so freeing it now can put one seat more in use than sold; send \
                 {{\"force\": true}} to free it anyway",
                row.expires_at
            ),
        )),
        RevokeOutcome::Unknown => Err(ApiError::new(
            StatusCode::NOT_FOUND,
            code::UNKNOWN_SEAT,
            format!("no seat {seat_id:?} is held (already released, revoked or reaped?)"),
        )),
    }
}

/// Parse an optional non-negative integer query parameter.
pub(super) fn query_int(query: &HashMap<String, String>, name: &str) -> Result<Option<i64>> {
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

pub async fn admin_events(state: &AppState, query: HashMap<String, String>) -> Result<Response> {
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
    last_event_id: Option<String>,
    query: HashMap<String, String>,
    meta: super::ui_auth::RequestMeta,
) -> Result<Response> {
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
    // The guard judged a request with `Authorization` by it alone; without
    // one, the session cookie let it in, and the stream lives only as long
    // as that session.
    let session = (!meta.headers.contains_key("authorization")).then_some(meta);
    Ok(super::sse::stream(state, after, session).into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_rounds_up_and_is_never_zero() {
        assert_eq!(ceil_secs(Duration::ZERO), 1);
        assert_eq!(ceil_secs(Duration::from_millis(1)), 1);
        assert_eq!(ceil_secs(Duration::from_millis(1001)), 2);
        assert_eq!(ceil_secs(Duration::from_secs(60)), 60);
    }
}
