//! Entitlements end to end (issue 41; docs/src/entitlements.md), against
//! the real `leaseholdd`: files a vendor signed in the entitlements
//! directory decide a vendor license's seats, versions and term, as clients
//! (checkout, heartbeat) and admins (`/v1/admin/entitlements`, licenses,
//! events, usage, metrics) see them.
//!
//! Files are signed in Rust with `leasehold_common::entitlement` (through
//! [`leasehold_tests::vendor::Vendor`]), one with Python's `cryptography`.
//! Every wait is a bounded poll for a positive condition.
//!
//! - `seats.rs`: entitled seats, narrowing, additive ids, renewals that
//!   replace for good, `not_entitled`, seats taken back after a renewal.
//! - `versions.rs`: version ranges on checkout.
//! - `files.rs`: rejected files and `[[vendor]]` mistakes; a Python-signed
//!   file.
//! - `term.rs`: the term's end and grace.
//! - `chain.rs`: a license's entitlements for its application, and the
//!   usage attestation (issue 42).
//! - `clock.rs`: a clock set back buys nothing (faketime).
//! - `concurrency.rs`: concurrent checkouts on one replica or two; the
//!   what-if of a vendor license.
//! - `views.rs`: `GET /v1/admin/entitlements`, the licenses view, metrics.

mod chain;
mod clock;
mod concurrency;
mod files;
mod seats;
mod term;
mod versions;
mod views;

use std::path::PathBuf;
use std::time::Duration;

use leasehold_tests::{Server, ServerOptions, eventually};
use serde_json::{Value, json};
use tempfile::TempDir;

/// The vendor every test signs as.
pub const KEYRIGHT: &str = "keyright";

/// How long a change in the directory may take to show (watched and
/// debounced; the brief's bound for a test).
pub const SHOWS_WITHIN: Duration = Duration::from_secs(15);

/// A `[[license]]` table `id` (key `<id>-key`) whose seats come from
/// keyright's entitlements; `extra` lines go at its end (`seats = 2`).
pub fn vendor_license(id: &str, extra: &str) -> String {
    format!(
        "\n[[license]]\nid = \"{id}\"\nkey = \"{id}-key\"\nvendor = \"{KEYRIGHT}\"\n\
         ttl = \"60s\"\nskew = \"5s\"\nreap_grace = \"15s\"\n{extra}\n"
    )
}

/// The claims of keyright's entitlement `jti` issued at `iat` with these
/// `licenses` items; tests add `exp`, `nbf`, `aud`... by indexing.
pub fn claims(jti: &str, iat: i64, licenses: Value) -> Value {
    json!({"iss": KEYRIGHT, "jti": jti, "iat": iat, "licenses": licenses})
}

/// A `licenses` list of one item: `seats` of `license`.
pub fn grant(license: &str, seats: u32) -> Value {
    json!([{"id": license, "seats": seats}])
}

/// A server and the entitlements directory it reads.
pub struct Rig {
    pub s: Server,
    dir: PathBuf,
    /// `--entitlements DIR`: a temp dir the test owns (`None`: the default,
    /// `<data-dir>/entitlements`).
    _owned: Option<TempDir>,
}

impl Rig {
    /// Starts with `licenses` (the licenses file, `[[vendor]]` included)
    /// and `files` (name, content) in the entitlements directory.
    pub async fn start(licenses: &str, files: &[(&str, String)]) -> Rig {
        Rig::start_with(licenses, files, |_| {}).await
    }

    /// [`Rig::start`], the server's options changed by `tweak` first.
    pub async fn start_with(
        licenses: &str,
        files: &[(&str, String)],
        tweak: impl FnOnce(&mut ServerOptions),
    ) -> Rig {
        let dir = tempfile::tempdir().expect("entitlements dir");
        for (name, text) in files {
            std::fs::write(dir.path().join(name), text).expect("write entitlement");
        }
        let mut options = ServerOptions::new(licenses)
            .arg("--entitlements")
            .arg(dir.path().to_str().expect("utf-8 path"));
        tweak(&mut options);
        Rig {
            s: Server::start_with(options).await,
            dir: dir.path().to_path_buf(),
            _owned: Some(dir),
        }
    }

