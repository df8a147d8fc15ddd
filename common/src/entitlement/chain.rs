//! The check a vendor's application makes, offline, that its lease comes
//! from an entitled server: vendor key → entitlement → server key → lease.
//!
//! A lease is entitled, for an application pinning the vendor's key(s) and
//! running `version`, at its own clock's `now`, when some entitlement of
//! the list the server gave verifies with a pinned key, is in force at
//! `now` (its term, not replaced by a newer one of the list), names the
//! lease's license, is bound to no server or to the `kid` of the key that
//! signed the lease, allows `version`, and ends no earlier than the lease.
//! The `kid` is computed from the key itself, never read from the JWKS's
//! `kid` field, so a server cannot claim another's binding.

use std::collections::HashMap;

use super::jws::{VendorKey, decode};
use super::ledger::Ledger;
use super::versions::Version;
use crate::token::{Jwks, LeaseClaims, header_kid, thumbprint, verify};

/// Why a lease is not entitled, from the first link that fails.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotEntitled {
    #[error("the lease token does not verify with the server's key named by its kid: {0}")]
    LeaseToken(String),
    #[error("no entitlement verifies with the vendor's key")]
    NoneVerifies,
    #[error("no entitlement in force names license {0}")]
    NotForLicense(String),
    #[error("the entitlements for this license are not in force now (not yet, ended or replaced)")]
    NotInForce,
    #[error("the entitlement is bound to another server (not kid {0})")]
    BoundElsewhere(String),
    #[error("version {version} is not entitled (entitled: {range})")]
    Version { version: String, range: String },
    #[error("the lease runs past the entitlement's term")]
    OutlivesTerm,
}

/// The entitlement a lease is entitled by.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EntitledBy {
    pub vendor: String,
    pub id: String,
    /// When it stops granting (ms): `exp + grace`; `None` if perpetual.
    pub ends_at_ms: Option<i64>,
    pub in_grace: bool,
}

/// What the application pins and knows of itself.
#[derive(Debug, Clone, Copy)]
pub struct Pins<'a> {
    pub vendor_keys: &'a [VendorKey],
    /// The application's version; `None` fails any license with a range.
    pub version: Option<&'a str>,
}

/// Checks the chain for `lease_token` (from the lease), the server's
/// `jwks` and `entitlements` (the JWSs of
/// `GET /v1/licenses/{id}/entitlements`), at the application's `now_ms`.
pub fn check_chain(
    lease_token: &str,
    jwks: &Jwks,
    entitlements: &[String],
    pins: Pins<'_>,
    now_ms: i64,
) -> Result<EntitledBy, NotEntitled> {
    let (kid, lease) = verify_lease(lease_token, jwks)?;
    let verified: Vec<_> = entitlements
        .iter()
        .filter_map(|jws| decode(jws).ok()?.verify(pins.vendor_keys).ok())
        .collect();
    if verified.is_empty() {
        return Err(NotEntitled::NoneVerifies);
    }
    let ledger = Ledger::new(verified, HashMap::new());
    let states = ledger.states(now_ms);
    let naming: Vec<usize> = (0..states.len())
        .filter(|&i| {
            ledger.entitlements()[i]
                .claims
                .grant_for(&lease.lic)
                .is_some()
        })
        .collect();
    if naming.is_empty() {
        return Err(NotEntitled::NotForLicense(lease.lic));
    }
    let mut failure = NotEntitled::NotInForce;
    for i in naming.into_iter().filter(|&i| states[i].grants()) {
        let e = &ledger.entitlements()[i];
        match link(e, &lease, &kid, pins.version) {
            Ok(()) => {
                return Ok(EntitledBy {
                    vendor: e.claims.iss.clone(),
                    id: e.claims.jti.clone(),
                    ends_at_ms: e.claims.ends_at_ms(),
                    in_grace: states[i] == super::State::Grace,
                });
            }
            Err(why) => failure = why,
        }
    }
    Err(failure)
}

/// The lease token verified with the JWKS key whose computed thumbprint is
/// the token's `kid`: that `kid`, and the claims.
fn verify_lease(token: &str, jwks: &Jwks) -> Result<(String, LeaseClaims), NotEntitled> {
    let bad = |why: &str| NotEntitled::LeaseToken(why.to_string());
    let kid = header_kid(token).ok_or_else(|| bad("no kid in its header"))?;
    let key = jwks
        .keys
        .iter()
        .find(|k| thumbprint(k).as_deref() == Some(kid.as_str()))
        .ok_or_else(|| bad("no key of the JWKS has that thumbprint"))?;
    let mut only = key.clone();
    only.kid = Some(kid.clone());
    let claims = verify(token, &Jwks { keys: vec![only] })
        .map_err(|e| NotEntitled::LeaseToken(e.to_string()))?;
    Ok((kid, claims))
}

/// The links from one entitlement in force to the lease.
fn link(
    e: &super::Entitlement,
    lease: &LeaseClaims,
    kid: &str,
    version: Option<&str>,
) -> Result<(), NotEntitled> {
    let c = &e.claims;
    if !c.aud.is_empty() && !c.aud.iter().any(|a| a == kid) {
        return Err(NotEntitled::BoundElsewhere(kid.to_string()));
    }
    let grant = c
        .grant_for(&lease.lic)
        .expect("only entitlements naming it");
    if let Some(range) = &grant.versions {
        let allowed = version
            .and_then(Version::parse)
            .is_some_and(|v| range.contains(&v));
        if !allowed {
            return Err(NotEntitled::Version {
                version: version.unwrap_or("(none)").to_string(),
                range: range.to_string(),
            });
        }
    }
    // The token's `exp` is whole seconds, rounded down from `expires_at`.
    if c.ends_at_ms().is_some_and(|end| lease.exp * 1000 > end) {
        return Err(NotEntitled::OutlivesTerm);
    }
    Ok(())
}
