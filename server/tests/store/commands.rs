//! Checkout and the counter, heartbeats, releases, Idempotency-Key and
//! fingerprint re-claims, revokes.

use std::collections::BTreeSet;

use leasehold_common::api::{EventKind, SeatLostReason};
use leasehold_server::store::{CheckoutOutcome, HeartbeatOutcome};

use crate::support::{NO_STALL, at, ms};
use crate::{GRACE, Harness, SKEW, TTL, renewed, req, req_fp, req_key, secs};

// ---------------------------------------------------------------------------
// Checkout and the counter
// ---------------------------------------------------------------------------

#[tokio::test]
async fn checkout_fills_the_pool_then_full_with_retry_after() {
    let h = Harness::new();
    let a = h.fresh(req("cad", "alice")).await;
    assert_eq!(a.license_id, "cad");
    assert_eq!(a.holder, "alice");
    assert_eq!(a.fingerprint, None);
    assert_eq!(a.checked_out_at, at(0));
    assert_eq!(a.issued_at, at(0));
    assert_eq!(
        a.expires_at,
        at(60_000),
        "expiry = now + ttl on the server's clock"
    );
    assert_eq!(a.seat_id.len(), 32, "128-bit hex seat id: {}", a.seat_id);
    assert!(a.seat_id.chars().all(|c| c.is_ascii_hexdigit()));

    h.advance(secs(1));
    let b = h.fresh(req("cad", "bob")).await;
    h.advance(secs(1));
    let c = h.fresh(req("cad", "carol")).await;
    let ids: BTreeSet<_> = [&a.seat_id, &b.seat_id, &c.seat_id].into_iter().collect();
    assert_eq!(ids.len(), 3, "distinct seat ids");
    assert_eq!(h.live("cad").await, 3);

    // Ten seconds later the pool is full; the earliest lease (a) lapses at
    // expires_at + skew + 1 ms = T0 + 65.001 s.
    h.advance(secs(10));
    let now = h.now();
    let expected = a
        .expires_at
        .saturating_add(SKEW)
        .saturating_add(ms(1))
        .millis_since(now);
    assert_eq!(expected, 53_001);
    match h.checkout(req("cad", "dave")).await {
        CheckoutOutcome::Full {
            seats,
            live,
            reserved: 0,
            retry_after,
        } => {
            assert_eq!(seats, 3);
            assert_eq!(live, 3);
            assert_eq!(retry_after, ms(expected as u64));
        }
        other => panic!("expected Full, got {other:?}"),
    }
    // The denial is in the log, and nothing was inserted.
    assert_eq!(h.events_of(EventKind::Denied).await.len(), 1);
    assert_eq!(h.store.seats(Some("cad")).await.unwrap().len(), 3);

    // At exactly expires_at + skew, a is still live: still full, 1 ms to go.
    h.set(a.expires_at.saturating_add(SKEW));
    match h.checkout(req("cad", "dave")).await {
        CheckoutOutcome::Full {
            live, retry_after, ..
        } => {
            assert_eq!(live, 3);
            assert_eq!(retry_after, ms(1));
        }
        other => panic!("expected Full at the boundary, got {other:?}"),
    }

    // One ms later a has lapsed: its seat counts as free although the row is
    // still there (not reaped yet).
    h.advance(ms(1));
    assert_eq!(h.live("cad").await, 2);
    assert!(h.seat(&a.seat_id).await.is_some(), "lapsed but not reaped");
    let d = h.fresh(req("cad", "dave")).await;
    assert_eq!(h.live("cad").await, 3);
    assert_eq!(h.store.seats(Some("cad")).await.unwrap().len(), 4);

    // Full again; now the earliest live lease is b.
    match h.checkout(req("cad", "erin")).await {
        CheckoutOutcome::Full {
            seats,
            live,
            reserved: 0,
            retry_after,
        } => {
            assert_eq!((seats, live), (3, 3));
            let expected = b
                .expires_at
                .saturating_add(SKEW)
                .saturating_add(ms(1))
                .millis_since(h.now());
            assert_eq!(retry_after, ms(expected as u64));
        }
        other => panic!("expected Full, got {other:?}"),
    }
    // Other licenses are counted on their own.
    h.fresh(req("other", "alice")).await;
    assert_eq!(h.live("other").await, 1);
    assert_ne!(d.seat_id, a.seat_id);
    h.finish().await;
}

