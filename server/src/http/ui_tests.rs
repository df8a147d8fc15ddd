//! The dashboard's sign-in and roles in-process (`warp::test`): the viewer
//! role, the session cookie's attributes, CSRF, forwarding headers trusted
//! only from loopback, the login limiter and the security headers.

use std::net::SocketAddr;
use std::time::Duration;

use warp::http::StatusCode;

use super::routes;
use super::security_headers::CONTENT_SECURITY_POLICY_VALUE;
use super::tests::{ADMIN_ROUTES, ADMIN_TOKEN, Harness, VIEWER_TOKEN, json};

type Resp = warp::http::Response<bytes::Bytes>;

const LOOPBACK: &str = "127.0.0.1:50000";
const REMOTE: &str = "192.0.2.7:50000";
const HOST: &str = "leasehold.test:7400";

fn request(method: &str, path: &str, peer: &str) -> warp::test::RequestBuilder {
    warp::test::request()
        .method(method)
        .path(path)
        .header("host", HOST)
        .remote_addr(peer.parse::<SocketAddr>().unwrap())
}

async fn login(h: &Harness, token: &str, peer: &str) -> Resp {
    request("POST", "/ui/login", peer)
        .header("content-type", "application/json")
        .body(serde_json::json!({ "token": token }).to_string())
        .reply(&routes(h.state.clone()))
        .await
}

/// The session id from a login's `Set-Cookie`.
fn cookie_of(resp: &Resp) -> String {
    let set = resp.headers()["set-cookie"].to_str().unwrap();
    let pair = set.split(';').next().unwrap();
    pair.to_string()
}

async fn csrf_of(h: &Harness, cookie: &str) -> String {
    let resp = request("GET", "/ui/session", LOOPBACK)
        .header("cookie", cookie)
        .reply(&routes(h.state.clone()))
        .await;
    assert_eq!(resp.status(), StatusCode::OK);
    json(&resp)["csrf_token"].as_str().unwrap().to_string()
}

fn assert_security_headers(resp: &Resp, what: &str) {
    let h = resp.headers();
    assert_eq!(
        h.get("content-security-policy")
            .map(|v| v.to_str().unwrap()),
        Some(CONTENT_SECURITY_POLICY_VALUE),
        "{what}"
    );
    assert_eq!(h["x-content-type-options"], "nosniff", "{what}");
    assert_eq!(h["referrer-policy"], "no-referrer", "{what}");
}

#[tokio::test]
async fn the_viewer_token_reads_every_admin_route_and_changes_nothing() {
    let h = Harness::new();
    let viewer = format!("Bearer {VIEWER_TOKEN}");
    for (method, path) in &ADMIN_ROUTES[..4] {
        let resp = h.send(method, path, Some(&viewer), b"").await;
        if *method == "GET" {
            assert_eq!(resp.status(), StatusCode::OK, "{method} {path}");
        } else {
            assert_eq!(resp.status(), StatusCode::FORBIDDEN, "{method} {path}");
            assert_eq!(json(&resp)["error"], "forbidden");
        }
    }
    h.close().await;
}

