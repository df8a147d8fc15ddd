//! The reaper: only strictly after expiry plus grace, bounded, never a
//! counted lease (a clock sweep and a proptest).

use std::collections::{BTreeMap, BTreeSet};

use leasehold_common::api::EventKind;
use leasehold_common::{is_live, is_reapable};
use leasehold_server::store::{CheckoutOutcome, HeartbeatOutcome};
use proptest::prelude::*;

use crate::support::{NO_STALL, at, license_toml, ms};
use crate::{GRACE, Harness, req, secs};

// ---------------------------------------------------------------------------
// Reap
// ---------------------------------------------------------------------------

#[tokio::test]
async fn reap_only_strictly_after_expiry_plus_grace_one_event_per_seat() {
    let h = Harness::new();
    let a = h.fresh(req("cad", "alice")).await;
    let events_before = h.events().await;
    let last_id = events_before.last().map_or(0, |e| e.id);

    h.set(a.expires_at.saturating_add(GRACE));
    assert_eq!(
        h.store.reap(100).await.unwrap(),
        0,
        "boundary is not reapable"
    );
    assert!(h.seat(&a.seat_id).await.is_some());

    h.advance(ms(1));
    assert_eq!(h.store.reap(100).await.unwrap(), 1);
    assert!(h.seat(&a.seat_id).await.is_none());
    assert_eq!(h.store.reap(100).await.unwrap(), 0, "nothing left");

    let new_events = h.store.events_after(last_id, 100).await.unwrap();
    assert_eq!(new_events.len(), 1, "{new_events:?}");
    let e = &new_events[0];
    assert_eq!(e.kind, EventKind::Reap);
    assert_eq!(e.seat_id.as_deref(), Some(a.seat_id.as_str()));
    assert_eq!(e.holder.as_deref(), Some("alice"));
    assert_eq!(e.license_id.as_deref(), Some("cad"));
    assert_eq!(e.at, h.now());
    let detail = format!("expired {} unrenewed", a.expires_at);
    assert_eq!(e.detail.as_deref(), Some(detail.as_str()));
    h.finish().await;
}

#[tokio::test]
async fn reap_is_bounded_by_limit_and_spares_live_leases() {
    let h = Harness::new();
    let mut doomed = BTreeSet::new();
    for i in 0..3 {
        doomed.insert(h.fresh(req("cad", &format!("c{i}"))).await.seat_id);
    }
    for i in 0..2 {
        doomed.insert(h.fresh(req("other", &format!("o{i}"))).await.seat_id);
    }
    // Past every grace; then one fresh lease that must survive.
    h.advance(secs(60 + 15 + 1));
    let survivor = h.fresh(req("pool", "s")).await;

    assert_eq!(h.store.reap(0).await.unwrap(), 0, "limit 0 reaps nothing");
    assert_eq!(h.store.reap(2).await.unwrap(), 2);
    assert_eq!(h.store.seats(None).await.unwrap().len(), 4);
    assert_eq!(h.store.reap(2).await.unwrap(), 2);
    assert_eq!(h.store.reap(2).await.unwrap(), 1);
    assert_eq!(h.store.reap(2).await.unwrap(), 0);

    let left = h.store.seats(None).await.unwrap();
    assert_eq!(left, vec![survivor]);

    let reaps = h.events_of(EventKind::Reap).await;
    let reaped: BTreeSet<_> = reaps.iter().filter_map(|e| e.seat_id.clone()).collect();
    assert_eq!(reaps.len(), 5, "one event per seat: {reaps:?}");
    assert_eq!(reaped, doomed);
    h.finish().await;
}

