//! The alert and webhook views in-process (`warp::test`): who may call
//! them, what they answer, how bad input is refused, and that a secret
//! never leaves in an answer. No worker runs here: queued deliveries stay
//! pending.

use std::sync::Arc;
use std::time::Duration;

use leasehold_common::Licenses;
use leasehold_common::token::TokenSigner;
use serde_json::Value;
use tokio::sync::watch;
use warp::http::StatusCode;

use super::routes;
use super::tests::{ADMIN_TOKEN, SIGN_IN_LIFETIME, VIEWER_TOKEN, json};
use crate::AppState;
use crate::clock::SystemClock;
use crate::keys::AdminToken;
use crate::licenses::LicensesHandle;
use crate::line::Lines;
use crate::metrics::Metrics;
use crate::store::{self, Store, StoreOptions};

const SECRET: &str = "the-ops-secret-0123";
const LICENSES: &str = r#"
[[webhook]]
name = "ops"
url = "http://127.0.0.1:9/hook"
secret = "the-ops-secret-0123"
events = ["revoke"]

[[webhook]]
name = "chat"
url = "http://127.0.0.1:9/chat"
secret = "the-chat-secret-0123"
format = "slack"

[[license]]
id = "cad"
key = "cad-key"
seats = 2
ttl = "60s"
skew = "5s"
reap_grace = "15s"

[[license.alert]]
name = "cad-full"
when = "full"
for = "5m"
webhooks = ["ops"]

[[license.alert]]
name = "cad-denied"
when = "denials"
count = 3
within = "15m"
"#;

struct Harness {
    state: Arc<AppState>,
    _stop: watch::Sender<bool>,
    _dir: tempfile::TempDir,
}

impl Harness {
    fn new() -> Harness {
        let dir = tempfile::tempdir().expect("temp dir");
        let licenses = LicensesHandle::new(Licenses::parse(LICENSES).expect("licenses"));
        let clock = Arc::new(SystemClock);
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
            admin_token: AdminToken::new(ADMIN_TOKEN),
            metrics: Arc::new(Metrics::default()),
            clock,
            shutdown,
            lines: Arc::new(Lines::default()),
            ui: super::UiAuth::new(
                AdminToken::new(VIEWER_TOKEN),
                Duration::from_secs(1800),
                SIGN_IN_LIFETIME,
            ),
        });
        Harness {
            state,
            _stop: stop,
            _dir: dir,
        }
    }

    async fn send(
        &self,
        method: &str,
        path: &str,
        token: Option<&str>,
    ) -> warp::http::Response<bytes::Bytes> {
        let mut req = warp::test::request().method(method).path(path);
        if let Some(t) = token {
            req = req.header("authorization", format!("Bearer {t}"));
        }
        req.reply(&routes(self.state.clone())).await
    }

    /// `GET` as the viewer, expecting `200`.
    async fn read(&self, path: &str) -> Value {
        let resp = self.send("GET", path, Some(VIEWER_TOKEN)).await;
        assert_eq!(resp.status(), StatusCode::OK, "{path}: {:?}", resp.body());
        assert!(
            !String::from_utf8_lossy(resp.body()).contains("secret-0123"),
            "{path} shows a secret"
        );
        json(&resp)
    }

    /// Queue a test delivery to `name` as the admin; its id.
    async fn queue_test(&self, name: &str) -> String {
        let path = format!("/v1/admin/webhooks/{name}/test");
        let resp = self.send("POST", &path, Some(ADMIN_TOKEN)).await;
        assert_eq!(resp.status(), StatusCode::ACCEPTED, "{:?}", resp.body());
        json(&resp)["id"].as_str().expect("an id").to_string()
    }

    async fn close(self) {
        self.state.store.close().await;
    }
}

/// The status and error code of an error answer; its message must name
/// `names`.
fn error_of(resp: &warp::http::Response<bytes::Bytes>, names: &str) -> (StatusCode, String) {
    let body = json(resp);
    let message = body["message"].as_str().unwrap_or_default();
    assert!(message.contains(names), "{message:?} names {names:?}");
    (
        resp.status(),
        body["error"].as_str().unwrap_or_default().to_string(),
    )
}

