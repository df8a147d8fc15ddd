//! What a bearer of the admin API may do, by token or dashboard sign-in.

use super::error::ApiError;
use crate::AppState;

/// Variants go from least to most powerful, and a role may do everything
/// the roles before it may.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Role {
    /// Reads everything (the `GET` routes), changes nothing.
    Viewer,
    Admin,
}

impl Role {
    /// The role `secret` grants, if any (compared in constant time).
    pub fn of(state: &AppState, secret: &str) -> Option<Role> {
        if state.admin_token.matches(secret) {
            Some(Role::Admin)
        } else if state.ui.viewer_token.matches(secret) {
            Some(Role::Viewer)
        } else {
            None
        }
    }

    /// The token of this role now.
    pub fn token(self, state: &AppState) -> &crate::keys::AdminToken {
        match self {
            Role::Viewer => &state.ui.viewer_token,
            Role::Admin => &state.admin_token,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Role::Viewer => "viewer",
            Role::Admin => "admin",
        }
    }

    pub fn parse(s: &str) -> Option<Role> {
        match s {
            "viewer" => Some(Role::Viewer),
            "admin" => Some(Role::Admin),
            _ => None,
        }
    }

    /// `held` may do what needs `self`, or 403.
    pub fn permits(self, held: Role) -> Result<(), ApiError> {
        if held >= self {
            Ok(())
        } else {
            Err(ApiError::forbidden(format!(
                "the {} role may only read; this needs the {} role",
                held.as_str(),
                self.as_str()
            )))
        }
    }
}
