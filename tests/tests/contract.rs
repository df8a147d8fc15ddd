//! Every operation of the HTTP contract (`assets/openapi.yaml`) against the
//! real binary: its answer and the errors a client acts on. Bad input (400,
//! 413) is in `race_and_input.rs`, 503 in `faults.rs`, `?wait=` in
//! `wait_queue.rs`; `schemathesis.rs` checks every answer against the spec.

use std::time::Duration;

use leasehold_common::Timestamp;
use leasehold_common::api::Lease;
use leasehold_common::token::{Jwks, LeaseClaims, verify};
use leasehold_tests::{LENDING, Server, TEST_LICENSES, read_sse};
use serde_json::{Value, json};

async fn lease(resp: reqwest::Response, status: u16) -> Lease {
    assert_eq!(resp.status(), status);
    resp.json().await.expect("lease json")
}

async fn error_code(resp: reqwest::Response) -> (u16, String, Value) {
    let status = resp.status().as_u16();
    let body: Value = resp.json().await.expect("error body is JSON");
    let code = body["error"].as_str().expect("error code").to_string();
    assert!(
        body["message"].as_str().is_some_and(|m| !m.is_empty()),
        "error has a message: {body}"
    );
    (status, code, body)
}

async fn jwks(server: &Server) -> Jwks {
    serde_json::from_value(server.get_json("/.well-known/jwks.json").await).expect("a JWKS")
}

#[tokio::test]
async fn checkout_heartbeat_release_round_trip() {
    let s = Server::start(TEST_LICENSES).await;
    let keys = jwks(&s).await;

    let first = s
        .take_seat(
            "small",
            "small-key",
            json!({"holder": "alice", "fingerprint": "m-1"}),
        )
        .await;
    assert_eq!(first.license_id, "small");
    assert_eq!(first.holder, "alice");
    assert_eq!(first.fingerprint.as_deref(), Some("m-1"));
    assert_eq!(first.seat_id.len(), 32, "128-bit hex seat id");
    assert!(first.seat_id.chars().all(|c| c.is_ascii_hexdigit()));
    assert_eq!(
        first.expires_at.millis_since(first.issued_at),
        60_000,
        "expires_at = issued_at + ttl"
    );
    let claims = verify(&first.token, &keys).expect("token verifies against the JWKS");
    assert!(
        claims.matches(&first),
        "token claims match the body: {claims:?}"
    );
    assert_eq!(claims, LeaseClaims::for_lease(&first));

    // Token times are whole seconds: wait into the next one so exp moves.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let renewed = lease(s.heartbeat("small", "small-key", &first.seat_id).await, 200).await;
    assert_eq!(renewed.seat_id, first.seat_id);
    assert!(renewed.expires_at > first.expires_at, "later expiry");
    assert_ne!(renewed.token, first.token, "new token");
    assert!(verify(&renewed.token, &keys).unwrap().matches(&renewed));
    assert_eq!(
        s.live("small").await,
        1,
        "a heartbeat never grows the count"
    );

    assert_eq!(
        s.release("small", "small-key", &first.seat_id)
            .await
            .status(),
        204
    );
    assert_eq!(
        s.release("small", "small-key", &first.seat_id)
            .await
            .status(),
        204,
        "idempotent"
    );
    let (status, code, _) =
        error_code(s.heartbeat("small", "small-key", &first.seat_id).await).await;
    assert_eq!((status, code.as_str()), (410, "seat_lost"));
    assert_eq!(s.live("small").await, 0);
}

