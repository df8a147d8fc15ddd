//! Borrowing end to end, against the real binary: a seat taken offline for
//! days (`borrow_s`), its token verified offline, the refusals in the
//! brief's order, the machine's own seat turned into the borrow, heartbeats
//! and unforced revokes refused with `409 borrowed`, the early return, and
//! a restart that keeps the borrow exactly.

use leasehold_common::api::Lease;
use leasehold_common::token::{Jwks, verify};
use leasehold_tests::Server;
use serde_json::{Value, json};

/// `lend`: 3 seats, 2 of which may be out on loan for up to a day, only to
/// `dev-*` holders. `plain`: no borrowing at all.
const LICENSES: &str = r#"
[[license]]
id = "lend"
key = "lend-key"
seats = 3
ttl = "60s"
skew = "5s"
reap_grace = "15s"

[license.borrow]
max = "1d"
seats = 2
allow = ["dev-*"]

[[license]]
id = "plain"
key = "plain-key"
seats = 3
ttl = "60s"
skew = "5s"
reap_grace = "15s"
"#;

const DAY_S: u64 = 86_400;

async fn checkout(s: &Server, license: &str, body: Value) -> (u16, Option<String>, Value) {
    let resp = s.checkout(license, &format!("{license}-key"), body).await;
    let status = resp.status().as_u16();
    let retry_after = resp
        .headers()
        .get("retry-after")
        .map(|v| v.to_str().unwrap().to_string());
    (status, retry_after, resp.json().await.unwrap())
}

fn borrow(holder: &str, fingerprint: &str, borrow_s: u64) -> Value {
    json!({"holder": holder, "fingerprint": fingerprint, "borrow_s": borrow_s})
}

async fn lent(s: &Server, body: Value) -> Lease {
    let (status, _, lease) = checkout(s, "lend", body).await;
    assert_eq!(status, 201, "{lease}");
    serde_json::from_value(lease).unwrap()
}

async fn seat_state(s: &Server, seat_id: &str) -> Option<Value> {
    s.seats(Some("lend"))
        .await
        .into_iter()
        .find(|seat| seat["seat_id"] == seat_id)
}

#[tokio::test]
async fn a_borrowed_seat_is_out_for_its_term_and_its_token_verifies_offline() {
    let s = Server::start(LICENSES).await;
    let lease = lent(&s, borrow("dev-ann", "laptop-1", DAY_S)).await;
    assert!(lease.borrowed);
    let term = lease.expires_at.millis_since(lease.issued_at);
    assert_eq!(term, DAY_S as i64 * 1000, "{lease:?}");

    let jwks: Jwks = serde_json::from_value(s.get_json("/.well-known/jwks.json").await).unwrap();
    let claims = verify(&lease.token, &jwks).expect("the borrowed token verifies offline");
    assert!(claims.borrowed);
    assert_eq!(claims.exp, lease.expires_at.as_secs_floor());
    assert!(claims.matches(&lease));

    // A borrowed seat counts like any other, and admins see it as borrowed.
    let seat = seat_state(&s, &lease.seat_id).await.expect("listed");
    assert_eq!(seat["state"], "borrowed");
    let pool = s.license("lend").await;
    assert_eq!(
        (pool["live"].as_u64(), pool["borrowed"].as_u64()),
        (Some(1), Some(1))
    );
    assert_eq!(pool["borrow"]["max_s"].as_f64(), Some(DAY_S as f64));
    assert_eq!(pool["borrow"]["seats"], 2);

    // Not renewed by heartbeats; a plain checkout from the machine gets it
    // back unchanged.
    let resp = s.heartbeat("lend", "lend-key", &lease.seat_id).await;
    assert_eq!(resp.status(), 409);
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["error"], "borrowed", "{body}");
    let (status, _, again) = checkout(
        &s,
        "lend",
        json!({"holder": "dev-ann", "fingerprint": "laptop-1"}),
    )
    .await;
    assert_eq!(status, 201, "{again}");
    assert_eq!(again["seat_id"], lease.seat_id.as_str());
    assert_eq!(again["expires_at"], json!(lease.expires_at));
    assert_eq!(again["borrowed"], true);
    assert_eq!(s.live("lend").await, 1);
}

