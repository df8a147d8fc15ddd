//! HTTP routes (warp filters). [`filters`] builds each route (path + method +
//! what it reads) and hands it to a function of [`handlers`]; [`auth`] guards
//! the admin routes with the [`role`] a bearer token or a dashboard session
//! ([`ui_auth`]) holds. Every error, including warp's own rejections, leaves
//! as the JSON error shape of [`error`].
//!
//! The modules form layers, each using only those below it: [`error`],
//! [`body`] and [`role`] at the bottom; then [`ui_auth`]; [`auth`];
//! [`handlers`] (with [`sse`]) and [`history`] (with [`csv`]); [`denials`]
//! and [`what_if`] over [`history`]; [`filters`]; [`webhooks`] (the alert
//! and webhook views, routes and handlers in one) over [`auth`] and
//! [`handlers`].

mod auth;
pub mod body;
mod csv;
mod denials;
mod error;
mod filters;
pub mod handlers;
mod history;
pub mod peer;
mod role;
pub mod security_headers;
mod sse;
#[cfg(test)]
mod tests;
pub mod ui_auth;
mod ui_static;
#[cfg(test)]
mod ui_tests;
mod webhooks;
#[cfg(test)]
mod webhooks_tests;
mod what_if;

use std::sync::Arc;

use warp::Filter;
use warp::filters::BoxedFilter;
use warp::reply::{Reply, Response};

pub use error::ApiError;
pub use ui_auth::DEFAULT_AUTH_FAILURES;
pub use ui_auth::UiAuth;

use crate::AppState;

/// Largest request body accepted (16 KiB).
pub const MAX_BODY: usize = 16 * 1024;

type State = Arc<AppState>;

/// The whole API: every route, rejections turned into JSON errors, a 405's
/// `Allow` header, the dashboard's security headers on `/` and everything
/// under `/ui` ([`security_headers`], by path, so any route mounted there
/// gets them, errors included), and request metrics.
///
/// The dashboard's static files mount here like any route group: add their
/// filter (e.g. `ui_static::routes()`, `GET /ui/`, `/ui/app.js`, ...) to the
/// `api` chain with `.or(…).unify()`. Being under `/ui`, their answers
/// (and their 404s) get the Content-Security-Policy, `nosniff` and
/// `no-referrer` headers without doing anything; `ui_auth::routes` must
/// stay first so `/ui/login`, `/ui/session` and `/ui/logout` are not
/// shadowed.
pub fn routes(state: State) -> BoxedFilter<(Response,)> {
    let api = ui_auth::routes(&state)
        .or(filters::meta(&state))
        .unify()
        .or(filters::client_seats(&state))
        .unify()
        .or(filters::admin(&state))
        .unify()
        .or(webhooks::routes(&state))
        .unify()
        .or(ui_static::routes())
        .unify()
        .recover(error::recover)
        .unify();
    let observe = state.clone();
    warp::path::full()
        .and(api)
        .map(|path: warp::path::FullPath, resp| {
            let resp = with_allow_header(&path, resp);
            security_headers::apply(path.as_str(), resp)
        })
        .with(warp::log::custom(move |info| {
            observe
                .metrics
                .observe_request(info.status().as_u16(), info.elapsed());
        }))
        .map(Reply::into_response)
        .boxed()
}

/// A 405 names the methods the path does serve (RFC 9110 §15.5.6).
fn with_allow_header(path: &warp::path::FullPath, mut resp: Response) -> Response {
    if resp.status() == warp::http::StatusCode::METHOD_NOT_ALLOWED
        && let Some(allow) = error::allowed_methods(path.as_str())
    {
        resp.headers_mut().insert(
            warp::http::header::ALLOW,
            warp::http::HeaderValue::from_static(allow),
        );
    }
    resp
}
