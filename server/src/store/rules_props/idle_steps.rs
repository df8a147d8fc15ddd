//! Idle reclaim, step by step, on the in-memory store: the four properties
//! of issue 30 on one timeline, and a report that reaches the timeout.

use std::time::Duration;

use leasehold_common::api::{EventKind, SeatLostReason, SessionEnd};

use super::super::model::{at, license_toml};
use super::super::{HeartbeatOutcome, LeaseRow, SeatMode};
use super::world::{RETENTION, World, granted, req};

/// `a`: 3 seats, TTL 10 s, no skew, reap grace 1 ms, idle_timeout 90 s,
/// one seat lent for up to 10 min; `b`: the same timing, no idle_timeout.
fn idle_world() -> World {
    World::new(
        &(license_toml("a", 3, 10_000, 0, 1)
            + "idle_timeout = \"90s\"\n[license.borrow]\nmax = \"600s\"\nseats = 1\n"
            + &license_toml("b", 1, 10_000, 0, 1)),
    )
}

fn beat(w: &mut World, license: &str, seat: &str, idle_s: Option<u64>) -> HeartbeatOutcome {
    let idle = idle_s.map(Duration::from_secs);
    w.run(|r| r.heartbeat(license, seat, idle)).0.unwrap()
}

fn renewed(out: HeartbeatOutcome) -> LeaseRow {
    match out {
        HeartbeatOutcome::Renewed(row) => row,
        other => panic!("expected a renewal, got {other:?}"),
    }
}

/// The four properties on one timeline: clients heartbeat every
/// 10 s, the reaper sweeps 5 s after each round.
#[test]
fn idle_reclaim_keeps_active_borrowed_and_untimed_seats_and_ends_idle_ones_at_the_timeout() {
    let mut w = idle_world();
    let (ann, _) = granted(w.checkout(&req("a", "ann", None, None), &[]));
    let (bob, _) = granted(w.checkout(&req("a", "bob", None, None), &[]));
    let (dan, _) = granted(w.checkout(&req("a", "dan", Some("fd"), None), &[]));
    let (cid, _) = granted(w.checkout(&req("b", "cid", None, None), &[]));
    let mut lent = None;
    for round in 1..=30u64 {
        let t = round * 10;
        w.now = at(t as i64 * 1000);
        // (1) ann reports activity every ttl: renewed, never idle.
        let row = renewed(beat(
            &mut w,
            "a",
            &ann.seat_id,
            [None, Some(0)][round as usize % 2],
        ));
        assert_eq!(row.idle_since, None);
        // (4) cid, on a license without idle_timeout, idle since checkout.
        let row = renewed(beat(&mut w, "b", &cid.seat_id, Some(t)));
        assert_eq!(row.idle_since, Some(at(0)));
        // bob is idle since 5 s: renewed until a sweep takes the seat at
        // 5 s + 90 s; his client learns it at its next heartbeat (and a
        // heartbeat a ttl later would hear `lapsed`).
        if t <= 100 {
            let got = beat(&mut w, "a", &bob.seat_id, Some(t - 5));
            if t < 100 {
                assert_eq!(renewed(got).idle_since, Some(at(5_000)));
            } else {
                assert_eq!(got, HeartbeatOutcome::Lost(SeatLostReason::Idle));
            }
        }
        // (3) dan, idle since 5 s too, borrows his seat at 80 s: its idle
        // period closes there, and no report reopens one.
        if t == 80 {
            let mut borrow = req("a", "dan", Some("fd"), None);
            borrow.borrow = Some(Duration::from_secs(600));
            let (row, reused) = granted(w.checkout(&borrow, &[]));
            assert!(reused && row.mode == SeatMode::Borrow && row.idle_since.is_none());
            lent = Some(row);
        }
        match &lent {
            None => assert!(
                renewed(beat(&mut w, "a", &dan.seat_id, Some(t - 5)))
                    .idle_since
                    .is_some()
            ),
            Some(row) => assert_eq!(
                beat(&mut w, "a", &dan.seat_id, Some(t)),
                HeartbeatOutcome::Borrowed {
                    expires_at: row.expires_at
                }
            ),
        }
        w.now = at(t as i64 * 1000 + 5_000);
        let live = w.run(|r| r.live_counts()).0.unwrap()[0].1.live;
        let (n, events) = w.run(|r| r.reap(10, RETENTION));
        let live_after = w.run(|r| r.live_counts()).0.unwrap()[0].1.live;
        if t + 5 == 95 {
            // (2) Gone in the sweep at its timeout; free in that command.
            assert_eq!(n.unwrap(), 1);
            assert_eq!(live_after, live - 1);
            assert_eq!(events[0].kind, EventKind::Reclaim);
            assert_eq!(
                events[0].detail.as_deref(),
                Some(format!("idle since {}: idle_timeout 90s", at(5_000)).as_str())
            );
        } else {
            assert_eq!((n.unwrap(), live_after), (0, live), "at {t} s + 5 s");
        }
    }
    assert_eq!(w.store.leases[&ann.seat_id].lease.idle_since, None);
    assert_eq!(w.store.leases[&dan.seat_id].lease.mode, SeatMode::Borrow);
    // (4) bob's session ended idle at the timeout, never as a lapse; his
    // idle period is history, as are dan's (lent) and cid's (released).
    w.now = at(300_000);
    assert!(w.run(|r| r.release("b", &cid.seat_id)).0.unwrap());
    let ends: Vec<_> = w
        .store
        .sessions
        .iter()
        .map(|s| (s.lease.seat_id.as_str(), s.end, s.at))
        .collect();
    assert_eq!(
        ends,
        vec![
            (bob.seat_id.as_str(), SessionEnd::Idle, at(95_000)),
            (cid.seat_id.as_str(), SessionEnd::Release, at(300_000)),
        ]
    );
    assert_eq!(
        w.store.idle_periods,
        vec![
            ("a".into(), dan.seat_id.clone(), at(5_000), at(80_000)),
            ("a".into(), bob.seat_id.clone(), at(5_000), at(95_000)),
            ("b".into(), cid.seat_id.clone(), at(0), at(300_000)),
        ]
    );
}

