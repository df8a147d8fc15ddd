//! Alerts and webhooks on PostgreSQL with two replicas (the harness starts
//! the cluster; these run on PostgreSQL whatever `LEASEHOLD_TEST_STORE`
//! says, and fail, never skip, without it): both replicas evaluate every
//! alert and run a delivery worker, yet each transition is delivered once,
//! and a delivery claimed by a replica that dies is taken over by the
//! other once the claim expires.

#[path = "../src/beacon.rs"]
mod beacon;
#[path = "../src/receiver.rs"]
mod receiver;
#[path = "../src/webhook_kit.rs"]
mod webhook_kit;

use std::time::Duration;

use beacon::{Beacon, is_beacon_detail};
use leasehold_tests::{Server, ServerOptions, TestStore, eventually};
use receiver::{Answer, Received, Receiver};
use serde_json::{Value, json};
use webhook_kit::{alert_toml, deliveries, license_toml, metric_in, metrics_texts, webhook_toml};

const SECRET: &str = "ops-secret-0123456789abcdef";
const ARRIVES: Duration = Duration::from_secs(10);

async fn two_replicas(licenses: &str) -> Server {
    let mut options = ServerOptions::new(licenses);
    options.store = TestStore::Postgres { replicas: 2 };
    Server::start_with(options).await
}

fn type_of(r: &Received) -> String {
    serde_json::from_slice::<Value>(&r.body)
        .ok()
        .and_then(|v| v["type"].as_str().map(str::to_string))
        .unwrap_or_default()
}

fn count_of(got: &[Received], kind: &str) -> usize {
    got.iter().filter(|r| type_of(r) == kind).count()
}

