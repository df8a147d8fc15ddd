//! What the webhook suites share besides the receiver: licenses-file
//! snippets, and what the server says about its webhooks (the admin
//! listings, `/metrics`, the test endpoint).
//!
//! Test files include it with `#[path = "../src/webhook_kit.rs"] mod
//! webhook_kit;` (next to `receiver.rs`).

#![allow(dead_code)] // each test file uses part of it

use leasehold_tests::Server;
use serde_json::Value;

/// One `[[webhook]]` table.
pub fn webhook_toml(name: &str, url: &str, secret: &str, format: &str, events: &[&str]) -> String {
    let events: Vec<String> = events.iter().map(|e| format!("{e:?}")).collect();
    format!(
        "\n[[webhook]]\nname = {name:?}\nurl = {url:?}\nsecret = {secret:?}\nformat = {format:?}\nevents = [{}]\n",
        events.join(", ")
    )
}

/// One `[[license]]` table of `seats` seats, key `<id>-key`, long TTL.
pub fn license_toml(id: &str, seats: u32) -> String {
    format!(
        "\n[[license]]\nid = {id:?}\nkey = \"{id}-key\"\nseats = {seats}\nttl = \"60s\"\nskew = \"5s\"\nreap_grace = \"15s\"\n"
    )
}

/// One `[[license.alert]]` table (after its license): `settings` are TOML
/// lines such as `percent = 50` and `for = "1s"`.
pub fn alert_toml(name: &str, when: &str, settings: &[&str]) -> String {
    format!(
        "\n[[license.alert]]\nname = {name:?}\nwhen = {when:?}\n{}\n",
        settings.join("\n")
    )
}

/// `GET /v1/admin/webhooks` with the admin token: the `webhooks` array.
pub async fn webhooks(s: &Server) -> Vec<Value> {
    let v = s.admin_get("/v1/admin/webhooks").await;
    v["webhooks"]
        .as_array()
        .unwrap_or_else(|| panic!("webhooks array: {v}"))
        .clone()
}

/// One webhook's entry in `GET /v1/admin/webhooks`.
pub async fn webhook_view(s: &Server, name: &str) -> Value {
    webhooks(s)
        .await
        .into_iter()
        .find(|w| w["name"] == name)
        .unwrap_or_else(|| panic!("webhook {name} listed"))
}

/// Every delivery `GET /v1/admin/webhooks/deliveries?<query>` lists,
/// following `next` to the end (newest first).
pub async fn deliveries(s: &Server, query: &str) -> Vec<Value> {
    let mut all = Vec::new();
    let mut after: Option<String> = None;
    for _ in 0..1000 {
        let mut path = format!("/v1/admin/webhooks/deliveries?{query}");
        if let Some(a) = &after {
            path.push_str(&format!("&after={a}"));
        }
        let v = s.admin_get(&path).await;
        let page = v["deliveries"]
            .as_array()
            .unwrap_or_else(|| panic!("deliveries array: {v}"));
        all.extend(page.iter().cloned());
        match &v["next"] {
            Value::Null => return all,
            Value::String(next) => after = Some(next.clone()),
            // Tolerate a number; the brief says `<after>|null`.
            other => after = Some(other.to_string()),
        }
    }
    panic!("deliveries: more than 1000 pages")
}

/// The listed delivery `id`, if any.
pub async fn delivery(s: &Server, id: &str) -> Option<Value> {
    deliveries(s, "").await.into_iter().find(|d| d["id"] == id)
}

/// `POST /v1/admin/webhooks/{name}/test` with the admin token: asserts
/// `202 {"id"}`, returns the id.
pub async fn send_test(s: &Server, name: &str) -> String {
    let resp = s
        .admin(
            reqwest::Method::POST,
            &format!("/v1/admin/webhooks/{name}/test"),
        )
        .send()
        .await
        .expect("test request");
    let status = resp.status().as_u16();
    let body: Value = resp.json().await.unwrap_or(Value::Null);
    assert_eq!(status, 202, "POST /v1/admin/webhooks/{name}/test: {body}");
    body["id"]
        .as_str()
        .unwrap_or_else(|| panic!("an id in {body}"))
        .to_string()
}

/// `/metrics` of each replica (one on SQLite).
pub async fn metrics_texts(s: &Server) -> Vec<String> {
    let client = s.client();
    let mut out = Vec::new();
    for addr in s.replica_addrs() {
        let text = client
            .get(format!("http://{addr}/metrics"))
            .send()
            .await
            .expect("metrics")
            .text()
            .await
            .expect("metrics text");
        out.push(text);
    }
    out
}

/// The value of series `name` whose labels include every `labels` pair,
/// in one exposition text.
pub fn metric_in(text: &str, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    text.lines().find_map(|line| {
        if line.starts_with('#') {
            return None;
        }
        let (series, value) = line.rsplit_once(' ')?;
        let (series_name, rest) = match series.split_once('{') {
            Some((n, rest)) => (n, rest.strip_suffix('}')?),
            None => (series, ""),
        };
        if series_name != name {
            return None;
        }
        let all = labels
            .iter()
            .all(|(k, v)| rest.split(',').any(|pair| pair == format!("{k}=\"{v}\"")));
        all.then(|| value.parse::<f64>().ok()).flatten()
    })
}

