//! Alerts and webhooks end to end (`docs/src/alerts-and-webhooks.md`), against the real
//! `leaseholdd` and a real receiver on a loopback port (`receiver.rs`)
//! that records every request and checks its `Leasehold-Signature` with
//! its own HMAC-SHA256: forwarded events (json and slack), `usage` and
//! `denials` alerts firing once while their condition holds and resolving, retries with
//! the same id and body, a stalled receiver, nothing lost across kill -9,
//! redirects not followed, the test endpoint and who sees what (never the
//! secret), and the licenses file's validation at start-up and on reload
//! (`webhooks/validation.rs`).
//! The two-replica cases on PostgreSQL are in `webhooks_pg.rs`.

#[path = "../src/beacon.rs"]
mod beacon;
#[path = "../src/receiver.rs"]
mod receiver;
#[path = "webhooks/validation.rs"]
mod validation;
#[path = "../src/webhook_kit.rs"]
mod webhook_kit;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use beacon::{Beacon, is_beacon_detail};
use futures_util::future::join_all;
use leasehold_tests::{Server, eventually};
use receiver::{Answer, Received, Receiver};
use serde_json::{Value, json};
use webhook_kit::{
    alert_toml, counter, deliveries, delivery, license_toml, metric_in, metrics_texts, send_test,
    webhook_toml, webhook_view,
};

const SECRET: &str = "ops-secret-0123456789abcdef";
const CHAT_SECRET: &str = "chat-secret-fedcba9876543210";
/// How long a delivery may take to arrive in the ordinary case.
const ARRIVES: Duration = Duration::from_secs(10);

/// The `type` of a json-format delivery (`""` if it has none).
fn type_of(r: &Received) -> String {
    serde_json::from_slice::<Value>(&r.body)
        .ok()
        .and_then(|v| v["type"].as_str().map(str::to_string))
        .unwrap_or_default()
}

fn of_type(got: &[Received], kind: &str) -> Vec<Received> {
    got.iter().filter(|r| type_of(r) == kind).cloned().collect()
}

/// A json-format delivery as the brief has it: POST, JSON content type, a
/// valid signature, every field present, `id` = `Leasehold-Delivery`.
fn json_delivery(r: &Received) -> Value {
    assert_eq!(r.method, "POST", "{}", receiver::summary(r));
    let content_type = r.header("content-type").unwrap_or_default();
    assert!(
        content_type.starts_with("application/json"),
        "Content-Type {content_type:?}"
    );
    r.valid_signature();
    let body = r.json();
    for field in ["id", "type", "at", "license_id", "alert", "event", "text"] {
        assert!(body.get(field).is_some(), "no {field:?} in {body}");
    }
    assert_eq!(body["id"], r.delivery_id(), "body id = Leasehold-Delivery");
    assert_eq!(
        body["id"].as_str().map(str::len),
        Some(32),
        "a 32-hex-digit id: {body}"
    );
    assert!(
        body["text"].as_str().is_some_and(|t| !t.is_empty()),
        "a sentence: {body}"
    );
    body
}

/// `leasehold_alerts_firing{license,alert}` on every replica, once each
/// reports a value (`None`: absent).
async fn firing_gauge(s: &Server, license: &str, alert: &str) -> Vec<Option<f64>> {
    metrics_texts(s)
        .await
        .iter()
        .map(|t| {
            metric_in(
                t,
                "leasehold_alerts_firing",
                &[("license", license), ("alert", alert)],
            )
        })
        .collect()
}

/// `leasehold_webhook_pending{webhook}`, the distinct values the replicas
/// report (each reads the same store).
async fn pending_gauge(s: &Server, webhook: &str) -> Vec<f64> {
    let mut values: Vec<f64> = metrics_texts(s)
        .await
        .iter()
        .map(|t| {
            metric_in(t, "leasehold_webhook_pending", &[("webhook", webhook)])
                .unwrap_or_else(|| panic!("no leasehold_webhook_pending for {webhook} in\n{t}"))
        })
        .collect();
    values.dedup();
    values
}

async fn alerts_firing(s: &Server, license: &str) -> Value {
    s.license(license).await["alerts_firing"].clone()
}

/// The details of the `alert` events (`firing <name>`), but the
/// beacon's ([`Beacon`]).
async fn alert_details(s: &Server) -> Vec<String> {
    s.events_of("alert")
        .await
        .iter()
        .map(|e| e["detail"].as_str().unwrap_or_default().to_string())
        .filter(|d| !is_beacon_detail(d))
        .collect()
}

