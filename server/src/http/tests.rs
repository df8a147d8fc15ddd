//! The routes in-process (`warp::test`): what the filters decide before any
//! handler runs — the admin guard, 405 with `Allow`, the body limit — and the
//! waiting line in the admin and metrics views.

use std::sync::Arc;
use std::time::Duration;

use leasehold_common::token::TokenSigner;
use leasehold_common::{Licenses, Timestamp};
use serde_json::Value;
use tokio::sync::watch;
use warp::http::StatusCode;

use super::{MAX_BODY, routes};
use crate::AppState;
use crate::clock::{ManualClock, SharedClock, SystemClock};
use crate::keys::AdminToken;
use crate::licenses::LicensesHandle;
use crate::line::Lines;
use crate::metrics::Metrics;
use crate::store::{self, Store, StoreOptions, Waiter};

const LICENSES: &str = r#"
[[license]]
id = "tiny"
key = "tiny-key"
seats = 1
ttl = "60s"
skew = "5s"
reap_grace = "15s"
"#;
const ADMIN: &str = "Bearer the-admin-token";
pub(super) const ADMIN_TOKEN: &str = "the-admin-token";
pub(super) const VIEWER_TOKEN: &str = "the-viewer-token";
/// How long a dashboard session lasts, however active.
pub(super) const SIGN_IN_LIFETIME: Duration = Duration::from_secs(12 * 3600);

/// Every admin route, with a path that reaches it.
pub(super) const ADMIN_ROUTES: [(&str, &str); 15] = [
    ("GET", "/v1/admin/licenses"),
    ("GET", "/v1/admin/entitlements"),
    ("GET", "/v1/admin/seats"),
    ("DELETE", "/v1/admin/seats/some-seat"),
    ("GET", "/v1/admin/events"),
    ("GET", "/v1/admin/events/stream"),
    ("GET", "/v1/admin/usage"),
    ("GET", "/v1/admin/sessions"),
    ("GET", "/v1/admin/denials"),
    ("GET", "/v1/admin/usage/what-if"),
    ("GET", "/v1/admin/webhooks"),
    ("GET", "/v1/admin/webhooks/deliveries"),
    ("POST", "/v1/admin/webhooks/ops/test"),
    ("GET", "/v1/admin/alerts"),
    ("GET", "/v1/admin/usage/attestation"),
];

/// A server's state on a fresh database in a temp dir.
pub(super) struct Harness {
    pub(super) state: Arc<AppState>,
    _stop: watch::Sender<bool>,
    _dir: tempfile::TempDir,
}

impl Harness {
    pub(super) fn new() -> Harness {
        Harness::with_clock(Arc::new(SystemClock), Duration::from_secs(1800))
    }

    /// On a clock the test moves by hand, with sessions idling out after
    /// `idle`.
    pub(super) fn with_manual_clock(idle: Duration) -> (Harness, Arc<ManualClock>) {
        let clock = ManualClock::new(Timestamp::from_millis(1_700_000_000_000));
        (Harness::with_clock(clock.clone(), idle), clock)
    }

    fn with_clock(clock: SharedClock, idle: Duration) -> Harness {
        let dir = tempfile::tempdir().expect("temp dir");
        let licenses = LicensesHandle::new(Licenses::parse(LICENSES).expect("licenses"));
        let store = Store::open(
            &store::database_path(dir.path()),
            licenses.clone(),
            clock.clone(),
            StoreOptions::default(),
        )
        .expect("store opens");
        let (stop, shutdown) = watch::channel(false);
        let state = Arc::new(AppState {
            store,
            licenses,
            signer: TokenSigner::from_seed(&[7; 32]),
            admin_token: AdminToken::new("the-admin-token"),
            metrics: Arc::new(Metrics::default()),
            clock,
            shutdown,
            lines: Arc::new(Lines::default()),
            ui: super::UiAuth::new(AdminToken::new(VIEWER_TOKEN), idle, SIGN_IN_LIFETIME),
        });
        Harness {
            state,
            _stop: stop,
            _dir: dir,
        }
    }

    pub(super) async fn send(
        &self,
        method: &str,
        path: &str,
        authorization: Option<&str>,
        body: &[u8],
    ) -> warp::http::Response<bytes::Bytes> {
        let mut req = warp::test::request().method(method).path(path).body(body);
        if let Some(a) = authorization {
            req = req.header("authorization", a);
        }
        req.reply(&routes(self.state.clone())).await
    }

