//! The outage rule: a gap longer than the stall threshold gives the leases
//! live at its start one TTL from its end.

use std::time::Duration;

use leasehold_common::api::{EventKind, SeatLostReason};
use leasehold_common::{Timestamp, is_live, is_reapable};
use leasehold_server::store::{HeartbeatOutcome, LeaseRow};

use crate::support::{at, ms};
use crate::{Harness, renewed, req, secs};

// ---------------------------------------------------------------------------
// The outage rule
// ---------------------------------------------------------------------------

/// ttl 10 s, skew 1 s, grace 5 s: short enough to walk by hand in steps
/// below the 3 s stall threshold.
const SHORT: &str = r#"
[[license]]
id = "s"
key = "k"
seats = 5
ttl = "10s"
skew = "1s"
reap_grace = "5s"
"#;
const SHORT_TTL: Duration = Duration::from_secs(10);
const STALL: Duration = Duration::from_secs(3);

/// Move the clock to `to` in steps the writer does not take for a stall,
/// waking it at each one (what the alive tick does in the server).
async fn walk(h: &Harness, to: Timestamp) {
    while h.now() < to {
        let next = h.now().saturating_add(secs(1)).min(to);
        h.set(next);
        h.store.tick().await.unwrap();
    }
}

/// L lapses before the gap; A is live at the writer's last wake-up.
/// Returns (L, A) with the last wake-up at T0 + 12 s.
async fn outage_setup(h: &Harness) -> (LeaseRow, LeaseRow) {
    let l = h.fresh(req("s", "lapsed")).await; // expires T0+10 s, lapses T0+11.001 s
    walk(h, at(8_000)).await;
    let a = h.fresh(req("s", "healthy")).await; // expires T0+18 s
    walk(h, at(12_000)).await;
    assert!(
        !is_live(l.expires_at, h.now(), secs(1)),
        "L lapsed before the gap"
    );
    assert!(
        is_live(a.expires_at, h.now(), secs(1)),
        "A live at the last wake-up"
    );
    (l, a)
}

#[tokio::test]
async fn no_outage_without_a_gap_a_walked_lease_lapses_normally() {
    let h = Harness::with(SHORT, STALL);
    let (_l, a) = outage_setup(&h).await;
    // Walking past A's expiry in 1 s steps is not an outage: A lapses.
    walk(
        &h,
        a.expires_at.saturating_add(secs(1)).saturating_add(ms(1)),
    )
    .await;
    assert_eq!(
        h.seat(&a.seat_id).await.unwrap().expires_at,
        a.expires_at,
        "not extended"
    );
    assert_eq!(
        h.heartbeat("s", &a.seat_id).await,
        HeartbeatOutcome::Lost(SeatLostReason::Lapsed)
    );
    h.finish().await;
}

#[tokio::test]
async fn outage_extends_leases_that_were_live_first_command_reap() {
    let h = Harness::with(SHORT, STALL);
    let (l, a) = outage_setup(&h).await;

    // The clock jumps 30 s: past A's expiry + skew (T0+19 s) by far more than
    // the threshold, and past its expiry + grace, so without the rule the
    // reaper would delete it.
    h.set(at(42_000));
    assert!(is_reapable(a.expires_at, h.now(), secs(5)));
    let reaped = h.store.reap(100).await.unwrap();
    assert_eq!(reaped, 1, "only L, which had lapsed before the gap");
    assert!(h.seat(&l.seat_id).await.is_none());
    let a_now = h.seat(&a.seat_id).await.expect("A survives the outage");
    assert_eq!(
        a_now.expires_at,
        h.now().saturating_add(SHORT_TTL),
        "extended to now + ttl"
    );
    assert_eq!(h.live("s").await, 1);
    let reaps = h.events_of(EventKind::Reap).await;
    assert_eq!(reaps.len(), 1);
    assert_eq!(reaps[0].seat_id.as_deref(), Some(l.seat_id.as_str()));

    h.advance(secs(2));
    let r = renewed(h.heartbeat("s", &a.seat_id).await);
    assert_eq!(r.seat_id, a.seat_id);
    assert_eq!(r.expires_at, h.now().saturating_add(SHORT_TTL));
    h.finish().await;
}

#[tokio::test]
async fn outage_extends_leases_that_were_live_first_command_heartbeat() {
    let h = Harness::with(SHORT, STALL);
    let (l, a) = outage_setup(&h).await;

    h.set(at(42_000));
    let r = renewed(h.heartbeat("s", &a.seat_id).await);
    assert_eq!(r.seat_id, a.seat_id);
    assert_eq!(r.expires_at, h.now().saturating_add(SHORT_TTL));
    // L was not extended: its expiry is untouched, it stays lost and is reaped.
    assert_eq!(h.seat(&l.seat_id).await.unwrap().expires_at, l.expires_at);
    assert_eq!(
        h.heartbeat("s", &l.seat_id).await,
        HeartbeatOutcome::Lost(SeatLostReason::Lapsed)
    );
    assert_eq!(h.store.reap(100).await.unwrap(), 1);
    assert!(h.seat(&l.seat_id).await.is_none());
    assert!(h.seat(&a.seat_id).await.is_some());

    // The outage is answered once: a lease that then lapses normally is lost.
    walk(
        &h,
        r.expires_at.saturating_add(secs(1)).saturating_add(ms(1)),
    )
    .await;
    assert_eq!(
        h.heartbeat("s", &a.seat_id).await,
        HeartbeatOutcome::Lost(SeatLostReason::Lapsed)
    );
    h.finish().await;
}