/// A report that sets or moves the seat's idle start and reaches the
/// timeout at once reclaims the seat as of that report: the session, the
/// `reclaim` event and the idle period carry the reported idle start (a
/// rules bug this test found: the seat was reclaimed as it was before).
#[test]
fn a_report_that_reaches_the_timeout_records_its_idle_start() {
    // The first report already reaches the timeout: idle since 5 s.
    let mut w = idle_world();
    let (seat, _) = granted(w.checkout(&req("a", "ann", None, None), &[]));
    for t in 1..=9 {
        w.now = at(t * 10_000);
        renewed(beat(&mut w, "a", &seat.seat_id, None));
    }
    w.now = at(100_000);
    let (got, events) = w.run(|r| r.heartbeat("a", &seat.seat_id, Some(Duration::from_secs(95))));
    assert_eq!(got.unwrap(), HeartbeatOutcome::Lost(SeatLostReason::Idle));
    assert_eq!(w.store.sessions[0].at, at(95_000));
    assert_eq!(
        events[0].detail.as_deref(),
        Some(format!("idle since {}: idle_timeout 90s", at(5_000)).as_str())
    );
    assert_eq!(
        w.store.idle_periods,
        vec![("a".into(), seat.seat_id.clone(), at(5_000), at(95_000))]
    );
    // A report that moves the start back (by less than the 2 s that
    // would mean "came back"): idle since 40 s, not 45 s.
    let mut w = idle_world();
    let (seat, _) = granted(w.checkout(&req("a", "ann", None, None), &[]));
    for t in 1..=13 {
        w.now = at(t * 10_000);
        let idle = (t >= 5).then(|| t as u64 * 10 - 45);
        renewed(beat(&mut w, "a", &seat.seat_id, idle));
    }
    w.now = at(132_000);
    let (got, _) = w.run(|r| r.heartbeat("a", &seat.seat_id, Some(Duration::from_secs(92))));
    assert_eq!(got.unwrap(), HeartbeatOutcome::Lost(SeatLostReason::Idle));
    assert_eq!(w.store.sessions[0].at, at(130_000));
    assert_eq!(
        w.store.idle_periods,
        vec![("a".into(), seat.seat_id.clone(), at(40_000), at(130_000))]
    );
}