/// A counter summed over the replicas (absent counts 0).
pub async fn counter(s: &Server, name: &str, labels: &[(&str, &str)]) -> f64 {
    metrics_texts(s)
        .await
        .iter()
        .map(|t| metric_in(t, name, labels).unwrap_or(0.0))
        .sum()
}

/// The positive marker for "no alert transition happened": alerts of
/// their own on a license of their own (`beacon`, one seat), delivered to
/// a receiver of their own (webhook `beacon`). Every alert of the file is
/// evaluated together, at each alive tick, in one transaction that also
/// writes each transition's event and deliveries; so once a beacon
/// transition arrives, every other alert was evaluated at that tick (or
/// later) and any transition of theirs is already in the events and the
/// outbox. A test makes the beacon move after the moment it checks, waits
/// for it, then asserts what did not happen, instead of sleeping.
///
/// Two kinds (one per test): `usage` (`beacon-held`, 100 % for the tested
/// alert's `for`: taking the seat fires it no sooner than an alert whose
/// condition held from the same tick would have fired) and `denials`
/// (`beacon-1`..`beacon-n`, `count = i`: each refused checkout of the held
/// seat fires the next one at the next tick).
pub struct Beacon {
    pub receiver: crate::receiver::Receiver,
    seat: std::sync::Mutex<Option<String>>,
    refused: std::sync::atomic::AtomicUsize,
}

impl Beacon {
    pub const SECRET: &str = "beacon-secret-0123456789";

    pub async fn start() -> Beacon {
        Beacon {
            receiver: crate::receiver::Receiver::start(Self::SECRET).await,
            seat: std::sync::Mutex::new(None),
            refused: std::sync::atomic::AtomicUsize::new(0),
        }
    }

    fn base(&self) -> String {
        [
            webhook_toml(
                "beacon",
                &self.receiver.url("/beacon"),
                Self::SECRET,
                "json",
                &[],
            ),
            license_toml("beacon", 1),
        ]
        .concat()
    }

    /// The licenses-file tables for a `usage` beacon held for `for_`.
    pub fn usage_toml(&self, for_: &str) -> String {
        let for_ = format!("for = {for_:?}");
        [
            self.base(),
            alert_toml(
                "beacon-held",
                "usage",
                &["percent = 100", &for_, "webhooks = [\"beacon\"]"],
            ),
        ]
        .concat()
    }

    /// The licenses-file tables for `n` `denials` beacons.
    pub fn denials_toml(&self, n: usize) -> String {
        let mut out = self.base();
        for i in 1..=n {
            out.push_str(&alert_toml(
                &format!("beacon-{i}"),
                "denials",
                &[
                    &format!("count = {i}"),
                    "within = \"1h\"",
                    "webhooks = [\"beacon\"]",
                ],
            ));
        }
        out
    }

    /// Take the beacon's seat (a `usage` beacon starts holding; a
    /// `denials` beacon needs it held to be refused).
    pub async fn take(&self, s: &Server) {
        let lease = s
            .take_seat(
                "beacon",
                "beacon-key",
                serde_json::json!({"holder": "beacon"}),
            )
            .await;
        *self.seat.lock().unwrap() = Some(lease.seat_id);
    }

    /// Give the seat back (a firing `usage` beacon resolves).
    pub async fn release(&self, s: &Server) {
        let seat = self.seat.lock().unwrap().take().expect("the beacon's seat");
        assert_eq!(s.release("beacon", "beacon-key", &seat).await.status(), 204);
    }

    /// Wait for the `n`th delivery of `kind` (`alert.firing`,
    /// `alert.resolved`) of beacon alert `name`.
    pub async fn wait(&self, kind: &str, name: &str, n: usize) {
        let what = format!("{kind} #{n} of {name}");
        self.receiver
            .wait_until(std::time::Duration::from_secs(10), &what, |got| {
                got.iter()
                    .filter(|r| {
                        let body = r.json();
                        body["type"] == kind && body["alert"]["name"] == name
                    })
                    .count()
                    >= n
            })
            .await;
    }

    /// A `denials` beacon: refuse one checkout of the held seat and wait
    /// for the beacon it fires: every alert was evaluated after the call.
    pub async fn refuse_and_wait(&self, s: &Server) {
        let resp = s
            .checkout(
                "beacon",
                "beacon-key",
                serde_json::json!({"holder": "knock"}),
            )
            .await;
        assert_eq!(resp.status(), 409, "the beacon's seat is held");
        let n = self
            .refused
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst)
            + 1;
        self.wait("alert.firing", &format!("beacon-{n}"), 1).await;
    }
}

/// Whether an `alert` event's detail (`firing <name>`) is a beacon's.
pub fn is_beacon_detail(detail: &str) -> bool {
    detail
        .split_once(' ')
        .is_some_and(|(_, name)| name.starts_with("beacon-"))
}