#[tokio::test]
async fn heartbeat_ignores_any_body() {
    let s = Server::start(TEST_LICENSES).await;
    let l = s
        .take_seat("small", "small-key", json!({"holder": "a"}))
        .await;
    let resp = s
        .client()
        .post(s.url(&format!("/v1/licenses/small/seats/{}/heartbeat", l.seat_id)))
        .bearer_auth("small-key")
        .body(r#"{"expires_at": "2099-01-01T00:00:00.000Z", "ttl": 999999}"#)
        .header("x-lease-ttl", "999999")
        .send()
        .await
        .unwrap();
    let renewed = lease(resp, 200).await;
    assert!(
        renewed.expires_at.millis_since(renewed.issued_at) == 60_000,
        "nothing a client sends lengthens a lease"
    );
}

#[tokio::test]
async fn full_pool_is_409_with_counts_and_retry_after() {
    let s = Server::start(TEST_LICENSES).await;
    let held = s
        .take_seat("tiny", "tiny-key", json!({"holder": "a"}))
        .await;
    let resp = s.checkout("tiny", "tiny-key", json!({"holder": "b"})).await;
    let retry_after: u64 = resp.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    let (status, code, body) = error_code(resp).await;
    assert_eq!((status, code.as_str()), (409, "no_seats_available"));
    assert_eq!(body["seats"], 1);
    assert_eq!(body["live"], 1);
    // The only live lease lapses at expires_at + skew: 60 s + 5 s from now.
    assert!(
        (60..=66).contains(&retry_after),
        "Retry-After {retry_after}"
    );

    s.release("tiny", "tiny-key", &held.seat_id).await;
    s.take_seat("tiny", "tiny-key", json!({"holder": "b"}))
        .await;
}

#[tokio::test]
async fn idempotency_key_and_fingerprint_return_the_same_seat() {
    let s = Server::start(TEST_LICENSES).await;
    let send = |key: &'static str, body: Value| {
        let c = s.client();
        let url = s.url("/v1/licenses/small/seats");
        async move {
            c.post(url)
                .bearer_auth("small-key")
                .header("idempotency-key", key)
                .json(&body)
                .send()
                .await
                .unwrap()
        }
    };
    let a = lease(send("retry-1", json!({"holder": "a"})).await, 201).await;
    let again = lease(send("retry-1", json!({"holder": "a"})).await, 201).await;
    assert_eq!(
        a.seat_id, again.seat_id,
        "a retried checkout returns the same seat"
    );
    assert_eq!(s.live("small").await, 1);

    let b = s
        .take_seat(
            "small",
            "small-key",
            json!({"holder": "b", "fingerprint": "host-b"}),
        )
        .await;
    let reclaim = s
        .take_seat(
            "small",
            "small-key",
            json!({"holder": "b", "fingerprint": "host-b"}),
        )
        .await;
    assert_eq!(b.seat_id, reclaim.seat_id, "same machine, same seat");
    assert_eq!(s.live("small").await, 2, "never double-counted");

    let bad = s
        .client()
        .post(s.url("/v1/licenses/small/seats"))
        .bearer_auth("small-key")
        .header("idempotency-key", "x".repeat(200))
        .json(&json!({"holder": "c"}))
        .send()
        .await
        .unwrap();
    assert_eq!(error_code(bad).await.1, "invalid_request");
}

#[tokio::test]
async fn client_auth_and_seat_ids_are_scoped_to_their_license() {
    let s = Server::start(TEST_LICENSES).await;
    let c = s.client();
    let url = s.url("/v1/licenses/small/seats");
    let no_key = c
        .post(&url)
        .json(&json!({"holder": "a"}))
        .send()
        .await
        .unwrap();
    assert_eq!(no_key.headers()["www-authenticate"], "Bearer");
    assert_eq!(error_code(no_key).await.1, "unauthorized");
    for key in ["wrong", "tiny-key", &s.admin_token] {
        let (status, code, _) =
            error_code(s.checkout("small", key, json!({"holder": "a"})).await).await;
        assert_eq!((status, code.as_str()), (401, "unauthorized"), "key {key}");
    }
    let (status, code, _) = error_code(
        s.checkout("nope", "small-key", json!({"holder": "a"}))
            .await,
    )
    .await;
    assert_eq!((status, code.as_str()), (404, "unknown_license"));

    // A seat of `small` cannot be renewed or released through `tiny`.
    let l = s
        .take_seat("small", "small-key", json!({"holder": "a"}))
        .await;
    let (status, _, _) = error_code(s.heartbeat("tiny", "tiny-key", &l.seat_id).await).await;
    assert_eq!(status, 410);
    assert_eq!(
        s.release("tiny", "tiny-key", &l.seat_id).await.status(),
        204
    );
    assert_eq!(
        s.live("small").await,
        1,
        "release through another license changed nothing"
    );
    let (status, _, _) = error_code(s.heartbeat("small", "wrong", &l.seat_id).await).await;
    assert_eq!(status, 401);
    assert_eq!(s.release("small", "wrong", &l.seat_id).await.status(), 401);
    assert_eq!(s.live("small").await, 1);
}

