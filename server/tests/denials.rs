//! Denials with their reasons, and true denials, on a real store with a
//! clock moved by hand: every test runs on SQLite and on PostgreSQL (the
//! harness's throwaway cluster). The reason recorded for each kind of
//! denial, a `?wait=` denial counted once, true and false denials at the
//! edges of the tolerance, the denials list's pages, a retry storm, and
//! the migration of the old per-second counts.

#[allow(dead_code)] // each test binary uses a part of it
mod support;

use std::sync::Arc;
use std::time::Duration;

use leasehold_common::Timestamp;
use leasehold_common::api::{DenialReason, DenialView, DenialsByReason, UsageSummary};
use leasehold_server::clock::Clock;
use leasehold_server::line::{Lines, checkout_in_line};
use leasehold_server::store::denials::{DenialCursor, DenialsQuery};
use leasehold_server::store::history::UsageQuery;
use leasehold_server::store::sign_ins::SignInOp;
use leasehold_server::store::{
    Ahead, CheckoutOutcome, CheckoutRequest, LeaseRow, Limit, NotAllowedBecause, pg,
    sqlite_migrate_to,
};
use leasehold_server::usage::UsageRange;
use support::{Harness, TestDb, at, req};

/// `tiny`: one seat. `other`: one seat, for a grant elsewhere. `caps`: a
/// holder cap of 1, a group `team` (`t-*`) capped at 1, `evil` denied, and
/// one seat to lend.
const LICENSES: &str = r#"
[[license]]
id = "tiny"
key = "tiny-key"
seats = 1
ttl = "60s"
skew = "5s"
reap_grace = "15s"

[[license]]
id = "other"
key = "other-key"
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

[[license.group]]
name = "team"
holders = ["t-*"]
max = 1

[license.borrow]
max = "1h"
seats = 1
"#;

const SKEW: Duration = Duration::from_secs(5);

/// Every test, once on each store.
macro_rules! on_both_stores {
    ($($name:ident),* $(,)?) => {$(
        mod $name {
            #[tokio::test]
            async fn sqlite() {
                super::$name(super::TestDb::sqlite()).await;
            }
            #[tokio::test]
            async fn postgres() {
                super::$name(super::TestDb::postgres()).await;
            }
        }
    )*};
}

on_both_stores!(
    each_kind_of_denial_is_recorded_with_its_reason,
    a_wait_refused_counts_once_and_a_403_at_once,
    true_and_false_denials_at_the_edges_of_the_tolerance,
    the_list_pages_newest_first_through_its_cursor,
    a_retry_storm_keeps_every_count_and_is_pruned,
    old_per_second_counts_are_kept_as_full_denials,
);

/// `n` milliseconds after T0.
fn ms(n: i64) -> Timestamp {
    at(n)
}

/// The store under [`LICENSES`].
fn harness(db: TestDb) -> Harness {
    Harness::on(db, LICENSES)
}

impl Harness {
    async fn release(&self, seat: &LeaseRow) {
        assert!(
            self.store
                .release(&seat.license_id, &seat.seat_id)
                .await
                .unwrap()
        );
    }

    /// Every denial of the license in `[from, to)` at `tolerance`, in
    /// pages of `limit`, with the cursors handed out.
    async fn all_denials(
        &self,
        license: &str,
        (from, to): (Timestamp, Timestamp),
        tolerance: Duration,
        limit: usize,
    ) -> Vec<DenialView> {
        let mut all = Vec::new();
        let mut after: Option<DenialCursor> = None;
        loop {
            let page = self
                .store
                .denials_page(DenialsQuery {
                    license_id: license.into(),
                    from,
                    to,
                    tolerance,
                    after: after.clone(),
                    limit,
                })
                .await
                .unwrap();
            assert!(page.len() <= limit);
            let last_page = page.len() < limit;
            // Through the wire form, as a client sends it back.
            after = DenialCursor::next(&page, after.as_ref())
                .map(|c| DenialCursor::decode(&c.encode()).unwrap());
            all.extend(page);
            if last_page {
                return all;
            }
        }
    }

