//! Entitlements: the seats, versions and term of a license, in a file the
//! vendor signed (a compact JWS, `typ: leasehold-entitlement`).
//!
//! - [`versions`]: dotted numeric versions and ranges (`">=2025.1, <2027"`).
//! - [`claims`]: the claims, checked one by one; errors name the claim.
//! - [`jws`]: vendor keys, reading a `.lic` file, verifying, signing.
//! - [`keys`]: the vendor's private key as PKCS#8 PEM.
//! - [`ledger`]: what the verified entitlements grant a license at an
//!   instant, and when its seats next drop.
//! - [`chain`]: the vendor's application's offline check that its lease
//!   comes from an entitled server.
//!
//! Like the rest of this crate, nothing here reads the clock or a file.

pub mod chain;
pub mod claims;
pub mod jws;
pub mod keys;
pub mod ledger;
pub mod versions;

pub use chain::{EntitledBy, NotEntitled, Pins, check_chain};
pub use claims::{BorrowGrant, Claims, LicenseGrant};
pub use jws::{Entitlement, Unverified, VendorKey, decode, jws_of_file, sign};
pub use keys::VendorSigner;
pub use ledger::{Grant, Ledger, Newest, State};
pub use versions::{Version, VersionRange};

#[cfg(test)]
mod chain_tests;
#[cfg(test)]
mod ledger_tests;