    /// Starts with `licenses` and no `--entitlements`: the server reads
    /// (and creates) `<data-dir>/entitlements`.
    pub async fn start_in_data_dir(licenses: &str) -> Rig {
        let s = Server::start(licenses).await;
        Rig {
            dir: s.data_dir().join("entitlements"),
            s,
            _owned: None,
        }
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// Writes `name` whole: a temp name the server ignores, then a rename.
    pub fn put(&self, name: &str, text: &str) {
        let tmp = self.path(&format!("{name}.tmp"));
        std::fs::write(&tmp, text).expect("write entitlement");
        std::fs::rename(&tmp, self.path(name)).expect("rename entitlement");
    }

    pub fn remove(&self, name: &str) {
        std::fs::remove_file(self.path(name)).expect("remove entitlement");
    }

    /// Replaces the licenses file (by rename, as editors do).
    pub fn rewrite_licenses(&self, text: &str) {
        let path = self.s.licenses_path();
        let tmp = path.with_extension("tmp");
        std::fs::write(&tmp, text).expect("write licenses");
        std::fs::rename(&tmp, &path).expect("rename licenses");
    }

    /// `GET /v1/admin/entitlements`.
    pub async fn listing(&self) -> Value {
        self.s.admin_get("/v1/admin/entitlements").await
    }

    /// `GET path` (admin) from each replica itself, bypassing the proxy
    /// (one on SQLite): a change shows on every replica before a test acts
    /// on it.
    pub async fn each_replica(&self, path: &str) -> Vec<Value> {
        let mut answers = Vec::new();
        for addr in self.s.replica_addrs() {
            let resp = self
                .s
                .client()
                .get(format!("http://{addr}{path}"))
                .header("authorization", self.s.auth())
                .send()
                .await
                .expect("request");
            assert_eq!(resp.status(), 200, "GET {path} from {addr}");
            answers.push(resp.json().await.expect("json"));
        }
        answers
    }

    /// The listing's entry for `file` (the first replica's), once every
    /// replica lists it in one of `states`; panics after [`SHOWS_WITHIN`].
    pub async fn wait_file(&self, file: &str, states: &[&str]) -> Value {
        let what = format!("{file} listed as {states:?} by every replica");
        eventually(SHOWS_WITHIN, &what, || async {
            let entries: Option<Vec<Value>> = self
                .each_replica("/v1/admin/entitlements")
                .await
                .iter()
                .map(|listing| entry(listing, file))
                .collect();
            let entries = entries?;
            let shown = |e: &Value| states.iter().any(|s| e["state"] == *s);
            entries.iter().all(shown).then(|| entries[0].clone())
        })
        .await
    }

    /// Waits until no replica lists `file`.
    pub async fn wait_unlisted(&self, file: &str) {
        let what = format!("{file} unlisted by every replica");
        eventually(SHOWS_WITHIN, &what, || async {
            let listings = self.each_replica("/v1/admin/entitlements").await;
            listings
                .iter()
                .all(|l| entry(l, file).is_none())
                .then_some(())
        })
        .await
    }

    /// Waits until every replica's licenses view says `license` is
    /// entitled to `seats`.
    pub async fn wait_entitled(&self, license: &str, seats: u64) {
        let what = format!("{license} entitled to {seats} seats on every replica");
        eventually(SHOWS_WITHIN, &what, || async {
            let views = self.each_replica("/v1/admin/licenses").await;
            views
                .iter()
                .all(|v| {
                    v["licenses"]
                        .as_array()
                        .expect("licenses")
                        .iter()
                        .any(|l| l["id"] == license && l["entitled_seats"] == seats)
                })
                .then_some(())
        })
        .await
    }

    /// The first `entitlement` event whose detail starts with `first` and
    /// contains every one of `words`, once there is one.
    pub async fn wait_event(&self, first: &str, words: &[&str]) -> Value {
        let what = format!("an entitlement event {first:?}... saying {words:?}");
        eventually(SHOWS_WITHIN, &what, || async {
            self.events_saying(first, words).await.into_iter().next()
        })
        .await
    }

    /// The `entitlement` events whose detail starts with `first` and
    /// contains every one of `words`.
    pub async fn events_saying(&self, first: &str, words: &[&str]) -> Vec<Value> {
        let mut events = self.s.events_of("entitlement").await;
        events.retain(|e| {
            let detail = e["detail"].as_str().unwrap_or_default();
            detail.starts_with(first) && words.iter().all(|w| detail.contains(w))
        });
        events
    }

    /// Checks out `license` as `holder` (with `body`'s other fields):
    /// (status, JSON body).
    pub async fn checkout(&self, license: &str, holder: &str, mut body: Value) -> (u16, Value) {
        body["holder"] = json!(holder);
        let resp = self.s.checkout(license, &key(license), body).await;
        let status = resp.status().as_u16();
        (status, resp.json().await.expect("checkout json"))
    }

    /// `license`'s seat `seat_id` heartbeats: (status, JSON body).
    pub async fn heartbeat(&self, license: &str, seat_id: &str) -> (u16, Value) {
        let resp = self.s.heartbeat(license, &key(license), seat_id).await;
        let status = resp.status().as_u16();
        (status, resp.json().await.expect("heartbeat json"))
    }

    pub async fn release(&self, license: &str, seat_id: &str) {
        let resp = self.s.release(license, &key(license), seat_id).await;
        assert!(resp.status().is_success(), "release: {}", resp.status());
    }

    /// How many seats of `license` one can take, measured: check out until
    /// `409 no_seats_available` (at most 50), then release them all.
    pub async fn capacity(&self, license: &str) -> usize {
        let mut taken = Vec::new();
        loop {
            let (status, body) = self
                .checkout(license, &format!("probe-{}", taken.len()), json!({}))
                .await;
            if status != 201 {
                assert_eq!(status, 409, "{license}: {body}");
                assert_eq!(body["error"], "no_seats_available", "{body}");
                break;
            }
            taken.push(body["seat_id"].as_str().expect("seat_id").to_string());
            assert!(taken.len() <= 50, "{license}: more than 50 seats");
        }
        for seat in &taken {
            self.release(license, seat).await;
        }
        taken.len()
    }
}

/// The key of a test license.
pub fn key(license: &str) -> String {
    format!("{license}-key")
}

/// The entry for `file` in a `GET /v1/admin/entitlements` answer (listed
/// by its name; `views.rs` pins that, the rest accept a path too).
pub fn entry(listing: &Value, file: &str) -> Option<Value> {
    listing["entitlements"]
        .as_array()
        .expect("entitlements array")
        .iter()
        .find(|e| {
            let listed = e["file"].as_str().unwrap_or_default();
            listed == file || listed.ends_with(&format!("/{file}"))
        })
        .cloned()
}

/// An RFC 3339 time of the wire, in milliseconds since the epoch.
pub fn millis(v: &Value) -> i64 {
    let text = v.as_str().unwrap_or_else(|| panic!("a time: {v}"));
    leasehold_common::Timestamp::parse_rfc3339(text)
        .unwrap_or_else(|| panic!("RFC 3339: {text}"))
        .as_millis()
}

/// The usage summary of `license` (`GET /v1/admin/usage`), once `holds`
/// says yes (denials are counted as the writer commits them).
pub async fn eventually_summary(rig: &Rig, license: &str, holds: impl Fn(&Value) -> bool) -> Value {
    let path = format!("/v1/admin/usage?license={license}");
    let what = format!("{license}'s usage summary to hold");
    eventually(SHOWS_WITHIN, &what, || async {
        let usage = rig.s.admin_get(&path).await;
        let summary = usage["summary"].clone();
        holds(&summary).then_some(summary)
    })
    .await
}

/// The value of the `/metrics` series that starts with `series` (name and
/// labels, e.g. `leasehold_entitled_seats{license="cad"}`), if present.
pub async fn metric(s: &Server, series: &str) -> Option<f64> {
    let text = s
        .client()
        .get(s.url("/metrics"))
        .send()
        .await
        .expect("metrics")
        .text()
        .await
        .expect("metrics text");
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.trim().parse::<f64>().ok())
}
