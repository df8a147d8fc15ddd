//! The CSRF and same-origin checks of the sign-in cookie.
//!
//! The CSRF token is derived from the sign-in id (SHA-256 of a label and the
//! id), so it needs no storage and the database cannot produce it. A state
//! change authenticated by the cookie needs it as `X-CSRF-Token`, and must
//! come from the same origin: an `Origin` equal to this server's (scheme +
//! `Host`) or `Sec-Fetch-Site: same-origin`, and neither may say otherwise.

use sha2::{Digest, Sha256};

use super::{RequestMeta, SignIn};
use crate::http::error::ApiError;

/// What the page sends back as `X-CSRF-Token`.
pub fn token_of(sign_in: &SignIn) -> String {
    csrf_token(&sign_in.id)
}

/// The CSRF token of a sign-in id: derived, never stored.
fn csrf_token(sign_in_id: &str) -> String {
    let mut h = Sha256::new();
    h.update(b"leasehold-ui-csrf\0");
    h.update(sign_in_id.as_bytes());
    hex::encode(h.finalize())
}

/// The CSRF check of a state change authenticated by the cookie.
pub fn check_csrf(meta: &RequestMeta, sign_in: &SignIn) -> Result<(), ApiError> {
    let Some(sent) = meta.header("x-csrf-token") else {
        return Err(ApiError::csrf_failed(
            "send the session's csrf_token (GET /ui/session) as X-CSRF-Token",
        ));
    };
    if !crate::keys::key_matches(&token_of(sign_in), sent) {
        return Err(ApiError::csrf_failed(
            "X-CSRF-Token does not match the sign-in",
        ));
    }
    if !origin_check(meta, false)? {
        return Err(ApiError::csrf_failed(
            "a change made with the session cookie needs a same-origin Origin header \
             (or Sec-Fetch-Site: same-origin)",
        ));
    }
    Ok(())
}

/// Refuse a request that says it comes from another origin: an `Origin`
/// that is not ours, or `Sec-Fetch-Site` other than `same-origin` (or
/// `none`, a user's own navigation, when `allow_none`). Returns whether
/// either header vouched for the same origin.
pub fn origin_check(meta: &RequestMeta, allow_none: bool) -> Result<bool, ApiError> {
    let mut vouched = false;
    if let Some(origin) = meta.header("origin") {
        if Some(origin.to_ascii_lowercase()) != meta.own_origin().map(|o| o.to_ascii_lowercase()) {
            return Err(ApiError::csrf_failed(format!(
                "the request comes from another origin ({origin:?})"
            )));
        }
        vouched = true;
    }
    if let Some(site) = meta.header("sec-fetch-site") {
        match site.to_ascii_lowercase().as_str() {
            "same-origin" => vouched = true,
            "none" if allow_none => {}
            other => {
                return Err(ApiError::csrf_failed(format!(
                    "the request comes from another site (Sec-Fetch-Site: {other})"
                )));
            }
        }
    }
    Ok(vouched)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sign_ins::id_sha256;

    #[test]
    fn csrf_tokens_are_derived_per_sign_in() {
        assert_ne!(csrf_token("a"), csrf_token("b"));
        assert_eq!(csrf_token("a"), csrf_token("a"));
        assert_ne!(csrf_token("a"), id_sha256("a"));
    }
}