#[tokio::test]
async fn admin_endpoints_require_the_admin_token() {
    let s = Server::start(TEST_LICENSES).await;
    let endpoints = [
        ("GET", "/v1/admin/licenses"),
        ("GET", "/v1/admin/seats"),
        ("GET", "/v1/admin/events"),
        ("GET", "/v1/admin/events/stream"),
        ("DELETE", "/v1/admin/seats/00000000000000000000000000000000"),
    ];
    for (i, (method, path)) in endpoints.into_iter().enumerate() {
        // Each endpoint from its own loopback address: more than ten wrong
        // tokens from one address are answered 429 (`security.rs`).
        let c = reqwest::Client::builder()
            .local_address(std::net::IpAddr::from([127, 0, 0, 10 + i as u8]))
            .timeout(Duration::from_secs(20))
            .pool_max_idle_per_host(0)
            .build()
            .unwrap();
        for auth in [
            None,
            Some("Bearer wrong"),
            Some("Bearer small-key"),
            Some(s.admin_token.as_str()),
        ] {
            let mut req = c.request(method.parse().unwrap(), s.url(path));
            if let Some(a) = auth {
                req = req.header("authorization", a);
            }
            let (status, code, _) = error_code(req.send().await.unwrap()).await;
            assert_eq!(
                (status, code.as_str()),
                (401, "unauthorized"),
                "{method} {path} with {auth:?}"
            );
        }
    }
}

/// The licenses view: the server's `now` and each pool's policy and count.
async fn licenses_view_shows_policy_and_live(s: &Server) {
    let licenses = s.admin_get("/v1/admin/licenses").await;
    assert!(Timestamp::parse_rfc3339(licenses["now"].as_str().unwrap()).is_some());
    let small = s.license("small").await;
    assert_eq!(small["seats"], 5);
    assert_eq!(small["live"], 1);
    assert_eq!(small["ttl_s"], 60.0);
    assert_eq!(small["skew_s"], 5.0);
    assert_eq!(small["reap_grace_s"], 15.0);
}

/// The seats view, whole and by license (`a` is small's one seat); an
/// unknown license is named as such.
async fn seats_view_lists_by_license(s: &Server, a: &Lease) {
    assert_eq!(s.seats(None).await.len(), 2);
    let list = s.seats(Some("small")).await;
    assert_eq!(list.len(), 1);
    let row = &list[0];
    assert_eq!(row["seat_id"], a.seat_id.as_str());
    assert_eq!(row["holder"], "alice");
    assert_eq!(row["fingerprint"], "fa");
    assert_eq!(row["state"], "live");
    for field in ["checked_out_at", "issued_at", "expires_at"] {
        assert!(row[field].is_string(), "{field}");
    }
    let unknown = s
        .admin(reqwest::Method::GET, "/v1/admin/seats?license=nope")
        .send()
        .await
        .unwrap();
    assert_eq!(error_code(unknown).await.1, "unknown_license");
}

/// Revoke with a block: the seat is gone at once, re-checkout refused; the
/// same holder on another machine is not blocked.
async fn revoke_with_a_block_refuses_the_machine(s: &Server, a: &Lease) {
    let revoke = s
        .revoke(&a.seat_id)
        .json(&json!({"reason": "stuck seat, ticket 42", "block_s": 60}))
        .send()
        .await
        .unwrap();
    assert_eq!(revoke.status(), 204);
    let (status, code, _) = error_code(s.heartbeat("small", "small-key", &a.seat_id).await).await;
    assert_eq!((status, code.as_str()), (410, "seat_lost"));
    let (status, code, _) = error_code(
        s.checkout(
            "small",
            "small-key",
            json!({"holder": "alice", "fingerprint": "fa"}),
        )
        .await,
    )
    .await;
    assert_eq!((status, code.as_str()), (403, "blocked"));
    s.take_seat(
        "small",
        "small-key",
        json!({"holder": "alice", "fingerprint": "other"}),
    )
    .await;
}

/// Revoke without a body (curl -X DELETE), then again: 404.
async fn revoke_without_a_body_then_again(s: &Server, b: &Lease) {
    let plain = s.revoke(&b.seat_id).send().await.unwrap();
    assert_eq!(plain.status(), 204);
    let again = s.revoke(&b.seat_id).send().await.unwrap();
    let (status, code, _) = error_code(again).await;
    assert_eq!((status, code.as_str()), (404, "unknown_seat"));
}

