//! A software vendor, for the suites that test entitlements: an Ed25519 key
//! that signs entitlement files (compact JWS, `typ: leasehold-entitlement`,
//! with `leasehold_common::entitlement`), the `[[vendor]]` table that names
//! it in a licenses file, and the `kid` a customer sends it
//! (`leaseholdd kid`).

use std::path::Path;
use std::process::Command;
use std::time::{SystemTime, UNIX_EPOCH};

use leasehold_common::entitlement::VendorSigner;
use serde_json::Value;

use crate::tools::leaseholdd_bin;

/// A vendor: its name (the `iss` of what it signs) and a fresh key.
#[derive(Debug)]
pub struct Vendor {
    pub name: String,
    signer: VendorSigner,
}

impl Vendor {
    /// A vendor called `name` with a new random key.
    pub fn generate(name: &str) -> Vendor {
        Vendor {
            name: name.to_string(),
            signer: VendorSigner::from_seed(&rand::random::<[u8; 32]>()),
        }
    }

    /// The public key as `[[vendor]]` writes it: base64url without padding
    /// of the 32 raw bytes.
    pub fn public_key(&self) -> String {
        self.signer.public_key().to_string()
    }

    /// Its `[[vendor]]` table, one key.
    pub fn toml(&self) -> String {
        format!(
            "\n[[vendor]]\nname = \"{}\"\npublic_key = \"{}\"\n",
            self.name,
            self.public_key()
        )
    }

    /// `claims` (a JSON object) signed as an entitlement: the text of a
    /// `.lic` file.
    pub fn sign(&self, claims: &Value) -> String {
        self.signer.sign(claims)
    }

    /// The private key as PKCS#8 PEM (what `leasehold vendor keygen`
    /// writes, and what Python's `cryptography` and OpenSSL read).
    pub fn pkcs8_pem(&self) -> String {
        self.signer.to_pkcs8_pem()
    }
}

/// The wall clock in whole seconds since the Unix epoch (entitlement
/// timestamps are whole seconds).
pub fn unix_now() -> i64 {
    let since = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("after 1970");
    i64::try_from(since.as_secs()).expect("seconds fit i64")
}

/// What `leaseholdd kid --data-dir DIR` prints: the `kid` of that data
/// dir's signing key (created if missing). Panics unless it exits 0.
pub fn leaseholdd_kid(data_dir: &Path) -> String {
    let out = Command::new(leaseholdd_bin())
        .arg("kid")
        .arg("--data-dir")
        .arg(data_dir)
        .env_remove("LEASEHOLD_DATA_DIR")
        .output()
        .expect("run leaseholdd kid");
    assert!(
        out.status.success(),
        "leaseholdd kid: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .expect("utf-8")
        .trim()
        .to_string()
}
