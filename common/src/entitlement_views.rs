//! Wire types of `GET /v1/admin/entitlements`: the server's `kid` and one
//! row per file of its entitlements directory. Re-exported from
//! [`crate::api`]; the field names are the contract. Apart from
//! [`crate::entitlement`], which reads tokens (and so the contract): the
//! contract must not read it back.

use serde::{Deserialize, Serialize};

use crate::time::Timestamp;

/// `GET /v1/admin/entitlements`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EntitlementsResponse {
    /// The `kid` of this server's lease-signing key: what a bound
    /// entitlement's `aud` must name.
    pub server_kid: String,
    pub entitlements: Vec<EntitlementView>,
}

/// `GET /v1/licenses/{id}/entitlements` (the license key): the
/// entitlements that grant the license now, each the JWS the vendor
/// signed, for the vendor's application to check the chain offline.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LicenseEntitlements {
    pub entitlements: Vec<String>,
}

/// One file of the entitlements directory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EntitlementView {
    /// `iss`; null for a file whose claims could not be read.
    pub vendor: Option<String>,
    /// `jti`.
    pub id: Option<String>,
    /// `sub`.
    pub customer: Option<String>,
    pub issued_at: Option<Timestamp>,
    pub not_before: Option<Timestamp>,
    pub expires_at: Option<Timestamp>,
    /// `exp + grace`.
    pub grace_until: Option<Timestamp>,
    /// Bound to server `kid`s (`aud`).
    pub bound: bool,
    /// `active`, `grace`, `not_yet`, `ended`, `replaced`, `conflict` or
    /// `rejected`.
    pub state: String,
    pub file: String,
    pub licenses: Vec<EntitledLicense>,
    /// Ids it names that the licenses file does not have with its vendor:
    /// they grant nothing.
    pub unused: Vec<String>,
    /// Why the file is rejected, or (state not `rejected`) why its
    /// current content fails while its last good content stays in force.
    pub error: Option<String>,
}

/// One license an entitlement grants.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EntitledLicense {
    pub id: String,
    pub seats: u32,
    pub versions: Option<String>,
    pub overage: u32,
    pub borrow: Option<EntitledBorrow>,
}

/// `{"max": seconds, "seats": n}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct EntitledBorrow {
    pub max: i64,
    pub seats: u32,
}
