//! The HTTP calls the suites make to a [`Server`]: the client API
//! (checkout, heartbeat, release), the admin API, `/metrics`, and reading
//! Server-Sent Events.

use std::time::Duration;

use leasehold_common::api::Lease;

use crate::server::Server;

impl Server {
    /// A `/metrics` counter summed over every replica.
    pub async fn counter_sum(&self, series: &str) -> u64 {
        let client = self.client();
        let mut total = 0;
        for addr in &self.replica_addrs() {
            let text = client
                .get(format!("http://{addr}/metrics"))
                .send()
                .await
                .expect("metrics")
                .text()
                .await
                .expect("metrics text");
            total += text
                .lines()
                .find_map(|l| l.strip_prefix(series)?.trim().parse::<u64>().ok())
                .unwrap_or_else(|| panic!("no {series} in\n{text}"));
        }
        total
    }

    /// `POST /v1/licenses/{license}/seats` with `Bearer key` and a JSON body.
    pub async fn checkout(
        &self,
        license: &str,
        key: &str,
        body: serde_json::Value,
    ) -> reqwest::Response {
        self.client()
            .post(self.url(&format!("/v1/licenses/{license}/seats")))
            .bearer_auth(key)
            .json(&body)
            .send()
            .await
            .expect("checkout request")
    }

    pub async fn heartbeat(&self, license: &str, key: &str, seat_id: &str) -> reqwest::Response {
        self.client()
            .post(self.url(&format!("/v1/licenses/{license}/seats/{seat_id}/heartbeat")))
            .bearer_auth(key)
            .send()
            .await
            .expect("heartbeat request")
    }

    pub async fn release(&self, license: &str, key: &str, seat_id: &str) -> reqwest::Response {
        self.client()
            .delete(self.url(&format!("/v1/licenses/{license}/seats/{seat_id}")))
            .bearer_auth(key)
            .send()
            .await
            .expect("release request")
    }

    /// Check out with `body` and return the new lease; panics unless 201.
    pub async fn take_seat(&self, license: &str, key: &str, body: serde_json::Value) -> Lease {
        let resp = self.checkout(license, key, body.clone()).await;
        assert_eq!(resp.status(), 201, "checkout {license} {body}");
        resp.json().await.expect("lease json")
    }

    /// `n` holders `user-000000`, `user-000001`, … each take a seat of
    /// `license` (key `<license>-key`), 64 checkouts in flight; panics
    /// unless every one is granted.
    pub async fn preload(&self, license: &str, n: usize) {
        use futures_util::StreamExt;
        let client = self.client();
        let url = self.url(&format!("/v1/licenses/{license}/seats"));
        let key = format!("Bearer {license}-key");
        let granted = futures_util::stream::iter(0..n)
            .map(|i| {
                let req = client
                    .post(&url)
                    .header("authorization", &key)
                    .json(&serde_json::json!({ "holder": format!("user-{i:06}") }));
                async move { req.send().await.map(|r| r.status().as_u16()) }
            })
            .buffer_unordered(64)
            .filter(|r| std::future::ready(matches!(r, Ok(201))))
            .count()
            .await;
        assert_eq!(granted, n, "every preload checkout granted");
    }

    /// A request to an admin endpoint, carrying the admin token.
    pub fn admin(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        self.client()
            .request(method, self.url(path))
            .header("authorization", self.auth())
    }

    /// The admin revoke of `seat_id`, not yet sent (a reason or block goes in
    /// the body).
    pub fn revoke(&self, seat_id: &str) -> reqwest::RequestBuilder {
        self.admin(
            reqwest::Method::DELETE,
            &format!("/v1/admin/seats/{seat_id}"),
        )
    }

    /// GET a public endpoint (no credentials); panics unless 200.
    pub async fn get_json(&self, path: &str) -> serde_json::Value {
        json_200(self.client().get(self.url(path)), path).await
    }

    /// GET an admin endpoint with the admin token; panics unless 200.
    pub async fn admin_get(&self, path: &str) -> serde_json::Value {
        json_200(self.admin(reqwest::Method::GET, path), path).await
    }

    /// GET an admin endpoint with the admin token: the status and the JSON
    /// body (for answers that may be errors).
    pub async fn admin_try(&self, path: &str) -> (u16, serde_json::Value) {
        let resp = self
            .admin(reqwest::Method::GET, path)
            .send()
            .await
            .expect("request");
        let status = resp.status().as_u16();
        (status, resp.json().await.expect("json"))
    }

    /// The admin view of `license` (seats, live, policy).
    pub async fn license(&self, license: &str) -> serde_json::Value {
        let v = self.admin_get("/v1/admin/licenses").await;
        v["licenses"]
            .as_array()
            .expect("licenses")
            .iter()
            .find(|l| l["id"] == license)
            .cloned()
            .unwrap_or_else(|| panic!("license {license} listed"))
    }

    /// Live seats of `license` according to the admin API.
    pub async fn live(&self, license: &str) -> u64 {
        self.license(license).await["live"].as_u64().expect("live")
    }

    /// The seats the admin API lists, of one license or all.
    pub async fn seats(&self, license: Option<&str>) -> Vec<serde_json::Value> {
        let path = match license {
            Some(l) => format!("/v1/admin/seats?license={l}"),
            None => "/v1/admin/seats".to_string(),
        };
        let mut v = self.admin_get(&path).await;
        serde_json::from_value(v["seats"].take()).expect("seats")
    }

    /// Every event so far (up to 10,000), oldest first.
    pub async fn events(&self) -> Vec<serde_json::Value> {
        let mut v = self.admin_get("/v1/admin/events?limit=10000").await;
        serde_json::from_value(v["events"].take()).expect("events")
    }

    /// The events of one kind (`"reap"`, `"config"`, ...), oldest first.
    pub async fn events_of(&self, kind: &str) -> Vec<serde_json::Value> {
        let mut events = self.events().await;
        events.retain(|e| e["kind"] == kind);
        events
    }
}

/// Send `req`, assert 200, parse the JSON body.
async fn json_200(req: reqwest::RequestBuilder, path: &str) -> serde_json::Value {
    let resp = req.send().await.expect("request");
    assert_eq!(resp.status(), 200, "GET {path}");
    resp.json().await.expect("json")
}

/// The next `n` messages of an SSE response, as (id, JSON data); fails
/// the test if they do not arrive within 10 s.
pub async fn read_sse(resp: &mut reqwest::Response, n: usize) -> Vec<(i64, serde_json::Value)> {
    let mut buf = String::new();
    let mut out = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while out.len() < n {
        let chunk = tokio::time::timeout_at(deadline, resp.chunk())
            .await
            .expect("SSE message in time")
            .expect("stream ok")
            .expect("stream open");
        buf.push_str(std::str::from_utf8(&chunk).unwrap());
        while let Some(end) = buf.find("\n\n") {
            let msg: String = buf.drain(..end + 2).collect();
            let mut id = None;
            let mut data = None;
            for line in msg.lines() {
                if let Some(v) = line.strip_prefix("id:") {
                    id = Some(v.trim().parse::<i64>().unwrap());
                } else if let Some(v) = line.strip_prefix("data:") {
                    data = Some(serde_json::from_str::<serde_json::Value>(v.trim()).unwrap());
                }
            }
            if let (Some(id), Some(data)) = (id, data) {
                out.push((id, data));
            }
        }
    }
    out
}
