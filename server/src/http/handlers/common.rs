//! What the handlers share: JSON replies and request bodies, store errors
//! (counted), integer query parameters, freshly signed leases and the
//! license pools. A leaf: it uses no other handler module.

use std::collections::HashMap;

use bytes::Bytes;
use leasehold_common::LicenseConfig;
use leasehold_common::api::Lease;
use leasehold_common::token::LeaseClaims;
use warp::http::StatusCode;
use warp::reply::{Reply, Response};

use crate::AppState;
use crate::http::error::ApiError;
use crate::metrics::Metrics;
use crate::store::{self, LeaseRow, PoolCounts, SeatMode};

pub type Result<T> = std::result::Result<T, ApiError>;

/// The lease as the client sees it, with a fresh signature.
pub(super) fn signed(state: &AppState, row: LeaseRow, overage: bool) -> Lease {
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

pub(in crate::http) fn json(status: StatusCode, body: &impl serde::Serialize) -> Response {
    warp::reply::with_status(warp::reply::json(body), status).into_response()
}

pub(super) fn parse_json<T: serde::de::DeserializeOwned>(body: &Bytes, what: &str) -> Result<T> {
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

pub(in crate::http) fn store_err(state: &AppState) -> impl Fn(store::StoreError) -> ApiError + '_ {
    |e| {
        Metrics::inc(&state.metrics.store_errors);
        ApiError::store(e)
    }
}

/// Parse an optional non-negative integer query parameter.
pub(in crate::http) fn query_int(
    query: &HashMap<String, String>,
    name: &str,
) -> Result<Option<i64>> {
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

/// One configured license, what counts against it (from the writer's
/// index) and how many `?wait=` checkouts stand in its line.
pub(super) struct Pool {
    pub license: LicenseConfig,
    pub counts: PoolCounts,
    pub waiting: u32,
}

pub(super) async fn pools(state: &AppState) -> std::result::Result<Vec<Pool>, store::StoreError> {
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
