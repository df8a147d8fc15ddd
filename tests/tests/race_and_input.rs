//! Concurrency and hostile input against the real binary: the last seat is
//! never granted twice, and bad input gets a clear 4xx and changes nothing.

use leasehold_tests::{Server, TEST_LICENSES};
use reqwest::Method;
use serde_json::{Value, json};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn forty_racers_for_five_seats_exactly_five_win_every_round() {
    let s = Server::start(TEST_LICENSES).await;
    for round in 0..10 {
        let racers: Vec<_> = (0..40)
            .map(|i| {
                let c = s.client();
                let url = s.url("/v1/licenses/small/seats");
                tokio::spawn(async move {
                    let resp = c
                        .post(url)
                        .bearer_auth("small-key")
                        .json(&json!({"holder": format!("racer-{round}-{i}")}))
                        .send()
                        .await
                        .unwrap();
                    let status = resp.status().as_u16();
                    let body: Value = resp.json().await.unwrap();
                    (status, body)
                })
            })
            .collect();
        let mut winners = Vec::new();
        for r in racers {
            let (status, body) = r.await.unwrap();
            match status {
                201 => winners.push(body["seat_id"].as_str().unwrap().to_string()),
                409 => assert_eq!(body["error"], "no_seats_available"),
                other => panic!("round {round}: unexpected {other}: {body}"),
            }
        }
        assert_eq!(
            winners.len(),
            5,
            "round {round}: exactly the pool size wins"
        );
        assert_eq!(s.live("small").await, 5);
        for seat in winners {
            assert_eq!(s.release("small", "small-key", &seat).await.status(), 204);
        }
        assert_eq!(s.live("small").await, 0);
    }
}

/// (what, request body, extra header) → must be 4xx with a JSON error.
fn bad_checkouts() -> Vec<(&'static str, Vec<u8>)> {
    let long = "x".repeat(129);
    vec![
        ("empty body", b"".to_vec()),
        ("not json", b"holder=alice".to_vec()),
        ("json array", b"[]".to_vec()),
        ("struct as array", br#"["bob", "fp"]"#.to_vec()),
        ("missing holder", br#"{"fingerprint": "f"}"#.to_vec()),
        ("holder not a string", br#"{"holder": 42}"#.to_vec()),
        ("empty holder", br#"{"holder": ""}"#.to_vec()),
        (
            "holder too long",
            format!(r#"{{"holder": "{long}"}}"#).into_bytes(),
        ),
        (
            "fingerprint too long",
            format!(r#"{{"holder": "a", "fingerprint": "{long}"}}"#).into_bytes(),
        ),
        (
            "ANSI escape",
            br#"{"holder": "evil\u001b[2J\u001b[31m"}"#.to_vec(),
        ),
        ("NUL", br#"{"holder": "a\u0000b"}"#.to_vec()),
        ("C1 CSI", br#"{"holder": "a\u009b31m"}"#.to_vec()),
        (
            "bidi override",
            br#"{"holder": "txt\u202eexe.doc"}"#.to_vec(),
        ),
        (
            "newline in fingerprint",
            br#"{"holder": "a", "fingerprint": "f\nINFO forged log line"}"#.to_vec(),
        ),
        ("invalid UTF-8", b"{\"holder\": \"\xff\xfe\"}".to_vec()),
        ("truncated json", br#"{"holder": "a""#.to_vec()),
        (
            "oversized body",
            format!(r#"{{"holder": "a", "pad": "{}"}}"#, "p".repeat(17 * 1024)).into_bytes(),
        ),
    ]
}

#[tokio::test]
async fn bad_checkouts_get_a_4xx_json_error_and_take_no_seat() {
    let s = Server::start(TEST_LICENSES).await;
    let c = s.client();
    for (what, body) in bad_checkouts() {
        let resp = c
            .post(s.url("/v1/licenses/small/seats"))
            .bearer_auth("small-key")
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await
            .unwrap();
        let status = resp.status().as_u16();
        assert!((400..500).contains(&status), "{what}: status {status}");
        let err: Value = resp
            .json()
            .await
            .unwrap_or_else(|e| panic!("{what}: not JSON: {e}"));
        assert!(
            err["error"].is_string() && err["message"].is_string(),
            "{what}: {err}"
        );
        if what == "oversized body" {
            assert_eq!(
                (status, err["error"].as_str()),
                (413, Some("payload_too_large"))
            );
        } else {
            assert_eq!(
                (status, err["error"].as_str()),
                (400, Some("invalid_request")),
                "{what}"
            );
        }
    }
    assert_eq!(s.live("small").await, 0, "no bad request took a seat");
    assert_eq!(s.events().await.len(), 0, "and none left a trace");
}

#[tokio::test]
async fn bad_admin_input_is_rejected_and_changes_nothing() {
    let s = Server::start(TEST_LICENSES).await;
    let seat = s
        .take_seat("small", "small-key", json!({"holder": "a"}))
        .await
        .seat_id;
    let revoke = |body: &'static str| s.revoke(&seat).body(body).send();
    for body in [
        r#"{"reason": "bad\u001b]0;pwned\u0007"}"#,
        r#"{"block_s": -1}"#,
        r#"{"block_s": "ten"}"#,
        r#"{"block_s": 999999999999}"#,
        r#"{"reason": 7}"#,
        r#"["a reason", 60]"#,
        "not json",
    ] {
        let resp = revoke(body).await.unwrap();
        assert_eq!(resp.status(), 400, "{body}");
        let err: Value = resp.json().await.unwrap();
        assert_eq!(err["error"], "invalid_request", "{body}");
    }
    assert_eq!(
        s.live("small").await,
        1,
        "the seat survived every bad revoke"
    );

    for query in ["after=-1", "after=abc", "limit=-5", "limit=ten"] {
        let resp = s
            .admin(Method::GET, &format!("/v1/admin/events?{query}"))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 400, "{query}");
    }
    let clamped = s.admin_get("/v1/admin/events?limit=99999999").await;
    assert!(clamped["events"].is_array());
    let resp = s
        .admin(Method::GET, "/v1/admin/events/stream")
        .header("last-event-id", "not-a-number")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 400);
    for bad in ["-1", "+3"] {
        let resp = s
            .admin(Method::GET, "/v1/admin/events/stream")
            .header("last-event-id", bad)
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 400, "Last-Event-ID {bad}");
    }
}

#[tokio::test]
async fn chunked_bodies_are_limited_too() {
    use futures_util::stream;
    let s = Server::start(TEST_LICENSES).await;
    // No Content-Length: the server must count as the body arrives. One
    // chunk past the 16 KiB limit: all of it is in the socket before the
    // server answers, so its early close cannot cut the client's write
    // (with 40 KiB, a client slowed by a loaded machine was still writing
    // when the 413 came and got a broken pipe instead of the answer).
    let chunks: Vec<Result<Vec<u8>, std::io::Error>> =
        (0..17).map(|_| Ok(vec![b' '; 1024])).collect();
    let resp = s
        .client()
        .post(s.url("/v1/licenses/small/seats"))
        .bearer_auth("small-key")
        .body(reqwest::Body::wrap_stream(stream::iter(chunks)))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 413);
    assert_eq!(s.live("small").await, 0);
}