#[tokio::test]
async fn outage_rule_applies_to_downtime_across_close_and_reopen() {
    let h = Harness::with(SHORT, STALL);
    let (l, a) = outage_setup(&h).await;
    h.store.close().await;

    // Down for ten minutes.
    h.clock.set(at(12_000 + 600_000));
    let store =
        h.db.open(&h.licenses_toml, &h.licenses, &h.clock, STALL)
            .unwrap();
    let h = Harness { store, ..h };
    let start = h.now();
    // SQLite applies the rule as it opens; PostgreSQL in the cluster's first
    // batch after the gap (in the server, the alive tick's, within a second).
    // One tick at the start-up time, before reading the leases back.
    h.store.tick().await.unwrap();

    let a_now = h.seat(&a.seat_id).await.expect("A survives the downtime");
    assert_eq!(
        a_now.expires_at,
        start.saturating_add(SHORT_TTL),
        "one TTL from start-up"
    );
    assert_eq!(
        h.seat(&l.seat_id).await.unwrap().expires_at,
        l.expires_at,
        "L not extended"
    );
    assert_eq!(h.live("s").await, 1);

    h.advance(secs(1));
    assert_eq!(h.store.reap(100).await.unwrap(), 1, "only L");
    assert!(h.seat(&a.seat_id).await.is_some());
    assert_eq!(
        renewed(h.heartbeat("s", &a.seat_id).await).seat_id,
        a.seat_id
    );
    h.finish().await;
}

#[tokio::test]
async fn outage_means_a_gap_strictly_longer_than_the_threshold() {
    // A expires at T0+10 s and lapses at T0+11.001 s. The last wake-up is at
    // T0+9 s, while A is live; the next one comes 3 s or 3.001 s later.
    for (gap_ms, extended) in [(3_000, false), (3_001, true)] {
        let h = Harness::with(SHORT, STALL);
        let a = h.fresh(req("s", "a")).await;
        walk(&h, at(9_000)).await;
        h.advance(ms(gap_ms));
        let out = h.heartbeat("s", &a.seat_id).await;
        if extended {
            assert_eq!(
                renewed(out).expires_at,
                h.now().saturating_add(SHORT_TTL),
                "gap {gap_ms} ms"
            );
        } else {
            assert_eq!(
                out,
                HeartbeatOutcome::Lost(SeatLostReason::Lapsed),
                "gap {gap_ms} ms is not an outage"
            );
        }
        h.finish().await;
    }
}

/// A lapse a heartbeat reported stays final though the server dies before
/// it next records that it is alive (SQLite does once a second): the
/// outage rule must not give the seat back. Found by the recorded
/// histories (robustness, kill9): after a restart the pool was full with a
/// seat whose client had been told `410 lapsed`.
#[tokio::test]
async fn a_lapse_a_heartbeat_reported_is_not_revived_by_the_outage_rule() {
    let h = Harness::on(crate::support::TestDb::sqlite(), SHORT, STALL);
    let l = h.fresh(req("s", "lapsed")).await; // expires T0+10 s, counts until T0+11 s
    walk(&h, at(9_950)).await;
    // Alive recorded at T0+10.95 s, while L still counts.
    h.set(at(10_950));
    h.store.tick().await.unwrap();
    h.set(at(11_500));
    assert!(
        matches!(
            h.heartbeat("s", &l.seat_id).await,
            HeartbeatOutcome::Lost(SeatLostReason::Lapsed)
        ),
        "L lapsed, and its client is told so"
    );
    // kill -9 now: the database as the disk has it, opened ten minutes on.
    let crashed = crate::support::TestDb::sqlite();
    for suffix in ["", "-wal"] {
        let from = format!("{}{suffix}", h.db.sqlite_path().display());
        let to = format!("{}{suffix}", crashed.sqlite_path().display());
        if std::path::Path::new(&from).exists() {
            std::fs::copy(&from, &to).unwrap();
        }
    }
    h.clock.set(at(11_500 + 600_000));
    let store = crashed
        .open(&h.licenses_toml, &h.licenses, &h.clock, STALL)
        .unwrap();
    let after = Harness {
        db: crashed,
        store,
        ..h
    };
    after.store.tick().await.unwrap();
    assert_eq!(
        after.seat(&l.seat_id).await.map(|s| s.expires_at),
        Some(l.expires_at),
        "L is not extended"
    );
    assert_eq!(after.live("s").await, 0);
    after.finish().await;
}
