//! Admin handlers (`/v1/admin/…`): licenses, seats, revoke, events and the
//! event stream. They run only behind the admin auth filters (see
//! [`crate::http::auth`]).

use std::collections::HashSet;
use std::time::Duration;

use bytes::Bytes;
use leasehold_common::api::{
    self, BorrowSummary, EventsResponse, GroupSummary, LicenseSummary, LicensesResponse,
    RevokeRequest, SeatState, SeatView, SeatsPage,
};
use leasehold_common::is_live;
use leasehold_common::text::{REASON_MAX_CHARS, check_text};
use warp::http::StatusCode;
use warp::reply::{Reply, Response};

use super::common::{Pool, PoolEntitlement, Result, json, parse_json, pools, store_err};
use super::outcomes;
use crate::AppState;
use crate::http::error::ApiError;
use crate::http::query::{self, Query};
use crate::metrics::Metrics;
use crate::store::{self, LeaseRow, SeatMode};

/// Events per page by default, and the most one page may hold.
const EVENTS_DEFAULT_LIMIT: usize = 100;
const EVENTS_MAX_LIMIT: usize = 10_000;
/// Longest re-checkout block an admin may set.
const MAX_BLOCK_S: u64 = 30 * 24 * 3600;
/// Longest `q` accepted.
const SEATS_Q_MAX_CHARS: usize = 256;

/// A pool as `GET /v1/admin/licenses` shows it; `firing`: the names of
/// the file's alerts that fire now.
fn license_summary(pool: Pool, firing: &HashSet<String>) -> LicenseSummary {
    let Pool {
        license: l,
        counts,
        waiting,
        entitlement,
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
        idle_timeout_s: l.policy.idle_timeout.map(api::seconds),
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
        alerts_firing: l
            .alerts
            .iter()
            .filter(|a| firing.contains(&a.name))
            .map(|a| a.name.clone())
            .collect(),
        id: l.id,
        ..entitlement_summary(entitlement)
    }
}

/// The entitlement fields of a pool's summary (all null for a license
/// without a vendor).
fn entitlement_summary(entitlement: Option<PoolEntitlement>) -> LicenseSummary {
    let Some(e) = entitlement else {
        return LicenseSummary::default();
    };
    LicenseSummary {
        vendor: Some(e.vendor),
        customer: e.customer,
        entitled_seats: Some(e.seats),
        entitlement_ends_at: e.ends_at,
        in_grace: e.in_grace,
        versions: e.versions,
        ..LicenseSummary::default()
    }
}

pub async fn admin_licenses(state: &AppState) -> Result<Response> {
    let now = state.clock.now();
    let pools = pools(state).await.map_err(store_err(state))?;
    // A file without alerts reads no alert state.
    let firing: HashSet<String> = if pools.iter().any(|p| !p.license.alerts.is_empty()) {
        state
            .store
            .alert_states()
            .await
            .map_err(store_err(state))?
            .into_iter()
            .filter(|s| s.firing_since.is_some())
            .map(|s| s.alert)
            .collect()
    } else {
        HashSet::new()
    };
    let licenses = pools
        .into_iter()
        .map(|p| license_summary(p, &firing))
        .collect();
    Ok(json(StatusCode::OK, &LicensesResponse { now, licenses }))
}

/// The query of `GET /v1/admin/seats`, validated.
fn seat_query(licenses: &leasehold_common::Licenses, query: &Query) -> Result<store::SeatQuery> {
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
pub async fn admin_seats(state: &AppState, query: Query) -> Result<Response> {
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
                // Seconds as of now, from the client's last report.
                idle_s: r
                    .idle_since
                    .map(|since| u64::try_from(now.millis_since(since) / 1000).unwrap_or(0)),
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
    let outcome = state
        .store
        .revoke(&seat_id, reason, block, req.force)
        .await
        .map_err(store_err(state))?;
    outcomes::revoke(&seat_id, &outcome)?;
    Metrics::inc(&state.metrics.revokes);
    Ok(StatusCode::NO_CONTENT.into_response())
}

pub async fn admin_events(state: &AppState, query: Query) -> Result<Response> {
    let after = query::int(&query, "after")?.unwrap_or(0);
    let limit = query::int(&query, "limit")?
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
    query: Query,
    meta: crate::http::ui_auth::RequestMeta,
) -> Result<Response> {
    let from_header = match last_event_id.as_deref().map(str::trim) {
        None | Some("") => None,
        Some(v) => Some(query::seq(v).ok_or_else(|| {
            ApiError::invalid(format!("Last-Event-ID must be an event id, not {v:?}"))
        })?),
    };
    let after = from_header.or(query::int(&query, "after")?).unwrap_or(0);
    // The guard judged a request with `Authorization` by it alone; without
    // one, the session cookie let it in, and the stream lives only as long
    // as that session.
    let session = (!meta.headers.contains_key("authorization")).then_some(meta);
    Ok(crate::http::sse::stream(state, after, session).into_response())
}
