//! Who may call what. Admin routes are guarded by a filter ([`require`]), so
//! a handler behind it cannot forget the check; client routes check the
//! license key of the license in their path ([`client_license`]).
//!
//! Secrets are compared in constant time (see [`crate::keys`]).

use std::convert::Infallible;

use leasehold_common::LicenseConfig;
use warp::{Filter, Rejection};

use super::State;
use super::error::ApiError;
use crate::AppState;
use crate::keys::key_matches;

/// What a bearer of the admin API may do. Variants go from least to most
/// powerful, and a role may do everything the roles before it may (a
/// read-only `Viewer` would go before `Admin`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Role {
    Admin,
}

impl Role {
    /// The role `secret` grants, if any.
    fn of(state: &AppState, secret: &str) -> Option<Role> {
        state.admin_token.matches(secret).then_some(Role::Admin)
    }

    fn unauthorized(self) -> ApiError {
        match self {
            Role::Admin => {
                ApiError::unauthorized("admin endpoints need 'Authorization: Bearer <admin token>'")
            }
        }
    }
}

/// Passes only a request whose bearer holds at least `role`; otherwise
/// rejects with 401. Put it last before the handler, so a request that is
/// malformed anyway (oversized body, bad header) is answered as such first.
pub fn require(state: State, role: Role) -> impl Filter<Extract = (), Error = Rejection> + Clone {
    authorization()
        .and_then(move |authorization: Option<String>| {
            let state = state.clone();
            async move {
                match bearer(authorization.as_deref()).and_then(|s| Role::of(&state, s)) {
                    Some(held) if held >= role => Ok(()),
                    _ => Err(warp::reject::custom(role.unauthorized())),
                }
            }
        })
        .untuple_one()
}

/// The guard of every `/v1/admin/…` route.
pub fn admin_auth(state: State) -> impl Filter<Extract = (), Error = Rejection> + Clone {
    require(state, Role::Admin)
}

/// The `Authorization` header; one that is not valid text counts as absent.
pub fn authorization() -> impl Filter<Extract = (Option<String>,), Error = Infallible> + Clone {
    warp::header::optional::<String>("authorization")
        .or_else(|_| async { Ok::<_, Infallible>((None,)) })
}

/// `Authorization: Bearer <secret>` → the secret.
fn bearer(authorization: Option<&str>) -> Option<&str> {
    let value = authorization?.trim();
    let (scheme, secret) = value.split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| secret.trim())
        .filter(|s| !s.is_empty())
}

/// A client of `license_id`: its key must match (in constant time).
pub fn client_license(
    state: &AppState,
    license_id: &str,
    authorization: Option<&str>,
) -> Result<LicenseConfig, ApiError> {
    let Some(presented) = bearer(authorization) else {
        return Err(ApiError::unauthorized(
            "send the license key as 'Authorization: Bearer <key>'",
        ));
    };
    let licenses = state.licenses.current();
    let lic = licenses
        .get(license_id)
        .ok_or_else(|| ApiError::unknown_license(license_id))?;
    if !key_matches(&lic.key, presented) {
        return Err(ApiError::unauthorized(format!(
            "the key is not valid for license {license_id:?}"
        )));
    }
    Ok(lic.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bearer_parsing() {
        assert_eq!(bearer(Some("Bearer abc")), Some("abc"));
        assert_eq!(bearer(Some("bearer   abc ")), Some("abc"));
        assert_eq!(bearer(Some("Basic abc")), None);
        assert_eq!(bearer(Some("Bearer ")), None);
        assert_eq!(bearer(Some("abc")), None);
        assert_eq!(bearer(None), None);
    }
}