#[tokio::test]
async fn login_sets_a_strict_cookie_and_the_session_answers_with_it() {
    let h = Harness::new();
    let resp = login(&h, ADMIN_TOKEN, REMOTE).await;
    assert_eq!(resp.status(), StatusCode::NO_CONTENT);
    assert_security_headers(&resp, "login");
    let set = resp.headers()["set-cookie"].to_str().unwrap().to_string();
    let id = set
        .strip_prefix("leasehold_session=")
        .and_then(|r| r.split(';').next())
        .unwrap();
    assert_eq!(id.len(), 64, "256 bits, hex: {set}");
    for attr in ["HttpOnly", "SameSite=Strict", "Path=/"] {
        assert!(set.contains(attr), "{set}");
    }
    assert!(!set.contains("Secure"), "plain HTTP: {set}");
    // Only the SHA-256 of the id is stored.
    assert!(h.state.store.ui_session(id).await.unwrap().is_none());

    let cookie = cookie_of(&resp);
    let resp = request("GET", "/ui/session", REMOTE)
        .header("cookie", format!("other=1; {cookie}"))
        .reply(&routes(h.state.clone()))
        .await;
    assert_eq!(resp.status(), StatusCode::OK);
    let v = json(&resp);
    assert_eq!(v["role"], "admin");
    assert_eq!(v["csrf_token"].as_str().unwrap().len(), 64);
    assert!(v["expires_at"].is_string());
    assert_eq!(resp.headers()["cache-control"], "no-store");

    let resp = login(&h, VIEWER_TOKEN, REMOTE).await;
    let cookie = cookie_of(&resp);
    let resp = request("GET", "/ui/session", REMOTE)
        .header("cookie", cookie)
        .reply(&routes(h.state.clone()))
        .await;
    assert_eq!(json(&resp)["role"], "viewer");
    h.close().await;
}

#[tokio::test]
async fn secure_is_set_only_when_a_loopback_proxy_says_https() {
    let h = Harness::new();
    for (peer, secure) in [(LOOPBACK, true), (REMOTE, false)] {
        let resp = request("POST", "/ui/login", peer)
            .header("x-forwarded-proto", "https")
            .header("content-type", "application/json")
            .body(serde_json::json!({ "token": ADMIN_TOKEN }).to_string())
            .reply(&routes(h.state.clone()))
            .await;
        let set = resp.headers()["set-cookie"].to_str().unwrap();
        assert_eq!(set.contains("; Secure"), secure, "{peer}: {set}");
    }
    h.close().await;
}

