//! Shared vocabulary of Leasehold: what a lease is, when it is live, and how it
//! is signed.
//!
//! This crate does no I/O and never reads the clock: every function that needs
//! the time takes `now` from its caller. That is what lets the server's store
//! tests move time by hand and what keeps the one liveness predicate pure.
//!
//! - [`time`]: [`Timestamp`] (integer milliseconds, RFC 3339 on the wire).
//! - [`liveness`]: **the** liveness predicate and the reapable predicate.
//!   Everything that counts seats or deletes leases derives from these two.
//! - [`policy`]: per-license policy, the licenses file format and its
//!   validation (`reap_grace > skew`, ...), and the seat policies: groups,
//!   `allow`/`deny` patterns, overage, linger, caps and borrowing.
//! - [`entitlement`]: the vendor-signed files a license's seats, versions
//!   and term come from, and what they grant at an instant.
//! - [`token`]: compact JWS (EdDSA / Ed25519) lease tokens and the JWKS.
//! - [`api`]: the JSON wire types of the HTTP contract ([`rightsizing`]'s
//!   denials and what-if among them).
//! - [`text`]: input rules for strings an admin's terminal will print.
//! - `client` (feature `client`): the typed HTTP client and `LeaseKeeper`,
//!   the crate's one I/O edge (its time logic still takes a clock).

pub mod alerts;
pub mod api;
pub mod attestation;
#[cfg(feature = "client")]
pub mod client;
pub mod entitlement;
pub mod entitlement_views;
pub mod events;
pub mod liveness;
pub mod policy;
pub mod rightsizing;
pub mod text;
pub mod time;
pub mod token;

pub use liveness::{is_live, is_reapable, live_threshold, reap_cutoff};
pub use policy::{BorrowPolicy, Group, LicenseConfig, Licenses, Pattern, Policy, PolicyError, Who};
pub use time::Timestamp;
