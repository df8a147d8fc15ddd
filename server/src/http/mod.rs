//! HTTP routes (warp filters). One function builds the whole API; each route
//! is a path + method + the headers it needs, handed to a handler in
//! [`handlers`]. Every error, including warp's own rejections, leaves as the
//! JSON error shape of [`error`].

mod error;
pub mod handlers;
mod sse;

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::Arc;

use bytes::{Buf, Bytes, BytesMut};
use futures_util::StreamExt;
use warp::filters::BoxedFilter;
use warp::reply::{Reply, Response};
use warp::{Filter, Rejection};

pub use error::ApiError;

use crate::AppState;

/// Largest request body accepted (16 KiB).
pub const MAX_BODY: usize = 16 * 1024;

type State = Arc<AppState>;

fn with_state(state: State) -> impl Filter<Extract = (State,), Error = Infallible> + Clone {
    warp::any().map(move || state.clone())
}

fn authorization() -> impl Filter<Extract = (Option<String>,), Error = Infallible> + Clone {
    warp::header::optional::<String>("authorization")
        .or_else(|_| async { Ok::<_, Infallible>((None,)) })
}

/// The body, at most [`MAX_BODY`] bytes, whether or not the client sent a
/// Content-Length (chunked bodies are counted as they arrive).
fn limited_body() -> impl Filter<Extract = (Bytes,), Error = Rejection> + Clone {
    warp::header::optional::<u64>("content-length")
        .and(warp::body::stream())
        .and_then(collect_limited)
}

async fn collect_limited<S, B>(length: Option<u64>, stream: S) -> Result<Bytes, Rejection>
where
    S: futures_util::Stream<Item = Result<B, warp::Error>>,
    B: Buf,
{
    if length.is_some_and(|l| l > MAX_BODY as u64) {
        return Err(warp::reject::custom(ApiError::too_large(MAX_BODY)));
    }
    let mut stream = std::pin::pin!(stream);
    let mut body = BytesMut::new();
    while let Some(chunk) = stream.next().await {
        let mut chunk = chunk.map_err(|e| {
            warp::reject::custom(ApiError::invalid(format!("could not read the body: {e}")))
        })?;
        if body.len() + chunk.remaining() > MAX_BODY {
            return Err(warp::reject::custom(ApiError::too_large(MAX_BODY)));
        }
        while chunk.has_remaining() {
            let part = chunk.chunk();
            let n = part.len();
            body.extend_from_slice(part);
            chunk.advance(n);
        }
    }
    Ok(body.freeze())
}

fn query() -> impl Filter<Extract = (HashMap<String, String>,), Error = Infallible> + Clone {
    warp::query::<HashMap<String, String>>()
        .or_else(|_| async { Ok::<_, Infallible>((HashMap::new(),)) })
}

fn reply(r: handlers::Result<Response>) -> Response {
    r.unwrap_or_else(ApiError::into_response)
}

/// The whole API.
pub fn routes(state: State) -> BoxedFilter<(Response,)> {
    let healthz = warp::path!("healthz")
        .and(warp::get())
        .map(|| {
            warp::reply::json(&leasehold_common::api::Health {
                status: "ok".into(),
            })
            .into_response()
        })
        .boxed();

    let jwks = {
        let body = serde_json::to_string(&state.signer.jwks()).expect("jwks serializes");
        warp::path!(".well-known" / "jwks.json")
            .and(warp::get())
            .map(move || {
                warp::reply::with_header(body.clone(), "content-type", "application/json")
                    .into_response()
            })
            .boxed()
    };

    let metrics = warp::path!("metrics")
        .and(warp::get())
        .and(with_state(state.clone()))
        .then(|s: State| async move { handlers::metrics(&s).await })
        .boxed();

    let checkout = warp::path!("v1" / "licenses" / String / "seats")
        .and(warp::post())
        .and(authorization())
        .and(warp::header::optional::<String>("idempotency-key"))
        .and(query())
        .and(limited_body())
        .and(with_state(state.clone()))
        .then(|license, auth, key, q, body, s: State| async move {
            reply(handlers::checkout(&s, license, auth, key, q, body).await)
        })
        .boxed();

    // No body filter: a heartbeat needs none and ignores any.
    let heartbeat = warp::path!("v1" / "licenses" / String / "seats" / String / "heartbeat")
        .and(warp::post())
        .and(authorization())
        .and(with_state(state.clone()))
        .then(|license, seat, auth, s: State| async move {
            reply(handlers::heartbeat(&s, license, seat, auth).await)
        })
        .boxed();

    let release = warp::path!("v1" / "licenses" / String / "seats" / String)
        .and(warp::delete())
        .and(authorization())
        .and(with_state(state.clone()))
        .then(|license, seat, auth, s: State| async move {
            reply(handlers::release(&s, license, seat, auth).await)
        })
        .boxed();

    let admin_licenses = warp::path!("v1" / "admin" / "licenses")
        .and(warp::get())
        .and(authorization())
        .and(with_state(state.clone()))
        .then(|auth, s: State| async move { reply(handlers::admin_licenses(&s, auth).await) })
        .boxed();

    let admin_seats = warp::path!("v1" / "admin" / "seats")
        .and(warp::get())
        .and(authorization())
        .and(query())
        .and(with_state(state.clone()))
        .then(|auth, q, s: State| async move { reply(handlers::admin_seats(&s, auth, q).await) })
        .boxed();

    let admin_revoke = warp::path!("v1" / "admin" / "seats" / String)
        .and(warp::delete())
        .and(authorization())
        .and(limited_body())
        .and(with_state(state.clone()))
        .then(|seat, auth, body, s: State| async move {
            reply(handlers::admin_revoke(&s, seat, auth, body).await)
        })
        .boxed();

    let admin_events = warp::path!("v1" / "admin" / "events")
        .and(warp::get())
        .and(authorization())
        .and(query())
        .and(with_state(state.clone()))
        .then(|auth, q, s: State| async move { reply(handlers::admin_events(&s, auth, q).await) })
        .boxed();

    let admin_stream = warp::path!("v1" / "admin" / "events" / "stream")
        .and(warp::get())
        .and(authorization())
        .and(warp::header::optional::<String>("last-event-id"))
        .and(query())
        .and(with_state(state.clone()))
        .then(|auth, last, q, s: State| async move {
            reply(handlers::admin_events_stream(s, auth, last, q).await)
        })
        .boxed();

    let observe = state.clone();
    let api = healthz
        .or(jwks)
        .unify()
        .or(metrics)
        .unify()
        .or(checkout)
        .unify()
        .or(heartbeat)
        .unify()
        .or(release)
        .unify()
        .or(admin_licenses)
        .unify()
        .or(admin_seats)
        .unify()
        .or(admin_revoke)
        .unify()
        .or(admin_events)
        .unify()
        .or(admin_stream)
        .unify()
        .recover(error::recover)
        .unify();
    // A 405 names the methods the path does serve (RFC 9110 §15.5.6).
    warp::path::full()
        .and(api)
        .map(|path: warp::path::FullPath, mut resp: Response| {
            if resp.status() == warp::http::StatusCode::METHOD_NOT_ALLOWED
                && let Some(allow) = error::allowed_methods(path.as_str())
            {
                resp.headers_mut().insert(
                    warp::http::header::ALLOW,
                    warp::http::HeaderValue::from_static(allow),
                );
            }
            resp
        })
        .with(warp::log::custom(move |info| {
            observe
                .metrics
                .observe_request(info.status().as_u16(), info.elapsed());
        }))
        .map(Reply::into_response)
        .boxed()
}
