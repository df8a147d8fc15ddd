//! The dashboard's server side against the real `leaseholdd`: the viewer
//! role on the bearer API, sign-in with the session cookie, session expiry
//! and logout, CSRF on cookie-authenticated changes, the failed-login
//! limiter, the security headers of `/ui`, and the seats list's filters,
//! sort and keyset pages. Runs on the store `LEASEHOLD_TEST_STORE` names.

use std::time::Duration;

use leasehold_tests::{Server, ServerOptions, TestStore, license_toml};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

#[rustfmt::skip]
const LICENSES: &str = concat!(
    license_toml!("small", seats = 5, ttl = "60s", skew = "5s", reap_grace = "15s"),
    license_toml!("big", seats = 1000, ttl = "60s", skew = "5s", reap_grace = "15s"),
);

const CSP: &str = "default-src 'self'; script-src 'self'; style-src 'self'; \
     img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; \
     form-action 'self'";

/// A client that shows redirects instead of following them.
fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .pool_max_idle_per_host(0)
        .timeout(Duration::from_secs(20))
        .build()
        .expect("client")
}

/// How many servers answer behind the address (failed logins are counted
/// per server process).
fn replicas(server: &Server) -> usize {
    match server.store() {
        TestStore::Sqlite => 1,
        TestStore::Postgres { replicas } => replicas,
    }
}

async fn login(server: &Server, token: &str) -> reqwest::Response {
    client()
        .post(server.url("/ui/login"))
        .json(&json!({ "token": token }))
        .send()
        .await
        .expect("login")
}

/// Sign in; the `name=value` of the session cookie.
async fn sign_in(server: &Server, token: &str) -> String {
    let resp = login(server, token).await;
    assert_eq!(resp.status(), 204, "login");
    cookie_pair(&resp)
}

fn cookie_pair(resp: &reqwest::Response) -> String {
    let set = resp.headers()["set-cookie"].to_str().expect("ascii");
    set.split(';').next().expect("pair").to_string()
}

async fn get_with_cookie(server: &Server, path: &str, cookie: &str) -> reqwest::Response {
    client()
        .get(server.url(path))
        .header("cookie", cookie)
        .send()
        .await
        .expect("request")
}

async fn session(server: &Server, cookie: &str) -> Value {
    let resp = get_with_cookie(server, "/ui/session", cookie).await;
    assert_eq!(resp.status(), 200, "GET /ui/session");
    resp.json().await.expect("json")
}

async fn error_code(resp: reqwest::Response) -> String {
    let v: Value = resp.json().await.expect("json error");
    v["error"].as_str().expect("error code").to_string()
}

fn assert_security_headers(resp: &reqwest::Response, what: &str) {
    let h = resp.headers();
    assert_eq!(
        h.get("content-security-policy")
            .map(|v| v.to_str().unwrap()),
        Some(CSP),
        "{what}"
    );
    assert_eq!(h["x-content-type-options"], "nosniff", "{what}");
    assert_eq!(h["referrer-policy"], "no-referrer", "{what}");
    assert!(h.get("access-control-allow-origin").is_none(), "{what}");
}

fn seat_count(v: &Value) -> usize {
    v["seats"].as_array().expect("seats").len()
}

