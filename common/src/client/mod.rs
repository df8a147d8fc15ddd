//! The client side of Leasehold (feature `client`): the crate's one I/O edge.
//!
//! - [`http::Client`]: a typed client for the client endpoints of the HTTP
//!   contract, one method per call (a checkout may wait in line with
//!   `?wait=`), each returning [`ClientError`] variants an application can
//!   act on (transient, seat lost, pool full, blocked, ...).
//! - [`LeaseKeeper`]: holds one seat for an application. Checks out, verifies
//!   every token against the server's JWKS, heartbeats at a third of the
//!   lease's own window, rides out transient failures on the lease it holds,
//!   re-acquires when the seat is lost, and reports its [`KeeperState`] on a
//!   `tokio::sync::watch` channel. [`LeaseKeeper::shutdown`] releases the seat.
//!   [`LeaseKeeper::activity`] opts in to reporting the user's idleness in
//!   every heartbeat; after an idle reclaim the keeper waits for the next
//!   activity before it takes a seat again ([`KeeperState::Reclaimed`]).
//!   [`LeaseKeeper::borrow`] turns the seat into a borrow for offline use
//!   (no heartbeats until it ends), [`LeaseKeeper::give_back`] returns it.
//!   [`KeeperConfig::vendor_key`] opts in to checking, offline, that every
//!   lease comes from an entitled server (the chain from the vendor's key,
//!   [`crate::entitlement::check_chain`], on the keeper's clock); a lease
//!   that is not is released, [`ClientError::NotEntitled`].
//! - [`LocalClock`]: the keeper's clock, so tests can run it hours off.
//!
//! Everything time-dependent in here (when to heartbeat, when the held lease
//! has lapsed) is computed in the pure [`machine`] module from the lease's own
//! window (`expires_at − issued_at`) and the local time the request was *sent*,
//! never by comparing the server's absolute times with the local clock: a
//! client whose clock is an hour off keeps its seat like any other.

mod activity;
pub mod clock;
pub mod config;
pub mod error;
pub mod http;
pub mod keeper;
pub mod machine;
pub mod state;
pub mod stats;

pub use clock::{LocalClock, SystemClock};
pub use config::KeeperConfig;
pub use error::ClientError;
pub use http::{Client, MAX_CHECKOUT_WAIT};
pub use keeper::{KeeperError, LeaseKeeper};
pub use state::KeeperState;
pub use stats::KeeperStats;
