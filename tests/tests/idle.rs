//! Idle reclaim over HTTP, against the real binary: what a heartbeat body
//! may say (`{"idle_s": N}`), the `410 seat_lost` reasons, a reclaim at the
//! heartbeat and by the reaper, and what admins see of it (seats, events,
//! sessions, usage, `/metrics`). The rule's edges are tested with a moved
//! clock in `server/tests/idle.rs` and `server/src/store/rules_props/`; here the times
//! are short and real.

use std::time::{Duration, Instant};

use leasehold_tests::{Server, ServerOptions, TEST_LICENSES, license_toml};
use serde_json::{Value, json};

/// `idle` reclaims after 2 s of reported idleness (ttl 1 s, so a seat is
/// kept only by heartbeats; skew 5 s, so a seat that stops heartbeating
/// stays live long enough for the reaper to reclaim it first).
const IDLE: &str = concat!(
    license_toml!(
        "idle",
        seats = 2,
        ttl = "1s",
        skew = "5s",
        reap_grace = "6s"
    ),
    "idle_timeout = \"2s\"\n",
);

async fn heartbeat_with(s: &Server, license: &str, seat: &str, body: &str) -> reqwest::Response {
    s.client()
        .post(s.url(&format!("/v1/licenses/{license}/seats/{seat}/heartbeat")))
        .bearer_auth(format!("{license}-key"))
        .body(body.to_string())
        .send()
        .await
        .unwrap()
}

async fn json_of(resp: reqwest::Response, status: u16) -> Value {
    assert_eq!(resp.status().as_u16(), status);
    resp.json().await.expect("a JSON body")
}

fn seat_of<'a>(seats: &'a [Value], seat_id: &str) -> &'a Value {
    seats
        .iter()
        .find(|s| s["seat_id"] == seat_id)
        .unwrap_or_else(|| panic!("seat {seat_id} in {seats:?}"))
}