    async fn summary(
        &self,
        license: &str,
        (from, to): (Timestamp, Timestamp),
        tolerance: Duration,
    ) -> UsageSummary {
        self.usage(license, (from, to), None, tolerance)
            .await
            .summary
    }

    async fn usage(
        &self,
        license: &str,
        (from, to): (Timestamp, Timestamp),
        step_ms: Option<i64>,
        tolerance: Duration,
    ) -> leasehold_server::usage::Usage {
        let range = UsageRange::new(from, to, step_ms, self.clock.now()).unwrap();
        self.store
            .usage(UsageQuery {
                license_id: license.into(),
                range,
                skew: SKEW,
                tolerance,
            })
            .await
            .unwrap()
    }
}

fn borrow(license: &str, holder: &str, fingerprint: &str) -> CheckoutRequest {
    CheckoutRequest {
        borrow: Some(Duration::from_secs(1800)),
        ..req(license, holder, Some(fingerprint))
    }
}

const MINUTE: Duration = Duration::from_secs(60);
const WHOLE: (Timestamp, Timestamp) = (
    Timestamp::from_millis(support::T0 - 3_600_000),
    Timestamp::from_millis(support::T0 + 3_600_000),
);

/// What each denial was, newest first: (ms after T0, holder, reason).
fn listed(views: &[DenialView]) -> Vec<(i64, &str, Option<&str>, DenialReason, bool)> {
    views
        .iter()
        .map(|v| {
            (
                v.at.as_millis() - support::T0,
                v.holder.as_str(),
                v.fingerprint.as_deref(),
                v.reason,
                v.is_true,
            )
        })
        .collect()
}

async fn each_kind_of_denial_is_recorded_with_its_reason(db: TestDb) {
    let h = harness(db);
    h.granted(&req("tiny", "a", None)).await;
    h.set(ms(1_001));
    let full = h.checkout(&req("tiny", "b", Some("fb"))).await;
    assert!(matches!(full, CheckoutOutcome::Full { .. }), "{full:?}");

    let x = h.granted(&req("caps", "x", Some("x1"))).await;
    h.set(ms(2_002));
    let holder = h.checkout(&req("caps", "x", Some("x2"))).await;
    assert!(matches!(
        holder,
        CheckoutOutcome::LimitReached {
            limit: Limit::Holder,
            ..
        }
    ));
    h.granted(&req("caps", "t-1", None)).await;
    h.set(ms(3_003));
    let group = h.checkout(&req("caps", "t-2", None)).await;
    assert!(matches!(
        group,
        CheckoutOutcome::LimitReached {
            limit: Limit::Group,
            ..
        }
    ));
    h.granted(&borrow("caps", "y", "y1")).await;
    h.set(ms(4_004));
    let lent_out = h.checkout(&borrow("caps", "z", "z1")).await;
    assert!(matches!(
        lent_out,
        CheckoutOutcome::LimitReached {
            limit: Limit::Borrow,
            ..
        }
    ));
    h.set(ms(5_005));
    assert_eq!(
        h.checkout(&req("caps", "evil", None)).await,
        CheckoutOutcome::NotAllowed(NotAllowedBecause::Lists)
    );
    h.store
        .revoke(&x.seat_id, None, Some(MINUTE), false)
        .await
        .unwrap();
    h.set(ms(6_006));
    let blocked = h.checkout(&req("caps", "x", Some("x1"))).await;
    assert!(matches!(blocked, CheckoutOutcome::Blocked { .. }));

    use DenialReason::*;
    assert_eq!(
        listed(&h.all_denials("caps", WHOLE, MINUTE, 100).await),
        [
            (6_006, "x", Some("x1"), Blocked, false),
            (5_005, "evil", None, NotAllowed, false),
            (4_004, "z", Some("z1"), Borrow, false),
            (3_003, "t-2", None, Group, false),
            (2_002, "x", Some("x2"), Holder, false),
        ]
    );
    assert_eq!(
        listed(&h.all_denials("tiny", WHOLE, MINUTE, 100).await),
        [(1_001, "b", Some("fb"), Full, true)]
    );
    let caps = h.summary("caps", WHOLE, MINUTE).await;
    let want = DenialsByReason {
        holder: 1,
        group: 1,
        borrow: 1,
        not_allowed: 1,
        blocked: 1,
        ..Default::default()
    };
    assert_eq!(
        (caps.denials, caps.denials_by_reason, caps.true_denials),
        (5, want, 0)
    );
    let tiny = h.summary("tiny", WHOLE, MINUTE).await;
    assert_eq!(
        (tiny.denials, tiny.denials_by_reason.full, tiny.true_denials),
        (1, 1, 1)
    );
    h.finish().await;
}

