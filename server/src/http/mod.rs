//! HTTP routes (warp filters). Every endpoint is written one way:
//! [`filters`] builds its route (path + method + guard + what it reads) in
//! its group and hands it to one function of [`handlers`]
//! (`handlers/<area>.rs`); the query parameters several endpoints share
//! are read by [`query`]; [`auth`] guards the admin routes with the
//! [`role`] a bearer token or a dashboard sign-in ([`ui_auth`]) holds.
//! Every error, including warp's own rejections, leaves as the JSON error
//! shape of [`error`]. ARCHITECTURE.md's "Adding an endpoint" is the
//! recipe.
//!
//! The modules form layers, each using only those below it: [`error`],
//! [`body`], [`role`], [`peer`] and [`csv`] at the bottom; then [`query`]
//! and [`ui_auth`]; [`auth`]; [`sse`] and [`ui_static`]; [`handlers`];
//! [`filters`]; this module's [`routes`] over them all.

mod auth;
pub mod body;
mod csv;
mod error;
mod filters;
pub mod handlers;
pub mod peer;
mod query;
mod role;
pub mod security_headers;
mod sse;
#[cfg(test)]
mod tests;
pub mod ui_auth;
mod ui_static;
#[cfg(test)]
mod ui_tests;
#[cfg(test)]
mod webhooks_tests;

use std::sync::Arc;

use warp::Filter;
use warp::filters::BoxedFilter;
use warp::reply::{Reply, Response};

pub use error::ApiError;
pub use ui_auth::UiAuth;

use crate::AppState;

/// Largest request body accepted (16 KiB).
pub const MAX_BODY: usize = 16 * 1024;

type State = Arc<AppState>;

/// The whole API: the route groups of [`filters`], rejections turned into
/// JSON errors, a 405's `Allow` header, the dashboard's security headers on
/// `/` and everything under `/ui` ([`security_headers`], by path, so any
/// route mounted there gets them, errors included), and request metrics.
///
/// A new endpoint joins its group in [`filters`], never this chain.
/// `filters::dashboard` stays first so `/ui/login`, `/ui/session` and
/// `/ui/logout` are not shadowed, and `filters::dashboard_page` last, since
/// it serves whatever other name under `/ui/` is one of its files.
pub fn routes(state: State) -> BoxedFilter<(Response,)> {
    let api = filters::dashboard(&state)
        .or(filters::meta(&state))
        .unify()
        .or(filters::client_seats(&state))
        .unify()
        .or(filters::admin(&state))
        .unify()
        .or(filters::dashboard_page())
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
