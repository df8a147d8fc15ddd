//! Repeated denials answered beside the writer (`store/repeats.rs`), on a
//! real SQLite store with a clock moved by hand: a repeat gets the answer
//! the writer would give (its retry time counted down) without a trip to
//! the writer, is counted at its own instant, logs `denied` events exactly
//! as often, and stops being repeated at the first thing that could change
//! the answer: a write to the license, a seat's lapse (no write at all), a
//! reload, a second, someone in line. PostgreSQL's writer is asked every
//! time.

#[allow(dead_code)] // each test binary uses a part of it
mod support;

use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

use leasehold_common::Licenses;
use leasehold_common::api::EventKind;
use leasehold_server::clock::Clock;
use leasehold_server::store::history::UsageQuery;
use leasehold_server::store::{
    Ahead, CheckoutOutcome, CheckoutRequest, Limit, NotAllowedBecause, Waiter,
};
use leasehold_server::usage::UsageRange;
use support::{Harness, TestDb, at, req};

/// `tiny`: one seat (a lease lapses 65 s after its renewal). `caps`: a
/// holder cap of 1 and `evil` denied.
const LICENSES: &str = r#"
[[license]]
id = "tiny"
key = "tiny-key"
seats = 1
ttl = "60s"
skew = "5s"
reap_grace = "15s"

[[license]]
id = "caps"
key = "caps-key"
seats = 5
ttl = "60s"
skew = "5s"
reap_grace = "15s"
max_per_holder = 1
deny = ["evil"]
"#;

/// The store under [`LICENSES`], the clock at `offset_ms` after T0.
fn harness(db: TestDb) -> Harness {
    Harness::on(db, LICENSES)
}

fn set(h: &Harness, offset_ms: i64) {
    h.set(at(offset_ms));
}

impl Harness {
    /// Commands the writer has applied, and denials repeated beside it.
    fn asked(&self) -> (u64, u64) {
        let stats = self.store.writer_stats();
        (
            stats.commands.load(Relaxed),
            stats.denials_repeated.load(Relaxed),
        )
    }

    /// Checkout `req`, and whether the writer was asked (`false`: repeated).
    async fn checkout_asking(&self, req: &CheckoutRequest) -> (CheckoutOutcome, bool) {
        let (commands, repeated) = self.asked();
        let outcome = self.checkout(req).await;
        let (commands_after, repeated_after) = self.asked();
        let asked = commands_after > commands;
        assert_eq!(repeated_after - repeated, u64::from(!asked), "{req:?}");
        (outcome, asked)
    }

    /// The instants (ms after T0) of the license's denials so far.
    async fn denial_instants(&self, license: &str) -> Vec<i64> {
        let range = UsageRange::new(at(0), at(600_000), None, self.clock.now()).unwrap();
        let usage = self
            .store
            .usage(UsageQuery {
                license_id: license.into(),
                range,
                skew: Duration::from_secs(5),
                tolerance: Duration::ZERO,
            })
            .await
            .unwrap();
        let mut all: Vec<i64> = self
            .store
            .denials_page(leasehold_server::store::denials::DenialsQuery {
                license_id: license.into(),
                from: at(0),
                to: at(600_000),
                tolerance: Duration::ZERO,
                after: None,
                limit: 1_000,
            })
            .await
            .unwrap()
            .iter()
            .map(|v| v.at.millis_since(at(0)))
            .collect();
        assert_eq!(usage.summary.denials, all.len() as u64);
        all.sort();
        all
    }

    async fn denied_events(&self) -> usize {
        let events = self.store.events_after(0, 10_000).await.unwrap();
        events
            .iter()
            .filter(|e| e.kind == EventKind::Denied)
            .count()
    }
}

fn full_retry(outcome: &CheckoutOutcome) -> Duration {
    match outcome {
        CheckoutOutcome::Full { retry_after, .. } => *retry_after,
        other => panic!("not full: {other:?}"),
    }
}