async fn a_wait_refused_counts_once_and_a_403_at_once(db: TestDb) {
    let h = harness(db);
    let lines = Arc::new(Lines::default());
    let wait = |r: CheckoutRequest, secs: f64| {
        let (store, lines) = (h.store.clone(), lines.clone());
        async move {
            checkout_in_line(&store, &lines, r, Duration::from_secs_f64(secs), |_| ())
                .await
                .unwrap()
                .1
        }
    };
    // Refused by the lists: final at once, so counted at once, once.
    assert_eq!(
        wait(req("caps", "evil", None), 5.0).await,
        CheckoutOutcome::NotAllowed(NotAllowedBecause::Lists)
    );
    // A full pool: retried in line, counted once, when the wait runs out.
    h.granted(&req("tiny", "a", None)).await;
    let full = wait(req("tiny", "b", None), 0.4).await;
    assert!(matches!(full, CheckoutOutcome::Full { .. }), "{full:?}");
    // A plain attempt (no wait) counts as well, once its batch commits
    // (the read below must not race the commit).
    let plain = h
        .store
        .checkout_applied(req("tiny", "c", None), Ahead::Waiters(Vec::new()), true)
        .await
        .unwrap()
        .committed()
        .await
        .unwrap();
    assert!(matches!(plain, CheckoutOutcome::Full { .. }));

    let caps = h.summary("caps", WHOLE, MINUTE).await;
    assert_eq!((caps.denials, caps.denials_by_reason.not_allowed), (1, 1));
    let tiny = h.summary("tiny", WHOLE, MINUTE).await;
    assert_eq!((tiny.denials, tiny.denials_by_reason.full), (2, 2));
    let holders: Vec<String> = h
        .all_denials("tiny", WHOLE, MINUTE, 10)
        .await
        .into_iter()
        .map(|v| v.holder)
        .collect();
    assert_eq!(holders.len(), 2);
    assert!(holders.contains(&"b".into()) && holders.contains(&"c".into()));
    h.finish().await;
}

