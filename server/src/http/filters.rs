//! Every route, as warp filters: one function per route, each path +
//! method + guard + what it reads from the request, handed to one function
//! of [`handlers`] (named as the route). Grouped as the API is:
//!
//! - [`dashboard`]: the dashboard's sign-in and the `/` redirect (a
//!   sign-in cookie, checked by the handler);
//! - [`meta`]: no credentials;
//! - [`client_seats`]: a license key, checked by the handler against the
//!   license in the path;
//! - [`admin`]: `/v1/admin/…`, the viewer role to read and the admin role
//!   to change, checked by [`auth::require`] (`admin_read`, `admin_auth`)
//!   before the handler runs;
//! - [`dashboard_page`]: the page's embedded files (none needs a
//!   credential; an unknown name falls through to the other routes).
//!
//! [`super::routes`] mounts the groups in that order. ARCHITECTURE.md's
//! "Adding an endpoint" is the recipe.

use std::convert::Infallible;

use warp::Filter;
use warp::filters::BoxedFilter;
use warp::reply::Response;

use super::auth::{self, admin_auth, admin_read};
use super::error::ApiError;
use super::query::Query;
use super::ui_auth::{RequestMeta, request_meta};
use super::{State, body, handlers};

/// A route, or a group of routes, that answers with a response.
pub type Route = BoxedFilter<(Response,)>;

/// `POST /ui/login`, `GET /ui/session`, `POST /ui/logout`, `GET /`.
pub fn dashboard(state: &State) -> Route {
    ui_login(state)
        .or(ui_session(state))
        .unify()
        .or(ui_logout(state))
        .unify()
        .or(ui_root())
        .unify()
        .boxed()
}

/// `/healthz`, `/.well-known/jwks.json`, `/metrics`.
pub fn meta(state: &State) -> Route {
    healthz(state)
        .or(jwks(state))
        .unify()
        .or(metrics(state))
        .unify()
        .boxed()
}

/// Checkout, heartbeat and release of a license's seats, and the
/// license's entitlements.
pub fn client_seats(state: &State) -> Route {
    checkout(state)
        .or(heartbeat(state))
        .unify()
        .or(release(state))
        .unify()
        .or(license_entitlements(state))
        .unify()
        .boxed()
}

fn license_entitlements(state: &State) -> Route {
    warp::path!("v1" / "licenses" / String / "entitlements")
        .and(warp::get())
        .and(auth::authorization())
        .and(with_state(state.clone()))
        .then(|license, auth, s: State| async move {
            reply(handlers::license_entitlements(&s, license, auth).await)
        })
        .boxed()
}

/// `/v1/admin/…`: reads need the viewer role (or admin), changes the admin
/// role, by bearer token or dashboard sign-in ([`auth::require`]).
pub fn admin(state: &State) -> Route {
    admin_licenses(state)
        .or(admin_entitlements(state))
        .unify()
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
        .or(admin_usage_attestation(state))
        .unify()
        .or(admin_sessions(state))
        .unify()
        .or(admin_denials(state))
        .unify()
        .or(admin_webhooks(state))
        .unify()
        .or(admin_deliveries(state))
        .unify()
        .or(admin_webhook_test(state))
        .unify()
        .or(admin_alerts(state))
        .unify()
        .boxed()
}

/// `GET /ui`, `GET /ui/`, `GET /ui/<file>`: the dashboard's page.
pub fn dashboard_page() -> Route {
    ui_page().or(ui_file()).unify().boxed()
}

fn ui_login(state: &State) -> Route {
    warp::path!("ui" / "login")
        .and(warp::post())
        .and(body::limited())
        .and(request_meta(state.ui.proxies.clone()))
        .and(with_state(state.clone()))
        .then(|body, meta: RequestMeta, s: State| async move {
            handlers::ui_login(&s, meta, body).await
        })
        .boxed()
}

fn ui_session(state: &State) -> Route {
    warp::path!("ui" / "session")
        .and(warp::get())
        .and(request_meta(state.ui.proxies.clone()))
        .and(with_state(state.clone()))
        .then(|meta, s: State| async move { handlers::ui_session(&s, meta).await })
        .boxed()
}

fn ui_logout(state: &State) -> Route {
    warp::path!("ui" / "logout")
        .and(warp::post())
        .and(request_meta(state.ui.proxies.clone()))
        .and(with_state(state.clone()))
        .then(|meta, s: State| async move { handlers::ui_logout(&s, meta).await })
        .boxed()
}