#[tokio::test]
async fn webhooks_are_listed_in_file_order_without_secrets() {
    let h = Harness::new();
    let body = h.read("/v1/admin/webhooks").await;
    let hooks = body["webhooks"].as_array().expect("webhooks");
    let names: Vec<&str> = hooks.iter().filter_map(|w| w["name"].as_str()).collect();
    assert_eq!(names, ["ops", "chat"]);
    assert_eq!(hooks[0]["url"], "http://127.0.0.1:9/hook");
    assert_eq!(hooks[0]["format"], "json");
    assert_eq!(hooks[1]["format"], "slack");
    assert_eq!(hooks[0]["events"], serde_json::json!(["revoke"]));
    for field in ["pending", "delivered", "failed"] {
        assert_eq!(hooks[0][field], 0, "{field}");
    }
    assert_eq!(hooks[0]["last_success_at"], Value::Null);
    assert_eq!(hooks[0]["last_error"], Value::Null);
    assert!(hooks[0].get("secret").is_none());

    h.queue_test("ops").await;
    let body = h.read("/v1/admin/webhooks").await;
    assert_eq!(body["webhooks"][0]["pending"], 1, "{body}");
    assert_eq!(body["webhooks"][1]["pending"], 0, "{body}");
    h.close().await;
}

#[tokio::test]
async fn a_test_delivery_is_for_the_admin_and_a_known_webhook() {
    let h = Harness::new();
    let path = "/v1/admin/webhooks/ops/test";
    let resp = h.send("POST", path, None).await;
    assert_eq!(resp.status(), StatusCode::UNAUTHORIZED);
    let resp = h.send("POST", path, Some(VIEWER_TOKEN)).await;
    assert_eq!(resp.status(), StatusCode::FORBIDDEN);
    assert_eq!(json(&resp)["error"], "forbidden");
    let resp = h
        .send("POST", "/v1/admin/webhooks/nope/test", Some(ADMIN_TOKEN))
        .await;
    assert_eq!(
        error_of(&resp, "nope"),
        (StatusCode::NOT_FOUND, "not_found".into())
    );
    let resp = h.send("GET", path, Some(ADMIN_TOKEN)).await;
    assert_eq!(resp.status(), StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(resp.headers()["allow"], "POST");

    let id = h.queue_test("ops").await;
    assert_eq!(id.len(), 32, "{id}");
    assert!(
        id.chars().all(|c| matches!(c, '0'..='9' | 'a'..='f')),
        "{id}"
    );
    let body = h.read("/v1/admin/webhooks/deliveries").await;
    let d = &body["deliveries"][0];
    assert_eq!(d["id"], id.as_str(), "{body}");
    assert_eq!(d["webhook"], "ops");
    assert_eq!(d["type"], "test");
    assert_eq!(d["status"], "pending");
    assert_eq!(d["attempts"], 0);
    assert_eq!(d["last_attempt_at"], Value::Null);
    assert_eq!(body["next"], Value::Null);
    h.close().await;
}

#[tokio::test]
async fn deliveries_page_newest_first_and_filter() {
    let h = Harness::new();
    let mut ids = Vec::new();
    for _ in 0..3 {
        ids.push(h.queue_test("ops").await);
    }
    ids.push(h.queue_test("chat").await);
    ids.reverse();

    let ids_of = |body: &Value| -> Vec<String> {
        body["deliveries"]
            .as_array()
            .expect("deliveries")
            .iter()
            .filter_map(|d| d["id"].as_str().map(str::to_string))
            .collect()
    };
    let all = h.read("/v1/admin/webhooks/deliveries").await;
    assert_eq!(ids_of(&all), ids, "newest first");

    let first = h.read("/v1/admin/webhooks/deliveries?limit=2").await;
    assert_eq!(ids_of(&first), ids[..2]);
    let next = first["next"].as_str().expect("a full page has a next");
    let second = h
        .read(&format!(
            "/v1/admin/webhooks/deliveries?limit=2&after={next}"
        ))
        .await;
    assert_eq!(ids_of(&second), ids[2..]);
    assert_eq!(second["next"], Value::Null, "the last page");

    let ops = h.read("/v1/admin/webhooks/deliveries?webhook=ops").await;
    assert_eq!(ids_of(&ops), ids[1..]);
    let pending = h
        .read("/v1/admin/webhooks/deliveries?status=pending&webhook=chat")
        .await;
    assert_eq!(ids_of(&pending), ids[..1]);
    let failed = h.read("/v1/admin/webhooks/deliveries?status=failed").await;
    assert_eq!(ids_of(&failed), Vec::<String>::new());
    h.close().await;
}

#[tokio::test]
async fn bad_delivery_queries_name_their_parameter() {
    let h = Harness::new();
    for (query, names) in [
        ("status=sent", "status"),
        ("status=", "status"),
        ("after=", "after"),
        ("after=%2B1", "after"),
        ("after=x", "after"),
        ("after=-1", "after"),
        ("limit=0", "limit"),
        ("limit=1001", "limit"),
        ("limit=ten", "limit"),
    ] {
        let path = format!("/v1/admin/webhooks/deliveries?{query}");
        let resp = h.send("GET", &path, Some(VIEWER_TOKEN)).await;
        assert_eq!(
            error_of(&resp, names),
            (StatusCode::BAD_REQUEST, "invalid_request".into()),
            "{query}"
        );
    }
    let resp = h
        .send(
            "GET",
            "/v1/admin/webhooks/deliveries?webhook=nope",
            Some(VIEWER_TOKEN),
        )
        .await;
    assert_eq!(
        error_of(&resp, "nope"),
        (StatusCode::NOT_FOUND, "not_found".into())
    );
    let resp = h
        .send("GET", "/v1/admin/webhooks/deliveries?limit=1000", None)
        .await;
    assert_eq!(resp.status(), StatusCode::UNAUTHORIZED);
    h.close().await;
}

#[tokio::test]
async fn alerts_are_listed_with_their_settings_and_state() {
    let h = Harness::new();
    let body = h.read("/v1/admin/alerts").await;
    let alerts = body["alerts"].as_array().expect("alerts");
    assert_eq!(alerts.len(), 2, "{body}");
    assert_eq!(alerts[0]["license_id"], "cad");
    assert_eq!(alerts[0]["alert"]["name"], "cad-full");
    assert_eq!(alerts[0]["alert"]["when"], "full");
    assert_eq!(alerts[0]["alert"]["for"], "5m");
    assert_eq!(alerts[0]["firing"], false);
    assert_eq!(alerts[0]["since"], Value::Null);
    assert_eq!(alerts[1]["alert"]["count"], 3);
    assert_eq!(alerts[1]["alert"]["within"], "15m");

    let licenses = h.read("/v1/admin/licenses").await;
    assert_eq!(
        licenses["licenses"][0]["alerts_firing"],
        serde_json::json!([]),
        "{licenses}"
    );
    let resp = h.send("GET", "/v1/admin/alerts", None).await;
    assert_eq!(resp.status(), StatusCode::UNAUTHORIZED);
    h.close().await;
}

#[tokio::test]
async fn metrics_show_every_webhook_and_alert() {
    let h = Harness::new();
    h.queue_test("ops").await;
    let resp = h.send("GET", "/metrics", None).await;
    let text = String::from_utf8_lossy(resp.body()).to_string();
    for line in [
        "leasehold_webhook_pending{webhook=\"ops\"} 1",
        "leasehold_webhook_pending{webhook=\"chat\"} 0",
        "leasehold_webhook_deliveries_total{webhook=\"chat\",result=\"retry\"} 0",
        "leasehold_alerts_firing{license=\"cad\",alert=\"cad-full\"} 0",
        "leasehold_alerts_firing{license=\"cad\",alert=\"cad-denied\"} 0",
    ] {
        assert!(text.lines().any(|l| l == line), "no {line:?} in {text}");
    }
    assert!(!text.contains(SECRET));
    h.close().await;
}