/// The `type`s of the deliveries to `webhook` in the outbox, newest first.
async fn queued_types(s: &Server, webhook: &str) -> Vec<String> {
    deliveries(s, &format!("webhook={webhook}"))
        .await
        .iter()
        .map(|d| d["type"].as_str().unwrap_or_default().to_string())
        .collect()
}

#[test]
fn the_receivers_hmac_is_rfc_4231() {
    // RFC 4231, test case 2.
    let mac = receiver::hmac_sha256(b"Jefe", b"what do ya want for nothing?");
    let hex: String = mac.iter().map(|b| format!("{b:02x}")).collect();
    assert_eq!(
        hex,
        "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
    );
    // A key longer than the block is hashed first (test case 6).
    let mac = receiver::hmac_sha256(
        &[0xaa; 131],
        b"Test Using Larger Than Block-Size Key - Hash Key First",
    );
    let hex: String = mac.iter().map(|b| format!("{b:02x}")).collect();
    assert_eq!(
        hex,
        "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"
    );
    let body = br#"{"text":"hi"}"#;
    let sig = format!(
        "t=1700000000,v1={}",
        receiver::hmac_sha256(b"k", b"1700000000.{\"text\":\"hi\"}")
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect::<String>()
    );
    assert!(receiver::verify_signature("k", &sig, body, 1_700_000_010).is_ok());
    assert!(receiver::verify_signature("other", &sig, body, 1_700_000_010).is_err());
    assert!(receiver::verify_signature("k", &sig, b"{}", 1_700_000_010).is_err());
    assert!(receiver::verify_signature("k", &sig.to_uppercase(), body, 1_700_000_010).is_err());
}

/// The receiver itself: refuses while down, answers as told, records what
/// it got and checks signatures (so a passing suite is not a deaf one).
#[tokio::test]
async fn the_receiver_answers_as_told() {
    let r = Receiver::down("receiver-secret-0123");
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(Duration::from_secs(1))
        .build()
        .unwrap();
    let post = |body: &'static str, sig: Option<String>| {
        let mut req = client
            .post(r.url("/hook"))
            .header("leasehold-delivery", "d1")
            .body(body);
        if let Some(sig) = sig {
            req = req.header("leasehold-signature", sig);
        }
        req.send()
    };
    assert!(post("{}", None).await.unwrap_err().is_connect(), "down");
    r.up();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let mac = receiver::hmac_sha256(b"receiver-secret-0123", format!("{now}.{{}}").as_bytes());
    let hex: String = mac.iter().map(|b| format!("{b:02x}")).collect();
    r.answer_next([Answer::Status(500), Answer::Redirect("/x".into())]);
    let signed = Some(format!("t={now},v1={hex}"));
    assert_eq!(post("{}", signed.clone()).await.unwrap().status(), 500);
    assert_eq!(post("{}", signed.clone()).await.unwrap().status(), 302);
    assert_eq!(post("{}", signed).await.unwrap().status(), 200);
    assert_eq!(post("[]", None).await.unwrap().status(), 200);
    r.answer_always(Answer::Stall(Duration::from_secs(5)));
    assert!(post("{}", None).await.unwrap_err().is_timeout(), "stalls");
    r.go_down().await;
    assert!(
        post("{}", None).await.unwrap_err().is_connect(),
        "down again"
    );
    r.answer_always(Answer::OK);
    r.up();
    assert_eq!(post("{}", None).await.unwrap().status(), 200, "up again");
    let got = r.received();
    assert_eq!(got.len(), 6, "{got:?}");
    assert!(got[..3].iter().all(|g| g.signature.is_ok()));
    assert!(got[3..].iter().all(|g| g.signature.is_err()));
    assert_eq!(got[3].body, b"[]");
    assert_eq!(got[0].delivery_id(), "d1");
    assert_eq!(got[0].path, "/hook");
}