#[tokio::test(flavor = "multi_thread")]
async fn the_viewer_token_reads_every_admin_endpoint_and_cannot_revoke() {
    let server = Server::start(LICENSES).await;
    let lease = server
        .take_seat("small", "small-key", json!({"holder": "ann"}))
        .await;
    let viewer = server.viewer_token();
    assert_ne!(viewer, server.admin_token);
    for path in [
        "/v1/admin/licenses",
        "/v1/admin/seats",
        "/v1/admin/seats?license=small&limit=1",
        "/v1/admin/events",
        "/v1/admin/events/stream",
        "/v1/admin/usage?license=small",
        "/v1/admin/sessions?license=small",
        "/v1/admin/sessions?license=small&format=csv",
    ] {
        let resp = server
            .client()
            .get(server.url(path))
            .bearer_auth(&viewer)
            .send()
            .await
            .expect("request");
        assert_eq!(resp.status(), 200, "GET {path} as viewer");
    }
    let resp = server
        .client()
        .delete(server.url(&format!("/v1/admin/seats/{}", lease.seat_id)))
        .bearer_auth(&viewer)
        .send()
        .await
        .expect("revoke");
    assert_eq!(resp.status(), 403);
    assert_eq!(error_code(resp).await, "forbidden");
    assert_eq!(server.seats(Some("small")).await.len(), 1, "still held");
    // Nor is the viewer token a license key or the admin token elsewhere.
    let resp = server
        .checkout("small", &viewer, json!({"holder": "x"}))
        .await;
    assert_eq!(resp.status(), 401);
}

