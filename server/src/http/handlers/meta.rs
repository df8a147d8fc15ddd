//! Meta handlers, without credentials: `/healthz`, the signing keys
//! (`/.well-known/jwks.json`) and `/metrics`.

use warp::http::StatusCode;
use warp::reply::{Reply, Response};

use super::common::{json, pools};
use crate::AppState;
use crate::http::error::ApiError;
use crate::metrics::{PoolGauges, StoreGauges};

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

/// The signing keys as JWKS JSON. They never change while the server
/// runs: the route serializes them once, at start.
pub fn jwks_body(state: &AppState) -> String {
    serde_json::to_string(&state.signer.jwks()).expect("jwks serializes")
}

/// `GET /.well-known/jwks.json`: `body` from [`jwks_body`].
pub fn jwks(body: &str) -> Response {
    warp::reply::with_header(body.to_string(), "content-type", "application/json").into_response()
}

/// `GET /metrics`. A store that cannot answer shows as no pool gauges rather
/// than a failed scrape.
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
    let mut text = state.metrics.render(
        &StoreGauges {
            kind: state.store.kind().as_str(),
            read_pool_idle: state.store.read_pool_idle(),
        },
        &pools,
        state.store.writer_stats(),
    );
    let licenses = state.licenses.current();
    let webhooks = crate::webhooks::gauges(&state.store, &licenses).await;
    text.push_str(&state.metrics.render_webhooks(&webhooks));
    let stats = state.store.writer_stats();
    text.push_str(&crate::entitlements::metrics::render(
        &licenses,
        state.store.decision_time(state.clock.now()),
        stats
            .clock_behind_ms
            .load(std::sync::atomic::Ordering::Relaxed),
    ));
    warp::reply::with_header(text, "content-type", "text/plain; version=0.0.4").into_response()
}
