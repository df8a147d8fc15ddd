//! The what-if's demand read from a real store with a clock moved by hand
//! (SQLite, or PostgreSQL with `LEASEHOLD_TEST_STORE=postgres`): recorded
//! idle periods cut a session at the timeout and its user's return starts
//! a new request, an open session ends at `to`, and the curve follows; and
//! the denials a store records, retries and all, replay as the reference
//! (`leasehold_testkit::what_if`) says, one episode per person's retries.

#[allow(dead_code)] // each test binary uses a part of it
mod support;

use std::time::Duration;

use leasehold_common::{Licenses, Timestamp};
use leasehold_server::clock::ManualClock;
use leasehold_server::licenses::LicensesHandle;
use leasehold_server::store::{
    CheckoutOutcome, CheckoutRequest, HeartbeatOutcome, LeaseRow, Store,
};
use leasehold_server::usage::what_if::{Demand, WhatIfQuery};
use leasehold_testkit::what_if::{self as reference, Answer, History, Session};
use proptest::prelude::*;
use support::{NO_STALL, TestDb, at, req};

/// No `idle_timeout`: idleness is recorded, never reclaimed.
const LICENSES: &str = r#"
[[license]]
id = "plain"
key = "plain-key"
seats = 3
ttl = "60s"
skew = "5s"
reap_grace = "15s"
"#;

fn s(n: i64) -> Timestamp {
    at(n * 1000)
}

async fn checkout(store: &Store, holder: &str) -> LeaseRow {
    let req = CheckoutRequest {
        license_id: "plain".into(),
        holder: holder.into(),
        fingerprint: None,
        idempotency_key: None,
        borrow: None,
        version: None,
    };
    match store.checkout(req).await.unwrap() {
        CheckoutOutcome::Granted { lease, .. } => lease,
        other => panic!("{holder}: {other:?}"),
    }
}

async fn demand(store: &Store, to: Timestamp, idle_timeout: Option<u64>) -> Demand {
    store
        .what_if_demand(WhatIfQuery {
            license_id: "plain".into(),
            from: s(-100),
            to,
            now: to,
            skew: Duration::from_secs(5),
            ttl: Duration::from_secs(60),
            idle_timeout: idle_timeout.map(Duration::from_secs),
            tolerance: Duration::from_secs(60),
        })
        .await
        .unwrap()
}

/// Alice holds a seat over `[0, 400)`, idle over `[10, 200)` (back at 200)
/// and over `[250, 400)` (released while idle); Bob over `[300, 350)`;
/// Carol from 450 on, still held at 500.
#[tokio::test]
async fn idle_periods_cut_sessions_and_returns_are_new_requests() {
    let db = TestDb::new();
    let clock = ManualClock::new(at(0));
    let licenses = LicensesHandle::new(Licenses::parse(LICENSES).unwrap());
    let store = db.open(LICENSES, &licenses, &clock, NO_STALL).unwrap();
    let a = checkout(&store, "alice").await;
    let beat = |t: i64, idle_s: Option<u64>, seat: &LeaseRow| {
        clock.set(s(t));
        let (store, seat) = (store.clone(), seat.seat_id.clone());
        async move {
            let outcome = match idle_s {
                Some(i) => {
                    store
                        .heartbeat_idle("plain", &seat, Duration::from_secs(i))
                        .await
                }
                None => store.heartbeat("plain", &seat).await,
            };
            assert!(
                matches!(outcome.unwrap(), HeartbeatOutcome::Renewed(_)),
                "at {t}"
            );
        }
    };
    for (t, idle) in [(30, 20), (80, 70), (130, 120), (180, 170)] {
        beat(t, Some(idle), &a).await;
    }
    beat(200, None, &a).await;
    beat(250, None, &a).await;
    beat(280, Some(30), &a).await;
    clock.set(s(300));
    let b = checkout(&store, "bob").await;
    beat(330, Some(80), &a).await;
    beat(340, None, &b).await;
    clock.set(s(350));
    assert!(store.release("plain", &b.seat_id).await.unwrap());
    beat(380, Some(130), &a).await;
    clock.set(s(400));
    assert!(store.release("plain", &a.seat_id).await.unwrap());
    clock.set(s(450));
    checkout(&store, "carol").await;
    clock.set(s(500));

    // No timeout: alice [0, 400), bob [300, 350), carol [450, 500).
    let d = demand(&store, s(500), None).await;
    assert_eq!((d.sessions(), d.idle_cut(), d.covered_from()), (3, 0, s(0)));
    let r = d.replay();
    assert_eq!((r.requests(), r.peak()), (3, 2));
    let (curve, _) = r.curve(1..=2, 0.0);
    assert_eq!((curve[0].denials, curve[1].denials), (1, 0));
    // 60 s: alice is cut at 70 and 310, back at 200 only: [0, 70) and
    // [200, 310); bob still finds her seat taken with one seat.
    let d = demand(&store, s(500), Some(60)).await;
    assert_eq!((d.sessions(), d.idle_cut()), (3, 1));
    let r = d.replay();
    assert_eq!(r.requests(), 4);
    let one = &r.curve(1..=1, 0.0).0[0];
    assert_eq!(one.denials, 1);
    // Seat time with one seat: 70 + 110 + 50 (carol) of 500 s.
    assert!((one.utilization - 230.0 / 500.0).abs() < 1e-12, "{one:?}");
    // 150 s: only the first period is long enough (cut at 160); the second
    // is exactly 150 s long and removes nothing.
    let d = demand(&store, s(500), Some(150)).await;
    assert_eq!((d.idle_cut(), d.replay().requests()), (1, 4));
    // 200 s: no period is that long.
    let d = demand(&store, s(500), Some(200)).await;
    assert_eq!((d.idle_cut(), d.replay().requests()), (0, 3));
    // A range that ends before carol: her open session is not in it.
    let d = demand(&store, s(420), Some(60)).await;
    assert_eq!((d.sessions(), d.replay().requests()), (2, 3));
    store.close().await;
}

