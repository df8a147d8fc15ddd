//! The HTTP calls the clients make, each recorded as one [`Op`], and the
//! reading of the event log at the end.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use super::Recorder;
use crate::history::{Event, Granted, Kind, Micros, Op, Outcome};

/// Longer than any answer of a healthy server, shorter than a stall: a
/// stalled request ends `unknown` while the run goes on.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(2);

/// One license on one server (or proxy), and where the records go.
#[derive(Debug, Clone)]
pub struct Api {
    http: reqwest::Client,
    base: String,
    license: String,
    key: String,
    /// `Bearer <admin token>`.
    admin: String,
    pub recorder: Arc<Recorder>,
}

impl Api {
    /// Clients of `license` (key `key`) at `base` (`http://host:port`).
    pub fn new(recorder: Arc<Recorder>, base: &str, license: &str, key: &str, admin: &str) -> Api {
        Api {
            http: http_client(),
            base: base.to_string(),
            license: license.to_string(),
            key: key.to_string(),
            admin: admin.to_string(),
            recorder,
        }
    }

    pub fn license(&self) -> &str {
        &self.license
    }

    pub async fn checkout(&self, client: u32, holder: &str, fingerprint: &str) -> Op {
        let body = json!({ "holder": holder, "fingerprint": fingerprint });
        self.take(client, Kind::Checkout, body).await
    }

    /// A checkout for offline use for `borrow_s` seconds.
    pub async fn borrow(&self, client: u32, holder: &str, fingerprint: &str, borrow_s: u64) -> Op {
        let body = json!({ "holder": holder, "fingerprint": fingerprint, "borrow_s": borrow_s });
        self.take(client, Kind::Borrow, body).await
    }

    async fn take(&self, client: u32, kind: Kind, body: Value) -> Op {
        let url = format!("{}/v1/licenses/{}/seats", self.base, self.license);
        let req = self.http.post(url).bearer_auth(&self.key).json(&body);
        self.send(client, kind, None, req).await
    }

    pub async fn heartbeat(&self, client: u32, seat: &str) -> Op {
        let url = format!(
            "{}/v1/licenses/{}/seats/{seat}/heartbeat",
            self.base, self.license
        );
        let req = self.http.post(url).bearer_auth(&self.key);
        self.send(client, Kind::Heartbeat, Some(seat), req).await
    }

    pub async fn release(&self, client: u32, seat: &str) -> Op {
        let url = format!("{}/v1/licenses/{}/seats/{seat}", self.base, self.license);
        let req = self.http.delete(url).bearer_auth(&self.key);
        self.send(client, Kind::Release, Some(seat), req).await
    }

    /// The admin revoke of `seat`.
    pub async fn revoke(&self, client: u32, seat: &str) -> Op {
        let url = format!("{}/v1/admin/seats/{seat}", self.base);
        let req = self.http.delete(url).header("authorization", &self.admin);
        self.send(client, Kind::Revoke, Some(seat), req).await
    }

    /// The seats the admin API lists for the license, as (seat id, state);
    /// not recorded (a read), `None` without a 200.
    pub async fn seats(&self) -> Option<Vec<(String, String)>> {
        let url = format!("{}/v1/admin/seats?license={}", self.base, self.license);
        let resp = self
            .http
            .get(url)
            .header("authorization", &self.admin)
            .send()
            .await
            .ok()?;
        if resp.status() != 200 {
            return None;
        }
        let body: Value = resp.json().await.ok()?;
        let seats = body["seats"].as_array()?.iter().filter_map(|s| {
            Some((
                s["seat_id"].as_str()?.to_string(),
                s["state"].as_str()?.to_string(),
            ))
        });
        Some(seats.collect())
    }

    /// Send `req` and record it as `kind` (about `seat`) for `client`.
    async fn send(
        &self,
        client: u32,
        kind: Kind,
        seat: Option<&str>,
        req: reqwest::RequestBuilder,
    ) -> Op {
        let sent = self.recorder.now();
        let outcome = outcome_of(kind, req.send().await).await;
        let op = Op {
            client,
            license: self.license.clone(),
            kind,
            seat: seat.map(str::to_string),
            sent,
            answered: self.recorder.now(),
            outcome,
        };
        self.recorder.record(op.clone());
        op
    }
}