#[tokio::test]
async fn a_revoke_is_forwarded_once_signed_to_a_json_and_a_slack_webhook() {
    let ops = Receiver::start(SECRET).await;
    let chat = Receiver::start(CHAT_SECRET).await;
    let licenses = [
        webhook_toml("ops", &ops.url("/ops"), SECRET, "json", &["revoke"]),
        webhook_toml(
            "chat",
            &chat.url("/chat"),
            CHAT_SECRET,
            "slack",
            &["revoke"],
        ),
        license_toml("cad", 2),
    ]
    .concat();
    let s = Server::start(&licenses).await;
    let lease = s
        .take_seat("cad", "cad-key", json!({"holder": "ann"}))
        .await;
    assert_eq!(s.revoke(&lease.seat_id).send().await.unwrap().status(), 204);
    let got = ops.wait_for(1, ARRIVES).await;
    let slack = chat.wait_for(1, ARRIVES).await;
    // The checkout is not a forwarded kind: nothing else comes. The marker
    // is the revoke's deliveries: an event's deliveries are queued in the
    // writer's transaction that writes it, so once they are listed the
    // checkout's would be too; and once every listed delivery is
    // delivered, nothing is left to send.
    for (id, webhook) in [
        (got[0].delivery_id(), "ops"),
        (slack[0].delivery_id(), "chat"),
    ] {
        let d = eventually(ARRIVES, "the delivery listed as delivered", || async {
            delivery(&s, id)
                .await
                .filter(|d| d["status"] == "delivered")
        })
        .await;
        assert_eq!(d["webhook"], webhook, "{d}");
        assert_eq!(d["type"], "event", "{d}");
        assert_eq!(d["attempts"], 1, "{d}");
    }
    let listed = deliveries(&s, "").await;
    assert_eq!(listed.len(), 2, "only the revoke's, once each: {listed:?}");
    assert_eq!(ops.received().len(), 1, "one delivery: {got:?}");
    assert_eq!(chat.received().len(), 1, "one delivery: {slack:?}");

    let body = json_delivery(&got[0]);
    eprintln!("revoke delivery: {body}\nslack: {}", slack[0].text());
    assert_eq!(got[0].path, "/ops");
    assert_eq!(body["type"], "event", "{body}");
    assert_eq!(body["license_id"], "cad", "{body}");
    assert_eq!(body["alert"], Value::Null, "{body}");
    assert_eq!(body["event"]["kind"], "revoke", "{body}");
    assert_eq!(body["event"]["seat_id"], lease.seat_id.as_str(), "{body}");
    let revokes = s.events_of("revoke").await;
    assert_eq!(revokes.len(), 1, "{revokes:?}");
    assert_eq!(
        body["event"], revokes[0],
        "the event as /v1/admin/events has it"
    );

    // slack: exactly {"text": the same sentence}, signed with its own secret.
    let r = &slack[0];
    assert_eq!(r.path, "/chat");
    assert!(
        r.header("content-type")
            .unwrap_or_default()
            .starts_with("application/json")
    );
    r.valid_signature();
    let text = r.json();
    let object = text.as_object().expect("a JSON object");
    assert_eq!(object.len(), 1, "only text: {text}");
    assert_eq!(
        text["text"], body["text"],
        "the same sentence, byte for byte"
    );
    assert_ne!(r.delivery_id(), got[0].delivery_id(), "one id per webhook");
}

