//! Seat policies end to end, against the real binary: reservations, group
//! and holder caps, allow/deny, overage and linger, as clients and admins
//! see them (status codes, bodies, `Retry-After`, admin views, metrics).

use std::time::Duration;

use leasehold_tests::{Server, eventually};
use serde_json::{Value, json};

/// Five pools, one policy each (the key is always `<id>-key`).
const POLICIES: &str = r#"
[[license]]
id = "reserved"
key = "reserved-key"
seats = 3
ttl = "60s"
skew = "5s"
reap_grace = "15s"

[[license.group]]
name = "render"
holders = ["r-*"]
reserve = 1
max = 2

[[license]]
id = "capped"
key = "capped-key"
seats = 5
ttl = "60s"
skew = "5s"
reap_grace = "15s"
max_per_holder = 1

[[license.group]]
name = "lab"
fingerprints = ["lab-*"]
max = 1

[[license]]
id = "guarded"
key = "guarded-key"
seats = 5
ttl = "60s"
skew = "5s"
reap_grace = "15s"
allow = ["@staff", "ci-*"]
deny = ["guest"]

[[license.group]]
name = "staff"
holders = ["s-*", "guest"]

[[license]]
id = "stretch"
key = "stretch-key"
seats = 1
ttl = "60s"
skew = "5s"
reap_grace = "15s"
overage = 1

[[license]]
id = "lingering"
key = "lingering-key"
seats = 2
ttl = "60s"
skew = "5s"
reap_grace = "15s"
linger = "1h"
"#;

async fn checkout(s: &Server, license: &str, body: Value) -> (u16, Option<String>, Value) {
    let resp = s.checkout(license, &format!("{license}-key"), body).await;
    let status = resp.status().as_u16();
    let retry_after = resp
        .headers()
        .get("retry-after")
        .map(|v| v.to_str().unwrap().to_string());
    (status, retry_after, resp.json().await.unwrap())
}

async fn seat_of(s: &Server, license: &str, seat_id: &str) -> Value {
    s.seats(Some(license))
        .await
        .into_iter()
        .find(|seat| seat["seat_id"] == seat_id)
        .unwrap_or_else(|| panic!("seat {seat_id} of {license} is listed"))
}

#[tokio::test]
async fn a_reservation_keeps_seats_for_its_group_only() {
    let s = Server::start(POLICIES).await;
    for who in ["a", "b"] {
        let (status, _, lease) = checkout(&s, "reserved", json!({"holder": who})).await;
        assert_eq!(status, 201, "{lease}");
        assert_eq!(lease["overage"], false);
    }
    // The third seat is render's unused reservation.
    let (status, retry_after, body) = checkout(&s, "reserved", json!({"holder": "c"})).await;
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["error"], "no_seats_available");
    assert_eq!(body["seats"], 3);
    assert_eq!(body["live"], 2);
    assert_eq!(body["reserved"], 1);
    assert!(retry_after.is_some(), "every 409 carries Retry-After");
    // A member takes it.
    let (status, _, lease) = checkout(&s, "reserved", json!({"holder": "r-1"})).await;
    assert_eq!(status, 201, "{lease}");
    assert_eq!(
        seat_of(&s, "reserved", lease["seat_id"].as_str().unwrap()).await["group"],
        "render"
    );
    // Now the pool is full for members too, and nothing is held back.
    let (status, _, body) = checkout(&s, "reserved", json!({"holder": "r-2"})).await;
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["reserved"], 0);

    let pool = s.license("reserved").await;
    assert_eq!(pool["live"], 3);
    assert_eq!(pool["reserved"], 0);
    assert_eq!(
        pool["groups"],
        json!([{"name": "render", "reserve": 1, "max": 2, "live": 1}])
    );
}

#[tokio::test]
async fn holder_and_group_caps_answer_limit_reached() {
    let s = Server::start(POLICIES).await;
    let first = s
        .take_seat(
            "capped",
            "capped-key",
            json!({"holder": "alice", "fingerprint": "a-1"}),
        )
        .await;
    // A second machine of the same holder is over max_per_holder.
    let (status, retry_after, body) = checkout(
        &s,
        "capped",
        json!({"holder": "alice", "fingerprint": "a-2"}),
    )
    .await;
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["error"], "limit_reached");
    assert_eq!(body["limit"], "holder");
    assert_eq!(body["max"], 1);
    assert!(body.get("group").is_none(), "{body}");
    let secs: u64 = retry_after.expect("Retry-After").parse().unwrap();
    assert!(
        (60..=66).contains(&secs),
        "until alice's seat could lapse: {secs}"
    );
    // The same machine re-claims its own seat: not a second seat.
    let (status, _, again) = checkout(
        &s,
        "capped",
        json!({"holder": "alice", "fingerprint": "a-1"}),
    )
    .await;
    assert_eq!(status, 201, "{again}");
    assert_eq!(again["seat_id"], first.seat_id.as_str());

    // The lab group (by machine) holds at most one seat.
    s.take_seat(
        "capped",
        "capped-key",
        json!({"holder": "bob", "fingerprint": "lab-1"}),
    )
    .await;
    let (status, _, body) = checkout(
        &s,
        "capped",
        json!({"holder": "carol", "fingerprint": "lab-2"}),
    )
    .await;
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["limit"], "group");
    assert_eq!(body["group"], "lab");
    assert_eq!(body["max"], 1);
    assert_eq!(s.live("capped").await, 2);
    assert_eq!(
        s.counter_sum("leasehold_denials_total{outcome=\"limit\"}")
            .await,
        2
    );
}