#[tokio::test]
async fn reaper_never_deletes_a_counted_lease_sweep() {
    // Leases spread over two minutes, then the clock swept forward in steps
    // of 700 ms, reaping at every step: a lease live by the predicate before
    // the reap must still be there after it, and the live count must not move.
    let h = Harness::new();
    let mut seats = Vec::new();
    for i in 0..40u64 {
        h.set(at((i * 3_100) as i64));
        let license = ["cad", "other", "pool"][(i % 3) as usize];
        if let CheckoutOutcome::Granted { lease, .. } =
            h.checkout(req(license, &format!("h{i}"))).await
        {
            seats.push(lease);
        }
    }
    assert!(seats.len() >= 20, "enough leases to sweep: {}", seats.len());
    let licenses = h.licenses.current();
    let mut reaped_total = 0;
    // Sweep on from the last checkout: the writer's time never runs back.
    let mut step = h.now();
    while step < at(300_000) {
        h.set(step);
        let now = h.now();
        let before = h.store.seats(None).await.unwrap();
        let counts_before = h.store.live_counts().await.unwrap();
        reaped_total += h.store.reap(3).await.unwrap();
        let after: BTreeMap<_, _> = h
            .store
            .seats(None)
            .await
            .unwrap()
            .into_iter()
            .map(|l| (l.seat_id.clone(), l))
            .collect();
        for lease in &before {
            let policy = licenses.get(&lease.license_id).unwrap().policy;
            if is_live(lease.expires_at, now, policy.skew) {
                assert!(
                    after.contains_key(&lease.seat_id),
                    "live lease {lease:?} reaped at {now}"
                );
            }
        }
        assert_eq!(
            h.store.live_counts().await.unwrap(),
            counts_before,
            "at {now}"
        );
        step = step.saturating_add(ms(700));
    }
    // By the end everything lapsed long ago and has been reaped.
    h.store.reap(1000).await.unwrap();
    assert!(h.store.seats(None).await.unwrap().is_empty());
    assert!(reaped_total > 0);
    h.finish().await;
}

#[derive(Debug, Clone)]
enum Op {
    Checkout,
    Heartbeat(usize),
    Reap(usize),
}

fn op() -> impl Strategy<Value = (u64, Op)> {
    (
        0u64..6_000,
        prop_oneof![
            Just(Op::Checkout),
            (0usize..64).prop_map(Op::Heartbeat),
            (1usize..5).prop_map(Op::Reap),
        ],
    )
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 24,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    /// For random policies (reap_grace > skew, as validation demands), random
    /// checkouts, heartbeats and clock steps: every reap leaves every lease
    /// that `is_live` counts, and removes only leases `is_reapable` allows.
    #[test]
    fn reaper_never_deletes_a_counted_lease(
        ttl_ms in 1u64..5_000,
        skew_ms in 0u64..3_000,
        extra_ms in 1u64..3_000,
        ops in proptest::collection::vec(op(), 1..30),
    ) {
        let toml = license_toml("p", 8, ttl_ms, skew_ms, skew_ms + extra_ms);
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async {
            let h = Harness::with(&toml, NO_STALL);
            let skew = ms(skew_ms);
            let grace = ms(skew_ms + extra_ms);
            let mut known: Vec<String> = Vec::new();
            for (i, (advance, op)) in ops.into_iter().enumerate() {
                h.advance(ms(advance));
                let now = h.now();
                match op {
                    Op::Checkout => {
                        if let CheckoutOutcome::Granted { lease, .. } =
                            h.checkout(req("p", &format!("h{i}"))).await
                        {
                            known.push(lease.seat_id);
                        }
                    }
                    Op::Heartbeat(n) => {
                        if !known.is_empty() {
                            let seat = known[n % known.len()].clone();
                            let was = h.seat(&seat).await;
                            let out = h.heartbeat("p", &seat).await;
                            let expect_live = was.is_some_and(|l| is_live(l.expires_at, now, skew));
                            let renewed = matches!(out, HeartbeatOutcome::Renewed(_));
                            prop_assert_eq!(renewed, expect_live);
                        }
                    }
                    Op::Reap(limit) => {
                        let before = h.store.seats(None).await.unwrap();
                        let n = h.store.reap(limit).await.unwrap();
                        let after: BTreeSet<_> = h
                            .store
                            .seats(None)
                            .await
                            .unwrap()
                            .into_iter()
                            .map(|l| l.seat_id)
                            .collect();
                        prop_assert_eq!(before.len() - after.len(), n);
                        prop_assert!(n <= limit);
                        let reapable = before
                            .iter()
                            .filter(|l| is_reapable(l.expires_at, now, grace))
                            .count();
                        prop_assert_eq!(n, reapable.min(limit));
                        for lease in &before {
                            if is_live(lease.expires_at, now, skew) {
                                prop_assert!(
                                    after.contains(&lease.seat_id),
                                    "live lease {:?} reaped at {}", lease, now
                                );
                            }
                            if !after.contains(&lease.seat_id) {
                                prop_assert!(is_reapable(lease.expires_at, now, grace));
                            }
                        }
                    }
                }
            }
            h.finish().await;
            Ok::<(), TestCaseError>(())
        })?;
    }
}
