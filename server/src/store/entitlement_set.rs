//! The entitlements in force as a scan judged them, in a form a store can
//! keep: on PostgreSQL the cluster's set (ARCHITECTURE P6, as the
//! licenses file is), published by the replica whose scan changed it and
//! taken by every replica's writer at its next batch, so every replica
//! grants from the same set.
//!
//! Each file is its JWS (in force: loaded, or kept at its last good
//! content, with the error of its current content) or the reason it is
//! rejected. Taking a set verifies each JWS again with the licenses file's
//! vendor keys: the set is never more than those keys signed.

use std::collections::HashMap;

use leasehold_common::entitlement::{Ledger, Newest, decode};
use leasehold_common::policy::vendors::keys_by_name;
use leasehold_common::policy::{Entitled, InForce, Rejected, Vendor};
use serde::{Deserialize, Serialize};

use super::entitlement_ids::EntitlementId;

/// One file of the entitlements directory, as judged.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JudgedFile {
    pub file: String,
    /// The JWS in force (`None`: rejected).
    pub jws: Option<String>,
    /// Why it is rejected, or why its current content fails while `jws`
    /// (its last good content) stays in force.
    pub error: Option<String>,
}

/// A scan's outcome, by file name.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct JudgedSet {
    pub files: Vec<JudgedFile>,
}

impl JudgedSet {
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("a judged set serializes")
    }

    pub fn from_json(text: &str) -> Result<JudgedSet, String> {
        serde_json::from_str(text).map_err(|e| format!("the cluster's entitlements: {e}"))
    }

    /// The entitlements in force, given the vendors' keys and what the
    /// store remembers of each id. A JWS that no longer verifies (a vendor
    /// key removed since) is rejected, saying why.
    pub fn entitled(&self, vendors: &[Vendor], remembered: &[EntitlementId]) -> Entitled {
        let keys = keys_by_name(vendors);
        let (mut entitlements, mut files, mut rejected) = (Vec::new(), Vec::new(), Vec::new());
        for f in &self.files {
            let verified = f.jws.as_deref().map(|jws| {
                let unverified = decode(jws)?;
                let keys = keys
                    .get(&unverified.claims().iss)
                    .ok_or("its vendor is no [[vendor]] of the licenses file now")?;
                unverified.verify(keys)
            });
            match verified {
                Some(Ok(e)) => {
                    entitlements.push(e);
                    files.push(InForce {
                        file: f.file.clone(),
                        error: f.error.clone(),
                    });
                }
                Some(Err(why)) => rejected.push(Rejected {
                    file: f.file.clone(),
                    why,
                }),
                None => rejected.push(Rejected {
                    file: f.file.clone(),
                    why: f.error.clone().unwrap_or_default(),
                }),
            }
        }
        let newest: HashMap<(String, String), Newest> =
            remembered.iter().map(|e| (e.key(), e.newest())).collect();
        Entitled::new(Ledger::new(entitlements, newest), files, rejected)
    }
}
