//! LeaseKeeper (common, feature "client") against the real `leaseholdd`, with
//! the faults it exists for: the server paused or killed and restarted, an
//! admin revoke (with and without a block), a real lapse, a client clock an
//! hour off, more keepers than seats, shutdown, borrowing (a seat held
//! without heartbeats, its token verified offline, given back early), and
//! idle reclaim (a keeper told of no activity is reclaimed, takes no seat
//! until the next activity; one told of activity, or never told at all,
//! keeps its seat).
//!
//! The licenses here have TTLs of a few seconds so each test runs in seconds.

use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use leasehold_common::Timestamp;
use leasehold_common::api::Lease;
use leasehold_common::client::{
    ClientError, KeeperConfig, KeeperError, KeeperState, LeaseKeeper, LocalClock, SystemClock,
};
use leasehold_common::token::{Jwks, verify};
use leasehold_tests::{Server, eventually};
use serde_json::json;

const LICENSES: &str = r#"
# Outages and restarts: heartbeats every ~2 s; a 4 s pause is inside the TTL.
[[license]]
id = "keep"
key = "keep-key"
seats = 10
ttl = "6s"
skew = "1s"
reap_grace = "2s"

# Lapses, revokes and clocks: a lease lasts 2 to 3 seconds.
[[license]]
id = "quick"
key = "quick-key"
seats = 10
ttl = "2s"
skew = "500ms"
reap_grace = "1s"

[[license]]
id = "clock"
key = "clock-key"
seats = 10
ttl = "3s"
skew = "500ms"
reap_grace = "1s"

# More keepers than seats.
[[license]]
id = "pool"
key = "pool-key"
seats = 4
ttl = "3s"
skew = "500ms"
reap_grace = "1s"

# Borrowing: heartbeats every ~0.7 s, one seat lent at a time.
[[license]]
id = "lend"
key = "lend-key"
seats = 3
ttl = "2s"
skew = "500ms"
reap_grace = "1s"

[license.borrow]
max = "1m"
seats = 1

# Idle reclaim: heartbeats every ~0.33 s, a seat idle 2 s is reclaimed.
[[license]]
id = "idle"
key = "idle-key"
seats = 3
ttl = "1s"
skew = "200ms"
reap_grace = "500ms"
idle_timeout = "2s"
"#;

fn config(s: &Server, license: &str, holder: &str, fingerprint: &str) -> KeeperConfig {
    KeeperConfig::new(
        &s.base,
        license,
        &format!("{license}-key"),
        holder,
        fingerprint,
    )
    .request_timeout(Duration::from_secs(1))
}

fn keeper(s: &Server, license: &str, holder: &str, fingerprint: &str) -> LeaseKeeper {
    LeaseKeeper::start(config(s, license, holder, fingerprint)).expect("keeper starts")
}

fn wall_now() -> Timestamp {
    Timestamp::from_millis(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_millis() as i64,
    )
}

/// Every state a keeper publishes, with the (real) time it was seen.
#[derive(Clone)]
struct Recorder(Arc<Mutex<Vec<(Timestamp, KeeperState)>>>);

impl Recorder {
    fn of(keeper: &LeaseKeeper) -> Recorder {
        let mut rx = keeper.subscribe();
        let first = rx.borrow_and_update().clone();
        let log = Arc::new(Mutex::new(vec![(wall_now(), first)]));
        let out = log.clone();
        tokio::spawn(async move {
            while rx.changed().await.is_ok() {
                let s = rx.borrow_and_update().clone();
                out.lock().unwrap().push((wall_now(), s));
            }
        });
        Recorder(log)
    }

    fn log(&self) -> Vec<(Timestamp, KeeperState)> {
        self.0.lock().unwrap().clone()
    }

    /// The states after the first `Held`, by name.
    fn names_since_held(&self) -> Vec<&'static str> {
        self.log()
            .into_iter()
            .map(|(_, s)| name(&s))
            .skip_while(|n| *n != "held")
            .collect()
    }
}