#[tokio::test]
async fn unknown_license_and_zero_seat_pool() {
    let h = Harness::with(
        "[[license]]\nid = \"off\"\nkey = \"k\"\nseats = 0\n",
        NO_STALL,
    );
    assert_eq!(
        h.checkout(req("nope", "alice")).await,
        CheckoutOutcome::UnknownLicense
    );
    match h.checkout(req("off", "alice")).await {
        CheckoutOutcome::Full { seats, live, .. } => assert_eq!((seats, live), (0, 0)),
        other => panic!("a zero-seat pool must be full, got {other:?}"),
    }
    assert!(h.store.seats(None).await.unwrap().is_empty());
    assert_eq!(
        h.heartbeat("nope", "00").await,
        HeartbeatOutcome::Lost(SeatLostReason::Lapsed)
    );
    h.finish().await;
}

// ---------------------------------------------------------------------------
// Heartbeat
// ---------------------------------------------------------------------------

#[tokio::test]
async fn heartbeat_renews_a_live_seat_only() {
    let h = Harness::new();
    let a = h.fresh(req_fp("cad", "alice", "m1")).await;
    let b = h.fresh(req("cad", "bob")).await;

    h.advance(secs(30));
    let r = renewed(h.heartbeat("cad", &a.seat_id).await);
    assert_eq!(r.seat_id, a.seat_id, "same seat");
    assert_eq!(
        r.expires_at,
        h.now().saturating_add(TTL),
        "new expiry = now + ttl"
    );
    assert_eq!(r.issued_at, h.now());
    assert_eq!(r.checked_out_at, a.checked_out_at, "checkout time is kept");
    assert_eq!(r.holder, "alice");
    assert_eq!(r.fingerprint.as_deref(), Some("m1"));
    assert_eq!(h.live("cad").await, 2, "a heartbeat takes no seat");
    assert_eq!(
        h.seat(&a.seat_id).await.unwrap(),
        r,
        "the renewal is stored"
    );
    assert_eq!(h.store.seats(Some("cad")).await.unwrap().len(), 2);

    // b was not renewed: at exactly its expiry + skew it may still renew...
    h.set(b.expires_at.saturating_add(SKEW));
    let rb = renewed(h.heartbeat("cad", &b.seat_id).await);
    assert_eq!(rb.expires_at, h.now().saturating_add(TTL));

    // ...but a seat 1 ms past expiry + skew is lost, even though its row is
    // still in the table, and the heartbeat does not bring it back.
    let a_now = h.seat(&a.seat_id).await.unwrap();
    h.set(a_now.expires_at.saturating_add(SKEW).saturating_add(ms(1)));
    assert_eq!(
        h.heartbeat("cad", &a.seat_id).await,
        HeartbeatOutcome::Lost(SeatLostReason::Lapsed)
    );
    assert_eq!(
        h.seat(&a.seat_id).await.unwrap().expires_at,
        a_now.expires_at,
        "a lost heartbeat must not extend the lease"
    );
    let lost = h.events_of(EventKind::Lost).await;
    assert_eq!(lost.len(), 1, "{lost:?}");
    assert_eq!(lost[0].seat_id.as_deref(), Some(a.seat_id.as_str()));
    assert_eq!(lost[0].holder.as_deref(), Some("alice"));
    assert_eq!(lost[0].license_id.as_deref(), Some("cad"));
    assert_eq!(lost[0].at, h.now());
    h.finish().await;
}