#[tokio::test]
async fn a_usage_alert_fires_once_while_it_holds_across_a_restart_and_resolves() {
    let ops = Receiver::start(SECRET).await;
    let beacon = Beacon::start().await;
    let licenses = [
        webhook_toml("ops", &ops.url("/ops"), SECRET, "json", &[]),
        license_toml("cad", 2),
        alert_toml(
            "cad-busy",
            "usage",
            &["percent = 50", "for = \"1s\"", "webhooks = [\"ops\"]"],
        ),
        beacon.usage_toml("1s"),
    ]
    .concat();
    let mut s = Server::start(&licenses).await;
    // The beacon, held from now for the same 1 s, fires no sooner than
    // cad-busy would have if the idle pool counted as busy.
    beacon.take(&s).await;
    beacon.wait("alert.firing", "beacon-held", 1).await;
    assert_eq!(
        alert_details(&s).await,
        [] as [&str; 0],
        "an idle pool fires nothing"
    );
    assert_eq!(queued_types(&s, "ops").await, [] as [&str; 0]);
    assert!(ops.received().is_empty(), "an idle pool fires nothing");
    beacon.release(&s).await;
    beacon.wait("alert.resolved", "beacon-held", 1).await;

    let held_from = Instant::now();
    let lease = s
        .take_seat("cad", "cad-key", json!({"holder": "ann"}))
        .await;
    let got = ops
        .wait_until(ARRIVES, "alert.firing", |r| {
            !of_type(r, "alert.firing").is_empty()
        })
        .await;
    let firing = &of_type(&got, "alert.firing")[0];
    assert!(
        firing.at.duration_since(held_from) >= Duration::from_secs(1),
        "fires only once usage held for 1s"
    );
    let body = json_delivery(firing);
    eprintln!("firing delivery: {body}");
    assert_eq!(body["license_id"], "cad", "{body}");
    assert_eq!(body["event"], Value::Null, "{body}");
    let alert = &body["alert"];
    assert_eq!(
        (
            &alert["name"],
            &alert["when"],
            &alert["percent"],
            &alert["for"]
        ),
        (
            &json!("cad-busy"),
            &json!("usage"),
            &json!(50),
            &json!("1s")
        ),
        "{body}"
    );
    let text = body["text"].as_str().unwrap();
    assert!(text.starts_with("cad-busy firing"), "{text}");
    assert_eq!(alert_details(&s).await, ["firing cad-busy"]);
    assert_eq!(alerts_firing(&s, "cad").await, json!(["cad-busy"]));
    eventually(ARRIVES, "leasehold_alerts_firing 1", || async {
        firing_gauge(&s, "cad", "cad-busy")
            .await
            .iter()
            .all(|v| *v == Some(1.0))
            .then_some(())
    })
    .await;

    // Still holding, across a kill -9 and restart: no second firing. The
    // beacon, held from after the restart for the same 1 s, fires no
    // sooner than cad-busy would fire again had the restart forgotten it.
    s.restart().await;
    assert_eq!(
        s.heartbeat("cad", "cad-key", &lease.seat_id).await.status(),
        200
    );
    beacon.take(&s).await;
    beacon.wait("alert.firing", "beacon-held", 2).await;
    assert_eq!(queued_types(&s, "ops").await, ["alert.firing"]);
    assert_eq!(
        of_type(&ops.received(), "alert.firing").len(),
        1,
        "fires once while it holds: {:?}",
        ops.received()
    );
    assert_eq!(alert_details(&s).await, ["firing cad-busy"]);
    assert_eq!(alerts_firing(&s, "cad").await, json!(["cad-busy"]));
    eventually(
        ARRIVES,
        "leasehold_alerts_firing 1 after restart",
        || async {
            firing_gauge(&s, "cad", "cad-busy")
                .await
                .iter()
                .all(|v| *v == Some(1.0))
                .then_some(())
        },
    )
    .await;

    // Released: below 50 %, resolved once.
    assert_eq!(
        s.release("cad", "cad-key", &lease.seat_id).await.status(),
        204
    );
    let got = ops
        .wait_until(ARRIVES, "alert.resolved", |r| {
            !of_type(r, "alert.resolved").is_empty()
        })
        .await;
    let resolved = json_delivery(&of_type(&got, "alert.resolved")[0]);
    assert_eq!(resolved["alert"]["name"], "cad-busy", "{resolved}");
    let text = resolved["text"].as_str().unwrap();
    assert!(text.starts_with("cad-busy resolved"), "{text}");
    assert_ne!(resolved["id"], body["id"], "one id per transition");
    assert_eq!(
        alert_details(&s).await,
        ["firing cad-busy", "resolved cad-busy"]
    );
    assert_eq!(alerts_firing(&s, "cad").await, json!([]));
    eventually(ARRIVES, "leasehold_alerts_firing not 1", || async {
        firing_gauge(&s, "cad", "cad-busy")
            .await
            .iter()
            .all(|v| v.unwrap_or(0.0) == 0.0)
            .then_some(())
    })
    .await;
    // Nothing after: the beacon, released and taken again from now, fires
    // no sooner than cad-busy would resolve again or fire anew.
    beacon.release(&s).await;
    beacon.wait("alert.resolved", "beacon-held", 2).await;
    beacon.take(&s).await;
    beacon.wait("alert.firing", "beacon-held", 3).await;
    assert_eq!(
        alert_details(&s).await,
        ["firing cad-busy", "resolved cad-busy"]
    );
    let all = ops.received();
    assert_eq!(all.len(), 2, "one firing, one resolved: {all:?}");
    let listed = deliveries(&s, "webhook=ops").await;
    let kinds: Vec<&str> = listed.iter().filter_map(|d| d["type"].as_str()).collect();
    assert_eq!(
        kinds,
        ["alert.resolved", "alert.firing"],
        "newest first: {listed:?}"
    );
}

