//! The routes as warp filters, one function per route, grouped as the API
//! is: [`meta`] (no credentials), [`client_seats`] (a license key, checked by
//! the handler against the license in the path) and [`admin`] (the admin
//! token or a session, checked by [`auth::require`] before the handler runs). Each
//! route is path + method + what it reads from the request, handed to one
//! function of [`handlers`].

use std::collections::HashMap;
use std::convert::Infallible;

use warp::Filter;
use warp::filters::BoxedFilter;
use warp::reply::{Reply, Response};

use super::auth::{self, admin_auth, admin_read};
use super::error::ApiError;
use super::{State, body, denials, handlers, history, what_if};

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
        .or(admin_usage(state))
        .unify()
        .or(admin_what_if(state))
        .unify()
        .or(admin_sessions(state))
        .unify()
        .or(admin_denials(state))
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
        .and(body::limited())
        .and(with_state(state.clone()))
        .then(|license, auth, key, q, body, s: State| async move {
            reply(handlers::checkout(&s, license, auth, key, q, body).await)
        })
        .boxed()
}

fn heartbeat(state: &State) -> Route {
    // The body is read only for a report of idleness (`idle_s`); any other
    // body is ignored, as the v1 contract says.
    warp::path!("v1" / "licenses" / String / "seats" / String / "heartbeat")
        .and(warp::post())
        .and(auth::authorization())
        .and(body::limited())
        .and(with_state(state.clone()))
        .then(|license, seat, auth, body, s: State| async move {
            reply(handlers::heartbeat(&s, license, seat, auth, body).await)
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
        .and(body::limited())
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
        .and(super::ui_auth::request_meta(state.ui.proxies.clone()))
        .and(with_state(state.clone()))
        .then(|last, q, meta, s: State| async move {
            reply(handlers::admin_events_stream(s, last, q, meta).await)
        })
        .boxed()
}

fn admin_usage(state: &State) -> Route {
    warp::path!("v1" / "admin" / "usage")
        .and(warp::get())
        .and(query())
        .and(admin_read(state.clone()))
        .and(with_state(state.clone()))
        .then(|q, s: State| async move { reply(history::usage(&s, q).await) })
        .boxed()
}

fn admin_what_if(state: &State) -> Route {
    warp::path!("v1" / "admin" / "usage" / "what-if")
        .and(warp::get())
        .and(query())
        .and(admin_read(state.clone()))
        .and(with_state(state.clone()))
        .then(|q, s: State| async move { reply(what_if::what_if(&s, q).await) })
        .boxed()
}

fn admin_sessions(state: &State) -> Route {
    // `Accept: text/csv` asks for the whole range as CSV; an Accept header
    // that is not text counts as absent.
    let accept = warp::header::optional::<String>("accept")
        .or_else(|_| async { Ok::<_, Infallible>((None,)) });
    warp::path!("v1" / "admin" / "sessions")
        .and(warp::get())
        .and(accept)
        .and(query())
        .and(admin_read(state.clone()))
        .and(with_state(state.clone()))
        .then(|accept, q, s: State| async move { reply(history::sessions(s, accept, q).await) })
        .boxed()
}

fn admin_denials(state: &State) -> Route {
    // As for sessions: `Accept: text/csv` asks for CSV.
    let accept = warp::header::optional::<String>("accept")
        .or_else(|_| async { Ok::<_, Infallible>((None,)) });
    warp::path!("v1" / "admin" / "denials")
        .and(warp::get())
        .and(accept)
        .and(query())
        .and(admin_read(state.clone()))
        .and(with_state(state.clone()))
        .then(|accept, q, s: State| async move { reply(denials::denials(s, accept, q).await) })
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

fn reply(r: handlers::Result<Response>) -> Response {
    r.unwrap_or_else(ApiError::into_response)
}