#[tokio::test]
async fn a_form_post_is_redirected_and_bad_logins_are_refused() {
    let h = Harness::new();
    let resp = request("POST", "/ui/login", REMOTE)
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!("token={VIEWER_TOKEN}"))
        .reply(&routes(h.state.clone()))
        .await;
    assert_eq!(resp.status(), StatusCode::SEE_OTHER);
    assert_eq!(resp.headers()["location"], "/ui/");
    assert!(resp.headers().contains_key("set-cookie"));

    for (ctype, body, status) in [
        ("application/json", r#"{"token": "wrong"}"#, 401),
        ("application/json", r#"{"token": ""}"#, 400),
        ("application/json", r#"["x"]"#, 400),
        ("application/json", r#"{"tok": 1}"#, 400),
        ("application/x-www-form-urlencoded", "nope=1", 400),
        ("text/plain", "token=x", 415),
    ] {
        let resp = request("POST", "/ui/login", REMOTE)
            .header("content-type", ctype)
            .body(body)
            .reply(&routes(h.state.clone()))
            .await;
        assert_eq!(resp.status().as_u16(), status, "{ctype} {body}");
        assert!(!resp.headers().contains_key("set-cookie"));
        assert_security_headers(&resp, body);
    }
    // A page on another site cannot sign a browser in.
    let resp = request("POST", "/ui/login", REMOTE)
        .header("origin", "https://evil.example")
        .header("content-type", "application/json")
        .body(serde_json::json!({ "token": ADMIN_TOKEN }).to_string())
        .reply(&routes(h.state.clone()))
        .await;
    assert_eq!(resp.status(), StatusCode::FORBIDDEN);
    assert_eq!(json(&resp)["error"], "csrf_failed");
    h.close().await;
}

#[tokio::test]
async fn a_cookie_state_change_needs_the_csrf_token_and_the_same_origin() {
    let h = Harness::new();
    let cookie = cookie_of(&login(&h, ADMIN_TOKEN, REMOTE).await);
    let csrf = csrf_of(&h, &cookie).await;
    let origin = format!("http://{HOST}");
    // (X-CSRF-Token, Origin, Sec-Fetch-Site, status)
    type Case<'a> = (Option<&'a str>, Option<&'a str>, Option<&'a str>, u16);
    let cases: [Case; 7] = [
        (None, Some(&origin), None, 403),
        (Some("0000"), Some(&origin), None, 403),
        (Some(&csrf), Some("http://evil.example"), None, 403),
        (Some(&csrf), None, Some("cross-site"), 403),
        (Some(&csrf), None, None, 403),
        // Through the guard: the seat does not exist.
        (Some(&csrf), Some(&origin), None, 404),
        (Some(&csrf), None, Some("same-origin"), 404),
    ];
    for (token, origin, site, status) in cases {
        let mut req = request("DELETE", "/v1/admin/seats/nope", REMOTE).header("cookie", &cookie);
        if let Some(t) = token {
            req = req.header("x-csrf-token", t);
        }
        if let Some(o) = origin {
            req = req.header("origin", o);
        }
        if let Some(s) = site {
            req = req.header("sec-fetch-site", s);
        }
        let resp = req.reply(&routes(h.state.clone())).await;
        assert_eq!(
            resp.status().as_u16(),
            status,
            "{token:?} {origin:?} {site:?}"
        );
        if status == 403 {
            assert_eq!(json(&resp)["error"], "csrf_failed");
        }
    }
    // A viewer's session may read but not revoke, CSRF or not.
    let cookie = cookie_of(&login(&h, VIEWER_TOKEN, REMOTE).await);
    let csrf = csrf_of(&h, &cookie).await;
    let resp = request("GET", "/v1/admin/seats", REMOTE)
        .header("cookie", &cookie)
        .reply(&routes(h.state.clone()))
        .await;
    assert_eq!(resp.status(), StatusCode::OK);
    let resp = request("DELETE", "/v1/admin/seats/nope", REMOTE)
        .header("cookie", &cookie)
        .header("x-csrf-token", &csrf)
        .header("origin", &origin)
        .reply(&routes(h.state.clone()))
        .await;
    assert_eq!(resp.status(), StatusCode::FORBIDDEN);
    assert_eq!(json(&resp)["error"], "forbidden");
    h.close().await;
}

#[tokio::test]
async fn logout_ends_the_session_everywhere() {
    let h = Harness::new();
    let cookie = cookie_of(&login(&h, ADMIN_TOKEN, REMOTE).await);
    let csrf = csrf_of(&h, &cookie).await;
    let resp = request("POST", "/ui/logout", REMOTE)
        .header("cookie", &cookie)
        .reply(&routes(h.state.clone()))
        .await;
    assert_eq!(resp.status(), StatusCode::FORBIDDEN, "no CSRF token");
    let resp = request("POST", "/ui/logout", REMOTE)
        .header("cookie", &cookie)
        .header("x-csrf-token", &csrf)
        .header("sec-fetch-site", "same-origin")
        .reply(&routes(h.state.clone()))
        .await;
    assert_eq!(resp.status(), StatusCode::NO_CONTENT);
    assert!(
        resp.headers()["set-cookie"]
            .to_str()
            .unwrap()
            .contains("Max-Age=0")
    );
    for path in ["/ui/session", "/v1/admin/seats"] {
        let resp = request("GET", path, REMOTE)
            .header("cookie", &cookie)
            .reply(&routes(h.state.clone()))
            .await;
        assert_eq!(resp.status(), StatusCode::UNAUTHORIZED, "{path}");
    }
    h.close().await;
}

#[tokio::test]
async fn an_idle_session_ends() {
    let h = Harness::with_idle_timeout(Duration::from_millis(300));
    let cookie = cookie_of(&login(&h, ADMIN_TOKEN, REMOTE).await);
    // Used more often than the timeout: it stays.
    for _ in 0..4 {
        tokio::time::sleep(Duration::from_millis(150)).await;
        let resp = request("GET", "/v1/admin/licenses", REMOTE)
            .header("cookie", &cookie)
            .reply(&routes(h.state.clone()))
            .await;
        assert_eq!(resp.status(), StatusCode::OK);
    }
    tokio::time::sleep(Duration::from_millis(400)).await;
    let resp = request("GET", "/ui/session", REMOTE)
        .header("cookie", &cookie)
        .reply(&routes(h.state.clone()))
        .await;
    assert_eq!(resp.status(), StatusCode::UNAUTHORIZED);
    assert_security_headers(&resp, "401");
    // The reaper's sweep deletes it.
    assert_eq!(super::ui_auth::expire_sessions(&h.state).await.unwrap(), 1);
    h.close().await;
}

#[tokio::test]
async fn failed_logins_are_limited_per_client() {
    let h = Harness::new();
    // Behind a loopback proxy, X-Forwarded-For names the client.
    let via_proxy = |client: &str| {
        request("POST", "/ui/login", LOOPBACK)
            .header("x-forwarded-for", format!("198.51.100.1, {client}"))
            .header("content-type", "application/json")
    };
    for _ in 0..10 {
        let resp = via_proxy("203.0.113.5")
            .body(r#"{"token": "wrong"}"#)
            .reply(&routes(h.state.clone()))
            .await;
        assert_eq!(resp.status(), StatusCode::UNAUTHORIZED);
    }
    let resp = via_proxy("203.0.113.5")
        .body(serde_json::json!({ "token": ADMIN_TOKEN }).to_string())
        .reply(&routes(h.state.clone()))
        .await;
    assert_eq!(resp.status(), StatusCode::TOO_MANY_REQUESTS);
    let wait: u64 = resp.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=60).contains(&wait), "{wait}");
    assert_security_headers(&resp, "429");
    // Another client is not held up.
    let resp = via_proxy("203.0.113.6")
        .body(serde_json::json!({ "token": ADMIN_TOKEN }).to_string())
        .reply(&routes(h.state.clone()))
        .await;
    assert_eq!(resp.status(), StatusCode::NO_CONTENT);
    // X-Forwarded-For from a remote peer is not believed: the peer counts.
    for _ in 0..10 {
        let resp = request("POST", "/ui/login", REMOTE)
            .header("x-forwarded-for", "203.0.113.99")
            .header("content-type", "application/json")
            .body(r#"{"token": "wrong"}"#)
            .reply(&routes(h.state.clone()))
            .await;
        assert_eq!(resp.status(), StatusCode::UNAUTHORIZED);
    }
    let resp = request("POST", "/ui/login", REMOTE)
        .header("x-forwarded-for", "203.0.113.100")
        .header("content-type", "application/json")
        .body(r#"{"token": "wrong"}"#)
        .reply(&routes(h.state.clone()))
        .await;
    assert_eq!(resp.status(), StatusCode::TOO_MANY_REQUESTS);
    h.close().await;
}

#[tokio::test]
async fn every_ui_response_carries_the_security_headers() {
    let h = Harness::new();
    let resp = request("GET", "/", REMOTE)
        .reply(&routes(h.state.clone()))
        .await;
    assert_eq!(resp.status(), StatusCode::SEE_OTHER);
    assert_eq!(resp.headers()["location"], "/ui/");
    assert_security_headers(&resp, "/");
    for (method, path, status) in [
        ("GET", "/ui/no-such-file", 404),
        ("GET", "/ui/session", 401),
        ("GET", "/ui/login", 405),
        ("POST", "/ui/logout", 204),
    ] {
        let resp = request(method, path, REMOTE)
            .reply(&routes(h.state.clone()))
            .await;
        assert_eq!(resp.status().as_u16(), status, "{method} {path}");
        assert_security_headers(&resp, path);
    }
    // The API itself is left as it was.
    let resp = h.send("GET", "/healthz", None, b"").await;
    assert!(resp.headers().get("content-security-policy").is_none());
    assert!(resp.headers().get("access-control-allow-origin").is_none());
    h.close().await;
}