#[tokio::test]
async fn a_bad_idle_s_is_400_and_changes_nothing_while_other_bodies_are_ignored() {
    let s = Server::start(TEST_LICENSES).await;
    let l = s
        .take_seat("small", "small-key", json!({"holder": "a"}))
        .await;
    let before = s.seats(Some("small")).await;
    for bad in [
        r#"{"idle_s": -1}"#,
        r#"{"idle_s": 1.5}"#,
        r#"{"idle_s": null}"#,
        r#"{"idle_s": "60"}"#,
        r#"{"idle_s": 31536001}"#,
        r#"{"idle_s": [1]}"#,
    ] {
        let body = json_of(heartbeat_with(&s, "small", &l.seat_id, bad).await, 400).await;
        assert_eq!(body["error"], "invalid_request", "{bad}: {body}");
        assert!(
            body["message"].as_str().unwrap().contains("idle_s"),
            "{bad}: the message names the field: {body}"
        );
    }
    assert_eq!(s.seats(Some("small")).await, before, "nothing changed");
    // Bodies that are not a JSON object with idle_s: a plain heartbeat.
    for ignored in [
        "",
        "[1, 2]",
        "\"idle_s\"",
        "{\"idle\": 5}",
        "not json",
        "{\"idle_s\"",
    ] {
        let resp = heartbeat_with(&s, "small", &l.seat_id, ignored).await;
        assert_eq!(resp.status(), 200, "{ignored:?}");
    }
    let seat = seat_of(&s.seats(Some("small")).await, &l.seat_id).clone();
    assert_eq!(seat["idle_s"], Value::Null, "active: {seat}");
    // The body is read with the same limit as a checkout's.
    let huge = format!("{{\"pad\": \"{}\"}}", "x".repeat(20 * 1024));
    let resp = heartbeat_with(&s, "small", &l.seat_id, &huge).await;
    assert_eq!(resp.status(), 413);
    // The largest report is accepted; idleness never starts before checkout.
    let resp = heartbeat_with(&s, "small", &l.seat_id, r#"{"idle_s": 31536000}"#).await;
    assert_eq!(resp.status(), 200);
    let seat = seat_of(&s.seats(Some("small")).await, &l.seat_id).clone();
    assert!(seat["idle_s"].as_u64().is_some_and(|i| i < 60), "{seat}");
    // A license without idle_timeout never reclaims, and says so.
    assert_eq!(s.license("small").await["idle_timeout_s"], Value::Null);
}

#[tokio::test]
async fn seat_lost_says_why() {
    let s = Server::start(TEST_LICENSES).await;
    let released = s
        .take_seat("small", "small-key", json!({"holder": "a"}))
        .await;
    let revoked = s
        .take_seat("small", "small-key", json!({"holder": "b"}))
        .await;
    assert_eq!(
        s.release("small", "small-key", &released.seat_id)
            .await
            .status(),
        204
    );
    assert_eq!(
        s.revoke(&revoked.seat_id).send().await.unwrap().status(),
        204
    );
    for (seat, reason) in [
        (released.seat_id.as_str(), "released"),
        (revoked.seat_id.as_str(), "revoked"),
        (&"0".repeat(32), "lapsed"),
    ] {
        let body = json_of(s.heartbeat("small", "small-key", seat).await, 410).await;
        assert_eq!(body["error"], "seat_lost");
        assert_eq!(body["reason"], reason, "{body}");
    }
    // A seat id is no capability on another license: it is only "lapsed".
    let other = s
        .take_seat("tiny", "tiny-key", json!({"holder": "c"}))
        .await;
    assert_eq!(s.revoke(&other.seat_id).send().await.unwrap().status(), 204);
    let body = json_of(s.heartbeat("small", "small-key", &other.seat_id).await, 410).await;
    assert_eq!(body["reason"], "lapsed", "{body}");
}

/// Heartbeats every 300 ms reporting the time since `since` as idle, until
/// one is answered 410; that answer.
async fn idle_until_lost(s: &Server, seat: &str, since: Instant) -> Value {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        assert!(Instant::now() < deadline, "never reclaimed");
        let idle_s = since.elapsed().as_secs();
        let resp = heartbeat_with(s, "idle", seat, &json!({"idle_s": idle_s}).to_string()).await;
        if resp.status() == 410 {
            return resp.json().await.unwrap();
        }
        assert_eq!(resp.status(), 200);
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

#[tokio::test]
async fn a_heartbeat_reporting_the_timeout_frees_the_seat_at_once() {
    let s = Server::start(IDLE).await;
    assert_eq!(s.license("idle").await["idle_timeout_s"], 2.0);
    let since = Instant::now();
    let l = s
        .take_seat("idle", "idle-key", json!({"holder": "dozing"}))
        .await;
    let body = idle_until_lost(&s, &l.seat_id, since).await;
    assert!(
        since.elapsed() >= Duration::from_secs(2),
        "not before the timeout"
    );
    assert_eq!(body["error"], "seat_lost");
    assert_eq!(body["reason"], "idle", "{body}");
    assert!(
        body["message"].as_str().unwrap().contains("2s"),
        "names the timeout: {body}"
    );
    // Free at once, no linger; the next heartbeat says the same.
    assert_eq!(s.live("idle").await, 0);
    let again = json_of(s.heartbeat("idle", "idle-key", &l.seat_id).await, 410).await;
    assert_eq!(again["reason"], "idle");
    let reclaims = s.events_of("reclaim").await;
    assert_eq!(reclaims.len(), 1, "{reclaims:?}");
    let detail = reclaims[0]["detail"].as_str().unwrap();
    assert!(detail.contains("idle") && detail.contains("2s"), "{detail}");
    assert_eq!(reclaims[0]["seat_id"], l.seat_id);
    // The session ended idle, and was idle for about the timeout.
    let sessions = s.admin_get("/v1/admin/sessions?license=idle").await;
    let session = &sessions["sessions"][0];
    assert_eq!(session["end"], "idle", "{session}");
    let idle_s = session["idle_s"].as_f64().unwrap();
    assert_eq!(
        idle_s, 0.0,
        "periods under a minute are not history: {session}"
    );
    assert_eq!(
        s.counter_sum("leasehold_idle_reclaims_total{license=\"idle\"}")
            .await,
        1
    );
}

#[tokio::test]
async fn the_reaper_reclaims_a_seat_whose_client_fell_silent_while_idle() {
    let s = Server::start_with(ServerOptions::new(IDLE).arg("--reap-interval=100ms")).await;
    let l = s
        .take_seat("idle", "idle-key", json!({"holder": "gone-quiet"}))
        .await;
    let active = s
        .take_seat("idle", "idle-key", json!({"holder": "busy"}))
        .await;
    tokio::time::sleep(Duration::from_millis(700)).await;
    let resp = heartbeat_with(&s, "idle", &l.seat_id, r#"{"idle_s": 1}"#).await;
    assert_eq!(resp.status(), 200);
    let seats = s.seats(Some("idle")).await;
    assert!(
        seat_of(&seats, &l.seat_id)["idle_s"].as_u64().is_some(),
        "{seats:?}"
    );
    // Silent from now on; still live (skew 5 s) when the timeout comes.
    let deadline = Instant::now() + Duration::from_secs(6);
    while s
        .seats(Some("idle"))
        .await
        .iter()
        .any(|x| x["seat_id"] == l.seat_id)
    {
        assert!(Instant::now() < deadline, "the reaper never reclaimed it");
        // The busy one reports activity and keeps its seat.
        let resp = heartbeat_with(&s, "idle", &active.seat_id, r#"{"idle_s": 0}"#).await;
        assert_eq!(resp.status(), 200);
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let body = json_of(s.heartbeat("idle", "idle-key", &l.seat_id).await, 410).await;
    assert_eq!(body["reason"], "idle", "{body}");
    assert_eq!(s.events_of("reclaim").await.len(), 1);
    assert_eq!(s.events_of("reap").await.len(), 0, "a reclaim, not a lapse");
    let resp = heartbeat_with(&s, "idle", &active.seat_id, r#"{"idle_s": 0}"#).await;
    assert_eq!(resp.status(), 200, "activity is never reclaimed");
}