#[tokio::test]
async fn a_repeat_is_the_writers_answer_counted_down_and_counted_at_its_instant() {
    let h = harness(TestDb::sqlite());
    set(&h, 1_000);
    let held = h.granted(&req("tiny", "a", Some("m-a"))).await;
    let b = req("tiny", "b", Some("m-b"));
    set(&h, 2_000);
    let (first, asked) = h.checkout_asking(&b).await;
    assert!(asked, "the first denial is the writer's");
    // The seat expires at 61 s and lapses after the 5 s skew.
    assert_eq!(full_retry(&first), Duration::from_millis(66_001 - 2_000));
    set(&h, 2_300);
    let (again, asked) = h.checkout_asking(&b).await;
    assert!(!asked, "a repeat is answered beside the writer");
    assert_eq!(full_retry(&again), Duration::from_millis(66_001 - 2_300));
    assert_eq!(
        again,
        CheckoutOutcome::Full {
            seats: 1,
            live: 1,
            reserved: 0,
            retry_after: Duration::from_millis(63_701),
        }
    );
    for t in [2_400, 2_400, 2_999] {
        set(&h, t);
        assert!(!h.checkout_asking(&b).await.1);
    }
    // A second after the writer's denial, it is asked again.
    set(&h, 3_000);
    let (asked_again, asked) = h.checkout_asking(&b).await;
    assert!(asked);
    assert_eq!(full_retry(&asked_again), Duration::from_millis(63_001));
    assert_eq!(
        h.denial_instants("tiny").await,
        [2_000, 2_300, 2_400, 2_400, 2_999, 3_000]
    );
    // Another machine of the same holder is another question.
    assert!(h.checkout_asking(&req("tiny", "b", Some("m-c"))).await.1);
    // A release is acknowledged only after the repeats are forgotten.
    assert!(h.store.release("tiny", &held.seat_id).await.unwrap());
    let (granted, asked) = h.checkout_asking(&b).await;
    assert!(asked && matches!(granted, CheckoutOutcome::Granted { .. }));
    h.finish().await;
}

#[tokio::test]
async fn a_lapse_a_heartbeat_a_reload_and_a_waiter_end_the_repeats() {
    let h = harness(TestDb::sqlite());
    set(&h, 1_000);
    let held = h.granted(&req("tiny", "a", None)).await;
    let b = req("tiny", "b", None);
    // The seat lapses at 66,001 with nothing written: the denial at
    // 65,500 holds only until then.
    set(&h, 65_500);
    assert!(h.checkout_asking(&b).await.1);
    set(&h, 66_000);
    assert!(!h.checkout_asking(&b).await.1);
    set(&h, 66_001);
    let (granted, asked) = h.checkout_asking(&b).await;
    assert!(asked, "the lapse ended the repeat");
    let b_seat = match granted {
        CheckoutOutcome::Granted { lease, .. } => lease,
        other => panic!("{other:?}"),
    };
    drop(held);

    // A heartbeat moves the earliest lapse: the writer tells the new one.
    let a = req("tiny", "a", None);
    set(&h, 70_000);
    assert!(h.checkout_asking(&a).await.1);
    assert!(!h.checkout_asking(&a).await.1);
    set(&h, 70_100);
    h.store.heartbeat("tiny", &b_seat.seat_id).await.unwrap();
    let (after, asked) = h.checkout_asking(&a).await;
    assert!(asked);
    assert_eq!(
        full_retry(&after),
        Duration::from_millis(65_001),
        "renewed to 130,100, lapsing at 135,101"
    );

    // A reload that adds a seat: the old policy's denial is not repeated.
    assert!(!h.checkout_asking(&a).await.1);
    h.licenses
        .replace(Licenses::parse(&LICENSES.replacen("seats = 1", "seats = 2", 1)).unwrap());
    let (granted, asked) = h.checkout_asking(&a).await;
    assert!(asked && matches!(granted, CheckoutOutcome::Granted { .. }));

    // Somebody waiting in line: the writer serves the line first.
    let c = req("tiny", "c", None);
    assert!(h.checkout_asking(&c).await.1);
    assert!(!h.checkout_asking(&c).await.1);
    let line = Ahead::Waiters(vec![Waiter {
        holder: "w".into(),
        fingerprint: None,
    }]);
    let (commands, _) = h.asked();
    let applied = h.store.checkout_applied(c.clone(), line, true).await;
    let outcome = applied.unwrap().committed().await.unwrap();
    assert!(matches!(outcome, CheckoutOutcome::Full { .. }));
    assert_eq!(h.asked().0, commands + 1);
    // A `?wait=` attempt that will be retried is not repeated either.
    let applied = h
        .store
        .checkout_applied(c, Ahead::Waiters(Vec::new()), false)
        .await;
    applied.unwrap().committed().await.unwrap();
    assert_eq!(h.asked().0, commands + 2);
    h.finish().await;
}