#[tokio::test(flavor = "multi_thread")]
async fn sign_in_session_and_logout() {
    let server = Server::start(LICENSES).await;
    // No cookie: 401, with the headers.
    let resp = client()
        .get(server.url("/ui/session"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 401);
    assert_security_headers(&resp, "401 /ui/session");

    // JSON: 204 and the cookie.
    let resp = login(&server, &server.admin_token).await;
    assert_eq!(resp.status(), 204);
    assert_security_headers(&resp, "204 /ui/login");
    let set = resp.headers()["set-cookie"].to_str().unwrap().to_string();
    for attr in [
        "leasehold_session=",
        "HttpOnly",
        "SameSite=Strict",
        "Path=/",
    ] {
        assert!(set.contains(attr), "{set}");
    }
    let admin_cookie = cookie_pair(&resp);
    let s = session(&server, &admin_cookie).await;
    assert_eq!(s["role"], "admin");
    assert_eq!(s["csrf_token"].as_str().unwrap().len(), 64);
    assert!(s["expires_at"].as_str().is_some());

    // A plain form post: 303 to /ui/.
    let resp = client()
        .post(server.url("/ui/login"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!("token={}", server.viewer_token()))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::SEE_OTHER);
    assert_eq!(resp.headers()["location"], "/ui/");
    let viewer_cookie = cookie_pair(&resp);
    assert_eq!(session(&server, &viewer_cookie).await["role"], "viewer");

    // A wrong token: 401, no cookie.
    let resp = login(&server, "not-a-token").await;
    assert_eq!(resp.status(), 401);
    assert!(resp.headers().get("set-cookie").is_none());

    // The cookie opens the admin GETs, for both roles.
    for cookie in [&admin_cookie, &viewer_cookie] {
        for path in ["/v1/admin/licenses", "/v1/admin/seats", "/v1/admin/events"] {
            let resp = get_with_cookie(&server, path, cookie).await;
            assert_eq!(resp.status(), 200, "GET {path} with a session cookie");
        }
    }

    // Logout (with its CSRF token) deletes the session server-side.
    let csrf = session(&server, &admin_cookie).await["csrf_token"]
        .as_str()
        .unwrap()
        .to_string();
    let resp = client()
        .post(server.url("/ui/logout"))
        .header("cookie", &admin_cookie)
        .header("x-csrf-token", &csrf)
        .header("origin", format!("http://{}", server.addr))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 204);
    assert_security_headers(&resp, "204 /ui/logout");
    for path in ["/ui/session", "/v1/admin/seats"] {
        let resp = get_with_cookie(&server, path, &admin_cookie).await;
        assert_eq!(resp.status(), 401, "{path} after logout");
    }
    // The other session is untouched.
    assert_eq!(session(&server, &viewer_cookie).await["role"], "viewer");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_session_survives_a_restart_and_ends_when_idle() {
    let mut server = Server::start_with(
        ServerOptions::new(LICENSES)
            .arg("--ui-idle-timeout")
            .arg("2s"),
    )
    .await;
    let cookie = sign_in(&server, &server.admin_token.clone()).await;
    server.restart().await;
    // Used more often than the timeout, it lives on (past the timeout).
    for _ in 0..5 {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let resp = get_with_cookie(&server, "/v1/admin/licenses", &cookie).await;
        assert_eq!(resp.status(), 200, "an active session");
    }
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let resp = get_with_cookie(&server, "/ui/session", &cookie).await;
    assert_eq!(resp.status(), 401, "idle longer than 2 s");
    let resp = get_with_cookie(&server, "/v1/admin/seats", &cookie).await;
    assert_eq!(resp.status(), 401);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_cookie_revoke_needs_the_csrf_token_and_the_same_origin() {
    let server = Server::start(LICENSES).await;
    let cookie = sign_in(&server, &server.admin_token).await;
    let csrf = session(&server, &cookie).await["csrf_token"]
        .as_str()
        .unwrap()
        .to_string();
    let origin = format!("http://{}", server.addr);
    let lease = server
        .take_seat("small", "small-key", json!({"holder": "bob"}))
        .await;
    let revoke = |token: Option<&str>, origin: Option<&str>, site: Option<&str>| {
        let mut req = client()
            .delete(server.url(&format!("/v1/admin/seats/{}", lease.seat_id)))
            .header("cookie", &cookie);
        if let Some(t) = token {
            req = req.header("x-csrf-token", t);
        }
        if let Some(o) = origin {
            req = req.header("origin", o);
        }
        if let Some(s) = site {
            req = req.header("sec-fetch-site", s);
        }
        req
    };
    let wrong = "0".repeat(64);
    for (what, req) in [
        ("no X-CSRF-Token", revoke(None, Some(&origin), None)),
        ("a wrong token", revoke(Some(&wrong), Some(&origin), None)),
        (
            "another Origin",
            revoke(Some(&csrf), Some("http://evil.example"), None),
        ),
        (
            "cross-site fetch",
            revoke(Some(&csrf), None, Some("cross-site")),
        ),
        (
            "cross-site fetch with our Origin",
            revoke(Some(&csrf), Some(&origin), Some("cross-site")),
        ),
        (
            "neither Origin nor Sec-Fetch-Site",
            revoke(Some(&csrf), None, None),
        ),
    ] {
        let resp = req.send().await.unwrap();
        assert_eq!(resp.status(), 403, "{what}");
        assert_eq!(error_code(resp).await, "csrf_failed", "{what}");
    }
    assert_eq!(
        server.seats(Some("small")).await.len(),
        1,
        "nothing changed"
    );
    let resp = revoke(Some(&csrf), Some(&origin), None)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 204, "token and Origin");
    let other = server
        .take_seat("small", "small-key", json!({"holder": "cy"}))
        .await;
    let resp = client()
        .delete(server.url(&format!("/v1/admin/seats/{}", other.seat_id)))
        .header("cookie", &cookie)
        .header("x-csrf-token", &csrf)
        .header("sec-fetch-site", "same-origin")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 204, "token and Sec-Fetch-Site: same-origin");
    assert!(server.seats(Some("small")).await.is_empty());

    // A viewer's session cannot revoke, CSRF token or not.
    let lease = server
        .take_seat("small", "small-key", json!({"holder": "dee"}))
        .await;
    let viewer = sign_in(&server, &server.viewer_token()).await;
    let csrf = session(&server, &viewer).await["csrf_token"]
        .as_str()
        .unwrap()
        .to_string();
    let resp = client()
        .delete(server.url(&format!("/v1/admin/seats/{}", lease.seat_id)))
        .header("cookie", &viewer)
        .header("x-csrf-token", &csrf)
        .header("origin", &origin)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 403);
    assert_eq!(error_code(resp).await, "forbidden");
    // Bearer requests need none of it.
    let resp = server.revoke(&lease.seat_id).send().await.unwrap();
    assert_eq!(resp.status(), 204);
}

