//! Dashboard sign-in over HTTP, what its endpoints (`POST /ui/login`,
//! `GET /ui/session`, `POST /ui/logout`: routes in `filters.rs`, handlers
//! in `handlers/dashboard.rs`) and the admin guard share: the sign-in
//! cookie ([`sign_in`]), the CSRF and same-origin checks ([`csrf`]), the
//! failed-login limiter ([`limiter`]) and what they read from a request
//! ([`request_meta`]). The sign-ins themselves live in
//! [`crate::sign_ins`].
//!
//! - **Cookie.** A sign-in with the admin or the viewer token sends the new
//!   sign-in's id once as the `leasehold_session` cookie (the wire keeps
//!   the older word) (`HttpOnly;
//!   SameSite=Strict; Path=/`, plus `Secure` when the request came over
//!   HTTPS). Logout deletes the sign-in at once.
//! - **HTTPS.** The server speaks plain HTTP; behind a TLS-terminating proxy,
//!   `X-Forwarded-Proto: https` marks a request as HTTPS, or `--public-url
//!   https://…` says every browser comes over HTTPS (then the cookie is
//!   `__Host-leasehold_session`). Forwarding headers are believed only from
//!   `--trusted-proxies` (loopback by default; anyone else could send
//!   them); `X-Forwarded-For` likewise names the client for the limiter
//!   only behind a trusted proxy ([`crate::proxies`]).
//! - **CSRF.** A state change authenticated by the cookie needs the
//!   sign-in's CSRF token and must come from the same origin; bearer
//!   requests are not affected.
//! - **Failed logins** are limited per client address, per server process;
//!   wrong admin or viewer bearer tokens on `/v1/admin/*` count in the same
//!   limiter ([`UiAuth::refuse_if_limited`], [`UiAuth::failed`]).

mod csrf;
mod limiter;
mod request_meta;
mod sign_in;

pub use csrf::{check_csrf, origin_check, token_of};
pub use request_meta::{RequestMeta, request_meta};
pub use sign_in::{SignIn, sign_in_of, touch};

use std::net::IpAddr;
use std::time::{Duration, Instant};

use std::sync::Arc;

use crate::http::error::ApiError;
use crate::keys::AdminToken;
use crate::proxies::ProxyPolicy;
use crate::sign_ins::SignIns;

/// The sign-in cookie's name.
pub const COOKIE: &str = "leasehold_session";
/// Its name when the public URL is https: browsers accept a `__Host-`
/// cookie only from a secure origin, for the whole host, so no sibling
/// subdomain or plain-HTTP page can plant or shadow it.
pub const HOST_COOKIE: &str = "__Host-leasehold_session";

/// Sign-in settings and state of one server.
pub struct UiAuth {
    pub viewer_token: AdminToken,
    /// How long sign-ins last.
    pub sign_ins: SignIns,
    limiter: limiter::LoginLimiter,
    /// Whose forwarding headers are believed, and the public origin.
    pub proxies: Arc<ProxyPolicy>,
}

impl UiAuth {
    pub fn new(viewer_token: AdminToken, idle_timeout: Duration, lifetime: Duration) -> Self {
        UiAuth {
            viewer_token,
            sign_ins: SignIns::new(idle_timeout, lifetime),
            limiter: limiter::LoginLimiter::default(),
            proxies: Arc::new(ProxyPolicy::default()),
        }
    }

    /// Failed sign-ins and wrong bearer tokens allowed per client address
    /// per minute.
    pub fn with_failure_limit(mut self, max_failures: usize) -> Self {
        self.limiter = limiter::LoginLimiter::new(max_failures);
        self
    }

    pub fn with_proxies(mut self, proxies: ProxyPolicy) -> Self {
        self.proxies = Arc::new(proxies);
        self
    }

    /// `429 rate_limited` with `Retry-After` if `client` has presented too
    /// many wrong tokens (at sign-in or as a bearer token) lately. Checked
    /// before the token, so a blocked address cannot go on guessing.
    pub fn refuse_if_limited(&self, client: IpAddr) -> Result<(), ApiError> {
        match self.limiter.blocked(client, Instant::now()) {
            None => Ok(()),
            Some(wait) => {
                let secs = wait.as_secs().max(1);
                Err(ApiError::rate_limited(
                    format!("too many wrong tokens from this address; try again in {secs} s"),
                    secs,
                ))
            }
        }
    }

    /// Count a wrong token presented by `client`.
    pub fn failed(&self, client: IpAddr) {
        self.limiter.failed(client, Instant::now());
    }
}
