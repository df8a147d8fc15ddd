//! Dashboard sign-in: `POST /ui/login`, `GET /ui/session`, `POST /ui/logout`,
//! the session cookie, the CSRF check and the failed-login limiter.
//!
//! - **Sessions.** A sign-in with the admin or the viewer token creates a
//!   session: a random 256-bit id, sent once as the `leasehold_session`
//!   cookie (`HttpOnly; SameSite=Strict; Path=/`, plus `Secure` when the
//!   request came over HTTPS). The store keeps only the id's SHA-256, the
//!   role and its times, so a session survives a restart and works on every
//!   replica. It ends after [`UiAuth::idle_timeout`] without use or
//!   [`UiAuth::lifetime`] after sign-in, and at logout (deleted at once).
//!   A use is recorded at most once per [`UiAuth::touch_every`].
//! - **HTTPS.** The server speaks plain HTTP; behind a TLS-terminating proxy
//!   on the same host, `X-Forwarded-Proto: https` marks a request as HTTPS.
//!   Forwarding headers are trusted only from loopback peers (anyone else
//!   could send them); `X-Forwarded-For` likewise names the client for the
//!   login limiter only when the peer is loopback.
//! - **CSRF.** The CSRF token is derived from the session id (SHA-256 of a
//!   label and the id), so it needs no storage and the database cannot
//!   produce it. A state change authenticated by the cookie needs it as
//!   `X-CSRF-Token`, and must come from the same origin: an `Origin` equal
//!   to this server's (scheme + `Host`) or `Sec-Fetch-Site: same-origin`,
//!   and neither may say otherwise. Bearer requests are not affected.
//! - **Failed logins** are limited per client address: after
//!   [`MAX_FAILURES`] within [`FAILURE_WINDOW`], every login from it is
//!   `429` with `Retry-After` until the oldest failure ages out. The count
//!   is per server process (each replica counts its own).

use std::collections::{HashMap, VecDeque};
use std::convert::Infallible;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use bytes::Bytes;
use leasehold_common::Timestamp;
use leasehold_common::api::{LoginRequest, UiSession};
use sha2::{Digest, Sha256};
use warp::Filter;
use warp::filters::BoxedFilter;
use warp::http::header::{CACHE_CONTROL, LOCATION, SET_COOKIE};
use warp::http::{HeaderMap, HeaderValue, Method, StatusCode};
use warp::reply::{Reply, Response};

use super::State;
use super::auth::Role;
use super::error::ApiError;
use crate::AppState;
use crate::keys::AdminToken;
use crate::store::{StoreError, UiSessionOp, UiSessionRow};

/// The session cookie's name.
pub const COOKIE: &str = "leasehold_session";
/// Failed logins allowed per client address within [`FAILURE_WINDOW`].
pub const MAX_FAILURES: usize = 10;
pub const FAILURE_WINDOW: Duration = Duration::from_secs(60);
/// Client addresses the limiter remembers at most (beyond that, the ones
/// with the oldest failures are forgotten first).
const MAX_TRACKED: usize = 65_536;
/// A session's use is recorded at most this often.
const TOUCH_EVERY_MAX: Duration = Duration::from_secs(60);
/// Longest token accepted at sign-in (tokens are 64 hex characters).
const MAX_TOKEN_LEN: usize = 1024;

/// Sign-in settings and state of one server.
pub struct UiAuth {
    pub viewer_token: AdminToken,
    /// A session not used for this long ends.
    pub idle_timeout: Duration,
    /// A session ends this long after sign-in.
    pub lifetime: Duration,
    limiter: LoginLimiter,
}

impl UiAuth {
    pub fn new(viewer_token: AdminToken, idle_timeout: Duration, lifetime: Duration) -> Self {
        UiAuth {
            viewer_token,
            idle_timeout,
            lifetime,
            limiter: LoginLimiter::default(),
        }
    }

    /// How often a session's use is recorded: once a minute, or a tenth of
    /// the idle timeout if that is shorter (so a short timeout in a test
    /// still sees an active session as active).
    pub fn touch_every(&self) -> Duration {
        (self.idle_timeout / 10).min(TOUCH_EVERY_MAX)
    }
}

/// What the auth checks read from a request.
#[derive(Debug, Clone)]
pub struct RequestMeta {
    pub method: Method,
    pub headers: HeaderMap,
    pub peer: Option<SocketAddr>,
}

/// The connection's peer address, as the accept loop ([`crate::serve`])
/// records it in the request's extensions.
#[derive(Debug, Clone, Copy)]
pub struct PeerAddr(pub SocketAddr);

