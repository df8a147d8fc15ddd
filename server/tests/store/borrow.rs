//! Borrowing on the store itself: the borrowed counts from lending to reap.

use leasehold_server::store::{
    CheckoutOutcome, CheckoutRequest, HeartbeatOutcome, Limit, RevokeOutcome, SeatMode,
};

use crate::support::NO_STALL;
use crate::{Harness, req_fp, secs};

// ---------------------------------------------------------------------------
// Borrowing on the store itself
// ---------------------------------------------------------------------------

/// `lend`: 3 seats, 10 s TTL, up to 2 borrowed for up to an hour.
const LENDING: &str = r#"
[[license]]
id = "lend"
key = "lend-key"
seats = 3
ttl = "10s"
skew = "1s"
reap_grace = "3s"

[license.borrow]
max = "1h"
seats = 2
"#;

fn borrow_req(holder: &str, fingerprint: &str, for_s: u64) -> CheckoutRequest {
    CheckoutRequest {
        borrow: Some(secs(for_s)),
        ..req_fp("lend", holder, fingerprint)
    }
}

async fn borrowed_count(h: &Harness) -> (u32, u32) {
    let counts = h.store.live_counts().await.unwrap();
    let (_, lend) = counts.into_iter().find(|(id, _)| id == "lend").unwrap();
    (lend.live, lend.borrowed)
}

/// The store's counts (the live index on SQLite, SQL on PostgreSQL) follow
/// a seat turned into a borrow, a second borrow, the borrow cap, a forced
/// revoke, a restart after an outage (which never shortens a borrow) and
/// the reap after its end.
#[tokio::test]
async fn borrowed_seats_are_counted_exactly_from_lending_to_reap() {
    let h = Harness::with(LENDING, NO_STALL);
    let held = h.fresh(req_fp("lend", "ann", "lap")).await;
    let (ann, reused) = h.grant(borrow_req("ann", "lap", 600)).await;
    assert!(reused && ann.seat_id == held.seat_id && ann.mode == SeatMode::Borrow);
    assert_eq!(ann.expires_at, h.now().saturating_add(secs(600)));
    assert_eq!(borrowed_count(&h).await, (1, 1));
    let bob = h.fresh(borrow_req("bob", "b", 60)).await;
    assert_eq!(borrowed_count(&h).await, (2, 2));
    assert!(matches!(
        h.checkout(borrow_req("cy", "c", 60)).await,
        CheckoutOutcome::LimitReached {
            limit: Limit::Borrow,
            max: 2,
            ..
        }
    ));
    assert_eq!(
        h.heartbeat("lend", &ann.seat_id).await,
        HeartbeatOutcome::Borrowed {
            expires_at: ann.expires_at
        }
    );
    let kept = h
        .store
        .revoke(&bob.seat_id, None, None, false)
        .await
        .unwrap();
    assert_eq!(kept, RevokeOutcome::Borrowed(bob.clone()));
    let freed = h
        .store
        .revoke(&bob.seat_id, None, None, true)
        .await
        .unwrap();
    assert_eq!(freed.revoked().map(|r| r.seat_id), Some(bob.seat_id));
    assert_eq!(borrowed_count(&h).await, (1, 1));

    // Down for a minute: the outage rule gives heartbeat seats a TTL from
    // now and leaves the borrow's end where it was.
    let plain = h.fresh(req_fp("lend", "dan", "d")).await;
    h.store.close().await;
    h.advance(secs(60));
    let store =
        h.db.open(&h.licenses_toml, &h.licenses, &h.clock, secs(5))
            .unwrap();
    let h = Harness { store, ..h };
    // (The first command after the gap applies the outage rule.)
    assert_eq!(borrowed_count(&h).await, (2, 1));
    let after = h.seat(&ann.seat_id).await.expect("the borrow is still out");
    assert_eq!(
        (after.mode, after.expires_at),
        (SeatMode::Borrow, ann.expires_at)
    );
    let plain = h
        .seat(&plain.seat_id)
        .await
        .expect("extended by the outage rule");
    assert_eq!(plain.expires_at, h.now().saturating_add(secs(10)));

    // Past the borrow's end and the reap grace: reaped like any lease (the
    // jump is not an outage).
    let h = h.reopen(NO_STALL).await;
    h.set(ann.expires_at.saturating_add(secs(5)));
    assert_eq!(borrowed_count(&h).await, (0, 0));
    assert_eq!(h.store.reap(100).await.unwrap(), 2);
    assert!(h.seat(&ann.seat_id).await.is_none());
    h.finish().await;
}