fn ui_root() -> Route {
    warp::path::end()
        .and(warp::get())
        .map(handlers::ui_root)
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
    let body = handlers::jwks_body(state);
    warp::path!(".well-known" / "jwks.json")
        .and(warp::get())
        .map(move || handlers::jwks(&body))
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

fn admin_entitlements(state: &State) -> Route {
    warp::path!("v1" / "admin" / "entitlements")
        .and(warp::get())
        .and(admin_read(state.clone()))
        .and(with_state(state.clone()))
        .then(|s: State| async move { reply(handlers::admin_entitlements(&s).await) })
        .boxed()
}

fn admin_usage_attestation(state: &State) -> Route {
    warp::path!("v1" / "admin" / "usage" / "attestation")
        .and(warp::get())
        .and(query())
        .and(admin_read(state.clone()))
        .and(with_state(state.clone()))
        .then(|q, s: State| async move { reply(handlers::admin_usage_attestation(&s, q).await) })
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
        .then(|q, s: State| async move { reply(handlers::admin_usage(&s, q).await) })
        .boxed()
}

fn admin_what_if(state: &State) -> Route {
    warp::path!("v1" / "admin" / "usage" / "what-if")
        .and(warp::get())
        .and(query())
        .and(admin_read(state.clone()))
        .and(with_state(state.clone()))
        .then(|q, s: State| async move { reply(handlers::admin_what_if(&s, q).await) })
        .boxed()
}

fn admin_sessions(state: &State) -> Route {
    // `Accept: text/csv` asks for the whole range as CSV.
    warp::path!("v1" / "admin" / "sessions")
        .and(warp::get())
        .and(accept())
        .and(query())
        .and(admin_read(state.clone()))
        .and(with_state(state.clone()))
        .then(|accept, q, s: State| async move {
            reply(handlers::admin_sessions(s, accept, q).await)
        })
        .boxed()
}

fn admin_denials(state: &State) -> Route {
    // As for sessions: `Accept: text/csv` asks for CSV.
    warp::path!("v1" / "admin" / "denials")
        .and(warp::get())
        .and(accept())
        .and(query())
        .and(admin_read(state.clone()))
        .and(with_state(state.clone()))
        .then(
            |accept, q, s: State| async move { reply(handlers::admin_denials(s, accept, q).await) },
        )
        .boxed()
}

fn admin_webhooks(state: &State) -> Route {
    warp::path!("v1" / "admin" / "webhooks")
        .and(warp::get())
        .and(admin_read(state.clone()))
        .and(with_state(state.clone()))
        .then(|s: State| async move { reply(handlers::admin_webhooks(&s).await) })
        .boxed()
}

fn admin_deliveries(state: &State) -> Route {
    warp::path!("v1" / "admin" / "webhooks" / "deliveries")
        .and(warp::get())
        .and(query())
        .and(admin_read(state.clone()))
        .and(with_state(state.clone()))
        .then(|q, s: State| async move { reply(handlers::admin_deliveries(&s, q).await) })
        .boxed()
}

fn admin_webhook_test(state: &State) -> Route {
    warp::path!("v1" / "admin" / "webhooks" / String / "test")
        .and(warp::post())
        .and(admin_auth(state.clone()))
        .and(with_state(state.clone()))
        .then(|name, s: State| async move { reply(handlers::admin_webhook_test(&s, name).await) })
        .boxed()
}

fn admin_alerts(state: &State) -> Route {
    warp::path!("v1" / "admin" / "alerts")
        .and(warp::get())
        .and(admin_read(state.clone()))
        .and(with_state(state.clone()))
        .then(|s: State| async move { reply(handlers::admin_alerts(&s).await) })
        .boxed()
}

fn ui_page() -> Route {
    // warp's `path::end` matches `/ui` and `/ui/` alike: the handler tells
    // them apart by the full path.
    warp::path!("ui")
        .and(warp::path::end())
        .and(warp::get())
        .and(warp::path::full())
        .map(|full: warp::path::FullPath| handlers::ui_page(full.as_str()))
        .boxed()
}

fn ui_file() -> Route {
    warp::path!("ui" / String)
        .and(warp::get())
        .and_then(|name: String| async move {
            handlers::ui_file(&name).ok_or_else(warp::reject::not_found)
        })
        .boxed()
}

fn with_state(state: State) -> impl Filter<Extract = (State,), Error = Infallible> + Clone {
    warp::any().map(move || state.clone())
}

/// The query string as a map; one that does not parse counts as empty.
/// Its parameters are read by [`super::query`].
fn query() -> impl Filter<Extract = (Query,), Error = Infallible> + Clone {
    warp::query::<Query>().or_else(|_| async { Ok::<_, Infallible>((Query::new(),)) })
}

/// The `Accept` header; one that is not text counts as absent.
fn accept() -> impl Filter<Extract = (Option<String>,), Error = Infallible> + Clone {
    warp::header::optional::<String>("accept").or_else(|_| async { Ok::<_, Infallible>((None,)) })
}

fn reply(r: handlers::Result<Response>) -> Response {
    r.unwrap_or_else(ApiError::into_response)
}