#[tokio::test]
async fn heartbeat_on_a_gone_or_foreign_seat_is_lost() {
    let h = Harness::new();
    let released = h.fresh(req("cad", "r")).await;
    let revoked = h.fresh(req("cad", "v")).await;
    let reaped = h.fresh(req("cad", "p")).await;

    assert!(h.store.release("cad", &released.seat_id).await.unwrap());
    assert_eq!(
        h.heartbeat("cad", &released.seat_id).await,
        HeartbeatOutcome::Lost(SeatLostReason::Released)
    );

    assert!(
        h.store
            .revoke(&revoked.seat_id, None, None, false)
            .await
            .unwrap()
            .revoked()
            .is_some()
    );
    assert_eq!(
        h.heartbeat("cad", &revoked.seat_id).await,
        HeartbeatOutcome::Lost(SeatLostReason::Revoked)
    );

    // A live seat of cad, presented under the other license: lost, untouched.
    h.advance(secs(10));
    let foreign = h.fresh(req("other", "o")).await;
    let cad_seat = h.fresh(req("cad", "q")).await;
    assert_eq!(
        h.heartbeat("other", &cad_seat.seat_id).await,
        HeartbeatOutcome::Lost(SeatLostReason::Lapsed)
    );
    assert_eq!(
        h.heartbeat("cad", &foreign.seat_id).await,
        HeartbeatOutcome::Lost(SeatLostReason::Lapsed)
    );
    assert_eq!(
        h.seat(&cad_seat.seat_id).await.unwrap(),
        cad_seat,
        "not renewed"
    );
    assert_eq!(
        h.seat(&foreign.seat_id).await.unwrap(),
        foreign,
        "not renewed"
    );
    // And an id that never existed.
    assert_eq!(
        h.heartbeat("cad", &"0".repeat(32)).await,
        HeartbeatOutcome::Lost(SeatLostReason::Lapsed)
    );

    // Reaped: past expiry + grace, the reaper deletes it; then heartbeat.
    h.set(
        reaped
            .expires_at
            .saturating_add(GRACE)
            .saturating_add(ms(1)),
    );
    assert!(h.store.reap(100).await.unwrap() >= 1);
    assert!(h.seat(&reaped.seat_id).await.is_none());
    assert_eq!(
        h.heartbeat("cad", &reaped.seat_id).await,
        HeartbeatOutcome::Lost(SeatLostReason::Lapsed)
    );

    // cad_seat was never renewed by the foreign heartbeat, so it lapsed on time.
    assert_eq!(
        h.heartbeat("cad", &cad_seat.seat_id).await,
        HeartbeatOutcome::Lost(SeatLostReason::Lapsed)
    );
    h.finish().await;
}

// ---------------------------------------------------------------------------
// Release
// ---------------------------------------------------------------------------

#[tokio::test]
async fn release_is_idempotent_and_scoped_to_its_license() {
    let h = Harness::new();
    let a = h.fresh(req("cad", "alice")).await;
    assert_eq!(h.live("cad").await, 1);

    // Through another license: nothing happens.
    assert!(!h.store.release("other", &a.seat_id).await.unwrap());
    assert_eq!(h.seat(&a.seat_id).await.unwrap(), a);
    assert_eq!(h.live("cad").await, 1);
    assert!(h.events_of(EventKind::Release).await.is_empty());

    assert!(h.store.release("cad", &a.seat_id).await.unwrap());
    assert!(
        !h.store.release("cad", &a.seat_id).await.unwrap(),
        "second release"
    );
    assert!(h.seat(&a.seat_id).await.is_none());
    assert_eq!(h.live("cad").await, 0);
    let rel = h.events_of(EventKind::Release).await;
    assert_eq!(rel.len(), 1, "one release event: {rel:?}");
    assert_eq!(rel[0].seat_id.as_deref(), Some(a.seat_id.as_str()));
    assert_eq!(rel[0].holder.as_deref(), Some("alice"));

    // Unknown seat, unknown license.
    assert!(!h.store.release("cad", "ffff").await.unwrap());
    assert!(!h.store.release("nope", "ffff").await.unwrap());
    h.finish().await;
}