/// The event log of the steps above, in order with increasing ids; the
/// first revoke (of `a`) carries its reason. Paging by `after` and `limit`.
async fn events_record_every_step(s: &Server, a: &Lease) {
    let events = s.events().await;
    let kinds: Vec<&str> = events.iter().map(|e| e["kind"].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        [
            "checkout", "checkout", "revoke", "denied", "checkout", "revoke"
        ],
        "{events:?}"
    );
    let revoke = &events[2];
    assert_eq!(revoke["seat_id"], a.seat_id.as_str());
    assert_eq!(revoke["holder"], "alice");
    assert!(revoke["detail"].as_str().unwrap().contains("ticket 42"));
    let ids: Vec<i64> = events.iter().map(|e| e["id"].as_i64().unwrap()).collect();
    assert!(
        ids.windows(2).all(|w| w[0] < w[1]),
        "ids strictly increasing: {ids:?}"
    );

    let page = s
        .admin_get(&format!("/v1/admin/events?after={}&limit=2", ids[1]))
        .await;
    let page_ids: Vec<i64> = page["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["id"].as_i64().unwrap())
        .collect();
    assert_eq!(page_ids, ids[2..4]);
    let default = s.admin_get("/v1/admin/events").await;
    assert_eq!(
        default["events"].as_array().unwrap().len(),
        6,
        "default limit covers these"
    );
}

#[tokio::test]
async fn admin_views_revoke_and_block() {
    let s = Server::start(TEST_LICENSES).await;
    let a = s
        .take_seat(
            "small",
            "small-key",
            json!({"holder": "alice", "fingerprint": "fa"}),
        )
        .await;
    let b = s
        .take_seat("tiny", "tiny-key", json!({"holder": "bob"}))
        .await;

    licenses_view_shows_policy_and_live(&s).await;
    seats_view_lists_by_license(&s, &a).await;
    revoke_with_a_block_refuses_the_machine(&s, &a).await;
    revoke_without_a_body_then_again(&s, &b).await;
    events_record_every_step(&s, &a).await;
}

#[tokio::test]
async fn operational_endpoints() {
    let s = Server::start(TEST_LICENSES).await;
    let c = s.client();
    assert_eq!(s.get_json("/healthz").await, json!({"status": "ok"}));

    let keys = jwks(&s).await;
    assert_eq!(keys.keys.len(), 1);
    let k = &keys.keys[0];
    assert_eq!((k.kty.as_str(), k.crv.as_str()), ("OKP", "Ed25519"));
    assert!(k.kid.is_some());

    s.take_seat("small", "small-key", json!({"holder": "a"}))
        .await;
    let _ = s.checkout("tiny", "tiny-key", json!({"holder": "a"})).await;
    let _ = s.checkout("tiny", "tiny-key", json!({"holder": "b"})).await;
    let metrics = c
        .get(s.url("/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    // Gauges come from the store, so every replica shows the same.
    for line in [
        "leasehold_seats{license=\"small\"} 5",
        "leasehold_live_seats{license=\"small\"} 1",
        "leasehold_live_seats{license=\"tiny\"} 1",
    ] {
        assert!(
            metrics.lines().any(|l| l == line),
            "metrics lack {line:?}:\n{metrics}"
        );
    }
    // Counters are each replica's own, as Prometheus scrapes them: the
    // cluster's figure is their sum.
    assert_eq!(
        s.counter_sum("leasehold_checkouts_total{outcome=\"new\"}")
            .await,
        2
    );
    assert_eq!(
        s.counter_sum("leasehold_denials_total{outcome=\"full\"}")
            .await,
        1
    );
    assert!(metrics.contains("leasehold_http_request_duration_seconds_bucket"));

    let (status, code, _) = error_code(c.get(s.url("/no/such/thing")).send().await.unwrap()).await;
    assert_eq!((status, code.as_str()), (404, "not_found"));
    let (status, code, _) = error_code(c.put(s.url("/healthz")).send().await.unwrap()).await;
    assert_eq!((status, code.as_str()), (405, "method_not_allowed"));
    // A 405 names what the path serves (RFC 9110), found by schemathesis.
    for (method, path, allow) in [
        ("PUT", "/healthz", "GET"),
        ("GET", "/v1/licenses/small/seats", "POST"),
        ("TRACE", "/v1/admin/seats/", "GET"),
        ("GET", "/v1/licenses/small/seats/x/heartbeat", "POST"),
    ] {
        let resp = c
            .request(method.parse().unwrap(), s.url(path))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 405, "{method} {path}");
        assert_eq!(resp.headers()["allow"], allow, "{method} {path}");
    }
}

#[tokio::test]
async fn sse_delivers_events_and_resumes_after_last_event_id() {
    let s = Server::start(TEST_LICENSES).await;
    let first = s
        .take_seat("small", "small-key", json!({"holder": "before"}))
        .await;

    let mut stream = s
        .admin(reqwest::Method::GET, "/v1/admin/events/stream")
        .send()
        .await
        .unwrap();
    assert_eq!(stream.status(), 200);
    assert!(
        stream.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/event-stream")
    );
    // Backlog first, then live events as they are committed.
    s.release("small", "small-key", &first.seat_id).await;
    let msgs = read_sse(&mut stream, 2).await;
    assert_eq!(msgs[0].1["kind"], "checkout");
    assert_eq!(msgs[0].1["holder"], "before");
    assert_eq!(msgs[1].1["kind"], "release");
    assert_eq!(
        msgs[0].0,
        msgs[0].1["id"].as_i64().unwrap(),
        "id: line is the event id"
    );
    drop(stream);

    // Reconnect with Last-Event-ID: only what came after.
    s.take_seat("small", "small-key", json!({"holder": "after"}))
        .await;
    let mut resumed = s
        .admin(reqwest::Method::GET, "/v1/admin/events/stream")
        .header("last-event-id", msgs[1].0.to_string())
        .send()
        .await
        .unwrap();
    let next = read_sse(&mut resumed, 1).await;
    assert_eq!(next[0].1["holder"], "after");
    assert_eq!(next[0].0, msgs[1].0 + 1, "no gap, no duplicate");
}

/// Borrowing as the contract says: a heartbeat on a borrowed seat and an
/// unforced admin revoke are `409 borrowed` (the error body with nothing
/// else), the seat stays `borrowed` in the admin view, `"force": true`
/// frees it, and its session carries `borrowed` in JSON and CSV.
#[tokio::test]
async fn a_borrowed_seat_is_not_renewed_and_is_revoked_only_with_force() {
    let s = Server::start(LENDING).await;
    let body = json!({ "holder": "erin", "fingerprint": "erin-laptop", "borrow_s": 3600 });
    let borrowed = lease(s.checkout("lab", "lab-key", body).await, 201).await;
    assert!(borrowed.borrowed);

    let (status, code, body) =
        error_code(s.heartbeat("lab", "lab-key", &borrowed.seat_id).await).await;
    assert_eq!((status, code.as_str()), (409, "borrowed"));
    assert_eq!(
        body.as_object().unwrap().len(),
        2,
        "error and message only: {body}"
    );

    let resp = s
        .revoke(&borrowed.seat_id)
        .json(&json!({ "reason": "lost" }))
        .send()
        .await
        .unwrap();
    let (status, code, body) = error_code(resp).await;
    assert_eq!((status, code.as_str()), (409, "borrowed"));
    assert!(
        body["message"].as_str().unwrap().contains("force"),
        "{body}"
    );
    let seats = s.seats(Some("lab")).await;
    assert_eq!(seats[0]["state"], "borrowed", "nothing changed: {seats:?}");
    assert_eq!(seats[0]["expires_at"], json!(borrowed.expires_at));

    let resp = s
        .revoke(&borrowed.seat_id)
        .json(&json!({ "force": true }))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 204);
    assert!(s.seats(Some("lab")).await.is_empty());

    let v = s.admin_get("/v1/admin/sessions?license=lab").await;
    let session = &v["sessions"][0];
    assert_eq!(
        (&session["borrowed"], &session["end"]),
        (&json!(true), &json!("revoke")),
        "{v}"
    );
    let csv = s
        .admin(
            reqwest::Method::GET,
            "/v1/admin/sessions?license=lab&format=csv",
        )
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let mut lines = csv.lines();
    assert!(
        lines.next().unwrap().ends_with(",group,borrowed,idle_s"),
        "{csv}"
    );
    assert!(lines.next().unwrap().ends_with(",true,0"), "{csv}");
}
