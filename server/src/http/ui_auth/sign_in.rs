//! The sign-in a request's cookie names, with its role, as the routes and
//! the admin guard need it: an [`ApiError`] when there is none.

use leasehold_common::Timestamp;

use super::RequestMeta;
use crate::AppState;
use crate::http::error::ApiError;
use crate::http::role::Role;
use crate::store::SignInRow;

/// A valid sign-in, as found in the store.
#[derive(Debug, Clone)]
pub struct SignIn {
    /// The id the cookie sent (the store has only its SHA-256).
    pub(super) id: String,
    pub row: SignInRow,
    pub role: Role,
}

impl SignIn {
    /// When the sign-in ends unless used again.
    pub fn ends_at(&self, state: &AppState) -> Timestamp {
        state.ui.sign_ins.ends_at(&self.row)
    }
}

/// The 401 for an ended sign-in.
fn signed_out() -> ApiError {
    ApiError::unauthorized(
        "the sign-in has ended (signed out, idle too long, too old, or its token changed); \
         sign in again",
    )
}

/// The sign-in the cookie names, if it is still valid (not touched).
pub async fn sign_in_of(state: &AppState, meta: &RequestMeta) -> Result<SignIn, ApiError> {
    let Some(id) = meta.sign_in_cookie() else {
        return Err(ApiError::unauthorized(
            "sign in at /ui/login, or send 'Authorization: Bearer <token>'",
        ));
    };
    let row = state
        .ui
        .sign_ins
        .find(&state.store, id, state.clock.now())
        .await
        .map_err(ApiError::store)?
        .ok_or_else(signed_out)?;
    let role = Role::parse(&row.role).ok_or_else(signed_out)?;
    // Rotating a token signs out everyone it signed in, on every
    // replica that runs with the new one.
    if row.token_fp != role.token(state).sign_in_fingerprint() {
        return Err(signed_out());
    }
    Ok(SignIn {
        id: id.to_string(),
        row,
        role,
    })
}

/// Record the sign-in's use (at most once per
/// [`crate::sign_ins::SignIns::touch_every`]). Call only once the
/// request is allowed.
pub async fn touch(state: &AppState, sign_in: &mut SignIn) -> Result<(), ApiError> {
    state
        .ui
        .sign_ins
        .touch(&state.store, &mut sign_in.row, state.clock.now())
        .await
        .map_err(ApiError::store)
}