#[tokio::test(flavor = "multi_thread")]
async fn failed_logins_are_rate_limited() {
    let server = Server::start(LICENSES).await;
    // Each replica counts its own failures; the proxy alternates.
    let most = 10 * replicas(&server) + 1;
    let mut limited = None;
    for attempt in 1..=most {
        let resp = login(&server, "wrong-token").await;
        match resp.status().as_u16() {
            401 => {}
            429 => {
                limited = Some((attempt, resp));
                break;
            }
            other => panic!("attempt {attempt}: {other}"),
        }
    }
    let (attempt, resp) = limited.unwrap_or_else(|| panic!("no 429 in {most} attempts"));
    assert!(attempt > 10, "429 after only {} failures", attempt - 1);
    let wait: u64 = resp.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=60).contains(&wait), "Retry-After {wait}");
    assert_security_headers(&resp, "429 /ui/login");
    assert_eq!(error_code(resp).await, "rate_limited");
    // Even the right token waits now (on the replica that refused).
    if replicas(&server) == 1 {
        let resp = login(&server, &server.admin_token).await;
        assert_eq!(resp.status(), 429);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn every_ui_response_carries_the_security_headers() {
    let server = Server::start(LICENSES).await;
    let resp = client().get(server.url("/")).send().await.unwrap();
    assert!(resp.status().is_redirection(), "{}", resp.status());
    assert_eq!(resp.headers()["location"], "/ui/");
    assert_security_headers(&resp, "GET /");
    for (method, path, status) in [
        (Method::GET, "/ui/no-such-file.js", 404),
        (Method::GET, "/ui/session", 401),
        (Method::GET, "/ui/login", 405),
        (Method::POST, "/ui/login", 400),
        (Method::POST, "/ui/logout", 204),
    ] {
        let resp = client()
            .request(method.clone(), server.url(path))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status().as_u16(), status, "{method} {path}");
        assert_security_headers(&resp, path);
    }
}