fn name(s: &KeeperState) -> &'static str {
    match s {
        KeeperState::Acquiring => "acquiring",
        KeeperState::Held(_) => "held",
        KeeperState::Waiting { .. } => "waiting",
        KeeperState::Lapsed => "lapsed",
        KeeperState::Reclaimed { .. } => "reclaimed",
        KeeperState::Blocked { .. } => "blocked",
        KeeperState::Failed(_) => "failed",
        KeeperState::Stopped => "stopped",
    }
}

async fn held_seat(k: &LeaseKeeper) -> String {
    let lease = tokio::time::timeout(Duration::from_secs(15), k.wait_for_lease())
        .await
        .expect("a seat within 15 s")
        .unwrap_or_else(|s| panic!("keeper stopped trying: {s:?}"));
    lease.seat_id
}

/// The marker that no heartbeat is due for three rhythms of `lend`'s 2 s
/// TTL: the keeper's own plan (it sleeps until then, `quiet_until_ms`),
/// read instead of waiting to see none sent.
async fn quiet_for_three_ttls(k: &LeaseKeeper) {
    let quiet = eventually(Duration::from_secs(5), "the keeper asleep", || async {
        k.stats().quiet_until_ms
    })
    .await;
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    assert!(
        quiet >= now + 3 * 2_000,
        "the keeper plans to send something within 6 s: quiet until {quiet}, now {now}"
    );
}

/// Wait for `n` more successful heartbeats than now.
async fn more_heartbeats(k: &LeaseKeeper, n: u64, timeout: Duration) {
    let target = k.stats().heartbeats + n;
    eventually(timeout, "more heartbeats", || async {
        (k.stats().heartbeats >= target).then_some(())
    })
    .await;
}

/// Revoke `seat` as an admin would, blocking its holder for `block_s`.
async fn revoke_seat(s: &Server, seat: &str, block_s: Option<u64>) {
    let body = match block_s {
        Some(b) => json!({"reason": "keeper test", "block_s": b}),
        None => json!({"reason": "keeper test"}),
    };
    let resp = s.revoke(seat).json(&body).send().await.unwrap();
    assert_eq!(resp.status(), 204, "revoke {seat}");
}

#[tokio::test]
async fn a_pause_shorter_than_the_ttl_never_lapses_the_keeper() {
    let s = Server::start(LICENSES).await;
    let k = keeper(&s, "keep", "alice", "m-pause");
    let rec = Recorder::of(&k);
    let seat = held_seat(&k).await;
    more_heartbeats(&k, 1, Duration::from_secs(10)).await;

    // Frozen for 4 s: connections hang, every request in that time times out
    // (after 1 s), and the lease sent ~0 s before the stop lasts 6 s.
    s.signal("STOP");
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert!(k.state().is_held(), "still held while the server is frozen");
    s.signal("CONT");
    more_heartbeats(&k, 1, Duration::from_secs(10)).await;

    let stats = k.stats();
    assert!(stats.failures >= 1, "the pause was felt: {stats:?}");
    assert_eq!(stats.checkouts, 1, "never re-acquired: {stats:?}");
    assert_eq!(stats.lapses, 0, "{stats:?}");
    assert!(
        rec.names_since_held().iter().all(|n| *n == "held"),
        "{:?}",
        rec.names_since_held()
    );
    assert_eq!(k.state().lease().unwrap().seat_id, seat);
    assert_eq!(s.live("keep").await, 1);
    k.shutdown().await;
}

#[tokio::test]
async fn a_kill9_and_restart_keeps_the_same_seat() {
    let mut s = Server::start(LICENSES).await;
    let k = keeper(&s, "keep", "bob", "m-restart");
    let rec = Recorder::of(&k);
    let seat = held_seat(&k).await;

    s.kill9();
    // Connection refused for a while: the keeper rides it out on its lease.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert!(k.state().is_held());
    s.restart().await;
    more_heartbeats(&k, 2, Duration::from_secs(15)).await;

    let stats = k.stats();
    assert!(stats.failures >= 1, "the outage was felt: {stats:?}");
    assert_eq!(stats.checkouts, 1, "{stats:?}");
    assert_eq!((stats.lapses, stats.seats_lost), (0, 0), "{stats:?}");
    assert!(
        rec.names_since_held().iter().all(|n| *n == "held"),
        "{:?}",
        rec.names_since_held()
    );
    assert_eq!(k.state().lease().unwrap().seat_id, seat, "same seat");
    assert_eq!(s.live("keep").await, 1);
    k.shutdown().await;
}