/// A fresh connection per request: a connection pooled before a kill -9
/// or a stall would fail the next request on it for reasons of its own
/// (an `unknown` that proves nothing).
fn http_client() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(REQUEST_TIMEOUT)
        .pool_max_idle_per_host(0)
        .build()
        .expect("an HTTP client")
}

/// How the client saw the answer (or its absence).
async fn outcome_of(kind: Kind, sent: reqwest::Result<reqwest::Response>) -> Outcome {
    let resp = match sent {
        // Refused: no connection was ever made, so no server saw it.
        Err(e) if e.is_connect() => {
            return Outcome::Fail {
                status: 0,
                error: "connect".to_string(),
                reason: None,
            };
        }
        Err(e) => return Outcome::Unknown { why: describe(&e) },
        Ok(resp) => resp,
    };
    let status = resp.status().as_u16();
    let body = match resp.bytes().await {
        Ok(body) => serde_json::from_slice::<Value>(&body).unwrap_or(Value::Null),
        // The status says it took effect or not, but a 2xx's lease is lost.
        Err(e) if (200..300).contains(&status) => {
            return Outcome::Unknown {
                why: format!("{status}, then {}", describe(&e)),
            };
        }
        Err(_) => Value::Null,
    };
    let error = body["error"].as_str().unwrap_or("").to_string();
    match status {
        200..=299 => ok_outcome(kind, status, &body),
        400..=499 => Outcome::Fail {
            status,
            error,
            reason: body["reason"].as_str().map(str::to_string),
        },
        _ => Outcome::Unknown {
            why: format!("{status} {error}").trim_end().to_string(),
        },
    }
}

/// A 2xx: checkouts, borrows and heartbeats carry the lease.
fn ok_outcome(kind: Kind, status: u16, body: &Value) -> Outcome {
    if !(kind.grants() || kind == Kind::Heartbeat) {
        return Outcome::Ok { lease: None };
    }
    match granted(body) {
        Some(lease) => Outcome::Ok { lease: Some(lease) },
        // It took effect, but what it granted is unknown.
        None => Outcome::Unknown {
            why: format!("{status} without a readable lease: {body}"),
        },
    }
}

fn granted(lease: &Value) -> Option<Granted> {
    Some(Granted {
        seat: lease["seat_id"].as_str()?.to_string(),
        issued_at: micros(&lease["issued_at"])?,
        expires_at: micros(&lease["expires_at"])?,
    })
}

/// An RFC 3339 instant of the API, as microseconds since the epoch.
fn micros(v: &Value) -> Option<Micros> {
    let t = chrono::DateTime::parse_from_rfc3339(v.as_str()?).ok()?;
    Some(t.timestamp_micros())
}

/// The error and its causes in a line (hyper's "connection closed before
/// message completed" is a cause, not the top error).
fn describe(e: &reqwest::Error) -> String {
    if e.is_timeout() {
        return "timeout".to_string();
    }
    let mut why = e.to_string();
    let mut cause = std::error::Error::source(e);
    while let Some(c) = cause {
        why.push_str(": ");
        why.push_str(&c.to_string());
        cause = c.source();
    }
    why
}

/// The whole event log of the server at `base`, read page by page with
/// the admin token `admin` (`Bearer ...`).
pub async fn event_log(base: &str, admin: &str) -> Result<Vec<Event>, String> {
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(20))
        .build()
        .map_err(|e| e.to_string())?;
    let mut events: Vec<Event> = Vec::new();
    loop {
        let after = events.last().map_or(0, |e| e.id);
        let url = format!("{base}/v1/admin/events?after={after}&limit=10000");
        let resp = http
            .get(&url)
            .header("authorization", admin)
            .send()
            .await
            .map_err(|e| format!("GET {url}: {}", describe(&e)))?;
        let status = resp.status();
        let page: Value = resp.json().await.map_err(|e| format!("GET {url}: {e}"))?;
        let Some(page) = page["events"].as_array().filter(|_| status == 200) else {
            return Err(format!("GET {url}: {status} {page}"));
        };
        if page.is_empty() {
            return Ok(events);
        }
        for e in page {
            events.push(event(e).ok_or_else(|| format!("an event unlike the API's: {e}"))?);
        }
    }
}

fn event(e: &Value) -> Option<Event> {
    let text = |k: &str| e[k].as_str().map(str::to_string);
    Some(Event {
        id: e["id"].as_i64()?,
        at: micros(&e["at"])?,
        kind: text("kind")?,
        license: text("license_id"),
        seat: text("seat_id"),
        detail: text("detail"),
    })
}