#[tokio::test]
async fn a_denials_alert_fires_at_the_refusal_that_reaches_count() {
    let ops = Receiver::start(SECRET).await;
    let beacon = Beacon::start().await;
    let licenses = [
        webhook_toml("ops", &ops.url("/ops"), SECRET, "json", &[]),
        license_toml("one", 1),
        alert_toml(
            "one-denied",
            "denials",
            &["count = 2", "within = \"1m\"", "webhooks = [\"ops\"]"],
        ),
        beacon.denials_toml(2),
    ]
    .concat();
    let s = Server::start(&licenses).await;
    s.take_seat("one", "one-key", json!({"holder": "a"})).await;
    beacon.take(&s).await;
    let refuse = |holder: &'static str| {
        let s = &s;
        async move {
            let resp = s
                .checkout("one", "one-key", json!({"holder": holder}))
                .await;
            assert_eq!(resp.status(), 409);
            let body: Value = resp.json().await.unwrap();
            assert_eq!(body["error"], "no_seats_available", "{body}");
        }
    };
    refuse("b").await;
    // Every alert evaluated since: one-denied saw the refusal.
    beacon.refuse_and_wait(&s).await;
    assert_eq!(alert_details(&s).await, [] as [&str; 0]);
    assert_eq!(queued_types(&s, "ops").await, [] as [&str; 0]);
    assert!(ops.received().is_empty(), "one refusal is under count");
    let second = Instant::now();
    refuse("c").await;
    let got = ops.wait_for(1, ARRIVES).await;
    eprintln!(
        "firing arrived {:?} after the second refusal",
        got[0].at - second
    );
    let body = json_delivery(&got[0]);
    assert_eq!(body["type"], "alert.firing", "{body}");
    assert_eq!(body["license_id"], "one", "{body}");
    let alert = &body["alert"];
    assert_eq!(
        (
            &alert["name"],
            &alert["when"],
            &alert["count"],
            &alert["within"]
        ),
        (
            &json!("one-denied"),
            &json!("denials"),
            &json!(2),
            &json!("1m")
        ),
        "{body}"
    );
    assert!(
        body["text"]
            .as_str()
            .unwrap()
            .starts_with("one-denied firing"),
        "{body}"
    );
    // A third refusal in the window: it still holds, no second firing.
    refuse("d").await;
    beacon.refuse_and_wait(&s).await;
    assert_eq!(queued_types(&s, "ops").await, ["alert.firing"]);
    assert_eq!(ops.received().len(), 1, "{:?}", ops.received());
    assert_eq!(alert_details(&s).await, ["firing one-denied"]);
    assert_eq!(alerts_firing(&s, "one").await, json!(["one-denied"]));
}

