//! The routes as warp filters, one function per route, grouped as the API
//! is: [`meta`] (no credentials), [`client_seats`] (a license key, checked by
//! the handler against the license in the path) and [`admin`] (the admin
//! token or a session, checked by [`auth::require`] before the handler runs). Each
//! route is path + method + what it reads from the request, handed to one
//! function of [`handlers`].

use std::collections::HashMap;
use std::convert::Infallible;

use bytes::{Buf, Bytes, BytesMut};
use futures_util::StreamExt;
use warp::filters::BoxedFilter;
use warp::reply::{Reply, Response};
use warp::{Filter, Rejection};

use super::auth::{self, admin_auth, admin_read};
use super::error::ApiError;
use super::{MAX_BODY, State, handlers};

/// A route, or a group of routes, that answers with a response.
pub type Route = BoxedFilter<(Response,)>;

/// `/healthz`, `/.well-known/jwks.json`, `/metrics`.
pub fn meta(state: &State) -> Route {
    healthz(state)
        .or(jwks(state))
        .unify()
        .or(metrics(state))
        .unify()
        .boxed()
}

/// Checkout, heartbeat and release of a license's seats.
pub fn client_seats(state: &State) -> Route {
    checkout(state)
        .or(heartbeat(state))
        .unify()
        .or(release(state))
        .unify()
        .boxed()
}

/// `/v1/admin/…`: reads need the viewer role (or admin), changes the admin
/// role, by bearer token or dashboard session ([`auth::require`]).
pub fn admin(state: &State) -> Route {
    admin_licenses(state)
        .or(admin_seats(state))
        .unify()
        .or(admin_revoke(state))
        .unify()
        .or(admin_events(state))
        .unify()
        .or(admin_events_stream(state))
        .unify()
        .boxed()
}

fn healthz(state: &State) -> Route {
    warp::path!("healthz")
        .and(warp::get())
        .and(with_state(state.clone()))
        .then(|s: State| async move { handlers::healthz(&s).await })
        .boxed()
}

fn jwks(state: &State) -> Route {
    // The keys never change while the server runs: serialize them once.
    let body = serde_json::to_string(&state.signer.jwks()).expect("jwks serializes");
    warp::path!(".well-known" / "jwks.json")
        .and(warp::get())
        .map(move || {
            warp::reply::with_header(body.clone(), "content-type", "application/json")
                .into_response()
        })
        .boxed()
}

fn metrics(state: &State) -> Route {
    warp::path!("metrics")
        .and(warp::get())
        .and(with_state(state.clone()))
        .then(|s: State| async move { handlers::metrics(&s).await })
        .boxed()
}

fn checkout(state: &State) -> Route {
    warp::path!("v1" / "licenses" / String / "seats")
        .and(warp::post())
        .and(auth::authorization())
        .and(warp::header::optional::<String>("idempotency-key"))
        .and(query())
        .and(json_body())
        .and(with_state(state.clone()))
        .then(|license, auth, key, q, body, s: State| async move {
            reply(handlers::checkout(&s, license, auth, key, q, body).await)
        })
        .boxed()
}

fn heartbeat(state: &State) -> Route {
    // No body filter: a heartbeat needs none and ignores any.
    warp::path!("v1" / "licenses" / String / "seats" / String / "heartbeat")
        .and(warp::post())
        .and(auth::authorization())
        .and(with_state(state.clone()))
        .then(|license, seat, auth, s: State| async move {
            reply(handlers::heartbeat(&s, license, seat, auth).await)
        })
        .boxed()
}

fn release(state: &State) -> Route {
    warp::path!("v1" / "licenses" / String / "seats" / String)
        .and(warp::delete())
        .and(auth::authorization())
        .and(with_state(state.clone()))
        .then(|license, seat, auth, s: State| async move {
            reply(handlers::release(&s, license, seat, auth).await)
        })
        .boxed()
}

fn admin_licenses(state: &State) -> Route {
    warp::path!("v1" / "admin" / "licenses")
        .and(warp::get())
        .and(admin_read(state.clone()))
        .and(with_state(state.clone()))
        .then(|s: State| async move { reply(handlers::admin_licenses(&s).await) })
        .boxed()
}

fn admin_seats(state: &State) -> Route {
    warp::path!("v1" / "admin" / "seats")
        .and(warp::get())
        .and(query())
        .and(admin_read(state.clone()))
        .and(with_state(state.clone()))
        .then(|q, s: State| async move { reply(handlers::admin_seats(&s, q).await) })
        .boxed()
}

fn admin_revoke(state: &State) -> Route {
    // The body is read (and an oversized one refused with 413) before the
    // token is checked, as the contract says.
    warp::path!("v1" / "admin" / "seats" / String)
        .and(warp::delete())
        .and(json_body())
        .and(admin_auth(state.clone()))
        .and(with_state(state.clone()))
        .then(|seat, body, s: State| async move {
            reply(handlers::admin_revoke(&s, seat, body).await)
        })
        .boxed()
}

fn admin_events(state: &State) -> Route {
    warp::path!("v1" / "admin" / "events")
        .and(warp::get())
        .and(query())
        .and(admin_read(state.clone()))
        .and(with_state(state.clone()))
        .then(|q, s: State| async move { reply(handlers::admin_events(&s, q).await) })
        .boxed()
}

fn admin_events_stream(state: &State) -> Route {
    warp::path!("v1" / "admin" / "events" / "stream")
        .and(warp::get())
        .and(warp::header::optional::<String>("last-event-id"))
        .and(query())
        .and(admin_read(state.clone()))
        .and(with_state(state.clone()))
        .then(|last, q, s: State| async move {
            reply(handlers::admin_events_stream(s, last, q).await)
        })
        .boxed()
}

fn with_state(state: State) -> impl Filter<Extract = (State,), Error = Infallible> + Clone {
    warp::any().map(move || state.clone())
}

/// The query string as a map; one that does not parse counts as empty.
fn query() -> impl Filter<Extract = (HashMap<String, String>,), Error = Infallible> + Clone {
    warp::query::<HashMap<String, String>>()
        .or_else(|_| async { Ok::<_, Infallible>((HashMap::new(),)) })
}

/// The raw body, at most [`MAX_BODY`] bytes, whether or not the client sent
/// a Content-Length (chunked bodies are counted as they arrive). Handlers
/// parse it, so an empty body can get its own message.
pub(super) fn json_body() -> impl Filter<Extract = (Bytes,), Error = Rejection> + Clone {
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

fn reply(r: handlers::Result<Response>) -> Response {
    r.unwrap_or_else(ApiError::into_response)
}
