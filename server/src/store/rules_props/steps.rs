//! The rule steps, one by one, on the in-memory store: blocks, replays,
//! waiters ahead and reservations, the outage rule, pool-size history,
//! sessions of lapsed seats, renewals, reaps.

use leasehold_common::Licenses;
use leasehold_common::Timestamp;
use leasehold_common::api::{DenialReason, EventKind, SeatLostReason, SessionEnd};
use leasehold_common::liveness::{lapses_at, live_until};

use super::super::model::{at, license_toml, ms};
use super::super::rules::LeaseTx;
use super::super::{CheckoutOutcome, HeartbeatOutcome, Limit};
use super::world::{RETENTION, World, granted, req, waiter};

/// One license `a`: 2 seats, TTL 10 s, skew 1 s, reap grace 3 s.
fn two_seats() -> World {
    World::new(&license_toml("a", 2, 10_000, 1_000, 3_000))
}

#[test]
fn a_blocked_holder_is_refused_even_with_a_live_seat_to_reclaim() {
    let mut w = two_seats();
    let (old, _) = granted(w.checkout(&req("a", "h", Some("f"), None), &[]));
    // The old seat lapses (not yet reaped); the same machine gets a new one.
    w.advance(11_001);
    let (new, reused) = granted(w.checkout(&req("a", "h", Some("f"), Some("k")), &[]));
    assert!(!reused);
    assert_ne!(new.seat_id, old.seat_id);
    // An admin revokes the lapsed seat and blocks its holder + fingerprint.
    let (revoked, _) = w.run(|r| r.revoke(&old.seat_id, None, Some(ms(5_000)), false));
    assert_eq!(revoked.unwrap().revoked().unwrap().seat_id, old.seat_id);
    let until = w.now.saturating_add(ms(5_000));
    // Blocked comes first: no re-claim by fingerprint, no replay by key.
    for r in [
        req("a", "h", Some("f"), None),
        req("a", "h", Some("f"), Some("k")),
    ] {
        assert_eq!(w.checkout(&r, &[]), CheckoutOutcome::Blocked { until });
    }
    assert_eq!(w.store.leases[&new.seat_id].lease, new, "not renewed");
    assert_eq!(w.store.denials.len(), 2);
    assert!(
        w.store
            .denials
            .iter()
            .all(|d| d.reason == DenialReason::Blocked && d.holder == "h")
    );
    // The live seat itself still renews, and without the fingerprint the
    // holder is not blocked.
    assert!(matches!(
        w.heartbeat("a", &new.seat_id),
        HeartbeatOutcome::Renewed(_)
    ));
    let (_, reused) = granted(w.checkout(&req("a", "h", None, None), &[]));
    assert!(!reused);
    // Once the block ends, the re-claim works again.
    w.now = until;
    let (again, reused) = granted(w.checkout(&req("a", "h", Some("f"), None), &[]));
    assert!(reused);
    assert_eq!(again.seat_id, new.seat_id);
}

#[test]
fn an_idempotency_key_of_a_lapsed_lease_gets_a_new_seat() {
    let mut w = two_seats();
    let first = req("a", "h", None, Some("k"));
    let (a, _) = granted(w.checkout(&first, &[]));
    // A replay while live: the same seat, renewed, nothing added.
    w.advance(5_000);
    let (again, reused) = granted(w.checkout(&first, &[]));
    assert!(reused);
    assert_eq!(again.seat_id, a.seat_id);
    assert_eq!(again.expires_at, w.now.saturating_add(ms(10_000)));
    assert_eq!(w.store.leases.len(), 1);
    // At the last live millisecond it is still a replay ...
    w.now = live_until(again.expires_at, ms(1_000));
    assert!(granted(w.checkout(&first, &[])).1);
    // ... and once it lapsed, the key buys a new seat and leaves the old one.
    let lapsed = w.store.leases[&a.seat_id].lease.clone();
    w.now = lapses_at(lapsed.expires_at, ms(1_000));
    let (b, reused) = granted(w.checkout(&first, &[]));
    assert!(!reused);
    assert_ne!(b.seat_id, a.seat_id);
    assert_eq!(w.store.leases[&a.seat_id].idempotency_key, None);
    assert_eq!(
        w.store.leases[&b.seat_id].idempotency_key.as_deref(),
        Some("k")
    );
    let (c, reused) = granted(w.checkout(&first, &[]));
    assert!(reused);
    assert_eq!(c.seat_id, b.seat_id);
}