/// The request's method, headers and peer.
pub fn request_meta() -> impl Filter<Extract = (RequestMeta,), Error = Infallible> + Clone {
    warp::method()
        .and(warp::header::headers_cloned())
        .and(warp::ext::optional::<PeerAddr>())
        .and(warp::addr::remote())
        .map(
            |method, headers, peer: Option<PeerAddr>, remote: Option<SocketAddr>| RequestMeta {
                method,
                headers,
                peer: peer.map(|p| p.0).or(remote),
            },
        )
}

impl RequestMeta {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
    }

    fn peer_is_loopback(&self) -> bool {
        self.peer.is_some_and(|p| p.ip().is_loopback())
    }

    /// Did the request come over HTTPS? Only a loopback peer (a proxy on
    /// this host) is believed about it.
    pub fn is_https(&self) -> bool {
        self.peer_is_loopback()
            && self
                .header("x-forwarded-proto")
                .and_then(|v| v.split(',').next())
                .is_some_and(|v| v.trim().eq_ignore_ascii_case("https"))
    }

    /// The client's address: the peer, or, from a loopback proxy, the last
    /// address it appended to `X-Forwarded-For`.
    pub fn client_ip(&self) -> IpAddr {
        let peer = self
            .peer
            .map(|p| p.ip())
            .unwrap_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED));
        if self.peer_is_loopback()
            && let Some(ip) = self
                .header("x-forwarded-for")
                .and_then(|v| v.rsplit(',').next())
                .and_then(|v| v.trim().parse::<IpAddr>().ok())
        {
            return ip;
        }
        peer
    }

    /// The session id of the `leasehold_session` cookie, if one was sent.
    pub fn session_cookie(&self) -> Option<&str> {
        self.headers
            .get_all("cookie")
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(';'))
            .filter_map(|pair| pair.split_once('='))
            .find(|(name, _)| name.trim() == COOKIE)
            .map(|(_, value)| value.trim())
    }

    /// GET and HEAD change nothing; everything else does.
    pub fn changes_state(&self) -> bool {
        !matches!(self.method, Method::GET | Method::HEAD | Method::OPTIONS)
    }

    /// This server's origin as the client addressed it.
    fn own_origin(&self) -> Option<String> {
        let host = self.header("host")?;
        let scheme = if self.is_https() { "https" } else { "http" };
        Some(format!("{scheme}://{host}"))
    }

    /// Refuse a request that says it comes from another origin: an `Origin`
    /// that is not ours, or `Sec-Fetch-Site` other than `same-origin` (or
    /// `none`, a user's own navigation, when `allow_none`). Returns whether
    /// either header vouched for the same origin.
    fn origin_check(&self, allow_none: bool) -> Result<bool, ApiError> {
        let mut vouched = false;
        if let Some(origin) = self.header("origin") {
            if Some(origin.to_ascii_lowercase())
                != self.own_origin().map(|o| o.to_ascii_lowercase())
            {
                return Err(ApiError::csrf_failed(format!(
                    "the request comes from another origin ({origin:?})"
                )));
            }
            vouched = true;
        }
        if let Some(site) = self.header("sec-fetch-site") {
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
}

/// A valid session, as found in the store.
#[derive(Debug, Clone)]
pub struct Session {
    id: String,
    pub row: UiSessionRow,
    pub role: Role,
}

impl Session {
    /// What the page sends back as `X-CSRF-Token`.
    pub fn csrf_token(&self) -> String {
        csrf_token(&self.id)
    }
}

/// The CSRF token of a session id: derived, never stored.
fn csrf_token(session_id: &str) -> String {
    let mut h = Sha256::new();
    h.update(b"leasehold-ui-csrf\0");
    h.update(session_id.as_bytes());
    hex::encode(h.finalize())
}

fn id_sha256(session_id: &str) -> String {
    hex::encode(Sha256::digest(session_id.as_bytes()))
}

fn store_error(e: StoreError) -> ApiError {
    ApiError::store(e)
}

fn signed_out() -> ApiError {
    ApiError::unauthorized(
        "the session has ended (signed out, idle too long or too old); sign in again",
    )
}

/// The session the cookie names, if it is still valid (not touched).
pub async fn session_of(state: &AppState, meta: &RequestMeta) -> Result<Session, ApiError> {
    let Some(id) = meta.session_cookie() else {
        return Err(ApiError::unauthorized(
            "sign in at /ui/login, or send 'Authorization: Bearer <token>'",
        ));
    };
    if id.len() != 64 || !id.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(signed_out());
    }
    let row = state
        .store
        .ui_session(&id_sha256(id))
        .await
        .map_err(store_error)?
        .ok_or_else(signed_out)?;
    let now = state.clock.now();
    if now >= row.expires_at || now >= row.last_seen_at.saturating_add(state.ui.idle_timeout) {
        return Err(signed_out());
    }
    let role = Role::parse(&row.role).ok_or_else(signed_out)?;
    Ok(Session {
        id: id.to_string(),
        row,
        role,
    })
}