#[tokio::test]
async fn caps_and_lists_repeat_and_log_denied_events_as_often_as_the_writer() {
    let h = harness(TestDb::sqlite());
    set(&h, 1_000);
    h.granted(&req("caps", "h", Some("one"))).await;
    let second = req("caps", "h", Some("two"));
    let evil = req("caps", "evil", None);
    let mut denials = 0;
    // One denial of each every 250 ms for 25 s: a `denied` event per
    // holder each 10 s window (at 1 s, 11 s and 21 s), as without repeats.
    let mut repeated = 0;
    for step in 0..100 {
        set(&h, 1_000 + step * 250);
        let (capped, asked) = h.checkout_asking(&second).await;
        assert!(
            matches!(
                capped,
                CheckoutOutcome::LimitReached {
                    limit: Limit::Holder,
                    max: 1,
                    ..
                }
            ),
            "{capped:?}"
        );
        let (listed, asked_evil) = h.checkout_asking(&evil).await;
        assert_eq!(
            listed,
            CheckoutOutcome::NotAllowed(NotAllowedBecause::Lists)
        );
        repeated += usize::from(!asked) + usize::from(!asked_evil);
        denials += 2;
    }
    assert!(repeated >= 140, "most were repeats: {repeated}");
    assert_eq!(h.denied_events().await, 6);
    assert_eq!(h.denial_instants("caps").await.len(), denials);
    h.finish().await;
}

#[tokio::test]
async fn repeats_are_committed_by_the_tick_and_a_clean_stop() {
    let h = harness(TestDb::sqlite());
    set(&h, 1_000);
    h.granted(&req("tiny", "a", None)).await;
    let b = req("tiny", "b", None);
    let file = rusqlite::Connection::open(h.db.sqlite_path()).unwrap();
    let committed = || -> i64 {
        file.query_row("SELECT coalesce(sum(count), 0) FROM denials", [], |r| {
            r.get(0)
        })
        .unwrap()
    };
    assert!(h.checkout_asking(&b).await.1);
    assert_eq!(committed(), 1);
    for _ in 0..5 {
        assert!(!h.checkout_asking(&b).await.1);
    }
    assert_eq!(committed(), 1, "repeats wait for the next batch");
    h.store.tick().await.unwrap();
    assert_eq!(committed(), 6, "the alive tick counts them");
    for _ in 0..3 {
        assert!(!h.checkout_asking(&b).await.1);
    }
    let db = h.db;
    h.store.close().await;
    assert_eq!(committed(), 9, "a clean stop counts them");
    drop(db);
}

#[tokio::test]
async fn postgres_asks_its_writer_every_time() {
    let h = harness(TestDb::postgres());
    set(&h, 1_000);
    h.granted(&req("tiny", "a", None)).await;
    let b = req("tiny", "b", None);
    for t in [2_000, 2_001, 2_500] {
        set(&h, t);
        assert!(h.checkout_asking(&b).await.1);
    }
    assert_eq!(h.denial_instants("tiny").await, [2_000, 2_001, 2_500]);
    h.finish().await;
}