async fn true_and_false_denials_at_the_edges_of_the_tolerance(db: TestDb) {
    let h = harness(db);
    let a = h.granted(&req("tiny", "a", None)).await;
    // b refused at 10 s and 20 s, granted at 40 s.
    for t in [10_000, 20_000] {
        h.set(ms(t));
        assert!(matches!(
            h.checkout(&req("tiny", "b", None)).await,
            CheckoutOutcome::Full { .. }
        ));
    }
    h.set(ms(40_000));
    h.release(&a).await;
    let b = h.granted(&req("tiny", "b", None)).await;
    // c refused at 40 s, the very instant of a grant to c elsewhere: a grant
    // at d does not make it false, nor does one on another license.
    assert!(matches!(
        h.checkout(&req("tiny", "c", None)).await,
        CheckoutOutcome::Full { .. }
    ));
    h.granted(&req("other", "c", None)).await;
    h.set(ms(41_000));
    h.release(&b).await;

    let verdicts = |views: Vec<DenialView>| -> Vec<(i64, String, bool)> {
        views
            .into_iter()
            .map(|v| (v.at.as_millis() - support::T0, v.holder, v.is_true))
            .collect()
    };
    let s = |n: u64| Duration::from_millis(n);
    // The grant at exactly d + tolerance is false-making; a millisecond
    // less and the denial at 10 s is true.
    for (tolerance, true_at_10, true_at_20) in [
        (s(30_000), false, false),
        (s(29_999), true, false),
        (s(20_000), true, false),
        (s(19_999), true, true),
        (s(0), true, true),
        (s(3_600_000), false, false),
    ] {
        assert_eq!(
            verdicts(h.all_denials("tiny", WHOLE, tolerance, 10).await),
            [
                (40_000, "c".to_string(), true),
                (20_000, "b".to_string(), true_at_20),
                (10_000, "b".to_string(), true_at_10),
            ],
            "tolerance {tolerance:?}"
        );
        let sum = h.summary("tiny", WHOLE, tolerance).await;
        let want = 1 + u64::from(true_at_10) + u64::from(true_at_20);
        assert_eq!((sum.denials, sum.true_denials), (3, want), "{tolerance:?}");
    }
    // A grant after the range still counts: [0, 30 s) holds both of b's
    // denials, and the grant at 40 s makes both false at 30 s.
    let early = (ms(0), ms(30_000));
    let sum = h.summary("tiny", early, s(30_000)).await;
    assert_eq!((sum.denials, sum.true_denials), (2, 0));
    assert_eq!(
        verdicts(h.all_denials("tiny", early, s(30_000), 10).await),
        [(20_000, "b".into(), false), (10_000, "b".into(), false)]
    );
    // Each point holds the denials at its instants: 10 s steps.
    let usage = h
        .usage("tiny", (ms(0), ms(50_000)), Some(10_000), s(25_000))
        .await;
    let points: Vec<(u64, u64, u64)> = usage
        .points
        .iter()
        .map(|p| (p.denials, p.denials_by_reason.full, p.true_denials))
        .collect();
    assert_eq!(
        points,
        [(0, 0, 0), (1, 1, 1), (1, 1, 0), (0, 0, 0), (1, 1, 1)]
    );
    h.finish().await;
}

async fn the_list_pages_newest_first_through_its_cursor(db: TestDb) {
    let h = harness(db);
    h.granted(&req("tiny", "a", None)).await;
    // Denials in two seconds; three identical ones (same holder, machine,
    // reason, millisecond) and a same-millisecond one of another holder.
    let plan: [(i64, &str); 8] = [
        (1_000, "b"),
        (1_500, "c"),
        (1_999, "b"),
        (2_000, "d"),
        (2_000, "b"),
        (2_000, "b"),
        (2_000, "b"),
        (2_700, "c"),
    ];
    for (t, holder) in plan {
        h.set(ms(t));
        assert!(matches!(
            h.checkout(&req("tiny", holder, Some("m"))).await,
            CheckoutOutcome::Full { .. }
        ));
    }
    let want: Vec<(i64, String)> = [
        (2_700, "c"),
        (2_000, "b"),
        (2_000, "b"),
        (2_000, "b"),
        (2_000, "d"),
        (1_999, "b"),
        (1_500, "c"),
        (1_000, "b"),
    ]
    .into_iter()
    .map(|(t, who)| (t, who.to_string()))
    .collect();
    for limit in [1, 2, 3, 8, 100] {
        let got: Vec<(i64, String)> = h
            .all_denials("tiny", WHOLE, MINUTE, limit)
            .await
            .into_iter()
            .map(|v| (v.at.as_millis() - support::T0, v.holder))
            .collect();
        assert_eq!(got, want, "pages of {limit}");
    }
    // The range cuts at the millisecond, inside a second.
    let inside: Vec<i64> = h
        .all_denials("tiny", (ms(1_500), ms(2_700)), MINUTE, 3)
        .await
        .iter()
        .map(|v| v.at.as_millis() - support::T0)
        .collect();
    assert_eq!(inside, [2_000, 2_000, 2_000, 2_000, 1_999, 1_500]);
    assert!(DenialCursor::decode("not a cursor").is_err());
    h.finish().await;
}