/// Record the session's use, if the last record is older than
/// [`UiAuth::touch_every`]. Call only once the request is allowed.
pub async fn touch(state: &AppState, session: &mut Session) -> Result<(), ApiError> {
    let now = state.clock.now();
    let every = leasehold_common::time::duration_millis(state.ui.touch_every());
    if now.millis_since(session.row.last_seen_at) >= every {
        state
            .store
            .ui_session_write(UiSessionOp::Touch {
                id_sha256: session.row.id_sha256.clone(),
                at: now,
            })
            .await
            .map_err(store_error)?;
        session.row.last_seen_at = now;
    }
    Ok(())
}

/// The CSRF check of a state change authenticated by the cookie.
pub fn check_csrf(meta: &RequestMeta, session: &Session) -> Result<(), ApiError> {
    let Some(sent) = meta.header("x-csrf-token") else {
        return Err(ApiError::csrf_failed(
            "send the session's csrf_token (GET /ui/session) as X-CSRF-Token",
        ));
    };
    if !crate::keys::key_matches(&session.csrf_token(), sent) {
        return Err(ApiError::csrf_failed(
            "X-CSRF-Token does not match the session",
        ));
    }
    if !meta.origin_check(false)? {
        return Err(ApiError::csrf_failed(
            "a change made with the session cookie needs a same-origin Origin header \
             (or Sec-Fetch-Site: same-origin)",
        ));
    }
    Ok(())
}

/// When the session ends unless used again.
fn session_ends(state: &AppState, row: &UiSessionRow) -> Timestamp {
    row.expires_at
        .min(row.last_seen_at.saturating_add(state.ui.idle_timeout))
}

fn cookie_header(meta: &RequestMeta, value: &str, max_age_s: u64) -> HeaderValue {
    let secure = if meta.is_https() { "; Secure" } else { "" };
    let text =
        format!("{COOKIE}={value}; Path=/; HttpOnly; SameSite=Strict; Max-Age={max_age_s}{secure}");
    HeaderValue::from_str(&text).unwrap_or_else(|_| HeaderValue::from_static(""))
}

fn no_store(mut resp: Response) -> Response {
    resp.headers_mut()
        .insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    resp
}

/// The sign-in routes and the `/` redirect.
pub fn routes(state: &State) -> BoxedFilter<(Response,)> {
    let with_state = {
        let state = state.clone();
        warp::any().map(move || state.clone())
    };
    let login = warp::path!("ui" / "login")
        .and(warp::post())
        .and(super::filters::json_body())
        .and(request_meta())
        .and(with_state.clone())
        .then(|body: Bytes, meta: RequestMeta, s: State| async move {
            no_store(reply(login(&s, &meta, body).await))
        });
    let session = warp::path!("ui" / "session")
        .and(warp::get())
        .and(request_meta())
        .and(with_state.clone())
        .then(|meta: RequestMeta, s: State| async move {
            no_store(reply(current_session(&s, &meta).await))
        });
    let logout = warp::path!("ui" / "logout")
        .and(warp::post())
        .and(request_meta())
        .and(with_state)
        .then(
            |meta: RequestMeta, s: State| async move { no_store(reply(logout(&s, &meta).await)) },
        );
    let root = warp::path::end().and(warp::get()).map(|| {
        let mut resp = StatusCode::SEE_OTHER.into_response();
        resp.headers_mut()
            .insert(LOCATION, HeaderValue::from_static("/ui/"));
        resp
    });
    login
        .or(session)
        .unify()
        .or(logout)
        .unify()
        .or(root)
        .unify()
        .boxed()
}

fn reply(r: Result<Response, ApiError>) -> Response {
    r.unwrap_or_else(ApiError::into_response)
}

/// How the token came: a plain form post (answered with a redirect) or JSON.
enum LoginForm {
    Form,
    Json,
}