#[tokio::test]
async fn a_revoke_makes_it_reacquire_and_a_blocking_revoke_stops_it() {
    let s = Server::start(LICENSES).await;
    let k = keeper(&s, "quick", "carol", "m-revoke");
    let first = held_seat(&k).await;

    revoke_seat(&s, &first, None).await;
    let second = eventually(Duration::from_secs(10), "a new seat", || async {
        k.state()
            .lease()
            .filter(|l| l.seat_id != first)
            .map(|l| l.seat_id.clone())
    })
    .await;
    let stats = k.stats();
    assert_eq!((stats.seats_lost, stats.checkouts), (1, 2), "{stats:?}");
    assert_eq!(s.live("quick").await, 1, "the revoked seat is not counted");

    // With a block: the re-checkout gets 403 and the keeper stops there.
    revoke_seat(&s, &second, Some(60)).await;
    let blocked = eventually(Duration::from_secs(10), "blocked", || async {
        match k.state() {
            KeeperState::Blocked {
                retry_after,
                message,
            } => Some((retry_after, message)),
            _ => None,
        }
    })
    .await;
    assert!(
        blocked.0.is_some_and(|d| d > Duration::from_secs(50)),
        "{blocked:?}"
    );
    assert_eq!(s.live("quick").await, 0);
    // It stays blocked (it stopped trying) until shut down.
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(matches!(k.state(), KeeperState::Blocked { .. }));
    assert_eq!(k.stats().checkouts, 2);
    assert_eq!(k.shutdown().await, KeeperState::Stopped);
}

#[tokio::test]
async fn a_lapse_is_reported_only_after_the_lease_expires() {
    let s = Server::start(LICENSES).await;
    let k = keeper(&s, "quick", "dave", "m-lapse");
    let rec = Recorder::of(&k);
    held_seat(&k).await;
    more_heartbeats(&k, 1, Duration::from_secs(10)).await;

    // Frozen longer than ttl + skew (2.5 s).
    s.signal("STOP");
    let stopped_at = wall_now();
    let lapsed_at = eventually(Duration::from_secs(8), "Lapsed", || async {
        rec.log()
            .into_iter()
            .find(|(_, s)| *s == KeeperState::Lapsed)
            .map(|(t, _)| t)
    })
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    s.signal("CONT");

    let log = rec.log();
    let before: Vec<_> = log.iter().take_while(|(t, _)| *t < lapsed_at).collect();
    assert!(
        before
            .iter()
            .skip_while(|(_, s)| !s.is_held())
            .all(|(_, s)| s.is_held()),
        "held until the lapse: {:?}",
        log.iter().map(|(_, s)| name(s)).collect::<Vec<_>>()
    );
    let last_lease = before
        .iter()
        .rev()
        .find_map(|(_, s)| s.lease().cloned())
        .expect("a lease before the lapse");
    // The keeper lays the lease's window over the local time it *sent* the
    // heartbeat, a few ms before the server issued the lease, so it may give
    // up that much before the server's expiry (the safe direction; seen: 1 ms
    // under a loaded test run). Anything earlier would be a keeper bug.
    const REQUEST_LATENCY: i64 = 100;
    assert!(
        lapsed_at.as_millis() >= last_lease.expires_at.as_millis() - REQUEST_LATENCY,
        "lapse reported at {lapsed_at}, well before the lease's expiry {}",
        last_lease.expires_at
    );
    assert!(
        lapsed_at.millis_since(stopped_at) < 5_000,
        "and reported promptly: {} ms after the stop",
        lapsed_at.millis_since(stopped_at)
    );

    // The server is back: the keeper holds a seat again.
    held_seat(&k).await;
    let stats = k.stats();
    assert_eq!(stats.lapses, 1, "{stats:?}");
    assert_eq!(s.live("quick").await, 1, "one seat, not two");
    k.shutdown().await;
}

