//! HTTP routes (warp filters). [`filters`] builds each route (path + method +
//! what it reads) and hands it to a function of [`handlers`]; [`auth`] guards
//! the admin routes. Every error, including warp's own rejections, leaves as
//! the JSON error shape of [`error`].

mod auth;
mod error;
mod filters;
pub mod handlers;
mod sse;
#[cfg(test)]
mod tests;
mod ui_static;

use std::sync::Arc;

use warp::Filter;
use warp::filters::BoxedFilter;
use warp::reply::{Reply, Response};

pub use error::ApiError;

use crate::AppState;

/// Largest request body accepted (16 KiB).
pub const MAX_BODY: usize = 16 * 1024;

type State = Arc<AppState>;

/// The whole API: every route, rejections turned into JSON errors, a 405's
/// `Allow` header, and request metrics.
pub fn routes(state: State) -> BoxedFilter<(Response,)> {
    let api = filters::meta(&state)
        .or(filters::client_seats(&state))
        .unify()
        .or(filters::admin(&state))
        .unify()
        .or(ui_static::routes())
        .unify()
        .recover(error::recover)
        .unify();
    let observe = state.clone();
    warp::path::full()
        .and(api)
        .map(with_allow_header)
        .with(warp::log::custom(move |info| {
            observe
                .metrics
                .observe_request(info.status().as_u16(), info.elapsed());
        }))
        .map(Reply::into_response)
        .boxed()
}

/// A 405 names the methods the path does serve (RFC 9110 §15.5.6).
fn with_allow_header(path: warp::path::FullPath, mut resp: Response) -> Response {
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