/// GET `path` from replica `addr` with the admin token.
async fn admin_get_on(s: &Server, addr: &str, path: &str) -> Value {
    let resp = s
        .client()
        .get(format!("http://{addr}{path}"))
        .bearer_auth(&s.admin_token)
        .send()
        .await
        .expect("request");
    assert_eq!(resp.status(), 200, "GET {path} on {addr}");
    resp.json().await.expect("json")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_alert_transition_is_delivered_once_though_both_replicas_evaluate() {
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
        // Held for 2 s: each replica evaluates the alerts at least once a
        // second (the alive tick), so both have since the beacon was taken.
        beacon.usage_toml("2s"),
    ]
    .concat();
    let s = two_replicas(&licenses).await;
    let addrs = s.replica_addrs();
    let lease = s
        .take_seat("cad", "cad-key", json!({"holder": "ann"}))
        .await;
    ops.wait_until(ARRIVES, "alert.firing", |r| count_of(r, "alert.firing") > 0)
        .await;
    // Both replicas see it firing (shared state), and nobody fires twice.
    for addr in &addrs {
        eventually(ARRIVES, "firing on every replica", || async {
            let v = admin_get_on(&s, addr, "/v1/admin/licenses").await;
            let cad = v["licenses"]
                .as_array()
                .unwrap()
                .iter()
                .find(|l| l["id"] == "cad")
                .cloned()
                .unwrap();
            (cad["alerts_firing"] == json!(["cad-busy"])).then_some(())
        })
        .await;
    }
    eventually(ARRIVES, "leasehold_alerts_firing 1 on both", || async {
        metrics_texts(&s)
            .await
            .iter()
            .all(|t| {
                metric_in(
                    t,
                    "leasehold_alerts_firing",
                    &[("license", "cad"), ("alert", "cad-busy")],
                ) == Some(1.0)
            })
            .then_some(())
    })
    .await;
    // The marker: the beacon, taken now, fires after both replicas have
    // evaluated cad-busy again (and queued any second firing with it).
    beacon.take(&s).await;
    beacon.wait("alert.firing", "beacon-held", 1).await;
    let queued = deliveries(&s, "webhook=ops").await;
    assert_eq!(queued.len(), 1, "{queued:?}");
    let got = ops.received();
    assert_eq!(count_of(&got, "alert.firing"), 1, "{got:?}");
    let firing = s
        .events_of("alert")
        .await
        .iter()
        .filter(|e| e["detail"] == "firing cad-busy")
        .count();
    assert_eq!(firing, 1, "one transition event");
    beacon.release(&s).await;

    assert_eq!(
        s.release("cad", "cad-key", &lease.seat_id).await.status(),
        204
    );
    ops.wait_until(ARRIVES, "alert.resolved", |r| {
        count_of(r, "alert.resolved") > 0
    })
    .await;
    // The marker again: resolved, then held anew for 2 s.
    beacon.wait("alert.resolved", "beacon-held", 1).await;
    beacon.take(&s).await;
    beacon.wait("alert.firing", "beacon-held", 2).await;
    let listed = deliveries(&s, "webhook=ops").await;
    assert_eq!(listed.len(), 2, "{listed:?}");
    let got = ops.received();
    assert_eq!(
        (
            count_of(&got, "alert.firing"),
            count_of(&got, "alert.resolved"),
            got.len()
        ),
        (1, 1, 2),
        "{got:?}"
    );
    for r in &got {
        r.valid_signature();
        assert_eq!(r.json()["id"], r.delivery_id());
    }
    let details: Vec<Value> = s
        .events_of("alert")
        .await
        .into_iter()
        .map(|e| e["detail"].clone())
        .filter(|d| !d.as_str().is_some_and(is_beacon_detail))
        .collect();
    assert_eq!(
        details,
        [json!("firing cad-busy"), json!("resolved cad-busy")]
    );
    let listed = deliveries(&s, "webhook=ops").await;
    assert_eq!(listed.len(), 2, "{listed:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_delivery_claimed_by_a_replica_killed_9_is_delivered_by_the_other() {
    let ops = Receiver::start(SECRET).await;
    // Replica 0 will claim it and stall in the attempt.
    ops.answer_always(Answer::Stall(Duration::from_secs(120)));
    let licenses = [
        webhook_toml("ops", &ops.url("/ops"), SECRET, "json", &[]),
        license_toml("cad", 1),
    ]
    .concat();
    let mut s = two_replicas(&licenses).await;
    let addrs = s.replica_addrs();
    // Only replica 0 runs while the delivery is queued and claimed.
    s.signal_replica(1, "STOP");
    let resp = s
        .client()
        .post(format!("http://{}/v1/admin/webhooks/ops/test", addrs[0]))
        .bearer_auth(&s.admin_token)
        .send()
        .await
        .expect("test request");
    assert_eq!(resp.status(), 202);
    let id = resp.json::<Value>().await.unwrap()["id"]
        .as_str()
        .expect("an id")
        .to_string();
    let first = ops.wait_for(1, ARRIVES).await[0].clone();
    assert_eq!(first.delivery_id(), id);
    // Claimed and in flight on replica 0: kill it; replica 1 wakes up.
    s.kill9_replica(0);
    ops.answer_always(Answer::OK);
    s.signal_replica(1, "CONT");

    let got = ops
        .wait_until(
            Duration::from_secs(45),
            "the delivery again, from replica 1",
            |r| r.iter().filter(|r| r.delivery_id() == id).count() >= 2,
        )
        .await;
    let again = got.iter().filter(|r| r.delivery_id() == id).nth(1).unwrap();
    let after = again.at - first.at;
    eprintln!("replica 1 took the delivery over {after:?} after replica 0's attempt");
    assert_eq!(again.body, first.body, "the same body");
    again.valid_signature();
    assert_eq!(again.json()["type"], "test");

    let b = addrs[1].clone();
    let d = eventually(ARRIVES, "delivered, as replica 1 lists it", || async {
        let v = admin_get_on(&s, &b, "/v1/admin/webhooks/deliveries?webhook=ops").await;
        v["deliveries"]
            .as_array()
            .unwrap()
            .iter()
            .find(|d| d["id"] == id.as_str() && d["status"] == "delivered")
            .cloned()
    })
    .await;
    assert!(d["attempts"].as_u64().unwrap_or(0) >= 1, "{d}");
    // The marker: a later delivery, queued and sent through replica 1
    // after this one, arrives; this one is not sent again.
    let resp = s
        .client()
        .post(format!("http://{b}/v1/admin/webhooks/ops/test"))
        .bearer_auth(&s.admin_token)
        .send()
        .await
        .expect("test request");
    assert_eq!(resp.status(), 202);
    let marker = resp.json::<Value>().await.unwrap()["id"]
        .as_str()
        .expect("an id")
        .to_string();
    ops.wait_until(ARRIVES, "the marker delivery", |r| {
        r.iter().any(|r| r.delivery_id() == marker)
    })
    .await;
    let answered_ok = ops
        .attempts_of(&id)
        .iter()
        .filter(|r| r.answer.is_success())
        .count();
    assert_eq!(answered_ok, 1, "delivered once: {:?}", ops.received());
    assert_eq!(ops.attempts_of(&id).len(), 2, "{:?}", ops.received());
}
