//! The dashboard's server side against the real `leaseholdd`: the viewer
//! role on the bearer API, sign-in with the cookie, bad logins,
//! sign-in expiry and logout, CSRF on cookie-authenticated changes, the
//! failed-login limiter, the security headers of `/ui`, and an event stream
//! opened with the sign-in getting nothing once the sign-in has ended. Runs
//! on the store `LEASEHOLD_TEST_STORE` names.
//!
//! What needs a peer other than loopback, time moved by hand or a look into
//! the store is tested in-process (`server/src/http/ui_tests.rs`).

use std::time::Duration;

use leasehold_tests::{Server, ServerOptions, TestStore, license_toml, read_sse};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

#[rustfmt::skip]
const LICENSES: &str = concat!(
    license_toml!("small", seats = 5, ttl = "60s", skew = "5s", reap_grace = "15s"),
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

/// Sign in; the `name=value` of the sign-in cookie.
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

async fn sign_in_status(server: &Server, cookie: &str) -> Value {
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
async fn sign_in_status_and_logout() {
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
    let id = set
        .strip_prefix("leasehold_session=")
        .and_then(|r| r.split(';').next())
        .unwrap_or_else(|| panic!("{set}"));
    assert_eq!(id.len(), 64, "256 bits, hex: {set}");
    for attr in ["HttpOnly", "SameSite=Strict", "Path=/"] {
        assert!(set.contains(attr), "{set}");
    }
    assert!(!set.contains("Secure"), "plain HTTP: {set}");
    let admin_cookie = cookie_pair(&resp);
    // Found among other cookies; never cached.
    let resp = get_with_cookie(&server, "/ui/session", &format!("other=1; {admin_cookie}")).await;
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["cache-control"], "no-store");
    let s: Value = resp.json().await.unwrap();
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
    assert_eq!(
        sign_in_status(&server, &viewer_cookie).await["role"],
        "viewer"
    );

    // A wrong token: 401, no cookie.
    let resp = login(&server, "not-a-token").await;
    assert_eq!(resp.status(), 401);
    assert!(resp.headers().get("set-cookie").is_none());

    // The cookie opens the admin GETs, for both roles.
    for cookie in [&admin_cookie, &viewer_cookie] {
        for path in ["/v1/admin/licenses", "/v1/admin/seats", "/v1/admin/events"] {
            let resp = get_with_cookie(&server, path, cookie).await;
            assert_eq!(resp.status(), 200, "GET {path} with a sign-in cookie");
        }
    }

    // Logout needs the CSRF token; with it, it deletes the sign-in
    // server-side and clears the cookie.
    let logout = |cookie: &str| {
        client()
            .post(server.url("/ui/logout"))
            .header("cookie", cookie)
    };
    let resp = logout(&admin_cookie).send().await.unwrap();
    assert_eq!(resp.status(), 403, "no CSRF token");
    assert_eq!(error_code(resp).await, "csrf_failed");
    let csrf = sign_in_status(&server, &admin_cookie).await["csrf_token"]
        .as_str()
        .unwrap()
        .to_string();
    let resp = logout(&admin_cookie)
        .header("x-csrf-token", &csrf)
        .header("origin", format!("http://{}", server.addr))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 204);
    assert_security_headers(&resp, "204 /ui/logout");
    let set = resp.headers()["set-cookie"].to_str().unwrap();
    assert!(set.contains("Max-Age=0"), "{set}");
    for path in ["/ui/session", "/v1/admin/seats"] {
        let resp = get_with_cookie(&server, path, &admin_cookie).await;
        assert_eq!(resp.status(), 401, "{path} after logout");
    }
    // The other sign-in is untouched, and ends by its own logout (here
    // vouched for by Sec-Fetch-Site instead of Origin).
    let s = sign_in_status(&server, &viewer_cookie).await;
    assert_eq!(s["role"], "viewer");
    let resp = logout(&viewer_cookie)
        .header("x-csrf-token", s["csrf_token"].as_str().unwrap())
        .header("sec-fetch-site", "same-origin")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 204);
    let resp = get_with_cookie(&server, "/ui/session", &viewer_cookie).await;
    assert_eq!(resp.status(), 401, "the viewer's sign-in after its logout");
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_logins_are_refused_without_a_cookie() {
    let server = Server::start(LICENSES).await;
    let post = |ctype: &str, body: String| {
        client()
            .post(server.url("/ui/login"))
            .header("content-type", ctype)
            .body(body)
    };
    const FORM: &str = "application/x-www-form-urlencoded";
    // A form is decoded as browsers encode it: other fields are ignored,
    // `%XX` is a byte.
    let encoded: String = server
        .viewer_token()
        .bytes()
        .map(|b| format!("%{b:02X}"))
        .collect();
    let resp = post(FORM, format!("submit=Sign+in&token={encoded}"))
        .send()
        .await
        .unwrap();
    assert_eq!(
        resp.status(),
        StatusCode::SEE_OTHER,
        "a percent-encoded token"
    );
    assert!(resp.headers().contains_key("set-cookie"));

    for (ctype, body, status) in [
        ("application/json", r#"{"token": "wrong"}"#, 401),
        ("application/json", r#"{"token": ""}"#, 400),
        ("application/json", r#"["x"]"#, 400),
        ("application/json", r#"{"tok": 1}"#, 400),
        (FORM, "nope=1", 400),
        (FORM, "token", 400),
        ("text/plain", "token=x", 415),
    ] {
        let resp = post(ctype, body.to_string()).send().await.unwrap();
        assert_eq!(resp.status().as_u16(), status, "{ctype} {body}");
        assert!(resp.headers().get("set-cookie").is_none(), "{body}");
        assert_security_headers(&resp, body);
    }
    // A page on another site cannot sign a browser in.
    let resp = client()
        .post(server.url("/ui/login"))
        .header("origin", "https://evil.example")
        .json(&json!({ "token": server.admin_token }))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 403);
    assert!(resp.headers().get("set-cookie").is_none());
    assert_eq!(error_code(resp).await, "csrf_failed");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_sign_in_survives_a_restart_and_ends_when_idle() {
    let mut server = Server::start_with(
        ServerOptions::new(LICENSES)
            .arg("--ui-idle-timeout")
            .arg("2s"),
    )
    .await;
    let cookie = sign_in(&server, &server.admin_token.clone()).await;
    server.restart().await;
    let resp = get_with_cookie(&server, "/v1/admin/licenses", &cookie).await;
    assert_eq!(resp.status(), 200, "the sign-in after a restart");
    // The flag is honoured (how use keeps a sign-in alive is tested
    // in-process, on a clock moved by hand).
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
    let csrf = sign_in_status(&server, &cookie).await["csrf_token"]
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
        ("a short token", revoke(Some("0000"), Some(&origin), None)),
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

    // A viewer's sign-in cannot revoke, CSRF token or not.
    let lease = server
        .take_seat("small", "small-key", json!({"holder": "dee"}))
        .await;
    let viewer = sign_in(&server, &server.viewer_token()).await;
    let csrf = sign_in_status(&server, &viewer).await["csrf_token"]
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
    // The API itself is left as it was.
    let resp = client().get(server.url("/healthz")).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    assert!(resp.headers().get("content-security-policy").is_none());
    assert!(resp.headers().get("access-control-allow-origin").is_none());
}

/// Open the event stream at `base` (one replica, not the proxy) with the
/// sign-in `cookie`, from after event `after`.
async fn open_sign_in_stream(base: &str, cookie: &str, after: i64) -> reqwest::Response {
    // No overall timeout: the stream is meant to stay open.
    let resp = reqwest::Client::new()
        .get(format!("{base}/v1/admin/events/stream?after={after}"))
        .header("cookie", cookie)
        .send()
        .await
        .expect("open the stream");
    assert_eq!(resp.status(), 200, "stream opened");
    resp
}

/// The events `stream` sends until the server ends it; panics if it is
/// still open after `limit`.
async fn read_until_closed(stream: &mut reqwest::Response, limit: Duration) -> Vec<Value> {
    let deadline = tokio::time::Instant::now() + limit;
    let mut bytes = Vec::new();
    loop {
        match tokio::time::timeout_at(deadline, stream.chunk()).await {
            Err(_) => panic!(
                "the stream is still open after {limit:?}; it sent:\n{}",
                String::from_utf8_lossy(&bytes)
            ),
            Ok(Ok(Some(chunk))) => bytes.extend_from_slice(&chunk),
            Ok(Ok(None)) | Ok(Err(_)) => break,
        }
    }
    String::from_utf8(bytes)
        .expect("utf-8")
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .map(|data| serde_json::from_str(data.trim()).expect("an event's JSON"))
        .collect()
}

/// The sign-in's expiry as the server sees it, read without counting as
/// use.
async fn sign_in_ends_at(server: &Server, cookie: &str) -> String {
    let resp = client()
        .get(server.url("/ui/session"))
        .header("cookie", cookie)
        .header("x-leasehold-background", "1")
        .send()
        .await
        .expect("GET /ui/session");
    assert_eq!(resp.status(), 200, "GET /ui/session");
    let s: Value = resp.json().await.expect("json");
    s["expires_at"].as_str().expect("expires_at").to_string()
}

/// Logout ends the sign-in's streams before it answers: a checkout made
/// after the answer never reaches the logged-out stream (a stream that
/// only re-checked its sign-in every second delivered it). The stream and
/// the logout go to one replica: the replica that ends a sign-in ends its
/// streams at once (another one notices within its periodic check).
#[tokio::test(flavor = "multi_thread")]
async fn a_sign_in_stream_gets_no_event_made_after_the_logout_answered() {
    let server = Server::start(LICENSES).await;
    let replica = format!("http://{}", server.replica_addrs()[0]);
    for round in 0..20 {
        // This round's stream starts after the events of earlier rounds.
        let last_seen = server
            .events()
            .await
            .iter()
            .filter_map(|e| e["id"].as_i64())
            .max()
            .unwrap_or(0);
        let cookie = sign_in(&server, &server.admin_token).await;
        let csrf = sign_in_status(&server, &cookie).await["csrf_token"]
            .as_str()
            .unwrap()
            .to_string();
        let mut stream = open_sign_in_stream(&replica, &cookie, last_seen).await;
        // The stream is live: it delivers a checkout made now.
        let holder = format!("before-logout-{round}");
        let before = server
            .take_seat("small", "small-key", json!({ "holder": holder }))
            .await;
        let (_, event) = read_sse(&mut stream, 1).await.remove(0);
        assert_eq!(event["holder"], holder.as_str(), "round {round}");

        let resp = client()
            .post(format!("{replica}/ui/logout"))
            .header("cookie", &cookie)
            .header("x-csrf-token", &csrf)
            .header("sec-fetch-site", "same-origin")
            .send()
            .await
            .expect("logout");
        assert_eq!(resp.status(), 204, "round {round}: logout");
        // Every event from here on is made after the logout's answer.
        let late = server
            .take_seat(
                "small",
                "small-key",
                json!({ "holder": format!("after-logout-{round}") }),
            )
            .await;
        for seat in [&late.seat_id, &before.seat_id] {
            let resp = server.release("small", "small-key", seat).await;
            assert_eq!(resp.status(), 204, "round {round}: release");
        }
        let leaked = read_until_closed(&mut stream, Duration::from_secs(5)).await;
        assert!(
            leaked.is_empty(),
            "round {round}: events made after the logout answered reached its stream: {leaked:?}"
        );
    }
}

/// A stream opened with a sign-in that ends by time (`flag` set to 2 s)
/// sends no event made at or after the moment the sign-in ended, and then
/// ends, while checkouts go on.
async fn a_stream_sends_nothing_past_its_sign_in_end(flag: &str) {
    let server = Server::start_with(ServerOptions::new(LICENSES).arg(flag).arg("2s")).await;
    let replica = format!("http://{}", server.replica_addrs()[0]);
    let cookie = sign_in(&server, &server.viewer_token()).await;
    let ends_at = sign_in_ends_at(&server, &cookie).await;
    let mut stream = open_sign_in_stream(&replica, &cookie, 0).await;
    let busy = {
        let server_url = server.url("");
        tokio::spawn(async move {
            let client = reqwest::Client::new();
            let started = std::time::Instant::now();
            let mut i = 0;
            while started.elapsed() < Duration::from_millis(3500) {
                let seat: Value = client
                    .post(format!("{server_url}/v1/licenses/small/seats"))
                    .bearer_auth("small-key")
                    .json(&json!({ "holder": format!("busy-{i}") }))
                    .send()
                    .await
                    .expect("checkout")
                    .json()
                    .await
                    .expect("lease");
                let seat_id = seat["seat_id"].as_str().expect("a seat");
                client
                    .delete(format!("{server_url}/v1/licenses/small/seats/{seat_id}"))
                    .bearer_auth("small-key")
                    .send()
                    .await
                    .expect("release");
                i += 1;
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
    };
    let sent = read_until_closed(&mut stream, Duration::from_secs(6)).await;
    busy.await.expect("checkouts");
    assert!(!sent.is_empty(), "the stream delivered events while valid");
    // RFC 3339 in UTC with the same precision: compared as text.
    let late: Vec<_> = sent
        .iter()
        .filter(|e| e["at"].as_str().expect("at") >= ends_at.as_str())
        .collect();
    assert!(
        late.is_empty(),
        "{flag} 2s: the sign-in ended at {ends_at}, yet its stream sent {late:?}"
    );
    let made_after = server
        .events()
        .await
        .into_iter()
        .filter(|e| e["at"].as_str().expect("at") >= ends_at.as_str())
        .count();
    assert!(made_after > 0, "events went on after the sign-in ended");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_sign_in_stream_sends_nothing_past_the_sign_in_lifetime() {
    a_stream_sends_nothing_past_its_sign_in_end("--ui-session-lifetime").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_sign_in_stream_sends_nothing_past_the_idle_timeout() {
    a_stream_sends_nothing_past_its_sign_in_end("--ui-idle-timeout").await;
}
