//! The dashboard's sign-in in-process (`warp::test`), for what the
//! end-to-end suite (`tests/tests/ui_auth.rs`, against the real binary)
//! cannot do: what the store keeps, peers other than loopback (forwarding
//! headers, the limiter per client) and time moved by hand (idle timeout,
//! lifetime, the reaper's sweep, an event stream outliving its sign-in).

use std::net::SocketAddr;
use std::time::Duration;

use warp::http::StatusCode;

use super::routes;
use super::tests::{ADMIN_TOKEN, Harness, SIGN_IN_LIFETIME, VIEWER_TOKEN, json};
use crate::clock::Clock;
use crate::sign_ins::id_sha256;

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

/// The sign-in cookie's `name=value` from a login's `Set-Cookie`.
fn cookie_of(resp: &Resp) -> String {
    let set = resp.headers()["set-cookie"].to_str().unwrap();
    let pair = set.split(';').next().unwrap();
    pair.to_string()
}

async fn get_with_cookie(h: &Harness, path: &str, cookie: &str) -> Resp {
    request("GET", path, REMOTE)
        .header("cookie", cookie)
        .reply(&routes(h.state.clone()))
        .await
}

#[tokio::test]
async fn only_the_sha256_of_the_sign_in_id_is_stored() {
    let h = Harness::new();
    for (token, role) in [(ADMIN_TOKEN, "admin"), (VIEWER_TOKEN, "viewer")] {
        let cookie = cookie_of(&login(&h, token, REMOTE).await);
        let id = cookie.strip_prefix("leasehold_session=").unwrap();
        assert!(h.state.store.sign_in(id).await.unwrap().is_none());
        let row = h.state.store.sign_in(&id_sha256(id)).await.unwrap();
        assert_eq!(row.expect("stored by its hash").role, role);
    }
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
async fn an_idle_sign_in_ends() {
    let idle = Duration::from_secs(30 * 60);
    let (h, clock) = Harness::with_manual_clock(idle);
    let signed_in = clock.now();
    let cookie = cookie_of(&login(&h, ADMIN_TOKEN, REMOTE).await);
    let resp = get_with_cookie(&h, "/ui/session", &cookie).await;
    assert_eq!(
        json(&resp)["expires_at"],
        serde_json::to_value(signed_in.saturating_add(idle)).unwrap(),
        "ends when idle, unless used"
    );
    // Used more often than the timeout: it stays, well past the timeout.
    for _ in 0..4 {
        clock.advance(idle / 2);
        let resp = get_with_cookie(&h, "/v1/admin/licenses", &cookie).await;
        assert_eq!(resp.status(), StatusCode::OK);
    }
    let sweep = || h.state.ui.sign_ins.expire(&h.state.store, clock.now());
    clock.advance(idle - Duration::from_millis(1));
    assert_eq!(sweep().await.unwrap(), 0, "not idle long enough yet");
    clock.advance(Duration::from_millis(1));
    for path in ["/ui/session", "/v1/admin/licenses"] {
        let resp = get_with_cookie(&h, path, &cookie).await;
        assert_eq!(resp.status(), StatusCode::UNAUTHORIZED, "{path}");
    }
    // The reaper's sweep deletes it.
    clock.advance(Duration::from_secs(1));
    assert_eq!(sweep().await.unwrap(), 1);
    h.close().await;
}

#[tokio::test]
async fn a_sign_in_ends_at_its_lifetime_however_active() {
    let idle = Duration::from_secs(30 * 60);
    let (h, clock) = Harness::with_manual_clock(idle);
    let signed_in = clock.now();
    let cookie = cookie_of(&login(&h, ADMIN_TOKEN, REMOTE).await);
    let step = Duration::from_secs(20 * 60);
    while clock.now().saturating_add(step) < signed_in.saturating_add(SIGN_IN_LIFETIME) {
        clock.advance(step);
        let resp = get_with_cookie(&h, "/v1/admin/licenses", &cookie).await;
        assert_eq!(resp.status(), StatusCode::OK, "used every 20 min");
    }
    clock.set(signed_in.saturating_add(SIGN_IN_LIFETIME));
    let resp = get_with_cookie(&h, "/ui/session", &cookie).await;
    assert_eq!(resp.status(), StatusCode::UNAUTHORIZED);
    clock.advance(Duration::from_secs(1));
    let swept = h.state.ui.sign_ins.expire(&h.state.store, clock.now());
    assert_eq!(swept.await.unwrap(), 1);
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
    assert_eq!(
        resp.status(),
        StatusCode::TOO_MANY_REQUESTS,
        "even the right token"
    );
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
async fn a_sign_in_stream_ends_when_the_clock_passes_its_lifetime() {
    let (h, clock) = Harness::with_manual_clock(Duration::from_secs(30 * 60));
    let cookie = cookie_of(&login(&h, ADMIN_TOKEN, REMOTE).await);
    // Twelve hours pass on the server's clock, not the test's, while the
    // stream is open: its sign-in is over, so the stream must end.
    let mover = {
        let clock = clock.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(300)).await;
            clock.advance(SIGN_IN_LIFETIME);
        })
    };
    // `reply` returns once the body ends: the server closed the stream.
    let resp = tokio::time::timeout(
        Duration::from_secs(10),
        get_with_cookie(&h, "/v1/admin/events/stream", &cookie),
    )
    .await
    .expect("the stream ended within a few seconds of the lifetime");
    assert_eq!(resp.status(), StatusCode::OK);
    mover.await.unwrap();
    h.close().await;
}