#[test]
fn waiters_ahead_make_a_free_seat_look_full_but_not_for_a_reclaim() {
    let mut w = two_seats();
    let (a, _) = granted(w.checkout(&req("a", "h1", Some("f1"), None), &[]));
    w.advance(2_000);
    // One of two seats live, one waiter ahead: full until `a` lapses.
    let one_ahead = [waiter("h3", None)];
    let full = w.checkout(&req("a", "h2", Some("f2"), None), &one_ahead);
    let retry = lapses_at(a.expires_at, ms(1_000)).millis_since(w.now);
    assert_eq!(
        full,
        CheckoutOutcome::Full {
            seats: 2,
            live: 1,
            reserved: 0,
            retry_after: ms(retry as u64),
        }
    );
    assert_eq!(retry, 9_001);
    assert_eq!(w.store.leases.len(), 1);
    // Its own seat is no seat spoken for: a re-claim ignores the line.
    let five_ahead: Vec<_> = (0..5).map(|i| waiter(&format!("w{i}"), None)).collect();
    let (back, reused) = granted(w.checkout(&req("a", "h1", Some("f1"), None), &five_ahead));
    assert!(reused);
    assert_eq!(back.seat_id, a.seat_id);
    // Nobody ahead: the free seat is granted.
    let (_, reused) = granted(w.checkout(&req("a", "h2", Some("f2"), None), &[]));
    assert!(!reused);
    // No live lease at all and the line fills the pool: retry after a TTL.
    let mut w = two_seats();
    assert_eq!(
        w.checkout(
            &req("a", "h", None, None),
            &[waiter("x", None), waiter("y", None)]
        ),
        CheckoutOutcome::Full {
            seats: 2,
            live: 0,
            reserved: 0,
            retry_after: ms(10_000),
        }
    );
}

/// Three seats, one reserved for `render`; `ann` is in it, `bob` is not.
fn a_reserved_seat() -> World {
    World::new(
        &(license_toml("a", 3, 10_000, 1_000, 3_000)
            + "max_per_holder = 2\n\n[[license.group]]\nname = \"render\"\n\
               holders = [\"ann\", \"amy\"]\nreserve = 1\n"),
    )
}

#[test]
fn a_member_takes_its_reserved_seat_past_a_non_member_waiting_ahead() {
    let mut w = a_reserved_seat();
    granted(w.checkout(&req("a", "carl", None, None), &[]));
    granted(w.checkout(&req("a", "dave", None, None), &[]));
    // The one free seat is render's: bob, first in line, cannot use it...
    let bob = [waiter("bob", None)];
    assert!(matches!(
        w.checkout(&req("a", "bob", None, None), &[]),
        CheckoutOutcome::Full { reserved: 1, .. }
    ));
    // ...so he does not hold up ann behind him.
    let (seat, _) = granted(w.checkout(&req("a", "ann", None, None), &bob));
    assert_eq!(seat.group.as_deref(), Some("render"));
}

#[test]
fn a_waiter_ahead_who_can_use_the_seat_keeps_it() {
    let mut w = a_reserved_seat();
    granted(w.checkout(&req("a", "carl", None, None), &[]));
    granted(w.checkout(&req("a", "dave", None, None), &[]));
    // amy, a member, is ahead of ann: the reserved seat is hers.
    let amy = [waiter("amy", None)];
    assert!(matches!(
        w.checkout(&req("a", "ann", None, None), &amy),
        CheckoutOutcome::Full { .. }
    ));
    // A waiter at its holder cap cannot use a seat and holds up no one.
    let mut w = a_reserved_seat();
    granted(w.checkout(&req("a", "carl", Some("1"), None), &[]));
    granted(w.checkout(&req("a", "carl", Some("2"), None), &[]));
    let carl = [waiter("carl", Some("3"))];
    assert!(matches!(
        w.checkout(&req("a", "carl", Some("3"), None), &[]),
        CheckoutOutcome::LimitReached {
            limit: Limit::Holder,
            ..
        }
    ));
    granted(w.checkout(&req("a", "ann", None, None), &carl));
    // The first waiter takes the last unreserved seat; a non-member
    // behind finds none, a member behind still has its reserved one.
    let mut w = a_reserved_seat();
    granted(w.checkout(&req("a", "carl", None, None), &[]));
    let line = [waiter("bob", None), waiter("eve", None)];
    assert!(matches!(
        w.checkout(&req("a", "dave", None, None), &line),
        CheckoutOutcome::Full { reserved: 1, .. }
    ));
    granted(w.checkout(&req("a", "ann", None, None), &line));
}