// ---------------------------------------------------------------------------
// Idempotency-Key and fingerprint re-claim
// ---------------------------------------------------------------------------

#[tokio::test]
async fn idempotency_key_returns_the_same_seat_until_it_lapses() {
    let h = Harness::new();
    let first = h.fresh(req_key("cad", "alice", "k1")).await;

    h.advance(secs(10));
    let (again, reused) = h.grant(req_key("cad", "alice", "k1")).await;
    assert!(reused);
    assert_eq!(again.seat_id, first.seat_id, "same key, same seat");
    assert_eq!(again.expires_at, h.now().saturating_add(TTL), "renewed");
    assert_eq!(h.live("cad").await, 1, "no second seat");
    assert_eq!(h.store.seats(Some("cad")).await.unwrap().len(), 1);
    assert_eq!(h.events_of(EventKind::Checkout).await.len(), 1);

    // A retry still finds its seat when the pool has filled up meanwhile.
    h.fresh(req("cad", "bob")).await;
    h.fresh(req("cad", "carol")).await;
    let (full_retry, reused) = h.grant(req_key("cad", "alice", "k1")).await;
    assert!(reused);
    assert_eq!(full_retry.seat_id, first.seat_id);

    // The key is per license: the same key elsewhere is a different seat.
    let elsewhere = h.fresh(req_key("other", "alice", "k1")).await;
    assert_ne!(elsewhere.seat_id, first.seat_id);

    // Once the seat has lapsed (not yet reaped), the key gives a new seat.
    let last = h.seat(&first.seat_id).await.unwrap();
    h.set(last.expires_at.saturating_add(SKEW).saturating_add(ms(1)));
    let renewed_key = h.fresh(req_key("cad", "alice", "k1")).await;
    assert_ne!(renewed_key.seat_id, first.seat_id);
    assert_eq!(renewed_key.expires_at, h.now().saturating_add(TTL));
    // And that new seat is now the one the key names.
    h.advance(secs(1));
    let (again, reused) = h.grant(req_key("cad", "alice", "k1")).await;
    assert!(reused);
    assert_eq!(again.seat_id, renewed_key.seat_id);
    h.finish().await;
}

#[tokio::test]
async fn fingerprint_reclaims_its_live_seat() {
    let h = Harness::new();
    let first = h.fresh(req_fp("cad", "alice", "machine-1")).await;

    h.advance(secs(20));
    let (again, reused) = h.grant(req_fp("cad", "alice", "machine-1")).await;
    assert!(reused);
    assert_eq!(
        again.seat_id, first.seat_id,
        "same fingerprint while live, same seat"
    );
    assert_eq!(again.expires_at, h.now().saturating_add(TTL));
    assert_eq!(h.live("cad").await, 1);

    // A different fingerprint is a different machine.
    let other_machine = h.fresh(req_fp("cad", "alice", "machine-2")).await;
    assert_ne!(other_machine.seat_id, first.seat_id);
    assert_eq!(h.live("cad").await, 2);

    // The same fingerprint on another license is not a re-claim.
    let elsewhere = h.fresh(req_fp("other", "alice", "machine-1")).await;
    assert_ne!(elsewhere.seat_id, first.seat_id);

    // After the seat lapsed, the fingerprint takes a fresh seat.
    h.set(again.expires_at.saturating_add(SKEW).saturating_add(ms(1)));
    let fresh = h.fresh(req_fp("cad", "alice", "machine-1")).await;
    assert_ne!(fresh.seat_id, first.seat_id);
    h.finish().await;
}

// ---------------------------------------------------------------------------
// Revoke
// ---------------------------------------------------------------------------

