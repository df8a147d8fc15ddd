//! Handlers: turn one parsed request into one reply. Input validation (and
//! the license-key check of client routes) happens here, before anything
//! reaches the store, so bad input changes nothing. Admin handlers run only
//! behind the admin auth filters (see [`crate::http::auth`]).
//!
//! Grouped as [`crate::http::filters`] is: [`meta`] (`/healthz`,
//! `/metrics`), [`client_seats`] (checkout, heartbeat, release) and
//! [`admin`] (`/v1/admin/…`). The store outcomes that refuse a request map
//! to their errors in [`refusals`]; what several handlers share (JSON
//! replies and bodies, store errors, query integers, signed leases, the
//! pools) is in [`common`], a leaf the others use.

mod admin;
mod client_seats;
mod common;
mod meta;
mod refusals;

pub use admin::{admin_events, admin_events_stream, admin_licenses, admin_revoke, admin_seats};
pub use client_seats::{checkout, heartbeat, release};
pub use common::Result;
pub(super) use common::{json, query_int, store_err};
pub use meta::{healthz, metrics};