/// A `?wait=` checkout that gives up is one denial, not one per second
/// it waited: with `count = 2` it alone does not fire.
#[tokio::test]
async fn a_wait_that_gives_up_counts_as_one_denial() {
    let ops = Receiver::start(SECRET).await;
    let beacon = Beacon::start().await;
    let licenses = [
        webhook_toml("ops", &ops.url("/ops"), SECRET, "json", &[]),
        license_toml("one", 1),
        alert_toml(
            "one-denied",
            "denials",
            &["count = 2", "within = \"1m\"", "webhooks = [\"ops\"]"],
        ),
        beacon.denials_toml(1),
    ]
    .concat();
    let s = Server::start(&licenses).await;
    s.take_seat("one", "one-key", json!({"holder": "a"})).await;
    beacon.take(&s).await;
    let resp = s
        .client()
        .post(s.url("/v1/licenses/one/seats?wait=2"))
        .bearer_auth("one-key")
        .json(&json!({"holder": "w"}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 409);
    // Every alert evaluated since the wait gave up.
    beacon.refuse_and_wait(&s).await;
    assert_eq!(alert_details(&s).await, [] as [&str; 0]);
    assert_eq!(queued_types(&s, "ops").await, [] as [&str; 0]);
    assert!(
        ops.received().is_empty(),
        "one wait is one denial: {:?}",
        ops.received()
    );
    let resp = s.checkout("one", "one-key", json!({"holder": "b"})).await;
    assert_eq!(resp.status(), 409);
    let got = ops.wait_for(1, ARRIVES).await;
    assert_eq!(json_delivery(&got[0])["type"], "alert.firing");
}

/// The brief rejects a URL that carries a password, and lists `url`
/// "without any userinfo": a user name alone is accepted and not shown.
#[tokio::test]
async fn a_failing_receiver_gets_retries_with_the_same_id_and_body_signed_afresh() {
    let ops = Receiver::start(SECRET).await;
    ops.answer_next([Answer::Status(500), Answer::Status(500)]);
    let licenses = [
        webhook_toml("ops", &ops.url("/ops"), SECRET, "json", &[]),
        license_toml("cad", 1),
    ]
    .concat();
    let s = Server::start(&licenses).await;
    let id = send_test(&s, "ops").await;

    // After the first 500: pending, and the webhook shows the error.
    ops.wait_for(1, ARRIVES).await;
    let view = eventually(Duration::from_secs(3), "last_error after a 500", || async {
        let w = webhook_view(&s, "ops").await;
        w["last_error"]
            .as_str()
            .is_some_and(|e| e.contains("500"))
            .then_some(w)
    })
    .await;
    assert_eq!(
        (&view["pending"], &view["delivered"], &view["failed"]),
        (&json!(1), &json!(0), &json!(0)),
        "{view}"
    );
    assert_eq!(view["last_success_at"], Value::Null, "{view}");
    let d = delivery(&s, &id).await.expect("listed");
    assert_eq!(d["status"], "pending", "{d}");
    assert!(
        d["last_error"].as_str().unwrap_or("").contains("500"),
        "{d}"
    );
    assert_eq!(pending_gauge(&s, "ops").await, [1.0], "while it retries");

    let got = ops.wait_for(3, ARRIVES).await;
    assert_eq!(
        got.iter().map(|r| r.answer.clone()).collect::<Vec<_>>(),
        [Answer::Status(500), Answer::Status(500), Answer::OK]
    );
    for r in &got {
        assert_eq!(r.delivery_id(), id, "the same Leasehold-Delivery");
        assert_eq!(r.body, got[0].body, "the same body bytes");
        let sig = r.valid_signature();
        assert!(
            sig.t.abs_diff(r.unix) <= 2,
            "signed at the attempt: {sig:?}"
        );
    }
    let body = json_delivery(&got[0]);
    assert_eq!(body["type"], "test", "{body}");
    let (t0, t2) = (got[0].valid_signature().t, got[2].valid_signature().t);
    assert!(t0 < t2, "each attempt signed afresh: t={t0} then t={t2}");
    let (gap1, gap2) = (got[1].at - got[0].at, got[2].at - got[1].at);
    assert!(
        gap1 >= Duration::from_millis(900) && gap2 >= Duration::from_millis(1800),
        "backoff from 1 s doubling: {gap1:?}, {gap2:?}"
    );

    let d = eventually(ARRIVES, "delivered after 3 attempts", || async {
        delivery(&s, &id)
            .await
            .filter(|d| d["status"] == "delivered")
    })
    .await;
    assert_eq!(d["attempts"], 3, "{d}");
    assert_eq!(d["type"], "test", "{d}");
    assert!(!d["last_attempt_at"].is_null(), "{d}");
    let view = webhook_view(&s, "ops").await;
    assert_eq!(
        (&view["pending"], &view["delivered"], &view["failed"]),
        (&json!(0), &json!(1), &json!(0)),
        "{view}"
    );
    assert_eq!(view["last_error"], Value::Null, "succeeded since: {view}");
    assert!(!view["last_success_at"].is_null(), "{view}");
    let total = "leasehold_webhook_deliveries_total";
    assert_eq!(
        counter(&s, total, &[("webhook", "ops"), ("result", "retry")]).await,
        2.0
    );
    assert_eq!(
        counter(&s, total, &[("webhook", "ops"), ("result", "delivered")]).await,
        1.0
    );
    assert_eq!(
        counter(&s, total, &[("webhook", "ops"), ("result", "failed")]).await,
        0.0
    );
    assert_eq!(pending_gauge(&s, "ops").await, [0.0]);
    // Nothing after success: a later delivery to the same webhook is
    // claimed and sent after it, and the first is not sent again.
    let marker = send_test(&s, "ops").await;
    let got = ops.wait_for(4, ARRIVES).await;
    assert_eq!(
        got[3].delivery_id(),
        marker,
        "nothing after success: {got:?}"
    );
    assert_eq!(ops.attempts_of(&id).len(), 3, "nothing after success");
}

#[tokio::test]
async fn a_stalled_receiver_slows_no_checkout_and_times_out_after_10s() {
    let ops = Receiver::start(SECRET).await;
    ops.answer_always(Answer::Stall(Duration::from_secs(30)));
    let licenses = [
        webhook_toml("ops", &ops.url("/ops"), SECRET, "json", &["checkout"]),
        license_toml("big", 60),
    ]
    .concat();
    let s = Server::start(&licenses).await;
    let id = send_test(&s, "ops").await;
    let first = ops.wait_for(1, ARRIVES).await[0].clone();
    assert_eq!(first.delivery_id(), id);

    // While it stalls: 25 checkouts (each queuing a delivery), 25 heartbeats.
    let leases = join_all((0..25).map(|i| {
        let s = &s;
        async move {
            let resp = s
                .checkout("big", "big-key", json!({"holder": format!("u{i}")}))
                .await;
            assert_eq!(resp.status(), 201);
            resp.json::<Value>().await.unwrap()["seat_id"]
                .as_str()
                .unwrap()
                .to_string()
        }
    }))
    .await;
    let beats = join_all(
        leases
            .iter()
            .map(|seat| async { s.heartbeat("big", "big-key", seat).await.status() }),
    )
    .await;
    assert!(beats.iter().all(|b| *b == 200), "{beats:?}");
    eprintln!(
        "50 checkouts and heartbeats done {:?} into the stall",
        first.at.elapsed()
    );

    let d = eventually(
        Duration::from_secs(25),
        "the stalled attempt recorded as an error",
        || async {
            delivery(&s, &id)
                .await
                .filter(|d| d["attempts"].as_u64().unwrap_or(0) >= 1 && !d["last_error"].is_null())
        },
    )
    .await;
    let waited = first.at.elapsed();
    assert!(
        waited >= Duration::from_secs(9),
        "given up only after the 10 s timeout, not after {waited:?}: {d}"
    );
    assert_eq!(d["status"], "pending", "retried later: {d}");
    let view = webhook_view(&s, "ops").await;
    assert!(!view["last_error"].is_null(), "{view}");
    assert_eq!(view["delivered"], 0, "{view}");
}

#[tokio::test]
async fn nothing_is_lost_across_kill_9() {
    let ops = Receiver::down(SECRET);
    let licenses = [
        webhook_toml(
            "ops",
            &ops.url("/ops"),
            SECRET,
            "json",
            &["checkout", "release"],
        ),
        license_toml("cad", 10),
    ]
    .concat();
    let mut s = Server::start(&licenses).await;
    let mut seats = Vec::new();
    for i in 0..6 {
        let lease = s
            .take_seat("cad", "cad-key", json!({"holder": format!("u{i}")}))
            .await;
        seats.push(lease.seat_id);
    }
    for seat in &seats[..3] {
        assert_eq!(s.release("cad", "cad-key", seat).await.status(), 204);
    }
    let tests = [send_test(&s, "ops").await, send_test(&s, "ops").await];
    let listed = eventually(
        ARRIVES,
        "11 deliveries listed, tried against the refusing receiver",
        || async {
            let all = deliveries(&s, "webhook=ops").await;
            let tried = all
                .iter()
                .any(|d| d["attempts"].as_u64().unwrap_or(0) >= 1 && !d["last_error"].is_null());
            (all.len() == 11 && tried).then_some(all)
        },
    )
    .await;
    assert!(
        listed.iter().all(|d| d["status"] == "pending"),
        "{listed:?}"
    );
    let ids: BTreeSet<String> = listed
        .iter()
        .map(|d| d["id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(ids.len(), 11, "distinct ids: {listed:?}");
    assert!(
        tests.iter().all(|t| ids.contains(t)),
        "{tests:?} in {ids:?}"
    );
    assert!(ops.received().is_empty());
    let pending = deliveries(&s, "webhook=ops&status=pending").await;
    assert_eq!(pending.len(), 11, "status=pending: {pending:?}");
    let delivered = deliveries(&s, "webhook=ops&status=delivered").await;
    assert!(delivered.is_empty(), "status=delivered: {delivered:?}");

    s.kill9();
    s.restart().await;
    ops.up();
    let got = ops
        .wait_until(Duration::from_secs(45), "every listed delivery", |got| {
            let seen: BTreeSet<String> = got
                .iter()
                .filter_map(|r| r.header("leasehold-delivery").map(str::to_string))
                .collect();
            ids.is_subset(&seen)
        })
        .await;
    for r in &got {
        json_delivery(r);
        assert!(
            ids.contains(r.delivery_id()),
            "only listed deliveries: {}",
            receiver::summary(r)
        );
    }
    eprintln!("{} requests for {} deliveries", got.len(), ids.len());
    eventually(ARRIVES, "every delivery listed as delivered", || async {
        let all = deliveries(&s, "webhook=ops&status=delivered").await;
        (all.len() == 11).then_some(())
    })
    .await;
    assert!(deliveries(&s, "status=pending").await.is_empty());
    assert_eq!(webhook_view(&s, "ops").await["delivered"], 11);
}

#[tokio::test]
async fn a_redirect_is_not_followed_and_counts_as_a_failure() {
    let ops = Receiver::start(SECRET).await;
    ops.answer_always(Answer::Redirect(ops.url("/elsewhere")));
    let licenses = [
        webhook_toml("ops", &ops.url("/ops"), SECRET, "json", &[]),
        license_toml("cad", 1),
    ]
    .concat();
    let s = Server::start(&licenses).await;
    let id = send_test(&s, "ops").await;
    // The first attempt and its retry a second later, both to /ops.
    ops.wait_for(2, ARRIVES).await;
    // An attempt is recorded once the request, and any redirect it would
    // follow, is done: once two are, a followed redirect has arrived.
    eventually(ARRIVES, "two attempts recorded", || async {
        delivery(&s, &id)
            .await
            .filter(|d| d["attempts"].as_u64().unwrap_or(0) >= 2)
    })
    .await;
    assert!(
        ops.received_on("/elsewhere").is_empty(),
        "redirect followed: {:?}",
        ops.received()
    );
    assert!(ops.received().iter().all(|r| r.path == "/ops"));
    let d = delivery(&s, &id).await.expect("listed");
    assert_eq!(d["status"], "pending", "{d}");
    assert!(d["attempts"].as_u64().unwrap_or(0) >= 1, "{d}");
    assert!(
        d["last_error"].as_str().unwrap_or("").contains("302"),
        "{d}"
    );
    let view = webhook_view(&s, "ops").await;
    assert_eq!(view["delivered"], 0, "{view}");
    assert!(
        view["last_error"].as_str().unwrap_or("").contains("302"),
        "{view}"
    );
    let retries = counter(
        &s,
        "leasehold_webhook_deliveries_total",
        &[("webhook", "ops"), ("result", "retry")],
    )
    .await;
    assert!(retries >= 1.0, "{retries}");
}

#[tokio::test]
async fn the_test_endpoint_and_who_sees_what_never_the_secret() {
    let ops = Receiver::start(SECRET).await;
    let licenses = [
        webhook_toml("ops", &ops.url("/ops"), SECRET, "json", &["revoke"]),
        license_toml("cad", 1),
    ]
    .concat();
    let s = Server::start(&licenses).await;
    let id = send_test(&s, "ops").await;
    let got = ops.wait_for(1, ARRIVES).await;
    let body = json_delivery(&got[0]);
    assert_eq!(body["id"], id.as_str());
    assert_eq!(body["type"], "test", "{body}");
    assert_eq!(
        (&body["license_id"], &body["alert"], &body["event"]),
        (&Value::Null, &Value::Null, &Value::Null),
        "{body}"
    );

    let post = |token: String, name: &str| {
        s.client()
            .post(s.url(&format!("/v1/admin/webhooks/{name}/test")))
            .bearer_auth(token)
            .send()
    };
    assert_eq!(
        post(s.admin_token.clone(), "nope").await.unwrap().status(),
        404
    );
    assert_eq!(post(s.viewer_token(), "ops").await.unwrap().status(), 403);
    let viewer = s
        .client()
        .get(s.url("/v1/admin/webhooks"))
        .bearer_auth(s.viewer_token())
        .send()
        .await
        .unwrap();
    assert_eq!(viewer.status(), 200, "a viewer may read the webhooks");
    let text = viewer.text().await.unwrap();
    assert!(!text.contains(SECRET), "the secret in {text}");
    let v: Value = serde_json::from_str(&text).unwrap();
    let w = &v["webhooks"][0];
    assert_eq!(
        (&w["name"], &w["url"], &w["format"]),
        (&json!("ops"), &json!(ops.url("/ops")), &json!("json")),
        "{v}"
    );

    // The secret changes in the file: used at once, never shown.
    let new_secret = "ops-secret-rotated-9876543210";
    std::fs::write(s.licenses_path(), licenses.replace(SECRET, new_secret)).unwrap();
    eventually(ARRIVES, "the config event of the new secret", || async {
        s.events_of("config")
            .await
            .iter()
            .any(|e| e["detail"].as_str().unwrap_or("").contains("webhook ops"))
            .then_some(())
    })
    .await;
    ops.set_secret(new_secret);
    let id = send_test(&s, "ops").await;
    let got = ops
        .wait_until(ARRIVES, "the second test", |r| {
            r.iter().any(|r| r.delivery_id() == id)
        })
        .await;
    json_delivery(got.last().unwrap());

    let mut seen = String::new();
    for path in [
        "/v1/admin/webhooks",
        "/v1/admin/webhooks/deliveries",
        "/v1/admin/events?limit=10000",
        "/v1/admin/licenses",
    ] {
        seen.push_str(&s.admin_get(path).await.to_string());
    }
    seen.push_str(&metrics_texts(&s).await.concat());
    seen.push_str(&s.logs());
    for secret in [SECRET, new_secret] {
        assert!(
            !seen.contains(secret),
            "a secret shown by an endpoint or the log:\n{seen}"
        );
    }
}