    pub(super) async fn close(self) {
        self.state.store.close().await;
    }
}

pub(super) fn json(resp: &warp::http::Response<bytes::Bytes>) -> Value {
    serde_json::from_slice(resp.body()).expect("a JSON body")
}

#[tokio::test]
async fn every_admin_route_refuses_a_missing_or_wrong_token() {
    let h = Harness::new();
    for (i, (method, path)) in ADMIN_ROUTES.into_iter().enumerate() {
        // A client address per route: wrong tokens from one address are
        // limited (429) after ten.
        let peer: std::net::SocketAddr = format!("192.0.2.{}:1000", i + 1).parse().unwrap();
        for auth in [None, Some("Bearer wrong"), Some("tiny-key")] {
            let mut req = warp::test::request()
                .method(method)
                .path(path)
                .remote_addr(peer);
            if let Some(a) = auth {
                req = req.header("authorization", a);
            }
            let resp = req.reply(&routes(h.state.clone())).await;
            assert_eq!(resp.status(), StatusCode::UNAUTHORIZED, "{method} {path}");
            assert_eq!(json(&resp)["error"], "unauthorized", "{method} {path}");
            assert_eq!(resp.headers()["www-authenticate"], "Bearer");
        }
    }
    h.close().await;
}

#[tokio::test]
async fn the_admin_token_opens_the_admin_routes() {
    let h = Harness::new();
    // Not the stream: its body never ends.
    for (method, path) in &ADMIN_ROUTES[..4] {
        let resp = h.send(method, path, Some(ADMIN), b"").await;
        let status = resp.status();
        assert!(
            status == StatusCode::OK || (*method == "DELETE" && status == StatusCode::NOT_FOUND),
            "{method} {path}: {status}"
        );
    }
    h.close().await;
}

#[tokio::test]
async fn a_wrong_method_is_405_naming_the_allowed_ones() {
    let h = Harness::new();
    for (method, path, allow) in [
        ("PUT", "/v1/admin/licenses", "GET"),
        ("POST", "/healthz", "GET"),
        ("GET", "/v1/licenses/tiny/seats", "POST"),
        ("POST", "/v1/admin/seats/some-seat", "DELETE"),
    ] {
        let resp = h.send(method, path, Some(ADMIN), b"").await;
        assert_eq!(
            resp.status(),
            StatusCode::METHOD_NOT_ALLOWED,
            "{method} {path}"
        );
        assert_eq!(resp.headers()["allow"], allow, "{method} {path}");
        assert_eq!(json(&resp)["error"], "method_not_allowed");
    }
    let resp = h.send("GET", "/no/such/endpoint", None, b"").await;
    assert_eq!(resp.status(), StatusCode::NOT_FOUND);
    assert!(resp.headers().get("allow").is_none());
    h.close().await;
}

#[tokio::test]
async fn a_body_over_the_limit_is_413_before_authentication() {
    let h = Harness::new();
    let too_big = vec![b' '; MAX_BODY + 1];
    for (method, path) in [
        ("POST", "/v1/licenses/tiny/seats"),
        ("DELETE", "/v1/admin/seats/some-seat"),
    ] {
        let resp = h.send(method, path, None, &too_big).await;
        assert_eq!(
            resp.status(),
            StatusCode::PAYLOAD_TOO_LARGE,
            "{method} {path}"
        );
        assert_eq!(json(&resp)["error"], "payload_too_large");
        // At the limit the body is read, and the missing key is what fails.
        let resp = h.send(method, path, None, &too_big[1..]).await;
        assert_eq!(resp.status(), StatusCode::UNAUTHORIZED, "{method} {path}");
    }
    h.close().await;
}

#[tokio::test]
async fn the_waiting_line_shows_in_licenses_and_metrics() {
    let h = Harness::new();
    let waiter = |holder: &str| Waiter {
        holder: holder.to_string(),
        fingerprint: None,
    };
    let _first = h.state.lines.join("tiny", waiter("a")).await.unwrap();
    let _second = h.state.lines.join("tiny", waiter("b")).await.unwrap();
    let resp = h.send("GET", "/v1/admin/licenses", Some(ADMIN), b"").await;
    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(json(&resp)["licenses"][0]["waiting"], 2);
    let resp = h.send("GET", "/metrics", None, b"").await;
    let text = String::from_utf8_lossy(resp.body()).into_owned();
    assert!(
        text.contains("leasehold_waiting{license=\"tiny\"} 2"),
        "{text}"
    );
    h.close().await;
}
