//! Group commit: commands sent at once each get their own answer, never
//! oversell, the WAL starts over, and the writer's time never runs back.

use std::collections::BTreeSet;
use std::sync::atomic::Ordering;

use leasehold_common::Licenses;
use leasehold_common::api::{EventKind, SeatLostReason};
use leasehold_server::clock::{ManualClock, SharedClock};
use leasehold_server::licenses::LicensesHandle;
use leasehold_server::store::{CheckoutOutcome, HeartbeatOutcome, Store, StoreOptions};

use crate::support::{NO_STALL, TestDb, at, ms};
use crate::{Harness, LICENSES, TTL, renewed, req, secs};

// ---------------------------------------------------------------------------
// Group commit
// ---------------------------------------------------------------------------

/// Heartbeats, releases, checkouts and heartbeats on seats that are not
/// there, sent at once so that they share batches: each gets its own
/// answer and the table agrees. (On PostgreSQL a batch reads its
/// heartbeats' leases up front, writes their renewals in one statement and
/// opens a command's savepoint only before its first statement.)
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn mixed_commands_sent_at_once_each_get_their_own_answer() {
    let h = Harness::new();
    let mut held = Vec::new();
    for i in 0..20 {
        held.push(h.fresh(req("pool", &format!("holder-{i}"))).await);
    }
    let foreign = h.fresh(req("other", "someone")).await;
    h.advance(secs(10));
    let now = h.now();

    let mut heartbeats = Vec::new();
    for lease in held.iter().take(15).chain(held.iter().take(15)) {
        let (store, seat) = (h.store.clone(), lease.seat_id.clone());
        heartbeats.push(tokio::spawn(
            async move { store.heartbeat("pool", &seat).await },
        ));
    }
    let mut releases = Vec::new();
    for lease in &held[15..] {
        let (store, seat) = (h.store.clone(), lease.seat_id.clone());
        releases.push(tokio::spawn(
            async move { store.release("pool", &seat).await },
        ));
    }
    let mut checkouts = Vec::new();
    for i in 0..10 {
        let store = h.store.clone();
        checkouts.push(tokio::spawn(async move {
            store.checkout(req("pool", &format!("newcomer-{i}"))).await
        }));
    }
    let mut strays = Vec::new();
    for seat in ["0123456789abcdef0123456789abcdef", foreign.seat_id.as_str()] {
        let (store, seat) = (h.store.clone(), seat.to_string());
        strays.push(tokio::spawn(
            async move { store.heartbeat("pool", &seat).await },
        ));
    }

    for t in heartbeats {
        let renewed = renewed(t.await.unwrap().unwrap());
        assert_eq!(renewed.expires_at, now.saturating_add(TTL));
    }
    for t in releases {
        assert!(t.await.unwrap().unwrap(), "a held seat is released");
    }
    let mut new_seats = BTreeSet::new();
    for t in checkouts {
        match t.await.unwrap().unwrap() {
            CheckoutOutcome::Granted { lease, .. } => assert!(new_seats.insert(lease.seat_id)),
            other => panic!("a checkout with seats free was answered {other:?}"),
        }
    }
    for t in strays {
        assert!(
            matches!(t.await.unwrap().unwrap(), HeartbeatOutcome::Lost(_)),
            "a seat not in this license is lost"
        );
    }

    let stored = h.store.seats(Some("pool")).await.unwrap();
    assert_eq!(stored.len(), 25, "15 kept + 10 new: {stored:?}");
    for lease in &stored {
        if new_seats.contains(&lease.seat_id) {
            continue;
        }
        assert!(held[..15].iter().any(|l| l.seat_id == lease.seat_id));
        assert_eq!(lease.expires_at, now.saturating_add(TTL), "renewal stored");
        assert_eq!(lease.issued_at, now);
    }
    assert_eq!(h.live("pool").await, 25);
    let foreign_now = h.store.seats(Some("other")).await.unwrap();
    assert_eq!(
        foreign_now,
        vec![foreign],
        "the other license's seat is untouched"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_checkouts_never_oversell_the_pool() {
    let h = Harness::new();
    let mut tasks = Vec::new();
    for i in 0..200 {
        let store = h.store.clone();
        tasks.push(tokio::spawn(async move {
            store
                .checkout(req("pool", &format!("client-{i}")))
                .await
                .unwrap()
        }));
    }
    let mut granted = BTreeSet::new();
    let mut full = 0;
    for t in tasks {
        match t.await.unwrap() {
            CheckoutOutcome::Granted {
                lease,
                reused,
                overage: false,
            } => {
                assert!(!reused);
                assert!(granted.insert(lease.seat_id), "a seat id handed out twice");
            }
            CheckoutOutcome::Full { seats, live, .. } => {
                assert_eq!((seats, live), (50, 50));
                full += 1;
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(granted.len(), 50);
    assert_eq!(full, 150);
    assert_eq!(h.live("pool").await, 50);
    let stored: BTreeSet<_> = h
        .store
        .seats(Some("pool"))
        .await
        .unwrap()
        .into_iter()
        .map(|l| l.seat_id)
        .collect();
    assert_eq!(stored, granted);
    assert_eq!(h.events_of(EventKind::Checkout).await.len(), 50);
    h.finish().await;
}

/// Under writes without a pause a background checkpoint never sees the whole
/// WAL copied, so SQLite never starts it over: it grew by 30 MB/s under the
/// heartbeat bench. The writer now finishes the checkpoint itself.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_the_wal_starts_over_under_writes_without_a_pause() {
    let db = TestDb::sqlite();
    let clock: SharedClock = ManualClock::new(at(0));
    let licenses = LicensesHandle::new(Licenses::parse(LICENSES).unwrap());
    let store = Store::open(
        &db.sqlite_path(),
        licenses,
        clock,
        StoreOptions {
            stall_threshold: NO_STALL,
            wal_restart_frames: 64,
            checkpoint_every: ms(20),
            ..StoreOptions::default()
        },
    )
    .unwrap();
    // 48 tasks heartbeat without a pause, so the writer commits back-to-back.
    let mut tasks = Vec::new();
    for i in 0..48 {
        let store = store.clone();
        tasks.push(tokio::spawn(async move {
            let lease = match store.checkout(req("pool", &format!("c{i}"))).await {
                Ok(CheckoutOutcome::Granted { lease, .. }) => lease,
                other => panic!("{other:?}"),
            };
            for _ in 0..1000 {
                let beat = store.heartbeat("pool", &lease.seat_id).await.unwrap();
                assert!(matches!(beat, HeartbeatOutcome::Renewed(_)), "{beat:?}");
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let stats = store.writer_stats();
    let commits = stats.batches.load(Ordering::Relaxed);
    let catch_ups = stats.wal_catch_ups.load(Ordering::Relaxed);
    // The file only grows while the store is open: its length is the most
    // frames the WAL ever held (32-byte header, 24-byte frame headers).
    let wal_len = std::fs::metadata(db.sqlite_path().with_extension("db-wal"))
        .unwrap()
        .len();
    let most_frames = (wal_len - 32) / (24 + 1024);
    store.close().await;
    assert!(catch_ups >= 1, "the writer never caught up");
    // Every commit appends at least one frame, so a WAL that never held as
    // many frames as there were commits has started over.
    assert!(
        most_frames < commits,
        "{commits} commits, yet the WAL once held {most_frames} frames"
    );
}

/// Found by the model-based test: if the server's clock steps back (an NTP
/// step), a lapsed lease must not come back to life beside the seat that
/// replaced it. The writer's time never goes backwards.
#[tokio::test]
async fn a_clock_stepping_back_never_revives_a_lapsed_lease() {
    let h = Harness::new();
    let a = h.fresh(req("cad", "a")).await;
    h.advance(secs(50));
    h.fresh(req("cad", "b")).await;
    h.fresh(req("cad", "c")).await;
    // a lapses at expires_at + skew + 1 ms; its seat goes to d.
    h.set(a.expires_at.saturating_add(secs(5) + ms(1)));
    h.fresh(req("cad", "d")).await;
    // The wall clock steps back 2 ms: by the raw predicate a is live again.
    h.set(a.expires_at.saturating_add(secs(5) - ms(1)));
    assert!(matches!(
        h.checkout(req("cad", "e")).await,
        CheckoutOutcome::Full {
            live: 3,
            seats: 3,
            ..
        }
    ));
    assert_eq!(
        h.heartbeat("cad", &a.seat_id).await,
        HeartbeatOutcome::Lost(SeatLostReason::Lapsed),
        "the lapsed lease stays lapsed"
    );
    let live: Vec<(String, u32)> = h
        .store
        .live_counts()
        .await
        .unwrap()
        .into_iter()
        .map(|(license, counts)| (license, counts.live))
        .collect();
    assert!(live.contains(&("cad".to_string(), 3)), "{live:?}");
    h.finish().await;
}
