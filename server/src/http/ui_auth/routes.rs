//! `POST /ui/login`, `GET /ui/session`, `POST /ui/logout`, and the `/`
//! redirect to the dashboard. Their answers are never cached.

use bytes::Bytes;
use leasehold_common::api::{LoginRequest, UiSession};
use warp::Filter;
use warp::filters::BoxedFilter;
use warp::http::header::{CACHE_CONTROL, LOCATION, SET_COOKIE};
use warp::http::{HeaderValue, StatusCode};
use warp::reply::{Reply, Response};

use super::{RequestMeta, csrf, request_meta, session_of, touch};
use crate::AppState;
use crate::http::State;
use crate::http::body;
use crate::http::error::ApiError;
use crate::http::role::Role;

/// Longest token accepted at sign-in (tokens are 64 hex characters).
const MAX_TOKEN_LEN: usize = 1024;

/// The sign-in routes and the `/` redirect.
pub fn routes(state: &State) -> BoxedFilter<(Response,)> {
    let with_state = {
        let state = state.clone();
        warp::any().map(move || state.clone())
    };
    let login = warp::path!("ui" / "login")
        .and(warp::post())
        .and(body::limited())
        .and(request_meta(state.ui.proxies.clone()))
        .and(with_state.clone())
        .then(|body: Bytes, meta: RequestMeta, s: State| async move {
            no_store(reply(login(&s, &meta, body).await))
        });
    let session = warp::path!("ui" / "session")
        .and(warp::get())
        .and(request_meta(state.ui.proxies.clone()))
        .and(with_state.clone())
        .then(|meta: RequestMeta, s: State| async move {
            no_store(reply(current_session(&s, &meta).await))
        });
    let logout = warp::path!("ui" / "logout")
        .and(warp::post())
        .and(request_meta(state.ui.proxies.clone()))
        .and(with_state)
        .then(
            |meta: RequestMeta, s: State| async move { no_store(reply(logout(&s, &meta).await)) },
        );
    let root = warp::path::end()
        .and(warp::get())
        .map(|| see_other_ui(StatusCode::SEE_OTHER.into_response()));
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
    csrf::origin_check(meta, true)?;
    let (token, form) = login_token(meta, &body)?;
    let Some(role) = Role::of(state, &token) else {
        state.ui.failed(client);
        return Err(ApiError::unauthorized(
            "that is neither the admin token nor the viewer token",
        ));
    };
    let sessions = &state.ui.sessions;
    // Signing in again replaces this browser's session: the old cookie
    // must not keep working beside the new one.
    if let Some(old) = meta.session_cookie() {
        sessions
            .end_id(&state.store, old)
            .await
            .map_err(ApiError::store)?;
    }
    let id = sessions
        .create(
            &state.store,
            role.as_str(),
            role.token(state).session_fingerprint(),
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
        cookie_header(meta, &id, sessions.lifetime.as_secs()),
    );
    Ok(resp)
}

async fn current_session(state: &AppState, meta: &RequestMeta) -> Result<Response, ApiError> {
    let mut session = session_of(state, meta).await?;
    if !meta.is_background() {
        touch(state, &mut session).await?;
    }
    let body = UiSession {
        role: session.role.as_str().to_string(),
        csrf_token: csrf::token_of(&session),
        expires_at: session.ends_at(state),
    };
    Ok(warp::reply::json(&body).into_response())
}

async fn logout(state: &AppState, meta: &RequestMeta) -> Result<Response, ApiError> {
    match session_of(state, meta).await {
        Ok(session) => {
            csrf::check_csrf(meta, &session)?;
            state
                .ui
                .sessions
                .end(&state.store, &session.row)
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
