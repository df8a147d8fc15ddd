//! The dashboard's own endpoints: sign-in (`POST /ui/login`,
//! `GET /ui/session`, `POST /ui/logout`; their answers are never cached),
//! the `/` redirect to the page, and the page's embedded files
//! (`GET /ui/`, `/ui/<file>`, from [`crate::http::ui_static`]). The
//! sign-in, CSRF and limiter machinery they use is [`crate::http::ui_auth`].

use bytes::Bytes;
use leasehold_common::api::{LoginRequest, UiSignIn};
use warp::http::header::{CACHE_CONTROL, LOCATION, SET_COOKIE};
use warp::http::{HeaderValue, StatusCode};
use warp::reply::{Reply, Response};

use crate::AppState;
use crate::http::error::ApiError;
use crate::http::role::Role;
use crate::http::ui_auth::{RequestMeta, check_csrf, origin_check, sign_in_of, token_of, touch};
use crate::http::ui_static;

/// Longest token accepted at sign-in (tokens are 64 hex characters).
const MAX_TOKEN_LEN: usize = 1024;

/// `POST /ui/login`: a sign-in for the admin or viewer token, as a cookie.
pub async fn ui_login(state: &AppState, meta: RequestMeta, body: Bytes) -> Response {
    no_store(reply(login(state, &meta, body).await))
}

/// `GET /ui/session`: the cookie's sign-in, its role and CSRF token (the
/// path keeps the older word).
pub async fn ui_session(state: &AppState, meta: RequestMeta) -> Response {
    no_store(reply(current_sign_in(state, &meta).await))
}

/// `POST /ui/logout`: end the cookie's sign-in (if any) and clear it.
pub async fn ui_logout(state: &AppState, meta: RequestMeta) -> Response {
    no_store(reply(logout(state, &meta).await))
}

/// `GET /`: to the dashboard.
pub fn ui_root() -> Response {
    see_other_ui(StatusCode::SEE_OTHER.into_response())
}

/// `GET /ui` and `GET /ui/` (`full` is the request's path): the page at
/// `/ui/`, whose relative URLs need the slash; `/ui` moves there.
pub fn ui_page(full: &str) -> Response {
    if full.ends_with('/') {
        return ui_static::file("index.html").expect("index.html is embedded");
    }
    let mut resp = Response::default();
    *resp.status_mut() = StatusCode::MOVED_PERMANENTLY;
    resp.headers_mut()
        .insert(LOCATION, HeaderValue::from_static("/ui/"));
    resp
}

/// `GET /ui/<name>`: one of the page's files; `None` for any other name,
/// which the route turns into a rejection (so `/ui/session` and the
/// others still get their turn).
pub fn ui_file(name: &str) -> Option<Response> {
    ui_static::file(name)
}

fn reply(r: Result<Response, ApiError>) -> Response {
    r.unwrap_or_else(ApiError::into_response)
}

fn no_store(mut resp: Response) -> Response {
    resp.headers_mut()
        .insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    resp
}

/// A redirect to the dashboard.
fn see_other_ui(mut resp: Response) -> Response {
    resp.headers_mut()
        .insert(LOCATION, HeaderValue::from_static("/ui/"));
    resp
}

fn cookie_header(meta: &RequestMeta, value: &str, max_age_s: u64) -> HeaderValue {
    let secure = if meta.is_https() { "; Secure" } else { "" };
    let name = meta.cookie_name();
    let text =
        format!("{name}={value}; Path=/; HttpOnly; SameSite=Strict; Max-Age={max_age_s}{secure}");
    HeaderValue::from_str(&text).unwrap_or_else(|_| HeaderValue::from_static(""))
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
            // What warp's `body::form()` does, on the body read with the limit.
            let req: LoginRequest = serde_urlencoded::from_bytes(body)
                .map_err(|_| ApiError::invalid("the form has no valid 'token' field"))?;
            (req.token, LoginForm::Form)
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

async fn login(state: &AppState, meta: &RequestMeta, body: Bytes) -> Result<Response, ApiError> {
    let client = meta.client_ip();
    state.ui.refuse_if_limited(client)?;
    // Login CSRF: a page elsewhere must not sign a browser in.
    origin_check(meta, true)?;
    let (token, form) = login_token(meta, &body)?;
    let Some(role) = Role::of(state, &token) else {
        state.ui.failed(client);
        return Err(ApiError::unauthorized(
            "that is neither the admin token nor the viewer token",
        ));
    };
    let sign_ins = &state.ui.sign_ins;
    // Signing in again replaces this browser's sign-in: the old cookie
    // must not keep working beside the new one.
    if let Some(old) = meta.sign_in_cookie() {
        sign_ins
            .end_id(&state.store, old)
            .await
            .map_err(ApiError::store)?;
    }
    let id = sign_ins
        .create(
            &state.store,
            role.as_str(),
            role.token(state).sign_in_fingerprint(),
            state.clock.now(),
        )
        .await
        .map_err(ApiError::store)?;
    let mut resp = match form {
        LoginForm::Json => StatusCode::NO_CONTENT.into_response(),
        LoginForm::Form => see_other_ui(StatusCode::SEE_OTHER.into_response()),
    };
    resp.headers_mut().insert(
        SET_COOKIE,
        cookie_header(meta, &id, sign_ins.lifetime.as_secs()),
    );
    Ok(resp)
}

async fn current_sign_in(state: &AppState, meta: &RequestMeta) -> Result<Response, ApiError> {
    let mut sign_in = sign_in_of(state, meta).await?;
    if !meta.is_background() {
        touch(state, &mut sign_in).await?;
    }
    let body = UiSignIn {
        role: sign_in.role.as_str().to_string(),
        csrf_token: token_of(&sign_in),
        expires_at: sign_in.ends_at(state),
    };
    Ok(warp::reply::json(&body).into_response())
}

async fn logout(state: &AppState, meta: &RequestMeta) -> Result<Response, ApiError> {
    match sign_in_of(state, meta).await {
        Ok(sign_in) => {
            check_csrf(meta, &sign_in)?;
            state
                .ui
                .sign_ins
                .end(&state.store, &sign_in.row)
                .await
                .map_err(ApiError::store)?;
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
