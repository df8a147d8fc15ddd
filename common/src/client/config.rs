//! [`KeeperConfig`]: what a [`super::LeaseKeeper`] needs to know.

use std::time::Duration;

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
        }
    }

    pub fn request_timeout(mut self, d: Duration) -> Self {
        self.request_timeout = d;
        self
    }
}