#[tokio::test]
async fn deny_wins_over_allow_and_a_refusal_changes_nothing() {
    let s = Server::start(POLICIES).await;
    for (holder, want) in [("s-1", 201), ("ci-7", 201), ("guest", 403), ("x", 403)] {
        let (status, retry_after, body) = checkout(&s, "guarded", json!({"holder": holder})).await;
        assert_eq!(status, want, "{holder}: {body}");
        if want == 403 {
            assert_eq!(body["error"], "not_allowed", "{body}");
            assert!(retry_after.is_none(), "a 403 is not worth retrying");
        }
    }
    assert_eq!(s.live("guarded").await, 2);
    assert_eq!(
        s.counter_sum("leasehold_denials_total{outcome=\"not_allowed\"}")
            .await,
        2
    );
    // A refused request never waits in line.
    let started = std::time::Instant::now();
    let resp = s
        .client()
        .post(s.url("/v1/licenses/guarded/seats?wait=10"))
        .bearer_auth("guarded-key")
        .json(&json!({"holder": "x"}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 403);
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[tokio::test]
async fn overage_grants_beyond_the_seats_and_says_so() {
    let s = Server::start(POLICIES).await;
    let (status, _, first) = checkout(&s, "stretch", json!({"holder": "a"})).await;
    assert_eq!((status, &first["overage"]), (201, &json!(false)), "{first}");
    let (status, _, second) = checkout(&s, "stretch", json!({"holder": "b"})).await;
    assert_eq!(
        (status, &second["overage"]),
        (201, &json!(true)),
        "{second}"
    );
    let (status, _, body) = checkout(&s, "stretch", json!({"holder": "c"})).await;
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["live"], 2);
    assert_eq!(s.live("stretch").await, 2);
    assert_eq!(
        s.counter_sum("leasehold_overage_grants_total{license=\"stretch\"}")
            .await,
        1
    );
    let checkouts = s.events_of("checkout").await;
    let overage: Vec<&Value> = checkouts
        .iter()
        .filter(|e| e["detail"].as_str().is_some_and(|d| d.contains("overage")))
        .collect();
    assert_eq!(overage.len(), 1, "{checkouts:?}");
    assert_eq!(overage[0]["seat_id"], second["seat_id"]);
    assert_eq!(s.license("stretch").await["overage"], 1);
}

#[tokio::test]
async fn a_released_seat_lingers_and_its_machine_takes_it_back() {
    let s = Server::start(POLICIES).await;
    let key = "lingering-key";
    let lease = s
        .take_seat(
            "lingering",
            key,
            json!({"holder": "ann", "fingerprint": "ann-pc"}),
        )
        .await;
    assert_eq!(
        s.release("lingering", key, &lease.seat_id).await.status(),
        204
    );
    let seat = seat_of(&s, "lingering", &lease.seat_id).await;
    assert_eq!(seat["state"], "lingering", "{seat}");
    let pool = s.license("lingering").await;
    assert_eq!(
        (pool["live"].clone(), pool["lingering"].clone()),
        (json!(1), json!(1))
    );
    assert_eq!(pool["linger_s"], 3600.0);
    // A released seat is not renewed, and a second release changes nothing.
    assert_eq!(
        s.heartbeat("lingering", key, &lease.seat_id).await.status(),
        410
    );
    assert_eq!(
        s.release("lingering", key, &lease.seat_id).await.status(),
        204
    );
    assert_eq!(s.live("lingering").await, 1);
    // Another holder on that machine does not get it.
    let (status, _, other) = checkout(
        &s,
        "lingering",
        json!({"holder": "bo", "fingerprint": "ann-pc"}),
    )
    .await;
    assert_eq!(status, 201, "{other}");
    assert_ne!(other["seat_id"], lease.seat_id.as_str());
    // The pool is now full with the lingering seat counted.
    let (status, _, body) = checkout(&s, "lingering", json!({"holder": "cy"})).await;
    assert_eq!(status, 409, "{body}");
    // Its holder and machine take it back: same seat, live again.
    let (status, _, back) = checkout(
        &s,
        "lingering",
        json!({"holder": "ann", "fingerprint": "ann-pc"}),
    )
    .await;
    assert_eq!(status, 201, "{back}");
    assert_eq!(back["seat_id"], lease.seat_id.as_str());
    assert_eq!(
        seat_of(&s, "lingering", &lease.seat_id).await["state"],
        "live"
    );
    assert_eq!(
        s.heartbeat("lingering", key, &lease.seat_id).await.status(),
        200
    );
    // An admin revoke frees a lingering seat at once.
    assert_eq!(
        s.release("lingering", key, &lease.seat_id).await.status(),
        204
    );
    let resp = s.revoke(&lease.seat_id).send().await.unwrap();
    assert_eq!(resp.status(), 204);
    assert_eq!(s.live("lingering").await, 1);
}

#[tokio::test]
async fn an_invalid_policy_is_rejected_whole_and_names_the_field() {
    let s = Server::start(POLICIES).await;
    let invalid = POLICIES.replace("allow = [\"@staff\", \"ci-*\"]", "allow = [\"@nobody\"]");
    std::fs::write(s.licenses_path(), invalid).unwrap();
    let detail = eventually(
        Duration::from_secs(10),
        "a rejected config event",
        || async {
            s.events_of("config")
                .await
                .into_iter()
                .filter_map(|e| e["detail"].as_str().map(str::to_string))
                .find(|d| d.contains("guarded"))
        },
    )
    .await;
    assert!(detail.contains("allow"), "{detail}");
    // The previous policy stays: the allow list still lets staff in.
    let (status, _, body) = checkout(&s, "guarded", json!({"holder": "s-2"})).await;
    assert_eq!(status, 201, "{body}");
}

/// A `?wait=` checkout of `license` in the background: (status, body).
fn wait_in_line(s: &Server, license: &str, body: Value) -> tokio::task::JoinHandle<(u16, Value)> {
    let (c, url) = (
        s.client(),
        s.url(&format!("/v1/licenses/{license}/seats?wait=30")),
    );
    let key = format!("{license}-key");
    tokio::spawn(async move {
        let resp = c
            .post(url)
            .bearer_auth(key)
            .json(&body)
            .send()
            .await
            .unwrap();
        (resp.status().as_u16(), resp.json().await.unwrap())
    })
}

async fn until_waiting(s: &Server, license: &str, n: u64) {
    eventually(
        Duration::from_secs(10),
        &format!("{n} waiter(s) in {license}'s line"),
        || async { (s.license(license).await["waiting"].as_u64() == Some(n)).then_some(()) },
    )
    .await
}

#[tokio::test]
async fn a_member_takes_its_reserved_seat_while_a_non_member_waits() {
    let s = Server::start(POLICIES).await;
    let mut held = Vec::new();
    for who in ["a", "b"] {
        let (status, _, lease) = checkout(&s, "reserved", json!({"holder": who})).await;
        assert_eq!(status, 201, "{lease}");
        held.push(lease["seat_id"].as_str().unwrap().to_string());
    }
    // c waits: the one free seat is render's.
    let c = wait_in_line(&s, "reserved", json!({"holder": "c"}));
    until_waiting(&s, "reserved", 1).await;
    // A member behind c is not held up by it...
    let (status, _, lease) = checkout(&s, "reserved", json!({"holder": "r-1"})).await;
    assert_eq!(status, 201, "{lease}");
    // ...nor is a member who waits in line behind c.
    let r2 = wait_in_line(&s, "reserved", json!({"holder": "r-2"}));
    let r1_seat = lease["seat_id"].as_str().unwrap().to_string();
    until_waiting(&s, "reserved", 2).await;
    assert_eq!(
        s.release("reserved", "reserved-key", &r1_seat)
            .await
            .status(),
        204
    );
    let (status, body) = r2.await.unwrap();
    assert_eq!(
        status, 201,
        "the freed reserved seat goes to the member: {body}"
    );
    assert!(
        !c.is_finished(),
        "c still waits: nothing it may use is free"
    );
    // A seat anyone may use goes to c, first in line.
    assert_eq!(
        s.release("reserved", "reserved-key", &held[0])
            .await
            .status(),
        204
    );
    let (status, body) = c.await.unwrap();
    assert_eq!(status, 201, "{body}");
    assert_eq!(body["holder"], "c");
    assert_eq!(s.live("reserved").await, 3);
}

#[tokio::test]
async fn a_holder_at_its_cap_waits_in_line_for_its_own_seat_to_go() {
    let s = Server::start(POLICIES).await;
    let body = |fp: &str| json!({"holder": "h", "fingerprint": fp});
    let (status, _, first) = checkout(&s, "capped", body("one")).await;
    assert_eq!(status, 201, "{first}");
    let second = wait_in_line(&s, "capped", body("two"));
    until_waiting(&s, "capped", 1).await;
    // The waiter at its cap holds up nobody else.
    let (status, _, other) = checkout(&s, "capped", json!({"holder": "k"})).await;
    assert_eq!(status, 201, "{other}");
    let seat = first["seat_id"].as_str().unwrap();
    assert_eq!(s.release("capped", "capped-key", seat).await.status(), 204);
    let (status, lease) = second.await.unwrap();
    assert_eq!(status, 201, "{lease}");
    assert_eq!(lease["fingerprint"], "two");
}