fn login_token(meta: &RequestMeta, body: &Bytes) -> Result<(String, LoginForm), ApiError> {
    let content_type = meta.header("content-type").map(|c| {
        c.split(';')
            .next()
            .unwrap_or("")
            .trim()
            .to_ascii_lowercase()
    });
    let (token, form) = match content_type.as_deref() {
        Some("application/x-www-form-urlencoded") => {
            let text = std::str::from_utf8(body)
                .map_err(|_| ApiError::invalid("the form is not valid UTF-8"))?;
            let token = form_field(text, "token")
                .ok_or_else(|| ApiError::invalid("the form has no valid 'token' field"))?;
            (token, LoginForm::Form)
        }
        Some("application/json") | None => {
            if body.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'{') {
                return Err(ApiError::invalid(
                    "send {\"token\": \"...\"} as JSON, or token=... as a form",
                ));
            }
            let req: LoginRequest = serde_json::from_slice(body).map_err(|e| {
                ApiError::invalid(format!("request body is not a valid login: {e}"))
            })?;
            (req.token, LoginForm::Json)
        }
        Some(other) => {
            return Err(ApiError::new(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                leasehold_common::api::code::UNSUPPORTED_MEDIA_TYPE,
                format!(
                    "send the token as application/json or application/x-www-form-urlencoded, \
                     not {other}"
                ),
            ));
        }
    };
    if token.is_empty() || token.chars().count() > MAX_TOKEN_LEN {
        return Err(ApiError::invalid(format!(
            "token must be 1 to {MAX_TOKEN_LEN} characters"
        )));
    }
    Ok((token, form))
}

/// The value of `name` in an `application/x-www-form-urlencoded` body.
fn form_field(body: &str, name: &str) -> Option<String> {
    body.split('&')
        .filter_map(|pair| {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            Some((percent_decode(k)?, v))
        })
        .find(|(k, _)| k == name)
        .and_then(|(_, v)| percent_decode(v))
}

/// `+` is a space, `%XX` a byte; the result must be UTF-8.
fn percent_decode(s: &str) -> Option<String> {
    let mut out = Vec::with_capacity(s.len());
    let mut bytes = s.bytes();
    while let Some(b) = bytes.next() {
        match b {
            b'+' => out.push(b' '),
            b'%' => {
                let hi = (bytes.next()? as char).to_digit(16)?;
                let lo = (bytes.next()? as char).to_digit(16)?;
                out.push((hi * 16 + lo) as u8);
            }
            b => out.push(b),
        }
    }
    String::from_utf8(out).ok()
}

async fn login(state: &AppState, meta: &RequestMeta, body: Bytes) -> Result<Response, ApiError> {
    let client = meta.client_ip();
    if let Some(wait) = state.ui.limiter.blocked(client, Instant::now()) {
        return Err(ApiError::rate_limited(
            format!(
                "too many failed sign-ins from this address; try again in {} s",
                wait.as_secs().max(1)
            ),
            wait.as_secs().max(1),
        ));
    }
    // Login CSRF: a page elsewhere must not sign a browser in.
    meta.origin_check(true)?;
    let (token, form) = login_token(meta, &body)?;
    let role = if state.admin_token.matches(&token) {
        Role::Admin
    } else if state.ui.viewer_token.matches(&token) {
        Role::Viewer
    } else {
        state.ui.limiter.failed(client, Instant::now());
        return Err(ApiError::unauthorized(
            "that is neither the admin token nor the viewer token",
        ));
    };
    let id = hex::encode(rand::random::<[u8; 32]>());
    let now = state.clock.now();
    state
        .store
        .ui_session_write(UiSessionOp::Create(UiSessionRow {
            id_sha256: id_sha256(&id),
            role: role.as_str().to_string(),
            created_at: now,
            last_seen_at: now,
            expires_at: now.saturating_add(state.ui.lifetime),
        }))
        .await
        .map_err(store_error)?;
    let mut resp = match form {
        LoginForm::Json => StatusCode::NO_CONTENT.into_response(),
        LoginForm::Form => {
            let mut resp = StatusCode::SEE_OTHER.into_response();
            resp.headers_mut()
                .insert(LOCATION, HeaderValue::from_static("/ui/"));
            resp
        }
    };
    resp.headers_mut().insert(
        SET_COOKIE,
        cookie_header(meta, &id, state.ui.lifetime.as_secs()),
    );
    Ok(resp)
}

async fn current_session(state: &AppState, meta: &RequestMeta) -> Result<Response, ApiError> {
    let mut session = session_of(state, meta).await?;
    touch(state, &mut session).await?;
    let body = UiSession {
        role: session.role.as_str().to_string(),
        csrf_token: session.csrf_token(),
        expires_at: session_ends(state, &session.row),
    };
    Ok(warp::reply::json(&body).into_response())
}

