//! `[[vendor]]` entries of the licenses file, and the entitlements a
//! snapshot of the file carries.
//!
//! ```toml
//! [[vendor]]
//! name = "keyright"
//! public_key = "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"  # or a list
//!
//! [[license]]
//! id = "cad"
//! key = "cad-key"
//! vendor = "keyright"   # seats come from keyright's entitlements
//! seats = 8             # optional here: may only narrow
//! ```

use std::collections::HashMap;
use std::sync::Arc;

use serde::Deserialize;

use crate::entitlement::{Ledger, VendorKey};

/// A vendor whose signed entitlements grant seats.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Vendor {
    pub name: String,
    /// Every key is accepted: a vendor rotating its key signs with the new
    /// one while files signed with the old stay valid.
    pub keys: Vec<VendorKey>,
}

/// The verified entitlements in force, as the server last judged its
/// entitlements directory. Snapshots share it until the next scan.
#[derive(Debug, Clone, Default)]
pub struct Entitled(Arc<Scan>);

#[derive(Debug, Default)]
struct Scan {
    ledger: Ledger,
    /// The file of each of the ledger's entitlements, in its order.
    files: Vec<InForce>,
    rejected: Vec<Rejected>,
    clock_floor_ms: i64,
}

/// The file an entitlement in force came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InForce {
    pub file: String,
    /// The file fails now, and this is its last good content.
    pub error: Option<String>,
}

/// A file that grants nothing, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejected {
    pub file: String,
    pub why: String,
}

impl Entitled {
    /// `files[i]` is where `ledger.entitlements()[i]` came from.
    pub fn new(ledger: Ledger, files: Vec<InForce>, rejected: Vec<Rejected>) -> Self {
        let newest_iat = ledger.entitlements().iter().map(|e| e.claims.iat).max();
        Entitled(Arc::new(Scan {
            ledger,
            files,
            rejected,
            clock_floor_ms: newest_iat.unwrap_or(0).saturating_mul(1000),
        }))
    }

    pub fn ledger(&self) -> &Ledger {
        &self.0.ledger
    }

    /// Where each entitlement in force came from, in the ledger's order.
    pub fn files(&self) -> &[InForce] {
        &self.0.files
    }

    pub fn rejected(&self) -> &[Rejected] {
        &self.0.rejected
    }

    /// The decision clock is never before this (ms): the newest `iat` of
    /// the entitlements that loaded. Signed, so it survives a wiped store.
    pub fn clock_floor_ms(&self) -> i64 {
        self.0.clock_floor_ms
    }
}

impl PartialEq for Entitled {
    /// The same scan, or scans that found the same: the same files, the
    /// same entitlements (by claims hash) in force, the same rejections.
    /// (Two files parsed apart, each with no entitlements yet, are equal.)
    fn eq(&self, other: &Self) -> bool {
        let hashes = |e: &Entitled| -> Vec<String> {
            e.ledger()
                .entitlements()
                .iter()
                .map(|x| x.claims_hash.clone())
                .collect()
        };
        Arc::ptr_eq(&self.0, &other.0)
            || (self.files() == other.files()
                && self.rejected() == other.rejected()
                && hashes(self) == hashes(other))
    }
}

impl Eq for Entitled {}

/// The vendors' keys by name, as the entitlements' judge wants them.
pub fn keys_by_name(vendors: &[Vendor]) -> HashMap<String, Vec<VendorKey>> {
    vendors
        .iter()
        .map(|v| (v.name.clone(), v.keys.clone()))
        .collect()
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawVendor {
    #[serde(default)]
    name: String,
    public_key: OneOrMany,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum OneOrMany {
    One(String),
    Many(Vec<String>),
}

/// A `[[vendor]]` mistake: which vendor, which field, why.
pub(super) struct VendorError {
    pub vendor: String,
    pub field: &'static str,
    pub problem: String,
}

/// Validate the `[[vendor]]` entries: names plain and unique, every key an
/// Ed25519 public key.
pub(super) fn parse_vendors(raw: Vec<RawVendor>) -> Result<Vec<Vendor>, VendorError> {
    let mut vendors: Vec<Vendor> = Vec::with_capacity(raw.len());
    for (index, raw) in raw.into_iter().enumerate() {
        let label = if raw.name.is_empty() {
            format!("#{}", index + 1)
        } else {
            raw.name.clone()
        };
        let fail = |field: &'static str, problem: String| VendorError {
            vendor: label.clone(),
            field,
            problem,
        };
        if let Err(field) = super::validate_id(&raw.name) {
            return Err(fail("vendor.name", field.problem));
        }
        if vendors.iter().any(|v| v.name == raw.name) {
            return Err(fail("vendor.name", "is used by another vendor".into()));
        }
        let texts = match raw.public_key {
            OneOrMany::One(t) => vec![t],
            OneOrMany::Many(ts) => ts,
        };
        if texts.is_empty() {
            return Err(fail(
                "vendor.public_key",
                "must name at least one key".into(),
            ));
        }
        let keys = texts
            .iter()
            .map(|t| {
                VendorKey::parse(t)
                    .map_err(|why| fail("vendor.public_key", format!("{t:?}: {why}")))
            })
            .collect::<Result<Vec<_>, _>>()?;
        vendors.push(Vendor {
            name: raw.name,
            keys,
        });
    }
    Ok(vendors)
}