/// One step of a script: `gap` seconds later, `holder` asks for a seat if
/// it holds none (granted or refused: a retry storm is denials of one
/// holder), else gives its seat back.
#[derive(Debug, Clone)]
struct Step {
    gap_s: i64,
    holder: u8,
}

const POOL: &str = r#"
[[license]]
id = "plain"
key = "plain-key"
seats = 2
ttl = "1h"
skew = "5s"
reap_grace = "15s"
"#;

/// What the script saw: every grant, release and denial, by second.
#[derive(Default)]
struct Seen {
    sessions: Vec<(String, i64, Option<i64>)>,
    denials: Vec<(String, i64)>,
}

impl Seen {
    /// The reference's input: a denial is true unless its holder got a
    /// seat within the tolerance after it.
    fn history(&self, to_s: i64, tolerance_s: i64) -> History {
        let granted_within = |who: &str, d: i64| {
            self.sessions
                .iter()
                .any(|(h, start, _)| h == who && *start > d && *start <= d + tolerance_s)
        };
        History {
            covered_from: 0,
            to: to_s * 1000,
            idle_timeout: None,
            ttl: 3_600_000,
            tolerance: tolerance_s * 1000,
            sessions: self
                .sessions
                .iter()
                .map(|(_, start, end)| Session {
                    start: start * 1000,
                    end: end.map(|e| e * 1000),
                    idle: Vec::new(),
                })
                .collect(),
            true_denials: self
                .denials
                .iter()
                .filter(|(who, d)| !granted_within(who, *d))
                .map(|(who, d)| (who.clone(), d * 1000))
                .collect(),
        }
    }
}

async fn play(store: &Store, clock: &ManualClock, steps: &[Step]) -> (Seen, i64) {
    let (mut seen, mut t) = (Seen::default(), 0);
    let mut holding: std::collections::HashMap<String, (String, usize)> = Default::default();
    for step in steps {
        t += step.gap_s;
        clock.set(s(t));
        let holder = format!("h{}", step.holder);
        if let Some((seat, i)) = holding.remove(&holder) {
            assert!(store.release("plain", &seat).await.unwrap());
            seen.sessions[i].2 = Some(t);
            continue;
        }
        match store.checkout(req("plain", &holder, None)).await.unwrap() {
            CheckoutOutcome::Granted { lease, .. } => {
                holding.insert(holder.clone(), (lease.seat_id, seen.sessions.len()));
                seen.sessions.push((holder, t, None));
            }
            CheckoutOutcome::Full { .. } => seen.denials.push((holder, t)),
            other => panic!("{holder} at {t}: {other:?}"),
        }
    }
    (seen, t + 1)
}

fn replayed(d: &Demand, k_max: u32) -> Answer {
    let r = d.replay();
    Answer {
        sessions: d.sessions(),
        true_denials: d.true_denials(),
        episodes: d.episodes(),
        idle_cut: d.idle_cut(),
        requests: r.requests(),
        curve: r.curve(1..=k_max, 0.0).0,
    }
}

fn steps() -> impl Strategy<Value = Vec<Step>> {
    // Five people on two seats, mostly seconds apart: retries join.
    prop::collection::vec(
        (1i64..40, 0u8..5).prop_map(|(gap_s, holder)| Step { gap_s, holder }),
        4..40,
    )
}

proptest! {
    // Each case is a store; PostgreSQL's take longer, so fewer by default.
    #![proptest_config(ProptestConfig::with_cases(
        std::env::var("PROPTEST_CASES").ok().and_then(|c| c.parse().ok()).unwrap_or(16)
    ))]

    #[test]
    fn recorded_retries_replay_as_the_reference(steps in steps(), tolerance_s in 0i64..60) {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async {
            let db = TestDb::new();
            let clock = ManualClock::new(at(0));
            let licenses = LicensesHandle::new(Licenses::parse(POOL).unwrap());
            let store = db.open(POOL, &licenses, &clock, NO_STALL).unwrap();
            let (seen, to_s) = play(&store, &clock, &steps).await;
            let d = store
                .what_if_demand(WhatIfQuery {
                    license_id: "plain".into(),
                    from: s(-100),
                    to: s(to_s),
                    now: s(to_s),
                    skew: Duration::from_secs(5),
                    ttl: Duration::from_secs(3600),
                    idle_timeout: None,
                    tolerance: Duration::from_secs(tolerance_s as u64),
                })
                .await
                .unwrap();
            store.close().await;
            // SQLite records the pool size when it opens, PostgreSQL at its
            // writer's first batch: either way, before anything to replay.
            let first = seen.sessions.first().map(|s| s.1).into_iter();
            let first = first.chain(seen.denials.first().map(|r| r.1)).min();
            let covered_from = d.covered_from().as_millis() - at(0).as_millis();
            assert!(first.is_none_or(|f| covered_from <= f * 1000), "{covered_from}");
            let mut history = seen.history(to_s, tolerance_s);
            history.covered_from = covered_from;
            let expected = reference::replay(&history, 3);
            assert_eq!(replayed(&d, 3), expected);
        });
    }
}
