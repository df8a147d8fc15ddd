//! `GET /v1/admin/entitlements`: the server's `kid` and every file of its
//! entitlements directory with its state now, from the scan in force (the
//! same snapshot the rules decide by).

use leasehold_common::Licenses;
use leasehold_common::Timestamp;
use leasehold_common::api::{
    EntitledBorrow, EntitledLicense, EntitlementView, EntitlementsResponse,
};
use leasehold_common::entitlement::Entitlement;
use warp::http::StatusCode;
use warp::reply::Response;

use super::common::{Result, json};
use crate::AppState;

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
