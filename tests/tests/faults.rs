//! Fault tests against the real binary: kill -9 under load, downtime longer
//! than the TTL, stalls, and a full disk. What was acknowledged must be
//! exactly as acknowledged afterwards; nothing over-granted, nothing lost.

use std::collections::HashMap;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use leasehold_tests::{Server, ServerOptions, eventually, license_toml, require_tool};
use serde_json::{Value, json};

#[rustfmt::skip]
const LICENSES: &str = concat!(
    license_toml!("pool", seats = 4, ttl = "60s", skew = "5s", reap_grace = "15s"),
    license_toml!("big", seats = 100000, ttl = "60s", skew = "5s", reap_grace = "15s"),
    license_toml!("short", seats = 10, ttl = "1s", skew = "0s", reap_grace = "300ms"),
);

/// What the clients were told, per seat.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Acked {
    Held,
    /// A release or revoke was sent but not answered: either outcome is
    /// correct, so such seats are left out of the verdict.
    Ending,
    Released,
    Revoked,
}

#[derive(Default)]
struct Ledger {
    seats: HashMap<String, (String, Acked)>,
}

/// One client: check out, then release or have an admin revoke, in a loop,
/// recording only what the server acknowledged.
async fn client_loop(
    base: String,
    admin: String,
    license: &'static str,
    key: &'static str,
    id: usize,
    ledger: Arc<Mutex<Ledger>>,
) {
    let c = reqwest::Client::builder()
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    for i in 0.. {
        let Ok(resp) = c
            .post(format!("{base}/v1/licenses/{license}/seats"))
            .bearer_auth(key)
            .json(&json!({"holder": format!("c{id}-{i}")}))
            .send()
            .await
        else {
            return; // server gone: this cycle is over
        };
        if resp.status() != 201 {
            tokio::time::sleep(Duration::from_millis(5)).await;
            continue;
        }
        let Ok(body) = resp.json::<Value>().await else {
            return;
        };
        let seat = body["seat_id"].as_str().unwrap().to_string();
        ledger
            .lock()
            .unwrap()
            .seats
            .insert(seat.clone(), (license.to_string(), Acked::Held));
        // Keep some seats, release or revoke the others.
        let (req, outcome) = match i % 3 {
            0 => continue,
            1 => (
                c.delete(format!("{base}/v1/licenses/{license}/seats/{seat}"))
                    .bearer_auth(key),
                Acked::Released,
            ),
            _ => (
                c.delete(format!("{base}/v1/admin/seats/{seat}"))
                    .header("authorization", &admin),
                Acked::Revoked,
            ),
        };
        ledger
            .lock()
            .unwrap()
            .seats
            .insert(seat.clone(), (license.to_string(), Acked::Ending));
        match req.send().await {
            Ok(r) if r.status() == 204 => {
                ledger
                    .lock()
                    .unwrap()
                    .seats
                    .insert(seat, (license.to_string(), outcome));
            }
            _ => return,
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn kill9_under_load_loses_and_resurrects_nothing() {
    let mut s = Server::start(LICENSES).await;
    let ledger = Arc::new(Mutex::new(Ledger::default()));
    let cycles = 8;
    let mut acknowledged = 0;
    for cycle in 0..cycles {
        // Clean the small pool between cycles so it is contended each time.
        for seat in s.seats(Some("pool")).await {
            let id = seat["seat_id"].as_str().unwrap();
            s.revoke(id).send().await.unwrap();
            ledger
                .lock()
                .unwrap()
                .seats
                .insert(id.to_string(), ("pool".into(), Acked::Revoked));
        }
        let mut clients = Vec::new();
        for id in 0..12 {
            let (license, key) = if id % 2 == 0 {
                ("pool", "pool-key")
            } else {
                ("big", "big-key")
            };
            clients.push(tokio::spawn(client_loop(
                s.base.clone(),
                s.auth(),
                license,
                key,
                cycle * 100 + id,
                ledger.clone(),
            )));
        }
        tokio::time::sleep(Duration::from_millis(300 + 97 * (cycle as u64 % 4))).await;
        s.kill9();
        for c in clients {
            let _ = c.await;
        }
        s.restart().await;

        // Everything acknowledged is exactly as acknowledged.
        let present: HashMap<String, String> = s
            .seats(None)
            .await
            .iter()
            .map(|r| {
                (
                    r["seat_id"].as_str().unwrap().to_string(),
                    r["license_id"].as_str().unwrap().to_string(),
                )
            })
            .collect();
        let ledger = ledger.lock().unwrap();
        let lost: Vec<_> = ledger
            .seats
            .iter()
            .filter(|(id, (_, a))| *a == Acked::Held && !present.contains_key(*id))
            .collect();
        let resurrected: Vec<_> = ledger
            .seats
            .iter()
            .filter(|(id, (_, a))| {
                matches!(a, Acked::Released | Acked::Revoked) && present.contains_key(*id)
            })
            .collect();
        assert!(
            lost.is_empty(),
            "cycle {cycle}: acknowledged checkouts lost: {lost:?}"
        );
        assert!(
            resurrected.is_empty(),
            "cycle {cycle}: released/revoked seats back: {resurrected:?}"
        );
        let in_pool = present.values().filter(|l| *l == "pool").count();
        assert!(
            in_pool <= 4,
            "cycle {cycle}: small pool over-granted: {in_pool} > 4"
        );
        acknowledged = ledger.seats.len();
    }
    println!(
        "kill -9 cycles: {cycles}, acknowledged seats tracked: {acknowledged}, lost: 0, resurrected: 0"
    );
    assert!(
        acknowledged > 50,
        "the load actually did something ({acknowledged})"
    );
}

#[tokio::test]
async fn downtime_longer_than_the_ttl_does_not_evict_healthy_clients() {
    let mut s = Server::start_with(stall_aware()).await;
    let healthy = checkout(&s, "healthy").await;
    let crashed = checkout(&s, "crashed").await;
    s.kill9();
    // Down for 2.5 s: more than the 1 s TTL plus the 300 ms reap grace.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    s.restart().await;
    assert_eq!(
        s.heartbeat("short", "short-key", &healthy).await.status(),
        200,
        "healthy client renews after the outage"
    );
    assert!(s.logs().contains("was not running"), "{}", s.logs());
    // The crashed one never renews and is reaped one TTL after start-up.
    let reaps = heartbeat_until_a_reap(&s, &healthy).await;
    assert_eq!(reaps.len(), 1, "only the crashed seat: {reaps:?}");
    assert_eq!(reaps[0]["seat_id"], crashed.as_str());
    assert_eq!(reaps[0]["holder"], "crashed");
}

#[tokio::test]
async fn after_a_stall_crashed_clients_are_still_reaped() {
    let s = Server::start_with(stall_aware()).await;
    let healthy = checkout(&s, "healthy").await;
    let crashed = checkout(&s, "crashed").await;
    s.signal("STOP");
    std::thread::sleep(Duration::from_millis(2500));
    s.signal("CONT");
    let reaps = heartbeat_until_a_reap(&s, &healthy).await;
    assert_eq!(reaps.len(), 1, "only the crashed seat: {reaps:?}");
    assert_eq!(reaps[0]["seat_id"], crashed.as_str());
}

/// Keep `healthy` on its rhythm (a heartbeat every ~250 ms, each renewed)
/// until a reap event appears; returns the reap events.
async fn heartbeat_until_a_reap(s: &Server, healthy: &str) -> Vec<Value> {
    eventually(Duration::from_secs(10), "a seat reaped", || async {
        assert_eq!(
            s.heartbeat("short", "short-key", healthy).await.status(),
            200,
            "the healthy client is renewed"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
        let reaps = s.events_of("reap").await;
        (!reaps.is_empty()).then_some(reaps)
    })
    .await
}

/// Fast reaping, and a stall threshold below the 1 s TTL of `short` (the
/// default 3 s suits real TTLs of a minute, not this test pool).
fn stall_aware() -> ServerOptions {
    ServerOptions::new(LICENSES)
        .arg("--reap-interval")
        .arg("100ms")
        .arg("--stall-threshold")
        .arg("500ms")
}

async fn checkout(s: &Server, holder: &str) -> String {
    s.take_seat("short", "short-key", json!({"holder": holder}))
        .await
        .seat_id
}

/// A small tmpfs for the data dir, so the disk can be filled without
/// touching the machine's. Mounting needs root, as CI runs.
struct Tmpfs(std::path::PathBuf);

impl Tmpfs {
    fn mount(size: &str) -> Tmpfs {
        let dir = tempfile::tempdir().expect("tempdir");
        require_tool(
            Command::new("mount")
                .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
                .arg(dir.path()),
            "a tmpfs mount (the full-disk test fills one)",
            "run the tests as root",
        );
        // Mounted: from here on Drop unmounts it, then removes the dir.
        Tmpfs(dir.keep())
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[tokio::test]
async fn a_full_disk_fails_requests_with_503_and_recovers_losing_nothing() {
    let fs = Tmpfs::mount("4m");
    let data = fs.0.join("data");
    let mut opts = ServerOptions::new(LICENSES);
    opts.data_dir = Some(data);
    let s = Server::start_with(opts).await;
    let kept = s
        .take_seat("big", "big-key", json!({"holder": "before"}))
        .await
        .seat_id;
    // Fill the disk.
    let filler = fs.0.join("filler");
    let _ = Command::new("dd")
        .args(["if=/dev/zero", "bs=64k"])
        .arg(format!("of={}", filler.display()))
        .output();
    let mut saw_503 = false;
    // Seats acknowledged while the disk filled up: a reply is built before
    // the batch commits, so these prove none is sent for a failed commit.
    let mut acknowledged = Vec::new();
    for i in 0..400 {
        let resp = s
            .checkout(
                "big",
                "big-key",
                json!({"holder": format!("fill-{i}-{}", "x".repeat(100))}),
            )
            .await;
        match resp.status().as_u16() {
            201 => {
                let body: Value = resp.json().await.unwrap();
                acknowledged.push(body["seat_id"].as_str().unwrap().to_string());
            }
            503 => {
                let body: Value = resp.json().await.unwrap();
                assert_eq!(body["error"], "unavailable");
                saw_503 = true;
                break;
            }
            other => panic!("unexpected {other} on a full disk"),
        }
    }
    assert!(saw_503, "a full disk must surface as 503");
    // A write may still fit in WAL space SQLite already owns; if not, it is
    // refused with 503. Either way it is never half-done.
    let during = s.heartbeat("big", "big-key", &kept).await.status().as_u16();
    assert!(
        during == 200 || during == 503,
        "a heartbeat on a full disk is renewed or refused, not {during}"
    );
    // Space returns: the server recovers by itself.
    std::fs::remove_file(&filler).unwrap();
    let resp = eventually(
        Duration::from_secs(10),
        "a checkout after space returns",
        || async {
            let r = s
                .checkout("big", "big-key", json!({"holder": "after"}))
                .await;
            (r.status() == 201).then_some(r)
        },
    )
    .await;
    assert_eq!(resp.status(), 201);
    assert_eq!(
        s.heartbeat("big", "big-key", &kept).await.status(),
        200,
        "the acknowledged lease survived"
    );
    for seat in &acknowledged {
        assert_eq!(
            s.heartbeat("big", "big-key", seat).await.status(),
            200,
            "seat {seat}, acknowledged while the disk filled, survived"
        );
    }
}
