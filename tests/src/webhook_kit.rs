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
