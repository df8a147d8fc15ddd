//! The session a request's cookie names, with its role, as the routes and
//! the admin guard need it: an [`ApiError`] when there is none.

use leasehold_common::Timestamp;

use super::RequestMeta;
use crate::AppState;
use crate::http::error::ApiError;
use crate::http::role::Role;
use crate::store::UiSessionRow;

/// A valid session, as found in the store.
#[derive(Debug, Clone)]
pub struct Session {
    /// The id the cookie sent (the store has only its SHA-256).
    pub(super) id: String,
    pub row: UiSessionRow,
    pub role: Role,
}

impl Session {
    /// When the session ends unless used again.
    pub fn ends_at(&self, state: &AppState) -> Timestamp {
        state.ui.sessions.ends_at(&self.row)
    }
}

fn signed_out() -> ApiError {
    ApiError::unauthorized(
        "the session has ended (signed out, idle too long, too old, or its token changed); \
         sign in again",
    )
}

/// The session the cookie names, if it is still valid (not touched).
pub async fn session_of(state: &AppState, meta: &RequestMeta) -> Result<Session, ApiError> {
    let Some(id) = meta.session_cookie() else {
        return Err(ApiError::unauthorized(
            "sign in at /ui/login, or send 'Authorization: Bearer <token>'",
        ));
    };
    let row = state
        .ui
        .sessions
        .find(&state.store, id, state.clock.now())
        .await
        .map_err(ApiError::store)?
        .ok_or_else(signed_out)?;
    let role = Role::parse(&row.role).ok_or_else(signed_out)?;
    // Rotating a token signs out every session it signed in, on every
    // replica that runs with the new one.
    if row.token_fp != role.token(state).session_fingerprint() {
        return Err(signed_out());
    }
    Ok(Session {
        id: id.to_string(),
        row,
        role,
    })
}

/// Record the session's use (at most once per
/// [`crate::ui_sessions::UiSessions::touch_every`]). Call only once the
/// request is allowed.
pub async fn touch(state: &AppState, session: &mut Session) -> Result<(), ApiError> {
    state
        .ui
        .sessions
        .touch(&state.store, &mut session.row, state.clock.now())
        .await
        .map_err(ApiError::store)
}
