//! Who may call what. Admin routes are guarded by a filter ([`require`]), so
//! a handler behind it cannot forget the check; client routes check the
//! license key of the license in their path ([`client_license`]).
//!
//! An admin route accepts either credential:
//! - `Authorization: Bearer <token>`: the admin token ([`Role::Admin`]) or
//!   the viewer token ([`Role::Viewer`]). A request that sends the header
//!   is judged by it alone.
//! - the dashboard's sign-in cookie (see [`super::ui_auth`]), with the role
//!   of the token that signed in; a state change made with it also needs
//!   the CSRF token and a same-origin request ([`ui_auth::check_csrf`]).
//!
//! No credential, or a wrong one: 401. A role too weak for the route
//! (a viewer's `DELETE`): 403 `forbidden`. Wrong bearer tokens count per
//! client address in the sign-in limiter: past its limit, every bearer
//! request from that address is 429 `rate_limited` until it cools down.
//!
//! Secrets are compared in constant time (see [`crate::keys`]).

use std::convert::Infallible;

use leasehold_common::LicenseConfig;
use warp::{Filter, Rejection};

use super::State;
use super::error::ApiError;
use super::role::Role;
use super::ui_auth::{self, RequestMeta};
use crate::AppState;
use crate::keys::key_matches;

/// No credential, or a wrong one.
fn unauthorized() -> ApiError {
    ApiError::unauthorized(
        "admin endpoints need 'Authorization: Bearer <admin or viewer token>' \
         or a dashboard session (POST /ui/login)",
    )
}

/// Passes only a request whose bearer token or sign-in holds at least
/// `role` (and, for a state change made with the sign-in cookie, passes the
/// CSRF check); otherwise rejects with 401 or 403. Put it last before the
/// handler, so a request that is malformed anyway (oversized body, bad
/// header) is answered as such first.
pub fn require(state: State, role: Role) -> impl Filter<Extract = (), Error = Rejection> + Clone {
    ui_auth::request_meta(state.ui.proxies.clone())
        .and_then(move |meta: RequestMeta| {
            let state = state.clone();
            async move {
                authorize(&state, role, &meta)
                    .await
                    .map_err(warp::reject::custom)
            }
        })
        .untuple_one()
}

async fn authorize(state: &AppState, needed: Role, meta: &RequestMeta) -> Result<(), ApiError> {
    if let Some(authorization) = meta.headers.get("authorization") {
        let client = meta.client_ip();
        state.ui.refuse_if_limited(client)?;
        let Some(held) = authorization
            .to_str()
            .ok()
            .and_then(|a| bearer(Some(a)))
            .and_then(|s| Role::of(state, s))
        else {
            state.ui.failed(client);
            return Err(unauthorized());
        };
        return needed.permits(held);
    }
    if meta.sign_in_cookie().is_none() {
        return Err(unauthorized());
    }
    let mut sign_in = ui_auth::sign_in_of(state, meta).await?;
    needed.permits(sign_in.role)?;
    if meta.changes_state() {
        ui_auth::check_csrf(meta, &sign_in)?;
    }
    if meta.is_background() {
        // Automatic refreshes must not keep an abandoned tab signed in.
        return Ok(());
    }
    ui_auth::touch(state, &mut sign_in).await
}

/// The guard of the admin routes that read (`GET`): the viewer role.
pub fn admin_read(state: State) -> impl Filter<Extract = (), Error = Rejection> + Clone {
    require(state, Role::Viewer)
}

/// The guard of the admin routes that change state: the admin role.
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