#[test]
fn the_outage_rule_extends_exactly_the_leases_live_at_last_alive() {
    // `a`: TTL 10 s, skew 1 s; `b`: TTL 20 s, no skew.
    let toml = license_toml("a", 4, 10_000, 1_000, 3_000) + &license_toml("b", 1, 20_000, 0, 1);
    let mut w = World::new(&toml);
    // a0 lapses (T0 + 6 s) long before the writer was last alive.
    w.now = at(-5_000);
    let (a0, _) = granted(w.checkout(&req("a", "h0", None, None), &[]));
    w.now = at(0);
    let (a1, _) = granted(w.checkout(&req("a", "h1", None, None), &[]));
    w.advance(500);
    let (a2, _) = granted(w.checkout(&req("a", "h2", None, None), &[]));
    let (b1, _) = granted(w.checkout(&req("b", "h3", None, None), &[]));
    // The writer was last alive on a1's last live millisecond (T0 + 11 s),
    // when it granted a3 (expiring T0 + 21 s).
    let last_alive = live_until(a1.expires_at, ms(1_000));
    w.now = last_alive;
    let (a3, _) = granted(w.checkout(&req("a", "h4", None, None), &[]));
    let before = w.store.clone();

    // Nobody renews for a minute: all but a0 get one TTL from now.
    w.now = last_alive.saturating_add(ms(60_000));
    let (n, events) = w.run(|r| r.outage(last_alive));
    assert_eq!(n, 4);
    assert!(events.is_empty());
    for (seat, ttl) in [
        (&a1.seat_id, 10_000),
        (&a2.seat_id, 10_000),
        (&a3.seat_id, 10_000),
        (&b1.seat_id, 20_000),
    ] {
        let after = &w.store.leases[seat].lease;
        assert_eq!(after.expires_at, w.now.saturating_add(ms(ttl)), "{seat}");
        assert_eq!(after.issued_at, before.leases[seat].lease.issued_at);
    }
    assert_eq!(w.store.leases[&a0.seat_id], before.leases[&a0.seat_id]);

    // Had it been last alive one millisecond later, a1 would not count.
    let mut later = World {
        store: before.clone(),
        ..World::new(&toml)
    };
    later.now = last_alive.saturating_add(ms(60_000));
    let (n, _) = later.run(|r| r.outage(last_alive.saturating_add(ms(1))));
    assert_eq!(n, 3);
    assert_eq!(later.store.leases[&a1.seat_id], before.leases[&a1.seat_id]);

    // "At least one TTL": a lease already expiring at now + TTL (a3, with
    // no gap at all) is left alone, and a second pass changes nothing.
    let mut no_gap = World {
        store: before.clone(),
        ..World::new(&toml)
    };
    no_gap.now = last_alive;
    let (n, _) = no_gap.run(|r| r.outage(last_alive));
    assert_eq!(n, 3, "a1, a2 and b1");
    assert_eq!(no_gap.store.leases[&a3.seat_id], before.leases[&a3.seat_id]);
    let (n, _) = no_gap.run(|r| r.outage(last_alive));
    assert_eq!(n, 0);
}

#[test]
fn pool_sizes_are_recorded_only_when_they_change() {
    let two = license_toml("a", 2, 10_000, 1_000, 3_000) + &license_toml("b", 5, 10_000, 0, 1);
    let mut w = World::new(&two);
    w.run(|r| r.record_pool_sizes()).0.unwrap();
    assert_eq!(
        w.store.pool_sizes,
        vec![("a".into(), at(0), 2), ("b".into(), at(0), 5)]
    );
    // Nothing changed: nothing recorded.
    w.advance(1_000);
    w.run(|r| r.record_pool_sizes()).0.unwrap();
    assert_eq!(w.store.pool_sizes.len(), 2);
    // `a` grows to 3, `b` leaves the policy (0 seats), `c` arrives.
    w.licenses = Licenses::parse(
        &(license_toml("a", 3, 10_000, 1_000, 3_000) + &license_toml("c", 0, 10_000, 0, 1)),
    )
    .unwrap();
    w.advance(1_000);
    w.run(|r| r.record_pool_sizes()).0.unwrap();
    let mut recorded = w.store.pool_sizes[2..].to_vec();
    recorded.sort();
    assert_eq!(
        recorded,
        vec![
            ("a".into(), at(2_000), 3),
            ("b".into(), at(2_000), 0),
            ("c".into(), at(2_000), 0),
        ]
    );
    // A license that is gone stays at 0 without being recorded again.
    w.advance(1_000);
    w.run(|r| r.record_pool_sizes()).0.unwrap();
    assert_eq!(w.store.pool_sizes.len(), 5);
    let sizes = w.store.current_pool_sizes().unwrap();
    assert_eq!(sizes.get("a"), Some(&3));
    assert_eq!(sizes.get("b"), Some(&0));
}