#[tokio::test]
async fn a_client_clock_an_hour_off_still_holds_its_seat() {
    let s = Server::start(LICENSES).await;
    let hour = Duration::from_secs(3600);
    let clocks: [(&str, Arc<dyn LocalClock>); 2] = [
        ("fast", Arc::new(SystemClock::ahead(hour))),
        ("slow", Arc::new(SystemClock::behind(hour))),
    ];
    let mut keepers = Vec::new();
    for (label, clock) in clocks {
        let cfg = config(&s, "clock", label, &format!("m-{label}"));
        let k = LeaseKeeper::start_with_clock(cfg, clock).unwrap();
        let rec = Recorder::of(&k);
        let seat = held_seat(&k).await;
        keepers.push((label, k, rec, seat));
    }
    // Over two TTLs.
    tokio::time::sleep(Duration::from_secs(7)).await;
    for (label, k, rec, seat) in &keepers {
        let stats = k.stats();
        assert!(stats.heartbeats >= 4, "{label}: heartbeats {stats:?}");
        assert_eq!(stats.checkouts, 1, "{label}: {stats:?}");
        assert_eq!(
            (stats.lapses, stats.seats_lost),
            (0, 0),
            "{label}: {stats:?}"
        );
        assert!(
            rec.names_since_held().iter().all(|n| *n == "held"),
            "{label}: {:?}",
            rec.names_since_held()
        );
        assert_eq!(&k.state().lease().unwrap().seat_id, seat, "{label}");
    }
    assert_eq!(s.live("clock").await, 2);
    for (_, k, _, _) in keepers {
        k.shutdown().await;
    }
    assert_eq!(s.live("clock").await, 0);
}

