//! [`KeeperConfig`]: what a [`super::LeaseKeeper`] needs to know.

use std::time::Duration;

use crate::entitlement::VendorKey;

/// What a keeper needs to know.
#[derive(Debug, Clone)]
pub struct KeeperConfig {
    /// Base URL, e.g. `http://127.0.0.1:7400`.
    pub server: String,
    pub license: String,
    /// The license key (`Authorization: Bearer`).
    pub key: String,
    /// Who holds the seat, shown to admins (1–128 printable characters).
    pub holder: String,
    /// This machine's fingerprint. A re-sent checkout from the same machine
    /// re-claims its live seat instead of taking a second one.
    pub fingerprint: String,
    /// Upper bound for one request (default 10 s); a request is also never
    /// given longer than the held lease has left.
    pub request_timeout: Duration,
    /// Opt-in: the vendor's public keys the application pins (a vendor
    /// rotating its key ships both). With at least one, every lease the
    /// keeper is given must be entitled by an entitlement the vendor signed
    /// (see [`super::keeper`], "Entitlements"); empty (the default): no
    /// check, as before.
    pub vendor_keys: Vec<VendorKey>,
    /// The application's version (`"2026.2"`), sent with every checkout
    /// and borrow and, with vendor keys, checked against the entitlement's
    /// version range. `None` (the default): sent nowhere.
    pub version: Option<String>,
}

impl KeeperConfig {
    pub fn new(server: &str, license: &str, key: &str, holder: &str, fingerprint: &str) -> Self {
        KeeperConfig {
            server: server.to_string(),
            license: license.to_string(),
            key: key.to_string(),
            holder: holder.to_string(),
            fingerprint: fingerprint.to_string(),
            request_timeout: Duration::from_secs(10),
            vendor_keys: Vec::new(),
            version: None,
        }
    }

    pub fn request_timeout(mut self, d: Duration) -> Self {
        self.request_timeout = d;
        self
    }

    /// Pins a vendor key (call again for each key of a vendor rotating its
    /// key): from then on a lease that is not entitled is released and the
    /// keeper stops with [`super::ClientError::NotEntitled`].
    pub fn vendor_key(mut self, key: VendorKey) -> Self {
        self.vendor_keys.push(key);
        self
    }

    /// The application's version (`"2026.2"`), sent with every checkout.
    pub fn version(mut self, version: &str) -> Self {
        self.version = Some(version.to_string());
        self
    }
}