#[test]
fn a_lapsed_seat_released_or_revoked_ends_its_session_when_it_lapsed() {
    let mut w = two_seats();
    let (a, _) = granted(w.checkout(&req("a", "h1", None, None), &[]));
    let (b, _) = granted(w.checkout(&req("a", "h2", None, None), &[]));
    // A live release ends at now.
    w.advance(4_000);
    assert!(w.run(|r| r.release("a", &a.seat_id)).0.unwrap());
    // Past its live end but not reaped: a revoke records the lapse.
    w.advance(9_000);
    assert!(
        w.run(|r| r.revoke(&b.seat_id, None, None, false))
            .0
            .unwrap()
            .revoked()
            .is_some()
    );
    let ends: Vec<(String, SessionEnd, Timestamp)> = w
        .store
        .sessions
        .iter()
        .map(|s| (s.lease.seat_id.clone(), s.end, s.at))
        .collect();
    assert_eq!(
        ends,
        vec![
            (a.seat_id.clone(), SessionEnd::Release, at(4_000)),
            (b.seat_id.clone(), SessionEnd::Lapse, at(11_000)),
        ]
    );
    // Releasing again does nothing.
    assert!(!w.run(|r| r.release("a", &a.seat_id)).0.unwrap());
    assert_eq!(w.store.sessions.len(), 2);
}

#[test]
fn a_seat_renews_only_under_its_own_license_and_while_live() {
    let toml = license_toml("a", 1, 10_000, 1_000, 3_000) + &license_toml("b", 1, 10_000, 0, 1);
    let mut w = World::new(&toml);
    let (a, _) = granted(w.checkout(&req("a", "h", None, None), &[]));
    let lapsed = HeartbeatOutcome::Lost(SeatLostReason::Lapsed);
    assert_eq!(w.heartbeat("b", &a.seat_id), lapsed);
    assert_eq!(w.heartbeat("nope", &a.seat_id), lapsed);
    assert_eq!(w.store.leases[&a.seat_id].lease, a);
    w.now = live_until(a.expires_at, ms(1_000));
    let HeartbeatOutcome::Renewed(r) = w.heartbeat("a", &a.seat_id) else {
        panic!("live at its last live millisecond");
    };
    assert_eq!(r.expires_at, w.now.saturating_add(ms(10_000)));
    w.now = lapses_at(r.expires_at, ms(1_000));
    let (lost, events) = w.run(|r| r.heartbeat("a", &a.seat_id, None));
    assert_eq!(lost.unwrap(), lapsed);
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].kind, EventKind::Lost);
    // The lapsed seat does not count: the pool of one is free again.
    let (_, reused) = granted(w.checkout(&req("a", "h2", None, None), &[]));
    assert!(!reused);
}

#[test]
fn reap_takes_the_earliest_reapable_leases_up_to_the_limit() {
    let toml = license_toml("a", 3, 10_000, 1_000, 3_000) + &license_toml("b", 2, 5_000, 0, 1);
    let mut w = World::new(&toml);
    let (a1, _) = granted(w.checkout(&req("a", "h1", None, None), &[]));
    w.advance(1_000);
    let (a2, _) = granted(w.checkout(&req("a", "h2", None, None), &[]));
    let (b1, _) = granted(w.checkout(&req("b", "h3", None, None), &[]));
    // a1 is reapable after T0 + 13 s, a2 after 14 s, b1 after 6 s + 1 ms.
    w.now = at(13_000);
    let (n, events) = w.run(|r| r.reap(10, RETENTION));
    assert_eq!(n.unwrap(), 1);
    assert_eq!(events[0].seat_id.as_deref(), Some(b1.seat_id.as_str()));
    w.now = at(14_001);
    let (n, events) = w.run(|r| r.reap(1, RETENTION));
    assert_eq!(n.unwrap(), 1, "the limit holds");
    assert_eq!(events[0].seat_id.as_deref(), Some(a1.seat_id.as_str()));
    let (n, _) = w.run(|r| r.reap(1, RETENTION));
    assert_eq!(n.unwrap(), 1);
    assert!(w.store.leases.is_empty());
    let lapse: Vec<(String, SessionEnd, Timestamp)> = w
        .store
        .sessions
        .iter()
        .map(|s| (s.lease.seat_id.clone(), s.end, s.at))
        .collect();
    assert_eq!(
        lapse,
        vec![
            (b1.seat_id, SessionEnd::Lapse, at(6_000)),
            (a1.seat_id, SessionEnd::Lapse, at(11_000)),
            (a2.seat_id, SessionEnd::Lapse, at(12_000)),
        ]
    );
}
