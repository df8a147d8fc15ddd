//! Handlers: turn one parsed request into one reply. Input validation (and
//! the license-key check of client routes) happens here, before anything
//! reaches the store, so bad input changes nothing. Admin handlers run only
//! behind the admin auth filters (see [`crate::http::auth`]).
//!
//! One file per area, one public function per route of
//! [`crate::http::filters`], named as its route: [`meta`] (`/healthz`,
//! `/metrics`, the JWKS), [`client_seats`] (checkout, heartbeat, release),
//! [`admin`] (licenses, seats, revoke, events), [`entitlements`], [`usage`] (usage and
//! sessions), [`denials`], [`what_if`], [`webhooks`] (webhooks,
//! deliveries, alerts) and [`dashboard`] (sign-in and the page's files).
//! The store outcomes that refuse a request map to their errors in
//! [`outcomes`]; what several handlers share (JSON replies and bodies,
//! store errors, signed leases, the pools, CSV downloads) is in [`common`],
//! a leaf the others use; the query parameters they share are read by
//! [`crate::http::query`].

mod admin;
mod attestation;
mod client_seats;
mod common;
mod dashboard;
mod denials;
mod entitlements;
mod meta;
mod outcomes;
mod usage;
mod webhooks;
mod what_if;

pub use admin::{admin_events, admin_events_stream, admin_licenses, admin_revoke, admin_seats};
pub use attestation::admin_usage_attestation;
pub use client_seats::{checkout, heartbeat, release};
pub use common::Result;
pub use dashboard::{ui_file, ui_login, ui_logout, ui_page, ui_root, ui_session};
pub use denials::admin_denials;
pub use entitlements::{admin_entitlements, license_entitlements};
pub use meta::{healthz, jwks, jwks_body, metrics};
pub use usage::{admin_sessions, admin_usage};
pub use webhooks::{admin_alerts, admin_deliveries, admin_webhook_test, admin_webhooks};
pub use what_if::admin_what_if;
