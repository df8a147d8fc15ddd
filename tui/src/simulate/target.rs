//! Which license the simulation runs on (pure choice from the flags and the
//! licenses file) and the preflight that checks it against the server.

use std::path::Path;
use std::time::Duration;

use anyhow::{Context, bail};
use leasehold_common::client::{Client, ClientError};
use leasehold_common::policy::Licenses;

/// Used when no licenses file is found: `demo-ide` of the shipped demo pools.
pub const FALLBACK_LICENSE: (&str, &str) = ("demo-ide", "demo-ide-key");

/// The license the simulation runs on and what is known about its pool.
#[derive(Debug, Clone, PartialEq)]
pub struct Target {
    pub license: String,
    pub key: String,
    pub seats: Option<u32>,
    pub ttl: Option<Duration>,
    pub skew: Option<Duration>,
    /// The license's `idle_timeout`, when known and set: idle clients are
    /// planned only then.
    pub idle_timeout: Option<Duration>,
}

/// Pick the license (pure): the one asked for, else the shortest TTL in the
/// licenses file (ties: the first by id), else [`FALLBACK_LICENSE`]. The
/// key comes from the flag, else the file.
pub fn choose_target(
    license: Option<&str>,
    key: Option<&str>,
    file: Option<&Licenses>,
    file_name: &Path,
) -> anyhow::Result<Target> {
    let entry = match license {
        Some(id) => file.and_then(|f| f.get(id)),
        None => file.and_then(|f| f.iter().min_by_key(|l| l.policy.ttl)),
    };
    let id = match (license, entry) {
        (Some(id), _) => id.to_string(),
        (None, Some(e)) => e.id.clone(),
        (None, None) => FALLBACK_LICENSE.0.to_string(),
    };
    let key = match (key, entry) {
        (Some(k), _) => k.to_string(),
        (None, Some(e)) => e.key.clone(),
        (None, None) if license.is_none() => FALLBACK_LICENSE.1.to_string(),
        (None, None) => bail!(
            "no key for license {id}: pass --key (it is not in {})",
            file_name.display()
        ),
    };
    Ok(Target {
        license: id,
        key,
        // A license with a vendor and no `seats` of its own: unknown here
        // (its entitlements are the server's to judge).
        seats: entry.and_then(|e| e.seats_in_file()),
        ttl: entry.map(|e| e.policy.ttl),
        skew: entry.map(|e| e.policy.skew),
        idle_timeout: entry.and_then(|e| e.policy.idle_timeout),
    })
}

/// The licenses file, if there is one that parses (a broken one is named
/// and ignored: the flags or the fallback still work).
pub(super) fn read_licenses(path: &Path) -> Option<Licenses> {
    let text = std::fs::read_to_string(path).ok()?;
    match Licenses::parse(&text) {
        Ok(l) => Some(l),
        Err(e) => {
            eprintln!("leasehold simulate: ignoring {}: {e}", path.display());
            None
        }
    }
}

/// Check the server, license and key without taking a seat: releasing a seat
/// that does not exist is a 204 once the key is right.
pub(super) async fn preflight(server: &str, target: &Target) -> anyhow::Result<()> {
    let client = Client::new(server, &target.license, &target.key)?;
    match client
        .release("00000000000000000000000000000000", Duration::from_secs(5))
        .await
    {
        Ok(()) => Ok(()),
        Err(ClientError::Transient(e)) => {
            bail!("cannot reach the server at {server} ({e}); is leaseholdd running?")
        }
        Err(ClientError::Unauthorized(_)) => bail!(
            "the server refused the key for license {} (401): pass the right --key",
            target.license
        ),
        Err(ClientError::UnknownLicense(_)) => bail!(
            "the server has no license {} (pass --license; see `leasehold status`)",
            target.license
        ),
        Err(e) => Err(e).context("checking the license key"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = r#"
[[license]]
id = "demo-cad"
key = "demo-cad-key"
seats = 10
ttl = "60s"
skew = "5s"
reap_grace = "15s"
idle_timeout = "30m"

[[license]]
id = "demo-ide"
key = "demo-ide-key"
seats = 3
ttl = "30s"
skew = "2s"
reap_grace = "10s"
"#;

    #[test]
    fn default_license_is_the_shortest_ttl_pool() {
        let f = Licenses::parse(FILE).unwrap();
        let p = Path::new("assets/licenses.toml");
        let t = choose_target(None, None, Some(&f), p).unwrap();
        assert_eq!(
            t,
            Target {
                license: "demo-ide".into(),
                key: "demo-ide-key".into(),
                seats: Some(3),
                ttl: Some(Duration::from_secs(30)),
                skew: Some(Duration::from_secs(2)),
                idle_timeout: None,
            }
        );
        let t = choose_target(Some("demo-cad"), None, Some(&f), p).unwrap();
        assert_eq!((t.key.as_str(), t.seats), ("demo-cad-key", Some(10)));
        assert_eq!(t.idle_timeout, Some(Duration::from_secs(1800)));
        let t = choose_target(Some("demo-cad"), Some("k2"), Some(&f), p).unwrap();
        assert_eq!(t.key, "k2");
        // No file: the shipped demo pool.
        let t = choose_target(None, None, None, p).unwrap();
        assert_eq!(
            (t.license.as_str(), t.key.as_str(), t.seats),
            ("demo-ide", "demo-ide-key", None)
        );
        let err = choose_target(Some("other"), None, Some(&f), p)
            .unwrap_err()
            .to_string();
        assert!(err.contains("pass --key"), "{err}");
        let t = choose_target(Some("other"), Some("k"), Some(&f), p).unwrap();
        assert_eq!(t.seats, None);
    }
}
