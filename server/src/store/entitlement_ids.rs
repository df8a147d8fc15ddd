//! What the store remembers of each vendor's entitlement id: the greatest
//! `iat` ever verified, that one's `nbf`, and the hash of its claims.
//!
//! An older file of the same id is replaced for good from the newer one's
//! `nbf` on, so putting an older, richer file back never works, whether
//! the newer file is still in the directory or not, across restarts, and
//! (on PostgreSQL) on every replica. Written beside the lease writer (no
//! lease rule is involved): on SQLite on the sign-ins' connection, on
//! PostgreSQL on the read pool; a write never lowers a remembered `iat`.

use leasehold_common::entitlement::Newest;

/// One remembered id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EntitlementId {
    pub vendor: String,
    pub id: String,
    pub iat: i64,
    pub nbf: Option<i64>,
    /// The SHA-256 of the claims, lowercase hex.
    pub claims_hash: String,
}

impl EntitlementId {
    /// The key the judge and the ledger look an id up by.
    pub fn key(&self) -> (String, String) {
        (self.vendor.clone(), self.id.clone())
    }

    /// Its newest `iat` and that one's `nbf`, as the ledger reads them.
    pub fn newest(&self) -> Newest {
        Newest {
            iat: self.iat,
            nbf: self.nbf,
        }
    }
}

/// The table both stores keep (the same columns; times in whole seconds,
/// as signed).
pub const TABLE_SQL: &str = "
    CREATE TABLE entitlement_ids (
        vendor      TEXT NOT NULL,
        id          TEXT NOT NULL,
        iat         BIGINT NOT NULL,
        nbf         BIGINT,
        claims_hash TEXT NOT NULL,
        PRIMARY KEY (vendor, id)
    );
";

/// Insert, or replace one whose `iat` is smaller (never larger: the
/// newest stays remembered whatever order replicas write in).
pub const UPSERT_SQL: &str = "
    INSERT INTO entitlement_ids (vendor, id, iat, nbf, claims_hash)
    VALUES ($1, $2, $3, $4, $5)
    ON CONFLICT (vendor, id) DO UPDATE
        SET iat = excluded.iat, nbf = excluded.nbf, claims_hash = excluded.claims_hash
        WHERE excluded.iat > entitlement_ids.iat
";

pub const SELECT_SQL: &str = "SELECT vendor, id, iat, nbf, claims_hash FROM entitlement_ids";
