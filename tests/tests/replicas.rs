//! Several replicas on one PostgreSQL (the harness starts the cluster):
//! the rules that must hold across replicas, against the real binaries.
//! These run on PostgreSQL whatever `LEASEHOLD_TEST_STORE` says.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::future::join_all;
use leasehold_common::client::{KeeperConfig, KeeperState, LeaseKeeper};
use leasehold_testkit::postgres::PgCluster;
use leasehold_tests::{
    Server, ServerOptions, TestStore, eventually, read_sse, run_leaseholdd_expecting_exit,
};
use serde_json::json;

const LICENSES: &str = r#"
[[license]]
id = "race"
key = "race-key"
seats = 5
ttl = "60s"
skew = "1s"
reap_grace = "2s"

# Twelve keepers, twelve seats: any over-grant or lost seat shows.
[[license]]
id = "keep"
key = "keep-key"
seats = 12
ttl = "4s"
skew = "1s"
reap_grace = "2s"
"#;

async fn two_replicas(database: Option<String>) -> Server {
    let mut options = ServerOptions::new(LICENSES);
    options.store = TestStore::Postgres { replicas: 2 };
    options.database = database;
    Server::start_with(options).await
}

fn keeper(s: &Server, holder: &str) -> LeaseKeeper {
    let config = KeeperConfig::new(&s.base, "keep", "keep-key", holder, holder)
        .request_timeout(Duration::from_secs(1));
    LeaseKeeper::start(config).expect("keeper starts")
}

/// Every keeper's states, and whether any of them ever reached `Lapsed`.
struct Watch {
    lapsed: Arc<Mutex<Vec<String>>>,
}

impl Watch {
    fn of(keepers: &[LeaseKeeper]) -> Watch {
        let lapsed = Arc::new(Mutex::new(Vec::new()));
        for (i, k) in keepers.iter().enumerate() {
            let mut rx = k.subscribe();
            let lapsed = lapsed.clone();
            tokio::spawn(async move {
                while rx.changed().await.is_ok() {
                    if matches!(*rx.borrow_and_update(), KeeperState::Lapsed) {
                        lapsed.lock().unwrap().push(format!("keeper {i}"));
                    }
                }
            });
        }
        Watch { lapsed }
    }

    fn lapsed(&self) -> Vec<String> {
        self.lapsed.lock().unwrap().clone()
    }
}

fn held_seat(k: &LeaseKeeper) -> Option<String> {
    match &*k.subscribe().borrow() {
        KeeperState::Held(lease) => Some(lease.seat_id.clone()),
        _ => None,
    }
}

async fn all_held(keepers: &[LeaseKeeper]) -> BTreeSet<String> {
    eventually(
        Duration::from_secs(20),
        "every keeper to hold a seat",
        || async {
            let seats: Vec<Option<String>> = keepers.iter().map(held_seat).collect();
            seats
                .iter()
                .all(Option::is_some)
                .then(|| seats.into_iter().flatten().collect())
        },
    )
    .await
}