#[tokio::test]
async fn a_borrow_is_refused_in_the_briefs_order() {
    let s = Server::start(LICENSES).await;
    let cases = [
        (
            "lend",
            json!({"holder": "dev-ann", "borrow_s": 60}),
            400,
            "invalid_request",
        ),
        (
            "lend",
            borrow("dev-ann", "l1", DAY_S + 1),
            400,
            "invalid_request",
        ),
        ("lend", borrow("dev-ann", "l1", 0), 400, "invalid_request"),
        ("plain", borrow("dev-ann", "l1", 60), 403, "not_allowed"),
        ("lend", borrow("guest", "l1", 60), 403, "not_allowed"),
    ];
    for (license, body, status, error) in cases {
        let (got, _, answer) = checkout(&s, license, body.clone()).await;
        assert_eq!(
            (got, answer["error"].as_str()),
            (status, Some(error)),
            "{body} → {answer}"
        );
    }
    // Each refusal says which rule refused it (and a too-long borrow, the
    // maximum).
    let said = [
        ("plain", borrow("dev-ann", "l1", 60), "lends no seats"),
        ("lend", borrow("guest", "l1", 60), "borrow.allow"),
        ("lend", borrow("dev-ann", "l1", DAY_S + 1), "86400"),
    ];
    for (license, body, words) in said {
        let (_, _, answer) = checkout(&s, license, body.clone()).await;
        let message = answer["message"].as_str().unwrap_or_default();
        assert!(message.contains(words), "{body} → {answer}");
    }
    // guest may take a plain seat; only borrowing is closed to it.
    let (status, _, guest) = checkout(&s, "lend", json!({"holder": "guest"})).await;
    assert_eq!(status, 201);
    assert_eq!(s.live("lend").await, 1, "no refusal took a seat");
    let guest = guest["seat_id"].as_str().unwrap();
    assert_eq!(s.release("lend", "lend-key", guest).await.status(), 204);

    // borrow.seats: two out at once, the third waits for one to come back.
    lent(&s, borrow("dev-a", "la", 3_600)).await;
    lent(&s, borrow("dev-b", "lb", 60)).await;
    let (status, retry_after, body) = checkout(&s, "lend", borrow("dev-c", "lc", 60)).await;
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["error"], "limit_reached");
    assert_eq!(
        (body["limit"].as_str(), body["max"].as_u64()),
        (Some("borrow"), Some(2))
    );
    let retry_after: u64 = retry_after.expect("Retry-After").parse().unwrap();
    assert!(
        (60..=66).contains(&retry_after),
        "until dev-b's borrow lapses: {retry_after}"
    );
    // A plain seat is still there for dev-c: the pool is not full.
    let (status, _, _) =
        checkout(&s, "lend", json!({"holder": "dev-c", "fingerprint": "lc"})).await;
    assert_eq!(status, 201);
}

#[tokio::test]
async fn the_machines_own_seat_becomes_the_borrow_and_a_second_borrow_extends_it() {
    let s = Server::start(LICENSES).await;
    let held = s
        .take_seat(
            "lend",
            "lend-key",
            json!({"holder": "dev-ann", "fingerprint": "laptop"}),
        )
        .await;
    let first = lent(&s, borrow("dev-ann", "laptop", 600)).await;
    assert_eq!(
        first.seat_id, held.seat_id,
        "the same seat, not a second one"
    );
    assert_eq!(s.live("lend").await, 1);
    // A shorter borrow never shortens it; a longer one runs to its end.
    let shorter = lent(&s, borrow("dev-ann", "laptop", 60)).await;
    assert_eq!(shorter.expires_at, first.expires_at);
    let longer = lent(&s, borrow("dev-ann", "laptop", 7_200)).await;
    assert_eq!(longer.seat_id, held.seat_id);
    assert!(longer.expires_at > first.expires_at);
    assert_eq!(s.live("lend").await, 1);
    let events = s.events_of("checkout").await;
    assert!(
        events
            .iter()
            .filter(|e| e["seat_id"] == held.seat_id.as_str())
            .any(|e| e["detail"]
                .as_str()
                .unwrap_or("")
                .contains("borrowed until")),
        "the lending is in the event log: {events:?}"
    );
}

#[tokio::test]
async fn an_admin_frees_a_borrowed_seat_only_with_force_and_its_client_returns_it_early() {
    let s = Server::start(LICENSES).await;
    let lease = lent(&s, borrow("dev-ann", "laptop", DAY_S)).await;
    let resp = s.revoke(&lease.seat_id).send().await.unwrap();
    assert_eq!(resp.status(), 409);
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["error"], "borrowed");
    assert!(
        body["message"].as_str().unwrap().contains("force"),
        "{body}"
    );
    assert!(seat_state(&s, &lease.seat_id).await.is_some(), "still out");
    let resp = s
        .revoke(&lease.seat_id)
        .json(&json!({"force": true, "reason": "lost laptop"}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 204);
    assert_eq!(s.live("lend").await, 0);
    let revoke = s.events_of("revoke").await;
    let detail = revoke[0]["detail"].as_str().unwrap();
    assert!(
        detail.contains("lost laptop") && detail.contains("borrowed"),
        "{detail}"
    );

    // The client's early return frees its borrow at once.
    let lease = lent(&s, borrow("dev-bob", "desk", DAY_S)).await;
    let resp = s.release("lend", "lend-key", &lease.seat_id).await;
    assert_eq!(resp.status(), 204);
    assert_eq!(s.live("lend").await, 0);
    let sessions = s
        .admin_get("/v1/admin/sessions?license=lend&holder=dev-bob")
        .await;
    let session = &sessions["sessions"][0];
    assert_eq!(session["borrowed"], true, "{sessions}");
    assert_eq!(session["end"], "release");
    // The usage history tells the borrowed part of the seat time apart.
    let usage = s.admin_get("/v1/admin/usage?license=lend").await;
    let (seat_h, borrowed_h) = (
        usage["summary"]["seat_hours"].as_f64().unwrap(),
        usage["summary"]["borrowed_hours"].as_f64().unwrap(),
    );
    assert!(borrowed_h > 0.0 && borrowed_h <= seat_h, "{usage}");
}

#[tokio::test]
async fn kill_9_and_a_restart_keep_a_borrow_exactly() {
    let mut s = Server::start(LICENSES).await;
    let lease = lent(&s, borrow("dev-ann", "laptop", DAY_S)).await;
    s.restart().await;
    let seat = seat_state(&s, &lease.seat_id)
        .await
        .expect("still out after kill -9");
    assert_eq!(seat["state"], "borrowed");
    assert_eq!(seat["expires_at"], json!(lease.expires_at));
    assert_eq!(s.license("lend").await["borrowed"], 1);
}
