//! Events (increasing ids, published after commit) and what survives a
//! close and reopen.

use leasehold_common::api::EventKind;
use leasehold_server::store::CheckoutOutcome;

use crate::support::NO_STALL;
use crate::{Harness, renewed, req, req_fp, req_key, secs};

// ---------------------------------------------------------------------------
// Events
// ---------------------------------------------------------------------------

#[tokio::test]
async fn events_have_increasing_ids_and_are_published_after_commit() {
    let h = Harness::new();
    let mut sub = h.store.subscribe();

    let a = h.fresh(req("cad", "alice")).await;
    h.advance(secs(1));
    renewed(h.heartbeat("cad", &a.seat_id).await); // no event for a renewal
    h.fresh(req("cad", "bob")).await;
    h.fresh(req("cad", "carol")).await;
    assert!(matches!(
        h.checkout(req("cad", "dave")).await,
        CheckoutOutcome::Full { .. }
    ));
    assert!(h.store.release("cad", &a.seat_id).await.unwrap());
    h.store
        .record_event(EventKind::Config, None, "reloaded".into())
        .await
        .unwrap();

    let log = h.events().await;
    let config = log.last().cloned().expect("events were logged");
    let kinds: Vec<_> = log.iter().map(|e| e.kind).collect();
    assert_eq!(
        kinds,
        [
            EventKind::Checkout,
            EventKind::Checkout,
            EventKind::Checkout,
            EventKind::Denied,
            EventKind::Release,
            EventKind::Config,
        ]
    );
    // Ids are gap-free from 1 on either store: no event is logged for the
    // licenses file a store starts with, and a denial takes an id like any.
    let ids: Vec<i64> = log.iter().map(|e| e.id).collect();
    assert_eq!(ids, (1..=6).collect::<Vec<_>>(), "{log:?}");
    assert_eq!(config.detail.as_deref(), Some("reloaded"));

    // `after` and `limit` page through the log.
    let page = h.store.events_after(log[1].id, 2).await.unwrap();
    assert_eq!(page, log[2..4].to_vec());
    assert!(
        h.store
            .events_after(config.id, 10)
            .await
            .unwrap()
            .is_empty()
    );

    // The subscriber got the same events, in order, and each one was already
    // committed (visible to a separate read connection) when it arrived.
    for expected in &log {
        let got = tokio::time::timeout(secs(5), sub.recv())
            .await
            .expect("event published")
            .unwrap();
        assert_eq!(&got, expected);
        let visible = h.store.events_after(got.id - 1, 1).await.unwrap();
        assert_eq!(visible, vec![got]);
    }
    assert!(sub.try_recv().is_err(), "nothing more was published");

    // A subscriber sees events committed after it subscribed, live.
    let mut late = h.store.subscribe();
    let waiter = tokio::spawn(async move { late.recv().await.unwrap() });
    let b = h.fresh(req("other", "zed")).await;
    let got = tokio::time::timeout(secs(5), waiter)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(got.kind, EventKind::Checkout);
    assert_eq!(got.seat_id, Some(b.seat_id));
    assert!(got.id > config.id);
    h.finish().await;
}

// ---------------------------------------------------------------------------
// Persistence
// ---------------------------------------------------------------------------

#[tokio::test]
async fn leases_and_events_survive_close_and_reopen() {
    let h = Harness::new();
    let a = h.fresh(req_fp("cad", "alice", "m1")).await;
    let b = h.fresh(req_key("cad", "bob", "key-b")).await;
    let gone = h.fresh(req("other", "carol")).await;
    h.store.release("other", &gone.seat_id).await.unwrap();
    let blocked = h.fresh(req_fp("pool", "mallory", "mx")).await;
    h.store
        .revoke(&blocked.seat_id, None, Some(secs(600)), false)
        .await
        .unwrap()
        .revoked();
    let seats_before = h.store.seats(None).await.unwrap();
    let events_before = h.events().await;
    assert_eq!(seats_before.len(), 2);

    h.advance(secs(5));
    let h = h.reopen(NO_STALL).await;

    assert_eq!(h.store.seats(None).await.unwrap(), seats_before);
    assert_eq!(h.events().await, events_before);
    assert_eq!(h.live("cad").await, 2);
    // Everything keeps working on the reopened file: heartbeats, the key,
    // the fingerprint, the block, and new event ids continue upwards.
    assert_eq!(
        renewed(h.heartbeat("cad", &a.seat_id).await).seat_id,
        a.seat_id
    );
    let (again, reused) = h.grant(req_key("cad", "bob", "key-b")).await;
    assert!(reused && again.seat_id == b.seat_id);
    let (again, reused) = h.grant(req_fp("cad", "alice", "m1")).await;
    assert!(reused && again.seat_id == a.seat_id);
    assert!(matches!(
        h.checkout(req_fp("pool", "mallory", "mx")).await,
        CheckoutOutcome::Blocked { .. }
    ));
    let c = h.fresh(req("cad", "carol")).await;
    let last = h.events().await.pop().unwrap();
    assert_eq!(last.seat_id.as_deref(), Some(c.seat_id.as_str()));
    assert!(last.id > events_before.last().unwrap().id);
    h.finish().await;
}
