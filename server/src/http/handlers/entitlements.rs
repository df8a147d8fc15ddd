//! `GET /v1/admin/entitlements`: the server's `kid` and every file of its
//! entitlements directory with its state now, from the scan in force (the
//! same snapshot the rules decide by); `GET /v1/licenses/{id}/entitlements`:
//! a license's own, for its vendor's application.

use leasehold_common::Licenses;
use leasehold_common::Timestamp;
use leasehold_common::api::{
    EntitledBorrow, EntitledLicense, EntitlementView, EntitlementsResponse, LicenseEntitlements,
};
use leasehold_common::entitlement::Entitlement;
use warp::http::StatusCode;
use warp::reply::Response;

use super::common::{Result, json};
use crate::AppState;
use crate::http::auth::client_license;

/// `GET /v1/licenses/{id}/entitlements`: the JWS of each entitlement that
/// grants the license now (none for a license without a vendor).
pub async fn license_entitlements(
    state: &AppState,
    license_id: String,
    authorization: Option<String>,
) -> Result<Response> {
    let lic = client_license(state, &license_id, authorization.as_deref())?;
    let licenses = state.licenses.current();
    let now = state.store.decision_time(state.clock.now()).as_millis();
    let entitlements = match lic.vendor.as_deref() {
        Some(vendor) => licenses
            .entitled()
            .ledger()
            .granting(vendor, &lic.id, now)
            .into_iter()
            .map(|e| e.jws.clone())
            .collect(),
        None => Vec::new(),
    };
    Ok(json(StatusCode::OK, &LicenseEntitlements { entitlements }))
}

pub async fn admin_entitlements(state: &AppState) -> Result<Response> {
    let licenses = state.licenses.current();
    let now = state.store.decision_time(state.clock.now()).as_millis();
    let entitled = licenses.entitled();
    let ledger = entitled.ledger();
    let mut rows: Vec<EntitlementView> = ledger
        .entitlements()
        .iter()
        .zip(entitled.files())
        .zip(ledger.states(now))
        .map(|((e, file), s)| {
            let mut row = view(&licenses, e, s.as_str(), &file.file);
            row.error = file.error.clone();
            row
        })
        .collect();
    rows.extend(entitled.rejected().iter().map(|r| EntitlementView {
        vendor: None,
        id: None,
        customer: None,
        issued_at: None,
        not_before: None,
        expires_at: None,
        grace_until: None,
        bound: false,
        state: "rejected".into(),
        file: r.file.clone(),
        licenses: Vec::new(),
        unused: Vec::new(),
        error: Some(r.why.clone()),
    }));
    rows.sort_by(|a, b| a.file.cmp(&b.file));
    Ok(json(
        StatusCode::OK,
        &EntitlementsResponse {
            server_kid: state.signer.kid().to_string(),
            entitlements: rows,
        },
    ))
}

/// One entitlement in force, as the admin reads it.
fn view(licenses: &Licenses, e: &Entitlement, state: &str, file: &str) -> EntitlementView {
    let c = &e.claims;
    let at = |s: i64| Timestamp::from_millis(s.saturating_mul(1000));
    let unused = c
        .licenses
        .iter()
        .filter(|g| {
            licenses
                .get(&g.id)
                .is_none_or(|l| l.vendor.as_deref() != Some(c.iss.as_str()))
        })
        .map(|g| g.id.clone())
        .collect();
    EntitlementView {
        vendor: Some(c.iss.clone()),
        id: Some(c.jti.clone()),
        customer: c.sub.clone(),
        issued_at: Some(at(c.iat)),
        not_before: c.nbf.map(at),
        expires_at: c.exp.map(at),
        grace_until: c.ends_at_ms().map(Timestamp::from_millis),
        bound: !c.aud.is_empty(),
        state: state.to_string(),
        file: file.to_string(),
        licenses: c
            .licenses
            .iter()
            .map(|g| EntitledLicense {
                id: g.id.clone(),
                seats: g.seats,
                versions: g.versions.as_ref().map(ToString::to_string),
                overage: g.overage,
                borrow: g.borrow.map(|b| EntitledBorrow {
                    max: b.max_s,
                    seats: b.seats,
                }),
            })
            .collect(),
        unused,
        error: None,
    }
}
