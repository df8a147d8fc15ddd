//! `POST …/seats?wait=SECONDS`: waiting in line for a seat.

use std::time::{Duration, Instant};

use leasehold_tests::{Server, TEST_LICENSES, eventually};
use serde_json::{Value, json};

/// Start a waiting checkout in the background: (status, body, seconds waited).
fn wait_for_seat(
    s: &Server,
    holder: &str,
    wait_s: u64,
) -> tokio::task::JoinHandle<(u16, Value, f64)> {
    let c = s.client();
    let url = s.url(&format!("/v1/licenses/tiny/seats?wait={wait_s}"));
    let holder = holder.to_string();
    tokio::spawn(async move {
        let started = Instant::now();
        let resp = c
            .post(url)
            .bearer_auth("tiny-key")
            .json(&json!({"holder": holder}))
            .send()
            .await
            .unwrap();
        let status = resp.status().as_u16();
        (
            status,
            resp.json().await.unwrap(),
            started.elapsed().as_secs_f64(),
        )
    })
}

/// Wait until the server reports `n` checkouts standing in `tiny`'s line.
async fn until_waiting(s: &Server, n: u64) {
    eventually(
        Duration::from_secs(10),
        &format!("{n} waiter(s) in line"),
        || async { (s.license("tiny").await["waiting"].as_u64() == Some(n)).then_some(()) },
    )
    .await
}

/// `holder` takes `tiny`'s one seat; its seat id.
async fn hold(s: &Server, holder: &str) -> String {
    s.take_seat("tiny", "tiny-key", json!({"holder": holder}))
        .await
        .seat_id
}

#[tokio::test]
async fn a_waiter_gets_the_seat_as_soon_as_it_is_released() {
    let s = Server::start(TEST_LICENSES).await;
    let held = hold(&s, "first").await;
    let waiter = wait_for_seat(&s, "second", 20);
    until_waiting(&s, 1).await;
    assert!(
        !waiter.is_finished(),
        "still waiting while the pool is full"
    );
    s.release("tiny", "tiny-key", &held).await;
    let (status, body, waited) = waiter.await.unwrap();
    assert_eq!(status, 201, "{body}");
    assert_eq!(body["holder"], "second");
    eprintln!("granted {waited:.3}s after it began waiting");
    assert!(
        waited < 5.0,
        "granted promptly after the release, waited {waited:.1}s"
    );
}

#[tokio::test]
async fn waiters_are_served_first_come_first_served() {
    let s = Server::start(TEST_LICENSES).await;
    let mut seat = hold(&s, "holder").await;
    let mut waiters = Vec::new();
    for i in 0..4 {
        waiters.push(wait_for_seat(&s, &format!("w{i}"), 30));
        // Arrival order is what FIFO means: the next one comes only once
        // this one stands in line.
        until_waiting(&s, i + 1).await;
    }
    for (i, w) in waiters.into_iter().enumerate() {
        s.release("tiny", "tiny-key", &seat).await;
        let (status, body, _) = w.await.unwrap();
        assert_eq!(status, 201, "w{i}: {body}");
        assert_eq!(body["holder"], format!("w{i}"), "served in arrival order");
        seat = body["seat_id"].as_str().unwrap().to_string();
    }
}

#[tokio::test]
async fn a_wait_that_runs_out_is_a_409() {
    let s = Server::start(TEST_LICENSES).await;
    hold(&s, "holder").await;
    let (status, body, waited) = wait_for_seat(&s, "patient", 1).await.unwrap();
    assert_eq!(status, 409);
    assert_eq!(body["error"], "no_seats_available");
    // About 1 s here; the bound is ten times that.
    assert!(
        (0.9..10.0).contains(&waited),
        "waited {waited:.1}s for a 1 s wait"
    );
}

#[tokio::test]
async fn a_disconnected_waiter_leaves_the_line_without_a_seat() {
    let s = Server::start(TEST_LICENSES).await;
    let held = hold(&s, "holder").await;
    // This client gives up after 500 ms and closes its connection.
    let impatient = reqwest::Client::builder()
        .timeout(Duration::from_millis(500))
        .build()
        .unwrap();
    let gave_up = impatient
        .post(s.url("/v1/licenses/tiny/seats?wait=30"))
        .bearer_auth("tiny-key")
        .json(&json!({"holder": "impatient"}))
        .send()
        .await;
    assert!(gave_up.is_err(), "the client timed out");
    // The server noticed the hang-up: the waiter left the line.
    until_waiting(&s, 0).await;
    s.release("tiny", "tiny-key", &held).await;
    // The line is empty: a plain checkout gets the seat (a waiter still in
    // line would be ahead of it, and a waiter given the seat would hold
    // it). With the one seat held, nobody can take it after.
    hold(&s, "next").await;
    let seats = s.seats(Some("tiny")).await;
    assert_eq!(seats.len(), 1, "nobody else took the seat: {seats:?}");
    assert_eq!(
        seats[0]["holder"], "next",
        "nobody took the seat: {seats:?}"
    );
}

#[tokio::test]
async fn a_pool_grown_by_a_config_edit_lets_a_waiter_in() {
    let s = Server::start(TEST_LICENSES).await;
    hold(&s, "holder").await;
    let waiter = wait_for_seat(&s, "waiter", 30);
    until_waiting(&s, 1).await;
    std::fs::write(
        s.licenses_path(),
        TEST_LICENSES.replacen("seats = 1", "seats = 2", 1),
    )
    .unwrap();
    let (status, body, _) = waiter.await.unwrap();
    assert_eq!(status, 201, "{body}");
    assert_eq!(s.live("tiny").await, 2);
}

#[tokio::test]
async fn wait_must_be_a_number() {
    let s = Server::start(TEST_LICENSES).await;
    let resp = s
        .client()
        .post(s.url("/v1/licenses/tiny/seats?wait=soon"))
        .bearer_auth("tiny-key")
        .json(&json!({"holder": "a"}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 400);
    assert_eq!(s.live("tiny").await, 0);
}