async fn logout(state: &AppState, meta: &RequestMeta) -> Result<Response, ApiError> {
    match session_of(state, meta).await {
        Ok(session) => {
            check_csrf(meta, &session)?;
            state
                .store
                .ui_session_write(UiSessionOp::Delete {
                    id_sha256: session.row.id_sha256.clone(),
                })
                .await
                .map_err(store_error)?;
        }
        // Signed out already (or never signed in): nothing to delete.
        Err(e) if e.status == StatusCode::UNAUTHORIZED => {}
        Err(e) => return Err(e),
    }
    let mut resp = StatusCode::NO_CONTENT.into_response();
    resp.headers_mut()
        .insert(SET_COOKIE, cookie_header(meta, "", 0));
    Ok(resp)
}

/// Failed sign-ins per client address, in a sliding window.
#[derive(Default)]
struct LoginLimiter {
    failures: Mutex<HashMap<IpAddr, VecDeque<Instant>>>,
}

impl LoginLimiter {
    /// How long `client` must wait, if it has failed too often.
    fn blocked(&self, client: IpAddr, now: Instant) -> Option<Duration> {
        let mut map = self.failures.lock().unwrap_or_else(|p| p.into_inner());
        let times = map.get_mut(&client)?;
        forget_old(times, now);
        if times.is_empty() {
            map.remove(&client);
            return None;
        }
        if times.len() < MAX_FAILURES {
            return None;
        }
        let oldest = *times.front()?;
        let wait = FAILURE_WINDOW.saturating_sub(now.duration_since(oldest));
        // Whole seconds, rounded up.
        Some(Duration::from_secs(
            wait.as_millis().div_ceil(1000).max(1) as u64
        ))
    }

    fn failed(&self, client: IpAddr, now: Instant) {
        let mut map = self.failures.lock().unwrap_or_else(|p| p.into_inner());
        if map.len() >= MAX_TRACKED && !map.contains_key(&client) {
            map.retain(|_, times| {
                forget_old(times, now);
                !times.is_empty()
            });
            if map.len() >= MAX_TRACKED
                && let Some(stalest) = map
                    .iter()
                    .min_by_key(|(_, t)| t.back().copied())
                    .map(|(ip, _)| *ip)
            {
                map.remove(&stalest);
            }
        }
        let times = map.entry(client).or_default();
        forget_old(times, now);
        times.push_back(now);
        while times.len() > MAX_FAILURES {
            times.pop_front();
        }
    }
}

fn forget_old(times: &mut VecDeque<Instant>, now: Instant) {
    while times
        .front()
        .is_some_and(|t| now.duration_since(*t) >= FAILURE_WINDOW)
    {
        times.pop_front();
    }
}

/// Delete sessions that have ended (run by the reaper).
pub async fn expire_sessions(state: &AppState) -> Result<usize, StoreError> {
    let now = state.clock.now();
    state
        .store
        .ui_session_write(UiSessionOp::DeleteExpired {
            now,
            idle_cutoff: now.saturating_sub(state.ui.idle_timeout),
        })
        .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_limiter_blocks_after_ten_failures_for_the_rest_of_the_minute() {
        let l = LoginLimiter::default();
        let ip: IpAddr = "192.0.2.1".parse().unwrap();
        let other: IpAddr = "192.0.2.2".parse().unwrap();
        let t0 = Instant::now();
        for i in 0..MAX_FAILURES {
            assert_eq!(l.blocked(ip, t0), None, "after {i}");
            l.failed(ip, t0 + Duration::from_secs(i as u64));
        }
        let now = t0 + Duration::from_secs(20);
        assert_eq!(l.blocked(ip, now), Some(Duration::from_secs(40)));
        assert_eq!(l.blocked(other, now), None, "per address");
        assert_eq!(l.blocked(ip, t0 + Duration::from_secs(60)), None);
    }

    #[test]
    fn form_fields_decode() {
        assert_eq!(
            form_field("token=ab%2Bc+d&x=1", "token").as_deref(),
            Some("ab+c d")
        );
        assert_eq!(form_field("x=1", "token"), None);
        assert_eq!(form_field("token=%zz", "token"), None);
        assert_eq!(form_field("token=%e2%82%ac", "token").as_deref(), Some("€"));
        assert_eq!(form_field("token=%ff", "token"), None);
        assert_eq!(form_field("token", "token").as_deref(), Some(""));
    }

    #[test]
    fn csrf_tokens_are_derived_per_session() {
        assert_ne!(csrf_token("a"), csrf_token("b"));
        assert_eq!(csrf_token("a"), csrf_token("a"));
        assert_ne!(csrf_token("a"), id_sha256("a"));
    }
}
