//! `GET /v1/admin/usage/attestation`: the usage summary's figures for a
//! license and range, signed with the server's lease key
//! (`leasehold_common::attestation`): what a customer on an overage plan
//! hands its vendor. The figures are the usage view's own, computed by the
//! same query over the same range.

use leasehold_common::attestation::{self, UsageAttestation};
use leasehold_common::{Licenses, Timestamp};
use warp::http::StatusCode;
use warp::reply::{Reply, Response};

use super::common::Result;
use crate::AppState;
use crate::http::query::{self, Query};

pub async fn admin_usage_attestation(state: &AppState, query: Query) -> Result<Response> {
    let w = query::window(state, &query)?;
    let tolerance = query::tolerance(&query)?;
    let (_, usage) = super::usage::usage_of(state, &w, None, tolerance).await?;
    let s = usage.summary;
    let covered_from = s.covered_from.unwrap_or(w.from);
    let claims = UsageAttestation {
        iss: "leasehold".into(),
        iat: w.now.as_millis().div_euclid(1000),
        entitlements: active_in(&state.licenses.current(), &w.license, covered_from, w.to),
        lic: w.license.id,
        from: w.from,
        to: w.to,
        covered_from,
        seats: s.seats,
        peak: s.peak,
        over_s: s.over_s,
        seat_hours: s.seat_hours,
        true_denials: s.true_denials,
        denied_holders: s.denied_holders,
    };
    let jws = attestation::sign(&state.signer, &claims);
    Ok(warp::reply::with_status(
        warp::reply::with_header(jws, "content-type", "application/jose"),
        StatusCode::OK,
    )
    .into_response())
}

/// The `jti`s of the license's vendor's entitlements in force whose term
/// meets `[from, to)`.
fn active_in(
    licenses: &Licenses,
    lic: &leasehold_common::LicenseConfig,
    from: Timestamp,
    to: Timestamp,
) -> Vec<String> {
    let Some(vendor) = lic.vendor.as_deref() else {
        return Vec::new();
    };
    let mut jtis: Vec<String> = licenses
        .entitled()
        .ledger()
        .entitlements()
        .iter()
        .map(|e| &e.claims)
        .filter(|c| c.iss == vendor && c.grant_for(&lic.id).is_some())
        .filter(|c| c.nbf.is_none_or(|n| n * 1000 < to.as_millis()))
        .filter(|c| c.ends_at_ms().is_none_or(|end| end > from.as_millis()))
        .map(|c| c.jti.clone())
        .collect();
    jtis.sort();
    jtis.dedup();
    jtis
}
