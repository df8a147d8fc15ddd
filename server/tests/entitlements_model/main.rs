//! Model-based test of entitlements (issue 41) on a real store.
//!
//! A license with `vendor = "keyright"` (`cad`) takes its seats from the
//! vendor's signed files in force at the decision instant, narrowed by the
//! licenses file; `plain`, a license without a vendor beside it, must
//! decide exactly as it always has. A proptest drives the real `Store`
//! (writer thread and read pool, on SQLite or PostgreSQL as
//! `LEASEHOLD_TEST_STORE` says: `support::TestDb`) with random sequences
//! of: sets of files put in force (new ids, seats 1–5, overage, `iat`,
//! optional `nbf`/`exp`/`grace`; renewals of an id with a greater `iat`
//! and other seats; tombstones; older files put back), clock moves
//! (seconds to minutes, onto a file's `nbf`, `exp` or `exp + grace` give
//! or take a millisecond or a second, and back), the licenses file's
//! `seats` set or cleared, checkouts, heartbeats (one seat, or every seat
//! of `cad` in turn) and releases. A set goes in force as a scan puts it:
//! its ids remembered by the store (`entitlement_ids`), the files judged
//! against the store's memory (`JudgedSet::entitled`, what a PostgreSQL
//! writer does with the cluster's set), and handed to the writer through
//! `LicensesHandle::set_entitled`.
//!
//! Every answer is checked against a small model of its own (`model.rs`),
//! which restates the rules without the server's code:
//!
//! - a checkout of `cad` is `not_entitled` iff no file grants, else granted
//!   iff a seat is left under min(entitled, file seats) + the effective
//!   overage (else `Full` with those seats, the live count, the retry);
//! - every lease of `cad` granted or renewed expires at the latest
//!   `exp + grace` of the files that grant, or a TTL (5 minutes) on if
//!   sooner (no cap while a perpetual file grants), and never after that
//!   end;
//! - a heartbeat of a seat among the newest over the grant (+ overage) is
//!   `Lost(Expired)` and the seat leaves; others renew; after every seat
//!   heartbeats, no more are live than the grant lets stay;
//! - replacement is for good: an older `iat` of an id never grants again
//!   once the newer's `nbf` passed, even with the newer file gone from the
//!   set, as long as the store remembers it (and the store's memory is
//!   checked to be the model's after every set);
//! - the writer's decision time never runs back: a wall clock set earlier
//!   never makes an ended term grant again (on SQLite the decision time is
//!   read from the writer and held to that; on PostgreSQL the model puts
//!   it at the high-water mark, and the lease times check it);
//! - what the ledger in force says keyright grants `cad` (seats, overage,
//!   cap, the ids that grant) is the model's at every decision;
//! - `plain` grants up to its own seats, uncapped, whatever the files say.
//!
//! After every step the leases table (`seats`) is the model's field for
//! field, and `live_counts` is what the predicate counts in it.
//!
//! Besides, a deterministic race: 40 concurrent checkouts against a 5-seat
//! entitlement take exactly 5 seats.

#[path = "../support/mod.rs"]
#[allow(dead_code)] // each test binary uses a part of it
mod support;

mod model;
mod ops;
mod run;

use std::collections::BTreeSet;
use std::time::Instant;

use leasehold_server::store::CheckoutOutcome;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};

use model::CAD;
use ops::{Add, Terms};
use run::{COVER, Run, req};
use support::TestDb;

/// Whether `LEASEHOLD_TEST_STORE` names PostgreSQL (`support::TestDb`).
fn on_postgres() -> bool {
    std::env::var("LEASEHOLD_TEST_STORE").is_ok_and(|s| s.starts_with("postgres"))
}

#[test]
fn the_store_grants_as_the_entitlement_model_says() {
    // PROPTEST_CASES=1000 for a longer soak.
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(if on_postgres() { 24 } else { 64 });
    let mut runner = TestRunner::new(Config {
        cases,
        max_shrink_iters: 1024,
        failure_persistence: None,
        ..Config::default()
    });
    let strategy = (
        0u32..=2,
        prop::option::weighted(0.3, 0u8..=6),
        prop::collection::vec(ops::new_file(), 1..=3),
        prop::collection::vec(ops::op(), 1..=50),
    );
    let started = Instant::now();
    let result = runner.run(&strategy, |(overage, seats, first, ops)| {
        run::case(overage, seats, first, ops)
    });
    let store = if on_postgres() {
        "PostgreSQL"
    } else {
        "SQLite"
    };
    eprintln!(
        "{cases} cases on {store} in {:.1?}: {}",
        started.elapsed(),
        COVER.summary()
    );
    if let Err(e) = result {
        panic!("{e}");
    }
}

#[test]
fn forty_concurrent_checkouts_take_exactly_the_five_entitled_seats() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let db = TestDb::new();
        let mut run = Run::open(&db, 0, None);
        let five = Add::New {
            id: 0,
            iat_back_s: 60,
            terms: Terms {
                seats: 5,
                overage: 0,
                nbf_s: None,
                exp_s: None,
                grace_s: None,
            },
        };
        run.install("five seats", BTreeSet::new(), &[five])
            .await
            .unwrap();
        let tasks: Vec<_> = (0..40)
            .map(|i| {
                let store = run.store.clone();
                tokio::spawn(async move { store.checkout(req(CAD, &format!("c{i}"))).await })
            })
            .collect();
        let mut granted = BTreeSet::new();
        let mut full = 0;
        for task in tasks {
            match task.await.unwrap().unwrap() {
                CheckoutOutcome::Granted {
                    lease,
                    reused: false,
                    overage: false,
                } => assert!(granted.insert(lease.seat_id), "a seat granted twice"),
                CheckoutOutcome::Full {
                    seats: 5, live: 5, ..
                } => full += 1,
                other => panic!("not granted, not full of 5: {other:?}"),
            }
        }
        assert_eq!((granted.len(), full), (5, 35));
        let stored: BTreeSet<String> = (run.store.seats(Some(CAD)).await.unwrap())
            .into_iter()
            .map(|l| l.seat_id)
            .collect();
        assert_eq!(stored, granted, "the table holds the five seats granted");
        let live = run.store.live_counts().await.unwrap();
        let cad = live.iter().find(|(id, _)| id == CAD).unwrap();
        assert_eq!(cad.1.live, 5);
        run.store.close().await;
    });
}
