//! The lease store: the rules written once ([`rules`]), run over one of two
//! stores: [`sqlite`] (one file, the default) or [`pg`] (any number of
//! replicas on one PostgreSQL database).
//!
//! - Every state change is a [`command::Command`] queued to the store's one
//!   **writer thread**, which applies whatever is queued in one transaction
//!   and commits once (group commit, [`batch`]), then answers each caller.
//!   A reply therefore means "durable".
//! - **Reads** ([`backend::StoreBackend`]) run beside the writer, so admin
//!   views never wait for it.
//! - Times are integer milliseconds; liveness in SQL is always
//!   `expires_at >= live_threshold(now, skew)` from `leasehold_common`.
//!
//! This file is the map; every item below is re-exported here, so it is
//! named `store::Item` wherever it lives:
//!
//! - `handle.rs` — [`Store`], the handle the server holds: commands queued to
//!   the writer, reads on the backend, events.
//! - `open.rs` — [`Store::open`] (SQLite) and [`Store::open_postgres`], the
//!   calls only PostgreSQL answers, and [`StoreOptions`]' defaults.
//! - `options.rs` — [`StoreOptions`] (tuning) and [`StoreKind`].
//! - `lease.rs` — [`LeaseRow`], [`SeatMode`] and the `lease_columns!` list.
//! - `request.rs` — [`CheckoutRequest`], [`Ahead`] and [`Waiter`].
//! - `repeats.rs` — a retry storm's repeated denials, answered beside the
//!   writer while nothing that decides them changes (SQLite).
//! - `outbox.rs` — the webhook outbox and its deliveries: a queued
//!   delivery and its body, claims, the retry schedule, alert states.
//! - `denials.rs` — recorded denials: how a row packs them, the page
//!   and cursor of `GET /v1/admin/denials`, and which are true denials.
//! - `outcome.rs` — what commands answer ([`CheckoutOutcome`],
//!   [`HeartbeatOutcome`], [`RevokeOutcome`], [`PoolCounts`]), why a
//!   checkout is refused ([`Limit`], [`NotAllowedBecause`]), and
//!   [`Applied`], a decision held back until its batch commits.

pub mod backend;
pub mod batch;
mod command;
pub mod denials;
pub mod entitlement_ids;
pub mod entitlement_set;
mod error;
mod handle;
pub mod history;
mod lease;
#[cfg(test)]
mod memory;
#[cfg(any(test, feature = "reference-model"))]
pub mod model;
mod open;
mod options;
pub mod outbox;
mod outcome;
pub mod pg;
pub mod repeats;
mod request;
pub mod rules;
#[cfg(test)]
mod rules_props;
pub mod seat_query;
pub mod sign_ins;
pub mod sqlite;

pub use batch::WriterStats;
pub use error::StoreError;
pub use handle::Store;
pub(crate) use lease::lease_columns;
pub use lease::{LeaseRow, SeatMode};
pub use options::{StoreKind, StoreOptions};
pub use outcome::{
    Applied, CheckoutOutcome, HeartbeatOutcome, Limit, NotAllowedBecause, PoolCounts, RevokeOutcome,
};
pub use pg::line::SharedLine;
pub use request::{Ahead, CheckoutRequest, Waiter};
pub use rules::Scope;
pub use seat_query::{SeatQuery, SeatSort, SeatsPage};
pub use sign_ins::{SignInOp, SignInRow};
pub use sqlite::database_path;
pub use sqlite::schema::CURRENT_VERSION as SCHEMA_VERSION;
#[doc(hidden)]
pub use sqlite::schema::migrate_to as sqlite_migrate_to;