#[tokio::test]
async fn revoke_removes_the_seat_at_once() {
    let h = Harness::new();
    let a = h.fresh(req_fp("cad", "alice", "m1")).await;
    let b = h.fresh(req("cad", "bob")).await;

    let row = h
        .store
        .revoke(&a.seat_id, Some("stuck client".into()), None, false)
        .await
        .unwrap()
        .revoked()
        .expect("the revoked row");
    assert_eq!(row, a);
    assert!(h.seat(&a.seat_id).await.is_none());
    assert_eq!(h.live("cad").await, 1);
    assert_eq!(
        h.heartbeat("cad", &a.seat_id).await,
        HeartbeatOutcome::Lost(SeatLostReason::Revoked)
    );
    assert!(
        h.store
            .revoke(&a.seat_id, None, None, false)
            .await
            .unwrap()
            .revoked()
            .is_none(),
        "already gone"
    );
    assert!(
        h.store
            .revoke("feedface", None, None, false)
            .await
            .unwrap()
            .revoked()
            .is_none()
    );

    let revokes = h.events_of(EventKind::Revoke).await;
    assert_eq!(revokes.len(), 1);
    assert_eq!(revokes[0].seat_id.as_deref(), Some(a.seat_id.as_str()));
    assert!(
        revokes[0]
            .detail
            .as_deref()
            .unwrap_or("")
            .contains("stuck client")
    );

    // Without a block the holder may check out again at once.
    h.fresh(req_fp("cad", "alice", "m1")).await;
    assert_eq!(
        renewed(h.heartbeat("cad", &b.seat_id).await).seat_id,
        b.seat_id
    );
    h.finish().await;
}

#[tokio::test]
async fn revoke_with_block_refuses_the_same_holder_and_fingerprint_until_it_expires() {
    let h = Harness::new();
    let a = h.fresh(req_fp("cad", "alice", "m1")).await;
    let revoked = h
        .store
        .revoke(&a.seat_id, None, Some(secs(300)), false)
        .await
        .unwrap()
        .revoked();
    assert!(revoked.is_some());
    let until = h.now().saturating_add(secs(300));

    assert_eq!(
        h.checkout(req_fp("cad", "alice", "m1")).await,
        CheckoutOutcome::Blocked { until }
    );
    h.advance(secs(120));
    assert_eq!(
        h.checkout(req_fp("cad", "alice", "m1")).await,
        CheckoutOutcome::Blocked { until }
    );
    assert!(h.store.seats(Some("cad")).await.unwrap().is_empty());

    // Other holders, other fingerprints, other licenses: unaffected.
    let bob = h.fresh(req_fp("cad", "bob", "m1")).await;
    let alice_m2 = h.fresh(req_fp("cad", "alice", "m2")).await;
    h.fresh(req_fp("other", "alice", "m1")).await;
    h.store.release("cad", &bob.seat_id).await.unwrap();
    h.store.release("cad", &alice_m2.seat_id).await.unwrap();

    // The block holds up to its last millisecond and ends at `until`.
    h.set(until.saturating_sub(ms(1)));
    assert_eq!(
        h.checkout(req_fp("cad", "alice", "m1")).await,
        CheckoutOutcome::Blocked { until }
    );
    h.set(until);
    let back = h.fresh(req_fp("cad", "alice", "m1")).await;
    assert_ne!(back.seat_id, a.seat_id);

    // A holder without a fingerprint is blocked as (holder, no fingerprint).
    let bare = h.fresh(req("cad", "carol")).await;
    h.store
        .revoke(&bare.seat_id, None, Some(secs(60)), false)
        .await
        .unwrap()
        .revoked();
    assert!(matches!(
        h.checkout(req("cad", "carol")).await,
        CheckoutOutcome::Blocked { .. }
    ));
    h.fresh(req_fp("cad", "carol", "m9")).await;
    h.finish().await;
}