#[tokio::test]
async fn n_keepers_on_a_pool_of_n_minus_2_never_exceed_it() {
    let s = Server::start(LICENSES).await;
    let seats = 4;
    let mut keepers: Vec<LeaseKeeper> = (0..seats + 2)
        .map(|i| keeper(&s, "pool", &format!("user-{i}"), &format!("m-{i}")))
        .collect();

    let held = |ks: &[LeaseKeeper]| ks.iter().filter(|k| k.state().is_held()).count();
    let waiting = |ks: &[LeaseKeeper]| {
        ks.iter()
            .filter(|k| matches!(k.state(), KeeperState::Waiting { .. }))
            .count()
    };
    // Watch for 6 s (two TTLs): never more live than seats, by the server
    // or by the keepers; the pool fills and the rest wait.
    let until = std::time::Instant::now() + Duration::from_secs(6);
    while std::time::Instant::now() < until {
        let live = s.live("pool").await;
        assert!(live <= seats as u64, "live {live} > {seats}");
        assert!(held(&keepers) <= seats, "held {}", held(&keepers));
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(held(&keepers), seats);
    assert_eq!(waiting(&keepers), 2);
    assert_eq!(s.live("pool").await, seats as u64);

    // Two holders leave; the two waiters take their seats.
    let mut leaving = Vec::new();
    for _ in 0..2 {
        let i = keepers.iter().position(|k| k.state().is_held()).unwrap();
        leaving.push(keepers.remove(i));
    }
    for k in leaving {
        assert_eq!(k.shutdown().await, KeeperState::Stopped);
    }
    eventually(
        Duration::from_secs(15),
        "the waiters hold the freed seats",
        || async {
            let live = s.live("pool").await;
            assert!(live <= seats as u64, "live {live} > {seats}");
            (held(&keepers) == seats).then_some(())
        },
    )
    .await;
    assert_eq!(s.live("pool").await, seats as u64);
    for k in keepers {
        k.shutdown().await;
    }
    assert_eq!(s.live("pool").await, 0);
}

#[tokio::test]
async fn shutdown_releases_the_seat() {
    let s = Server::start(LICENSES).await;
    let k = keeper(&s, "keep", "erin", "m-shutdown");
    let seat = held_seat(&k).await;
    assert_eq!(s.live("keep").await, 1);
    assert_eq!(k.shutdown().await, KeeperState::Stopped);
    // Released, not left to lapse: gone at once.
    assert_eq!(s.live("keep").await, 0);
    let releases = s.events_of("release").await;
    assert!(
        releases.iter().any(|e| e["seat_id"] == seat.as_str()),
        "{releases:?}"
    );
}

#[tokio::test]
async fn a_wrong_key_fails_at_once_and_takes_no_seat() {
    let s = Server::start(LICENSES).await;
    let cfg = KeeperConfig {
        key: "not-the-key".into(),
        ..config(&s, "keep", "frank", "m-wrong")
    };
    let k = LeaseKeeper::start(cfg).unwrap();
    let state = tokio::time::timeout(Duration::from_secs(10), k.wait_for_lease())
        .await
        .expect("an answer within 10 s");
    assert!(
        matches!(&state, Err(KeeperState::Failed(m)) if m.contains("unauthorized")),
        "{state:?}"
    );
    assert_eq!(s.live("keep").await, 0);
    k.shutdown().await;
}

/// The server's word on a seat: its `state`, or None once it is gone.
async fn seat_state(s: &Server, seat: &str) -> Option<String> {
    s.seats(None)
        .await
        .into_iter()
        .find(|row| row["seat_id"] == seat)
        .map(|row| row["state"].as_str().unwrap().to_string())
}

/// The lease's token verifies offline against the JWKS and says `borrowed`,
/// with `exp` at the lease's end.
async fn verify_borrowed_offline(s: &Server, lease: &Lease) {
    let jwks: Jwks = serde_json::from_value(s.get_json("/.well-known/jwks.json").await).unwrap();
    let claims = verify(&lease.token, &jwks).expect("the borrowed token verifies");
    assert!(
        claims.borrowed && claims.matches(lease),
        "{claims:?} vs {lease:?}"
    );
    assert_eq!(claims.exp, lease.expires_at.as_secs_floor());
}

#[tokio::test]
async fn a_borrow_keeps_the_seat_without_heartbeats_until_given_back() {
    let s = Server::start(LICENSES).await;
    let k = keeper(&s, "lend", "alice", "alice-laptop");
    let seat = held_seat(&k).await;
    let lease = k.borrow(Duration::from_secs(30)).await.expect("borrowed");
    assert_eq!(
        (lease.seat_id.as_str(), lease.borrowed),
        (seat.as_str(), true)
    );
    assert_eq!(lease.expires_at.millis_since(lease.issued_at), 30_000);
    assert_eq!(k.state(), KeeperState::Held(lease.clone()));
    verify_borrowed_offline(&s, &lease).await;

    // Longer than the 2 s TTL, three heartbeat rhythms: not one heartbeat
    // (none is even planned), and the seat is still out, borrowed.
    let before = k.stats();
    quiet_for_three_ttls(&k).await;
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    assert_eq!(k.stats().heartbeats, before.heartbeats, "{:?}", k.stats());
    assert_eq!(k.stats().borrows, 1);
    assert_eq!(k.state(), KeeperState::Held(lease.clone()));
    assert_eq!(seat_state(&s, &seat).await.as_deref(), Some("borrowed"));

    // The one seat lent is out: bob's borrow is refused and he keeps his
    // seat by heartbeats.
    let bob = keeper(&s, "lend", "bob", "bob-pc");
    let bob_seat = held_seat(&bob).await;
    match bob.borrow(Duration::from_secs(30)).await {
        Err(KeeperError::Client(ClientError::LimitReached { limit, .. })) => {
            assert_eq!(limit, "borrow")
        }
        other => panic!("bob's borrow: {other:?}"),
    }
    assert!(!bob.state().lease().unwrap().borrowed);
    more_heartbeats(&bob, 2, Duration::from_secs(5)).await;
    assert_eq!(bob.state().lease().unwrap().seat_id, bob_seat);
    assert_eq!(bob.give_back().await, Err(KeeperError::NotBorrowed));

    // Given back: freed at once, and alice is kept by heartbeats again.
    k.give_back().await.expect("given back");
    assert_eq!(seat_state(&s, &seat).await, None);
    let again = eventually(Duration::from_secs(5), "a plain seat again", || async {
        k.state().lease().filter(|l| !l.borrowed).cloned()
    })
    .await;
    assert_ne!(again.seat_id, seat);
    more_heartbeats(&k, 2, Duration::from_secs(5)).await;
    bob.shutdown().await;
    assert_eq!(k.shutdown().await, KeeperState::Stopped);
    assert_eq!(s.live("lend").await, 0);
}

#[tokio::test]
async fn a_borrow_outlives_shutdown_and_the_next_keeper_holds_it_unrenewed() {
    let s = Server::start(LICENSES).await;
    let k = keeper(&s, "lend", "carol", "carol-laptop");
    held_seat(&k).await;
    let lease = k.borrow(Duration::from_secs(20)).await.expect("borrowed");
    assert_eq!(k.shutdown().await, KeeperState::Stopped);
    assert_eq!(
        seat_state(&s, &lease.seat_id).await.as_deref(),
        Some("borrowed"),
        "shutdown does not return a borrow"
    );

    // The program starts again on the same machine: its checkout hands the
    // borrow back, held without heartbeats.
    let k = keeper(&s, "lend", "carol", "carol-laptop");
    let back = held_seat(&k).await;
    assert_eq!(back, lease.seat_id);
    assert!(k.state().lease().unwrap().borrowed);
    quiet_for_three_ttls(&k).await;
    assert_eq!(k.stats().heartbeats, 0, "{:?}", k.stats());
    assert!(k.state().is_held());
    k.give_back().await.expect("given back");
    assert_eq!(seat_state(&s, &lease.seat_id).await, None);
    k.shutdown().await;
}

#[tokio::test]
async fn a_borrow_that_runs_out_goes_back_to_heartbeats() {
    let s = Server::start(LICENSES).await;
    let cfg = config(&s, "lend", "dave", "dave-laptop");
    let clock = Arc::new(SystemClock::behind(Duration::from_secs(3_600)));
    let k = LeaseKeeper::start_with_clock(cfg, clock).unwrap();
    let seat = held_seat(&k).await;
    let lease = k.borrow(Duration::from_secs(2)).await.expect("borrowed");
    assert_eq!(lease.seat_id, seat);
    let rec = Recorder::of(&k);
    let plain = eventually(
        Duration::from_secs(10),
        "a plain seat after the borrow",
        || async { k.state().lease().filter(|l| !l.borrowed).cloned() },
    )
    .await;
    assert_ne!(plain.seat_id, seat, "the borrowed seat ran out");
    assert_eq!(rec.log()[0].1, KeeperState::Held(lease), "held to its end");
    more_heartbeats(&k, 2, Duration::from_secs(5)).await;
    assert_eq!(k.stats().lapses, 0);
    k.shutdown().await;
}

#[tokio::test]
async fn a_keeper_without_a_fingerprint_cannot_borrow() {
    let s = Server::start(LICENSES).await;
    let k = keeper(&s, "lend", "erin", "");
    held_seat(&k).await;
    assert_eq!(
        k.borrow(Duration::from_secs(10)).await,
        Err(KeeperError::NoFingerprint)
    );
    assert!(!k.state().lease().unwrap().borrowed);
    k.shutdown().await;
}

/// The admin view of `seat`: its `idle_s` (None when null), or None once
/// the seat is gone.
async fn seat_idle_s(s: &Server, seat: &str) -> Option<Option<u64>> {
    s.seats(None)
        .await
        .into_iter()
        .find(|row| row["seat_id"] == seat)
        .map(|row| row["idle_s"].as_u64())
}

#[tokio::test]
async fn an_idle_keeper_is_reclaimed_and_takes_a_seat_again_at_the_next_activity() {
    let s = Server::start(LICENSES).await;
    let k = keeper(&s, "idle", "ida", "m-idle");
    let rec = Recorder::of(&k);
    let active_at = wall_now();
    k.activity();
    let first = held_seat(&k).await;

    // No activity since: the heartbeats report it, the admin sees it.
    eventually(Duration::from_secs(5), "idle_s reported", || async {
        seat_idle_s(&s, &first)
            .await
            .flatten()
            .filter(|idle| *idle >= 1)
    })
    .await;
    let message = eventually(Duration::from_secs(8), "Reclaimed", || async {
        match k.state() {
            KeeperState::Reclaimed { message } => Some(message),
            _ => None,
        }
    })
    .await;
    assert!(message.contains("idle"), "{message}");
    let reclaimed_at = rec
        .log()
        .into_iter()
        .find(|(_, st)| matches!(st, KeeperState::Reclaimed { .. }))
        .map(|(t, _)| t)
        .expect("recorded");
    assert!(
        reclaimed_at.millis_since(active_at) >= 2_000,
        "not before the 2 s idle timeout: {} ms",
        reclaimed_at.millis_since(active_at)
    );
    let stats = k.stats();
    assert_eq!(
        (stats.reclaims, stats.seats_lost, stats.checkouts),
        (1, 1, 1),
        "{stats:?}"
    );
    // The server's side: the seat is gone, for idleness.
    assert_eq!(seat_idle_s(&s, &first).await, None, "the seat is gone");
    assert_eq!(s.live("idle").await, 0);
    let reclaims: Vec<_> = s
        .events_of("reclaim")
        .await
        .into_iter()
        .filter(|e| e["seat_id"] == first.as_str())
        .collect();
    assert_eq!(reclaims.len(), 1, "{reclaims:?}");
    assert!(
        reclaims[0]["detail"]
            .as_str()
            .unwrap_or("")
            .contains("idle"),
        "{reclaims:?}"
    );

    // While the user stays away: no seat, no checkout (six heartbeat rhythms).
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(matches!(k.state(), KeeperState::Reclaimed { .. }));
    assert_eq!(k.stats().checkouts, 1, "{:?}", k.stats());
    assert_eq!(s.live("idle").await, 0);

    // The user is back: a seat again, at once.
    k.activity();
    let second = held_seat(&k).await;
    assert_ne!(second, first);
    let names: Vec<&str> = rec.log().iter().map(|(_, st)| name(st)).collect();
    let tail: Vec<&str> = names
        .iter()
        .copied()
        .skip_while(|n| *n != "reclaimed")
        .collect();
    assert_eq!(tail, ["reclaimed", "acquiring", "held"], "{names:?}");
    assert_eq!(s.live("idle").await, 1);
    assert_eq!(k.shutdown().await, KeeperState::Stopped);
    assert_eq!(s.live("idle").await, 0);
}

#[tokio::test]
async fn an_active_keeper_and_one_that_never_reports_keep_their_seats() {
    let s = Server::start(LICENSES).await;
    let active = keeper(&s, "idle", "ada", "m-active");
    let silent = keeper(&s, "idle", "sam", "m-silent");
    active.activity();
    let (a, b) = (held_seat(&active).await, held_seat(&silent).await);

    // Two and a half idle timeouts: the user of `active` keeps working;
    // `silent` never calls activity(), so it reports nothing at all.
    let until = std::time::Instant::now() + Duration::from_secs(5);
    while std::time::Instant::now() < until {
        active.activity();
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    for (k, seat, label) in [(&active, &a, "active"), (&silent, &b, "silent")] {
        let stats = k.stats();
        assert!(stats.heartbeats >= 10, "{label}: {stats:?}");
        assert_eq!(
            (stats.checkouts, stats.seats_lost, stats.reclaims),
            (1, 0, 0),
            "{label}: {stats:?}"
        );
        assert_eq!(&k.state().lease().expect(label).seat_id, seat, "{label}");
    }
    assert!(
        seat_idle_s(&s, &a).await.expect("held").unwrap_or(0) <= 1,
        "reported active"
    );
    assert_eq!(
        seat_idle_s(&s, &b).await,
        Some(None),
        "never reported: no idle_s"
    );
    assert!(s.events_of("reclaim").await.is_empty());
    active.shutdown().await;
    silent.shutdown().await;
    assert_eq!(s.live("idle").await, 0);
}