async fn server_seats(s: &Server) -> BTreeSet<String> {
    s.seats(Some("keep"))
        .await
        .iter()
        .map(|seat| seat["seat_id"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn forty_racers_over_two_replicas_get_exactly_five_seats_every_round() {
    let s = two_replicas(None).await;
    let addrs = s.replica_addrs();
    let client = s.client();
    for round in 0..10 {
        let racers = (0..40).map(|i| {
            let url = format!("http://{}/v1/licenses/race/seats", addrs[i % 2]);
            let request = client
                .post(url)
                .bearer_auth("race-key")
                .json(&json!({"holder": format!("racer-{round}-{i}")}))
                .send();
            async move {
                let resp = request.await.expect("racer request");
                let status = resp.status().as_u16();
                let body: serde_json::Value = resp.json().await.expect("JSON answer");
                (status, body)
            }
        });
        let answers = join_all(racers).await;
        let granted: Vec<&serde_json::Value> = answers
            .iter()
            .filter(|(status, _)| *status == 201)
            .map(|(_, body)| body)
            .collect();
        let refused = answers.iter().filter(|(status, _)| *status == 409).count();
        assert_eq!(
            (granted.len(), refused),
            (5, 35),
            "round {round}: {answers:?}"
        );
        assert_eq!(s.live("race").await, 5, "round {round}");
        for lease in granted {
            let seat = lease["seat_id"].as_str().unwrap();
            assert_eq!(s.release("race", "race-key", seat).await.status(), 204);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_replica_killed_under_twelve_keepers_loses_no_seat_and_rejoins() {
    let mut s = two_replicas(None).await;
    let keepers: Vec<LeaseKeeper> = (0..12).map(|i| keeper(&s, &format!("k{i}"))).collect();
    let watch = Watch::of(&keepers);
    let before = all_held(&keepers).await;
    assert_eq!(before.len(), 12);

    s.kill9_replica(0);
    // Three TTLs on the survivor: every keeper renews through it.
    let until = tokio::time::Instant::now() + Duration::from_secs(12);
    while tokio::time::Instant::now() < until {
        let live = s.live("keep").await;
        assert!(live <= 12, "live {live} over 12 seats");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    assert_eq!(watch.lapsed(), Vec::<String>::new(), "a keeper lapsed");
    assert_eq!(all_held(&keepers).await, before, "a seat changed hands");
    assert_eq!(server_seats(&s).await, before, "seats lost or resurrected");

    s.restart_replica(0).await;
    let rejoined = format!("http://{}/healthz", s.replica_addrs()[0]);
    let health = s.client().get(rejoined).send().await.unwrap();
    assert_eq!(health.status(), 200);
    assert_eq!(server_seats(&s).await, before);
    for k in keepers {
        k.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_database_away_longer_than_a_ttl_costs_no_healthy_seat() {
    let cluster = PgCluster::start();
    let s = two_replicas(Some(cluster.create_database())).await;
    let keepers: Vec<LeaseKeeper> = (0..4).map(|i| keeper(&s, &format!("k{i}"))).collect();
    let before = all_held(&keepers).await;

    cluster.stop();
    let replica = format!("http://{}", s.replica_addrs()[1]);
    let client = s.client();
    let health = eventually(Duration::from_secs(10), "/healthz 503", || async {
        let r = client.get(format!("{replica}/healthz")).send().await.ok()?;
        (r.status() == 503).then_some(r)
    })
    .await;
    let body: serde_json::Value = health.json().await.unwrap();
    assert_eq!(body["error"], "unavailable");
    let checkout = client
        .post(format!("{replica}/v1/licenses/keep/seats"))
        .bearer_auth("keep-key")
        .json(&json!({"holder": "during"}))
        .send()
        .await
        .unwrap();
    assert_eq!(
        checkout.status(),
        503,
        "a clear 503 while the database is away"
    );
    // Longer than the 4 s TTL.
    tokio::time::sleep(Duration::from_secs(6)).await;
    cluster.restart();

    let after = eventually(
        Duration::from_secs(30),
        "the keepers' old seats",
        || async {
            let held = all_held(&keepers).await;
            (held == before).then_some(held)
        },
    )
    .await;
    assert_eq!(
        server_seats(&s).await,
        after,
        "the outage rule kept every seat"
    );
    let outages = s.logs().matches("made no progress").count();
    assert_eq!(outages, 1, "the outage rule applied once:\n{}", s.logs());
    for k in keepers {
        k.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_replica_frozen_inside_a_transaction_does_not_hold_the_license() {
    let s = two_replicas(None).await;
    let addrs = s.replica_addrs();
    let client = s.client();
    // Keep replica 0's writer busy on the license, then freeze it: it is
    // most likely inside a batch's transaction, holding the license lock.
    let busy = {
        let client = client.clone();
        let url = format!("http://{}/v1/licenses/race/seats", addrs[0]);
        tokio::spawn(async move {
            for i in 0.. {
                let _ = client
                    .post(&url)
                    .bearer_auth("race-key")
                    .json(&json!({"holder": format!("busy-{i}")}))
                    .timeout(Duration::from_millis(500))
                    .send()
                    .await;
            }
        })
    };
    tokio::time::sleep(Duration::from_millis(500)).await;
    s.signal_replica(0, "STOP");
    busy.abort();

    let started = tokio::time::Instant::now();
    let resp = client
        .post(format!("http://{}/v1/licenses/race/seats", addrs[1]))
        .bearer_auth("race-key")
        .json(&json!({"holder": "other-replica"}))
        .timeout(Duration::from_secs(45))
        .send()
        .await
        .expect("the other replica answers");
    let waited = started.elapsed();
    eprintln!("the other replica answered in {waited:?}");
    s.signal_replica(0, "CONT");
    assert!(
        matches!(resp.status().as_u16(), 201 | 409),
        "{}",
        resp.status()
    );
    // 30 ms to 3 s here (3 s: PostgreSQL ended the frozen transaction,
    // idle_in_transaction_session_timeout): at most ten times that.
    assert!(waited < Duration::from_secs(35), "waited {waited:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sse_on_one_replica_sees_the_others_events_and_resumes_on_either() {
    let s = two_replicas(None).await;
    let [a, b] = [0, 1].map(|i| format!("http://{}", s.replica_addrs()[i]));
    let client = s.client();
    let stream_from = |base: &str, last: Option<i64>| {
        let mut req = client
            .get(format!("{base}/v1/admin/events/stream"))
            .header("authorization", s.auth());
        if let Some(last) = last {
            req = req.header("last-event-id", last.to_string());
        }
        req.send()
    };
    let mut on_a = stream_from(&a, None).await.unwrap();
    assert_eq!(on_a.status(), 200);

    let checkout = |base: &str, holder: &str| {
        client
            .post(format!("{base}/v1/licenses/race/seats"))
            .bearer_auth("race-key")
            .json(&json!({"holder": holder}))
            .send()
    };
    let started = tokio::time::Instant::now();
    assert_eq!(checkout(&b, "on-b").await.unwrap().status(), 201);
    let seen = read_sse(&mut on_a, 1).await;
    let took = started.elapsed();
    eprintln!("checkout on b seen on a's stream after {took:?}");
    // A NOTIFY wakes the follower at once; without one it reads the table
    // every 500 ms (`pg/follower.rs`): at most ten times that.
    assert!(took < Duration::from_secs(5), "{took:?}");
    assert_eq!(seen[0].1["kind"], "checkout");
    assert_eq!(seen[0].1["holder"], "on-b");
    let last_on_a = seen[0].0;
    drop(on_a);

    // More events on both replicas, then resume on B from A's last id.
    assert_eq!(checkout(&a, "on-a").await.unwrap().status(), 201);
    assert_eq!(checkout(&b, "on-b-again").await.unwrap().status(), 201);
    let mut on_b = stream_from(&b, Some(last_on_a)).await.unwrap();
    let resumed = read_sse(&mut on_b, 2).await;
    let ids: Vec<i64> = resumed.iter().map(|(id, _)| *id).collect();
    assert_eq!(
        ids,
        [last_on_a + 1, last_on_a + 2],
        "gap-free, no duplicate"
    );
    let holders: Vec<&str> = resumed
        .iter()
        .map(|(_, e)| e["holder"].as_str().unwrap())
        .collect();
    assert_eq!(holders, ["on-a", "on-b-again"]);
}

#[tokio::test]
async fn a_replica_with_another_key_or_token_refuses_to_start() {
    let s = two_replicas(None).await;
    let url = s.database_url().expect("on PostgreSQL");
    let licenses = s.licenses_path();
    let dir = tempfile::tempdir().unwrap();
    // Another replica on the same database with `data_dir`'s key and token.
    let start_replica = |data_dir: &std::path::Path| {
        run_leaseholdd_expecting_exit(
            &[
                "--database",
                &url,
                "--data-dir",
                data_dir.to_str().unwrap(),
                "--licenses",
                licenses.to_str().unwrap(),
                "--listen",
                "127.0.0.1:0",
            ],
            Duration::from_secs(20),
        )
    };

    // A data dir of its own: a fresh signing key.
    let own = dir.path().join("own");
    let (status, stderr) = start_replica(&own);
    assert!(!status.success());
    assert!(stderr.contains("signing key"), "{stderr}");
    assert!(
        stderr.contains("signing.key"),
        "names the file to copy: {stderr}"
    );

    // The cluster's key but another admin token.
    let copied = dir.path().join("copied");
    std::fs::create_dir_all(&copied).unwrap();
    std::fs::copy(s.data_dir().join("signing.key"), copied.join("signing.key")).unwrap();
    std::fs::write(copied.join("admin.token"), "not-the-cluster-token\n").unwrap();
    // Kept secret, as the server demands: the token is what is wrong.
    std::fs::set_permissions(
        copied.join("admin.token"),
        std::os::unix::fs::PermissionsExt::from_mode(0o600),
    )
    .unwrap();
    let (status, stderr) = start_replica(&copied);
    assert!(!status.success());
    let errors: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("leaseholdd: error:"))
        .collect();
    assert_eq!(errors.len(), 1, "one clear line: {stderr}");
    assert!(errors[0].contains("admin token"), "{stderr}");
}