/// Open the event stream with `cookie` in a task of its own (`reply`
/// returns once the body ends), and wait until it watches its sign-in.
async fn stream_task(h: &Harness, cookie: &str) -> tokio::task::JoinHandle<Resp> {
    let req = request("GET", "/v1/admin/events/stream", REMOTE).header("cookie", cookie);
    let routes = routes(h.state.clone());
    let watches = h.state.ui.sign_ins.watches();
    let task = tokio::spawn(async move { req.reply(&routes).await });
    // The marker: the stream got past the guard and holds its sign-in's
    // watch, so an end of the sign-in reaches it from now on.
    tokio::time::timeout(Duration::from_secs(10), async {
        while h.state.ui.sign_ins.watches() <= watches {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .expect("the stream watches its sign-in");
    assert!(!task.is_finished(), "the stream is open");
    task
}

/// Well under the once-a-second re-read: the stream ended at the end.
async fn ended_at_once(stream: tokio::task::JoinHandle<Resp>, what: &str) {
    let resp = tokio::time::timeout(Duration::from_millis(400), stream)
        .await
        .unwrap_or_else(|_| panic!("{what}: the stream is still open"))
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK, "{what}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_sign_in_stream_ends_at_once_at_logout_and_at_a_new_sign_in() {
    let h = Harness::new();
    // Logout.
    let cookie = cookie_of(&login(&h, ADMIN_TOKEN, REMOTE).await);
    let csrf = json(&get_with_cookie(&h, "/ui/session", &cookie).await)["csrf_token"]
        .as_str()
        .unwrap()
        .to_string();
    let (first, second) = (
        stream_task(&h, &cookie).await,
        stream_task(&h, &cookie).await,
    );
    assert_eq!(h.state.ui.sign_ins.watched(), 1, "one sign-in, two streams");
    let resp = request("POST", "/ui/logout", REMOTE)
        .header("cookie", &cookie)
        .header("x-csrf-token", &csrf)
        .header("sec-fetch-site", "same-origin")
        .reply(&routes(h.state.clone()))
        .await;
    assert_eq!(resp.status(), StatusCode::NO_CONTENT);
    ended_at_once(first, "logout").await;
    ended_at_once(second, "logout").await;
    assert_eq!(
        h.state.ui.sign_ins.watched(),
        0,
        "forgotten with its streams"
    );

    // Signing in again ends the browser's previous sign-in, and its stream;
    // another sign-in's stream goes on.
    let old = cookie_of(&login(&h, ADMIN_TOKEN, REMOTE).await);
    let other = cookie_of(&login(&h, VIEWER_TOKEN, REMOTE).await);
    let (by_old, by_other) = (stream_task(&h, &old).await, stream_task(&h, &other).await);
    let resp = request("POST", "/ui/login", REMOTE)
        .header("cookie", &old)
        .header("content-type", "application/json")
        .body(serde_json::json!({ "token": ADMIN_TOKEN }).to_string())
        .reply(&routes(h.state.clone()))
        .await;
    assert_eq!(resp.status(), StatusCode::NO_CONTENT);
    ended_at_once(by_old, "a new sign-in").await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(!by_other.is_finished(), "the other sign-in's stream");
    assert_eq!(h.state.ui.sign_ins.watched(), 1);
    by_other.abort();
    let _ = by_other.await;
    assert_eq!(
        h.state.ui.sign_ins.watched(),
        0,
        "a dropped stream forgets it"
    );
    h.close().await;
}