/// Every page of `path` (which has `limit=`), following `next`.
async fn all_pages(server: &Server, path: &str) -> (Vec<Value>, usize) {
    let mut seats = Vec::new();
    let mut pages = 0;
    let mut url = path.to_string();
    loop {
        let v = server.admin_get(&url).await;
        pages += 1;
        assert_eq!(v["total"].as_u64(), Some(300), "{url}");
        seats.extend(v["seats"].as_array().unwrap().iter().cloned());
        match v["next"].as_str() {
            Some(next) => url = format!("{path}&after={next}"),
            None => return (seats, pages),
        }
        assert!(pages < 100, "paging does not end: {path}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn seats_are_filtered_sorted_and_paged_by_the_store() {
    let server = Server::start(LICENSES).await;
    for i in 0..300 {
        let holder = if i % 10 == 0 {
            format!("Alice-{i:03}")
        } else {
            format!("user-{:03}", (i * 7) % 300)
        };
        let license = if i % 3 == 0 { "small" } else { "big" };
        if license == "small" && i >= 15 {
            // small has 5 seats: the rest go to big.
            server
                .take_seat(
                    "big",
                    "big-key",
                    json!({"holder": holder, "fingerprint": format!("fp-{i}")}),
                )
                .await;
            continue;
        }
        server
            .take_seat(
                license,
                &format!("{license}-key"),
                json!({"holder": holder, "fingerprint": format!("fp-{i}")}),
            )
            .await;
    }

    // Without limit: everything, as before, plus total and next.
    let all = server.admin_get("/v1/admin/seats").await;
    assert_eq!(seat_count(&all), 300);
    assert_eq!(all["total"], 300);
    assert!(all["next"].is_null());
    let all: Vec<Value> = all["seats"].as_array().unwrap().clone();

    let key = |s: &Value, sort: &str| -> (String, i64, String) {
        let ms = |f: &str| {
            leasehold_common::Timestamp::parse_rfc3339(s[f].as_str().unwrap())
                .unwrap()
                .as_millis()
        };
        let id = s["seat_id"].as_str().unwrap().to_string();
        match sort {
            "license" => (
                s["license_id"].as_str().unwrap().into(),
                ms("checked_out_at"),
                id,
            ),
            "holder" => (s["holder"].as_str().unwrap().into(), 0, id),
            "expires_at" => (String::new(), ms("expires_at"), id),
            _ => (String::new(), ms("checked_out_at"), id),
        }
    };
    let ids = |v: &[Value]| -> Vec<String> {
        v.iter()
            .map(|s| s["seat_id"].as_str().unwrap().to_string())
            .collect()
    };
    {
        let mut expected = all.clone();
        expected.sort_by_key(|s| key(s, "license"));
        assert_eq!(ids(&all), ids(&expected), "the order without sort");
    }
    for sort in ["license", "holder", "expires_at", "checked_out_at"] {
        for order in ["asc", "desc"] {
            let mut expected = all.clone();
            expected.sort_by_key(|s| key(s, sort));
            if order == "desc" {
                expected.reverse();
            }
            let (got, pages) = all_pages(
                &server,
                &format!("/v1/admin/seats?sort={sort}&order={order}&limit=37"),
            )
            .await;
            assert_eq!(pages, 9, "{sort} {order}");
            assert_eq!(ids(&got), ids(&expected), "{sort} {order}");
        }
    }

    // Filters: q (case-insensitive, holder / fingerprint / license id /
    // seat id) and license, with total counting the matches.
    let v = server.admin_get("/v1/admin/seats?q=aLiCe&limit=7").await;
    assert_eq!(v["total"], 30);
    assert_eq!(seat_count(&v), 7);
    assert!(v["next"].is_string());
    let v = server.admin_get("/v1/admin/seats?q=FP-29").await;
    // fp-29, fp-290..fp-299
    assert_eq!(v["total"], 11);
    let one = all[123]["seat_id"].as_str().unwrap();
    let v = server
        .admin_get(&format!("/v1/admin/seats?q={}", &one[..16].to_uppercase()))
        .await;
    assert_eq!(v["total"], 1);
    assert_eq!(v["seats"][0]["seat_id"], one);
    let v = server
        .admin_get("/v1/admin/seats?license=small&sort=holder&limit=2")
        .await;
    assert_eq!(v["total"], 5);
    assert_eq!(seat_count(&v), 2);
    // No holder, fingerprint or (hex) seat id contains "small": the
    // license id's five seats.
    let v = server.admin_get("/v1/admin/seats?q=SmAlL").await;
    assert_eq!(v["total"], 5);
    assert!(
        v["seats"]
            .as_array()
            .unwrap()
            .iter()
            .all(|s| s["license_id"] == "small")
    );
    let v = server.admin_get("/v1/admin/seats?q=nobody-at-all").await;
    assert_eq!(v["total"], 0);
    assert_eq!(seat_count(&v), 0);
    assert!(v["next"].is_null());
    let v = server.admin_get("/v1/admin/seats?limit=10000").await;
    assert_eq!(seat_count(&v), 300);
    assert!(v["next"].is_null());

    // Bad input: 400, invalid_request.
    let holder_cursor = server
        .admin_get("/v1/admin/seats?sort=holder&limit=1")
        .await["next"]
        .as_str()
        .unwrap()
        .to_string();
    for bad in [
        "sort=name".to_string(),
        "sort=".to_string(),
        "order=up".to_string(),
        "limit=0".to_string(),
        "limit=10001".to_string(),
        "limit=-1".to_string(),
        "limit=ten".to_string(),
        "after=not-a-cursor".to_string(),
        "after=7b7d".to_string(),
        format!("sort=expires_at&limit=5&after={holder_cursor}"),
        format!("sort=holder&order=desc&limit=5&after={holder_cursor}"),
        format!("q={}", "x".repeat(300)),
    ] {
        let resp = server
            .admin(Method::GET, &format!("/v1/admin/seats?{bad}"))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 400, "{bad}");
        assert_eq!(error_code(resp).await, "invalid_request", "{bad}");
    }
}
