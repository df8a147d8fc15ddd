//! Security II against the real `leaseholdd`: the admin API's reply
//! headers, the request-body timeout, the bearer-token limiter, sessions
//! that end everywhere (sign-in again, token rotation, open event streams),
//! secret checks at start-up, and trusted proxies. Where a store holds the
//! sessions it runs on the store `LEASEHOLD_TEST_STORE` names.

use std::time::Duration;

use leasehold_tests::{Server, license_toml};
use serde_json::json;

#[rustfmt::skip]
const LICENSES: &str = concat!(
    license_toml!("small", seats = 5, ttl = "60s", skew = "5s", reap_grace = "15s"),
);

/// A client that shows redirects and keeps no connection between requests.
fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .pool_max_idle_per_host(0)
        .timeout(Duration::from_secs(20))
        .build()
        .expect("client")
}

fn assert_admin_headers(resp: &reqwest::Response, what: &str) {
    let h = resp.headers();
    assert_eq!(
        h.get("x-content-type-options").map(|v| v.to_str().unwrap()),
        Some("nosniff"),
        "{what}"
    );
    assert_eq!(
        h.get("cache-control").map(|v| v.to_str().unwrap()),
        Some("no-store"),
        "{what}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn admin_replies_are_nosniff_and_never_stored() {
    let server = Server::start(LICENSES).await;
    server
        .take_seat("small", "small-key", json!({"holder": "ann"}))
        .await;
    let admin = |path: &str| {
        client()
            .get(server.url(path))
            .bearer_auth(&server.admin_token)
    };
    for (path, status, ctype) in [
        ("/v1/admin/licenses", 200, "application/json"),
        ("/v1/admin/seats?license=small", 200, "application/json"),
        ("/v1/admin/sessions?license=small", 200, "application/json"),
        (
            "/v1/admin/sessions?license=small&format=csv",
            200,
            "text/csv",
        ),
        ("/v1/admin/seats?limit=nope", 400, "application/json"),
        ("/v1/admin/usage?license=nope", 404, "application/json"),
        ("/v1/admin/no-such-thing", 404, "application/json"),
    ] {
        let resp = admin(path).send().await.unwrap();
        assert_eq!(resp.status().as_u16(), status, "GET {path}");
        let got = resp.headers()["content-type"].to_str().unwrap();
        assert!(got.starts_with(ctype), "GET {path}: {got}");
        assert_admin_headers(&resp, path);
    }
    // Errors before any handler: no token, and a wrong method.
    let resp = client()
        .get(server.url("/v1/admin/seats"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 401);
    assert_admin_headers(&resp, "401 /v1/admin/seats");
    let resp = client()
        .put(server.url("/v1/admin/seats"))
        .bearer_auth(&server.admin_token)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 405);
    assert_admin_headers(&resp, "405 /v1/admin/seats");
    // The event stream too (its headers come before any event).
    let resp = admin("/v1/admin/events/stream").send().await.unwrap();
    assert_eq!(resp.status(), 200);
    assert_admin_headers(&resp, "the event stream");
    drop(resp);
    // The client API is left as it was: a lease is the client's to keep.
    let resp = server
        .checkout("small", "small-key", json!({"holder": "bo"}))
        .await;
    assert_eq!(resp.status(), 201);
    assert!(resp.headers().get("cache-control").is_none());
}