/// Denials fed to the writer concurrently, so they share its batches as a
/// storm's would.
async fn refuse_many(h: &Harness, r: &CheckoutRequest, n: usize) {
    let outcomes =
        futures_util::future::join_all((0..n).map(|_| h.store.checkout(r.clone()))).await;
    for o in outcomes {
        assert!(matches!(o.unwrap(), CheckoutOutcome::Full { .. }));
    }
}

/// Denials of one holder, each from a machine not seen before.
#[derive(Default)]
struct Fresh(std::sync::atomic::AtomicUsize);

async fn refuse_fresh(h: &Harness, fresh: &Fresh, n: usize) {
    for _ in 0..n {
        let i = fresh.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        refuse_many(h, &req("tiny", "storm", Some(&format!("machine-{i}"))), 1).await;
    }
}

async fn a_retry_storm_keeps_every_count_and_is_pruned(db: TestDb) {
    let h = harness(db);
    h.granted(&req("tiny", "a", None)).await;
    let storm = req("tiny", "storm", Some("loop"));
    // 3 denials at each of the 1,000 milliseconds of one second, and a
    // quieter client beside it.
    for offset in 0..1_000 {
        h.set(ms(10_000 + offset));
        refuse_many(&h, &storm, 3).await;
        if offset % 100 == 0 {
            refuse_many(&h, &req("tiny", "calm", None), 1).await;
        }
    }
    let second = (ms(10_000), ms(11_000));
    let sum = h.summary("tiny", second, MINUTE).await;
    assert_eq!((sum.denials, sum.true_denials), (3_010, 3_010));
    // Exact to the millisecond: the first 250 ms hold 750 + 3.
    let quarter = h.summary("tiny", (ms(10_000), ms(10_250)), MINUTE).await;
    assert_eq!(quarter.denials, 753);
    let newest = h
        .store
        .denials_page(DenialsQuery {
            license_id: "tiny".into(),
            from: second.0,
            to: second.1,
            tolerance: MINUTE,
            after: None,
            limit: 4,
        })
        .await
        .unwrap();
    assert_eq!(
        listed(&newest),
        [
            (10_999, "storm", Some("loop"), DenialReason::Full, true),
            (10_999, "storm", Some("loop"), DenialReason::Full, true),
            (10_999, "storm", Some("loop"), DenialReason::Full, true),
            (10_998, "storm", Some("loop"), DenialReason::Full, true),
        ]
    );
    // A storm-second is one row per holder and machine.
    if let TestDb::Sqlite(_) = h.db {
        let c = rusqlite::Connection::open(h.db.sqlite_path()).unwrap();
        let (rows, bytes): (i64, i64) = c
            .query_row(
                "SELECT count(*), sum(length(offsets)) FROM denials WHERE holder = 'storm'",
                [],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .unwrap();
        assert_eq!((rows, bytes), (1, 6_000));
    }
    // Past the retention, the storm goes with the rest of the history, a
    // bounded batch at a time.
    h.set(ms(401 * 86_400_000));
    let mut pruned = 0;
    loop {
        let n = h.store.prune_history(1).await.unwrap();
        if n == 0 {
            break;
        }
        pruned += n;
    }
    assert!(pruned >= 2, "{pruned}");
    assert_eq!(h.summary("tiny", second, MINUTE).await.denials, 0);
    assert!(h.all_denials("tiny", WHOLE, MINUTE, 10).await.is_empty());
    h.finish().await;
}

async fn old_per_second_counts_are_kept_as_full_denials(db: TestDb) {
    // Two seconds of the old table: 3 denials, then 2.
    let old = [(5_000i64, 3i64), (7_000, 2)];
    const INSERT: &str =
        "INSERT INTO denials (license_id, second_ms, count) VALUES ('tiny', $1, $2)";
    match &db {
        TestDb::Sqlite(_) => {
            let mut c = rusqlite::Connection::open(db.sqlite_path()).unwrap();
            sqlite_migrate_to(&mut c, 10).unwrap();
            for (second, count) in old {
                c.execute(INSERT, rusqlite::params![ms(second).as_millis(), count])
                    .unwrap();
            }
        }
        TestDb::Postgres(url) => {
            let url = url.clone();
            // The blocking client runs its own runtime: not on this one.
            std::thread::spawn(move || {
                let mut c = postgres::Client::connect(&url, postgres::NoTls).unwrap();
                pg::schema::migrate_to(&mut c, 12).unwrap();
                for (second, count) in old {
                    c.execute(INSERT, &[&ms(second).as_millis(), &count])
                        .unwrap();
                }
            })
            .join()
            .unwrap();
        }
    }
    let h = harness(db);
    h.set(ms(8_000));
    let sum = h.summary("tiny", WHOLE, MINUTE).await;
    assert_eq!(
        (sum.denials, sum.denials_by_reason.full, sum.true_denials),
        (5, 5, 5)
    );
    let views = h.all_denials("tiny", WHOLE, MINUTE, 2).await;
    let got: Vec<(i64, &str, Option<&str>, DenialReason)> = views
        .iter()
        .map(|v| {
            (
                v.at.as_millis() - support::T0,
                v.holder.as_str(),
                v.fingerprint.as_deref(),
                v.reason,
            )
        })
        .collect();
    let mut want = vec![(7_000, "", None, DenialReason::Full); 2];
    want.extend(vec![(5_000, "", None, DenialReason::Full); 3]);
    assert_eq!(got, want);
    // New denials join the old ones.
    h.set(ms(8_500));
    h.granted(&req("tiny", "a", None)).await;
    assert!(matches!(
        h.checkout(&req("tiny", "b", None)).await,
        CheckoutOutcome::Full { .. }
    ));
    assert_eq!(h.summary("tiny", WHOLE, MINUTE).await.denials, 6);
    h.finish().await;
}

/// SQLite holds a batch that only counted denials uncommitted (no
/// `fdatasync` per batch of a retry storm); the counts are committed by the
/// next batch with anything else (the alive tick), by a read of the
/// history, after a second of holding at most, and at a clean stop.
#[tokio::test]
async fn sqlite_holds_denial_counts_until_a_tick_a_read_a_second_or_the_stop() {
    let h = harness(TestDb::sqlite());
    h.set(ms(1_000));
    h.granted(&req("tiny", "a", None)).await;
    // Each denial a new question (a new machine): a repeat would be
    // answered beside the writer (`repeats.rs`), which this is not about.
    let storm = Fresh::default();
    let file = rusqlite::Connection::open(h.db.sqlite_path()).unwrap();
    let committed = || -> i64 {
        file.query_row("SELECT coalesce(sum(count), 0) FROM denials", [], |r| {
            r.get(0)
        })
        .unwrap()
    };

    // The first denial of a holder also logs a `denied` event (once a
    // window): that batch commits.
    refuse_fresh(&h, &storm, 1).await;
    assert_eq!(committed(), 1);
    refuse_fresh(&h, &storm, 5).await;
    assert_eq!(committed(), 1, "a batch of denials alone is held");
    h.store.tick().await.unwrap();
    assert_eq!(committed(), 6, "the alive tick commits them");

    refuse_fresh(&h, &storm, 3).await;
    assert_eq!(committed(), 6);
    let whole = (ms(0), ms(10_000));
    assert_eq!(h.summary("tiny", whole, MINUTE).await.denials, 9);
    assert_eq!(committed(), 9, "a read of the history commits them first");

    refuse_fresh(&h, &storm, 2).await;
    h.set(ms(1_999));
    refuse_fresh(&h, &storm, 1).await;
    assert_eq!(committed(), 9, "held for less than a second");
    h.set(ms(2_000));
    refuse_fresh(&h, &storm, 1).await;
    assert_eq!(committed(), 13, "never held for a second");

    // The next batch that writes anything else (a grant) commits them.
    refuse_fresh(&h, &storm, 2).await;
    h.granted(&req("other", "b", None)).await;
    assert_eq!(committed(), 15);

    // A dashboard session is written on a connection of its own, which
    // would wait for the writer's lock: the held counts go first.
    refuse_fresh(&h, &storm, 1).await;
    assert_eq!(committed(), 15);
    let deleted = h
        .store
        .sign_in_write(SignInOp::Delete {
            id_sha256: "none".into(),
        })
        .await
        .unwrap();
    assert_eq!((deleted, committed()), (0, 16));

    refuse_fresh(&h, &storm, 4).await;
    assert_eq!(committed(), 16);
    let db = h.db;
    h.store.close().await;
    assert_eq!(committed(), 20, "a clean stop commits them");
    drop(db);
}

/// The figures of BENCHMARKS.md: what a minute of a retry storm (one
/// client refused 1,000 times a second) costs the history, on each store.
/// `cargo test --release -p leasehold-server --test denials -- --ignored
/// --nocapture storm_minute`
#[tokio::test]
#[ignore]
async fn storm_minute_figures() {
    for db in [TestDb::sqlite(), TestDb::postgres()] {
        let kind = match db {
            TestDb::Sqlite(_) => "sqlite",
            TestDb::Postgres(_) => "postgres",
        };
        let h = harness(db);
        h.granted(&req("tiny", "a", None)).await;
        let before = history_bytes(&h).await;
        let storm = req("tiny", "storm", Some("loop"));
        let started = std::time::Instant::now();
        // 10 denials every 10 ms for 60 s, 10 at a time as a writer
        // batch would take them.
        for tick in 0..6_000 {
            h.set(ms(tick * 10));
            refuse_many(&h, &storm, 10).await;
        }
        let took = started.elapsed();
        let sum = h.summary("tiny", (ms(0), ms(60_000)), MINUTE).await;
        assert_eq!(sum.denials, 60_000);
        let bytes = history_bytes(&h).await - before;
        println!(
            "{kind}: 60,000 denials in 60 s: {bytes} bytes of denials table and indexes \
             ({:.1} bytes a denial), {:.0} denials/s through the writer",
            bytes as f64 / 60_000.0,
            60_000.0 / took.as_secs_f64()
        );
        h.finish().await;
    }
}

/// Bytes the denials table and its indexes take.
async fn history_bytes(h: &Harness) -> i64 {
    match &h.db {
        TestDb::Sqlite(_) => {
            let c = rusqlite::Connection::open(h.db.sqlite_path()).unwrap();
            c.query_row(
                "SELECT sum(pgsize) FROM dbstat WHERE name IN
                     ('denials', 'denials_by_second', 'sqlite_autoindex_denials_1')",
                [],
                |r| r.get(0),
            )
            .unwrap()
        }
        TestDb::Postgres(url) => {
            let url = url.clone();
            tokio::task::spawn_blocking(move || {
                let mut c = postgres::Client::connect(&url, postgres::NoTls).unwrap();
                c.execute("VACUUM denials", &[]).unwrap();
                c.query_one("SELECT pg_total_relation_size('denials')", &[])
                    .unwrap()
                    .get(0)
            })
            .await
            .unwrap()
        }
    }
}
