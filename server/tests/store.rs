//! Store tests on a real store with a clock moved by hand: SQLite (a file in
//! a temp dir) or PostgreSQL (a fresh database on a throwaway cluster), as
//! `LEASEHOLD_TEST_STORE` says. Tests named `sqlite_*` are about SQLite
//! itself (schema version, WAL, the file) and run on SQLite either way.
//!
//! Every test opens its own database. Unless a test is about the outage rule,
//! the stall threshold is set far beyond any clock jump the test makes, so
//! moving the clock by hand is not mistaken for the server having been down.

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use leasehold_common::api::{Event, EventKind, SeatLostReason};
use leasehold_common::{Licenses, Timestamp, is_live, is_reapable};
use leasehold_server::clock::{Clock, ManualClock, SharedClock};
use leasehold_server::licenses::LicensesHandle;
use leasehold_server::store::{
    CheckoutOutcome, CheckoutRequest, HeartbeatOutcome, LeaseRow, Limit, RevokeOutcome,
    SCHEMA_VERSION, SeatMode, Store, StoreError, StoreOptions,
};
use proptest::prelude::*;
use support::{NO_STALL, TestDb, at, license_toml, ms};

/// `cad`: 3 seats, ttl 60 s, skew 5 s, grace 15 s.
/// `other`: a second license, to check that seat ids do not cross licenses.
/// `pool`: 50 seats for the group-commit race.
const LICENSES: &str = r#"
[[license]]
id = "cad"
key = "cad-key"
seats = 3
ttl = "60s"
skew = "5s"
reap_grace = "15s"

[[license]]
id = "other"
key = "other-key"
seats = 2
ttl = "30s"
skew = "2s"
reap_grace = "10s"

[[license]]
id = "pool"
key = "pool-key"
seats = 50
ttl = "60s"
skew = "5s"
reap_grace = "15s"
"#;

const TTL: Duration = Duration::from_secs(60);
const SKEW: Duration = Duration::from_secs(5);
const GRACE: Duration = Duration::from_secs(15);

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

struct Harness {
    db: TestDb,
    /// The licenses file the store was opened with (PostgreSQL publishes it
    /// again on every open).
    licenses_toml: String,
    clock: Arc<ManualClock>,
    licenses: LicensesHandle,
    store: Store,
}

impl Harness {
    fn new() -> Harness {
        Harness::with(LICENSES, NO_STALL)
    }

    /// On the store `LEASEHOLD_TEST_STORE` names.
    fn with(licenses_toml: &str, stall_threshold: Duration) -> Harness {
        Harness::on(TestDb::new(), licenses_toml, stall_threshold)
    }

    /// On SQLite whatever the environment says, for tests of SQLite itself.
    fn sqlite_only() -> Harness {
        Harness::on(TestDb::sqlite(), LICENSES, NO_STALL)
    }

    fn on(db: TestDb, licenses_toml: &str, stall_threshold: Duration) -> Harness {
        let clock = ManualClock::new(at(0));
        let licenses = LicensesHandle::new(Licenses::parse(licenses_toml).unwrap());
        let store = db
            .open(licenses_toml, &licenses, &clock, stall_threshold)
            .unwrap();
        Harness {
            db,
            licenses_toml: licenses_toml.to_string(),
            clock,
            licenses,
            store,
        }
    }

    fn now(&self) -> Timestamp {
        self.clock.now()
    }

    fn advance(&self, d: Duration) {
        self.clock.advance(d);
    }

    fn set(&self, t: Timestamp) {
        self.clock.set(t);
    }

    /// Close the store and open the same database again.
    async fn reopen(self, stall_threshold: Duration) -> Harness {
        self.store.close().await;
        let store = self
            .db
            .open(
                &self.licenses_toml,
                &self.licenses,
                &self.clock,
                stall_threshold,
            )
            .unwrap();
        Harness { store, ..self }
    }

    async fn finish(self) {
        self.store.close().await;
    }

    async fn checkout(&self, req: CheckoutRequest) -> CheckoutOutcome {
        self.store.checkout(req).await.unwrap()
    }

    /// A checkout that must be granted; returns the lease and `reused`.
    async fn grant(&self, req: CheckoutRequest) -> (LeaseRow, bool) {
        match self.checkout(req.clone()).await {
            CheckoutOutcome::Granted {
                lease,
                reused,
                overage: false,
            } => (lease, reused),
            other => panic!(
                "checkout {req:?} at {} was not granted: {other:?}",
                self.now()
            ),
        }
    }

    /// A checkout that must take a fresh seat.
    async fn fresh(&self, req: CheckoutRequest) -> LeaseRow {
        let (lease, reused) = self.grant(req).await;
        assert!(
            !reused,
            "expected a fresh seat, got a reused one: {lease:?}"
        );
        lease
    }

    async fn heartbeat(&self, license: &str, seat: &str) -> HeartbeatOutcome {
        self.store.heartbeat(license, seat).await.unwrap()
    }

    async fn live(&self, license: &str) -> u32 {
        self.store
            .live_counts()
            .await
            .unwrap()
            .into_iter()
            .find(|(id, _)| id == license)
            .map(|(_, n)| n.live)
            .unwrap_or_else(|| panic!("no live count for {license}"))
    }

    async fn seat(&self, seat: &str) -> Option<LeaseRow> {
        self.store.find_seat(seat).await.unwrap()
    }

    async fn events(&self) -> Vec<Event> {
        self.store.events_after(0, 10_000).await.unwrap()
    }

    async fn events_of(&self, kind: EventKind) -> Vec<Event> {
        self.events()
            .await
            .into_iter()
            .filter(|e| e.kind == kind)
            .collect()
    }
}

fn req(license: &str, holder: &str) -> CheckoutRequest {
    CheckoutRequest {
        license_id: license.to_string(),
        holder: holder.to_string(),
        fingerprint: None,
        idempotency_key: None,
        borrow: None,
    }
}

fn req_fp(license: &str, holder: &str, fingerprint: &str) -> CheckoutRequest {
    CheckoutRequest {
        fingerprint: Some(fingerprint.to_string()),
        ..req(license, holder)
    }
}

fn req_key(license: &str, holder: &str, key: &str) -> CheckoutRequest {
    CheckoutRequest {
        idempotency_key: Some(key.to_string()),
        ..req(license, holder)
    }
}

fn renewed(outcome: HeartbeatOutcome) -> LeaseRow {
    match outcome {
        HeartbeatOutcome::Renewed(row) => row,
        other => panic!("heartbeat was answered {other:?}"),
    }
}

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

// ---------------------------------------------------------------------------
// Migrations and bad files (SQLite's own: `user_version`, WAL, the file)
// ---------------------------------------------------------------------------

fn user_version(path: &Path) -> i64 {
    let conn = rusqlite::Connection::open(path).unwrap();
    conn.query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap()
}

#[tokio::test]
async fn sqlite_a_fresh_file_gets_the_current_schema_version() {
    let h = Harness::sqlite_only();
    let version = user_version(&h.db.sqlite_path());
    assert_eq!(version, SCHEMA_VERSION);
    assert!(version >= 1, "the schema was created");
    let journal: String = rusqlite::Connection::open(h.db.sqlite_path())
        .unwrap()
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .unwrap();
    assert_eq!(journal.to_ascii_lowercase(), "wal");
    // Reopening an up-to-date file migrates nothing and loses nothing.
    let a = h.fresh(req("cad", "alice")).await;
    let h = h.reopen(NO_STALL).await;
    assert_eq!(user_version(&h.db.sqlite_path()), SCHEMA_VERSION);
    assert_eq!(h.seat(&a.seat_id).await.unwrap(), a);
    h.finish().await;
}

fn open_err(db: &TestDb) -> StoreError {
    let clock = ManualClock::new(at(0));
    let licenses = LicensesHandle::new(Licenses::parse(LICENSES).unwrap());
    match db.open(LICENSES, &licenses, &clock, NO_STALL) {
        Ok(_) => panic!("{} should have been refused", db.sqlite_path().display()),
        Err(e) => e,
    }
}

#[tokio::test]
async fn sqlite_a_newer_schema_is_refused() {
    let db = TestDb::sqlite();
    let path = db.sqlite_path();
    {
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.execute_batch("CREATE TABLE future (x INTEGER);")
            .unwrap();
        conn.pragma_update(None, "user_version", SCHEMA_VERSION + 1)
            .unwrap();
    }
    let err = open_err(&db);
    assert!(matches!(err, StoreError::SchemaTooNew { .. }), "{err:?}");
    assert!(err.to_string().contains("newer"), "{err}");
    assert_eq!(user_version(&path), SCHEMA_VERSION + 1, "left as it was");
}

#[tokio::test]
async fn sqlite_a_negative_schema_version_is_refused() {
    let db = TestDb::sqlite();
    let path = db.sqlite_path();
    {
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.pragma_update(None, "user_version", -1).unwrap();
    }
    let err = open_err(&db);
    assert!(matches!(err, StoreError::SchemaNotOurs { .. }), "{err:?}");
    assert!(err.to_string().contains("schema version -1"), "{err}");
}

#[tokio::test]
async fn sqlite_a_file_that_is_not_sqlite_is_refused() {
    let db = TestDb::sqlite();
    let path = db.sqlite_path();
    let junk = "this is not a database, it is a shopping list\n".repeat(200);
    std::fs::write(&path, &junk).unwrap();
    let err = open_err(&db);
    let text = err.to_string();
    assert!(!text.is_empty());
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        junk,
        "the file is not overwritten"
    );
}

// ---------------------------------------------------------------------------
// Group commit
// ---------------------------------------------------------------------------

/// Heartbeats, releases, checkouts and heartbeats on seats that are not
/// there, sent at once so that they share batches: each gets its own
/// answer and the table agrees. (On PostgreSQL a batch reads its
/// heartbeats' leases up front, writes their renewals in one statement and
/// opens a command's savepoint only before its first statement.)
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn mixed_commands_sent_at_once_each_get_their_own_answer() {
    let h = Harness::new();
    let mut held = Vec::new();
    for i in 0..20 {
        held.push(h.fresh(req("pool", &format!("holder-{i}"))).await);
    }
    let foreign = h.fresh(req("other", "someone")).await;
    h.advance(secs(10));
    let now = h.now();

    let mut heartbeats = Vec::new();
    for lease in held.iter().take(15).chain(held.iter().take(15)) {
        let (store, seat) = (h.store.clone(), lease.seat_id.clone());
        heartbeats.push(tokio::spawn(
            async move { store.heartbeat("pool", &seat).await },
        ));
    }
    let mut releases = Vec::new();
    for lease in &held[15..] {
        let (store, seat) = (h.store.clone(), lease.seat_id.clone());
        releases.push(tokio::spawn(
            async move { store.release("pool", &seat).await },
        ));
    }
    let mut checkouts = Vec::new();
    for i in 0..10 {
        let store = h.store.clone();
        checkouts.push(tokio::spawn(async move {
            store.checkout(req("pool", &format!("newcomer-{i}"))).await
        }));
    }
    let mut strays = Vec::new();
    for seat in ["0123456789abcdef0123456789abcdef", foreign.seat_id.as_str()] {
        let (store, seat) = (h.store.clone(), seat.to_string());
        strays.push(tokio::spawn(
            async move { store.heartbeat("pool", &seat).await },
        ));
    }

    for t in heartbeats {
        let renewed = renewed(t.await.unwrap().unwrap());
        assert_eq!(renewed.expires_at, now.saturating_add(TTL));
    }
    for t in releases {
        assert!(t.await.unwrap().unwrap(), "a held seat is released");
    }
    let mut new_seats = BTreeSet::new();
    for t in checkouts {
        match t.await.unwrap().unwrap() {
            CheckoutOutcome::Granted { lease, .. } => assert!(new_seats.insert(lease.seat_id)),
            other => panic!("a checkout with seats free was answered {other:?}"),
        }
    }
    for t in strays {
        assert!(
            matches!(t.await.unwrap().unwrap(), HeartbeatOutcome::Lost(_)),
            "a seat not in this license is lost"
        );
    }

    let stored = h.store.seats(Some("pool")).await.unwrap();
    assert_eq!(stored.len(), 25, "15 kept + 10 new: {stored:?}");
    for lease in &stored {
        if new_seats.contains(&lease.seat_id) {
            continue;
        }
        assert!(held[..15].iter().any(|l| l.seat_id == lease.seat_id));
        assert_eq!(lease.expires_at, now.saturating_add(TTL), "renewal stored");
        assert_eq!(lease.issued_at, now);
    }
    assert_eq!(h.live("pool").await, 25);
    let foreign_now = h.store.seats(Some("other")).await.unwrap();
    assert_eq!(
        foreign_now,
        vec![foreign],
        "the other license's seat is untouched"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_checkouts_never_oversell_the_pool() {
    let h = Harness::new();
    let mut tasks = Vec::new();
    for i in 0..200 {
        let store = h.store.clone();
        tasks.push(tokio::spawn(async move {
            store
                .checkout(req("pool", &format!("client-{i}")))
                .await
                .unwrap()
        }));
    }
    let mut granted = BTreeSet::new();
    let mut full = 0;
    for t in tasks {
        match t.await.unwrap() {
            CheckoutOutcome::Granted {
                lease,
                reused,
                overage: false,
            } => {
                assert!(!reused);
                assert!(granted.insert(lease.seat_id), "a seat id handed out twice");
            }
            CheckoutOutcome::Full { seats, live, .. } => {
                assert_eq!((seats, live), (50, 50));
                full += 1;
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(granted.len(), 50);
    assert_eq!(full, 150);
    assert_eq!(h.live("pool").await, 50);
    let stored: BTreeSet<_> = h
        .store
        .seats(Some("pool"))
        .await
        .unwrap()
        .into_iter()
        .map(|l| l.seat_id)
        .collect();
    assert_eq!(stored, granted);
    assert_eq!(h.events_of(EventKind::Checkout).await.len(), 50);
    h.finish().await;
}

/// Under writes without a pause a background checkpoint never sees the whole
/// WAL copied, so SQLite never starts it over: it grew by 30 MB/s under the
/// heartbeat bench. The writer now finishes the checkpoint itself.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_the_wal_starts_over_under_writes_without_a_pause() {
    let db = TestDb::sqlite();
    let clock: SharedClock = ManualClock::new(at(0));
    let licenses = LicensesHandle::new(Licenses::parse(LICENSES).unwrap());
    let store = Store::open(
        &db.sqlite_path(),
        licenses,
        clock,
        StoreOptions {
            stall_threshold: NO_STALL,
            wal_restart_frames: 64,
            checkpoint_every: ms(20),
            ..StoreOptions::default()
        },
    )
    .unwrap();
    // 48 tasks heartbeat without a pause, so the writer commits back-to-back.
    let mut tasks = Vec::new();
    for i in 0..48 {
        let store = store.clone();
        tasks.push(tokio::spawn(async move {
            let lease = match store.checkout(req("pool", &format!("c{i}"))).await {
                Ok(CheckoutOutcome::Granted { lease, .. }) => lease,
                other => panic!("{other:?}"),
            };
            for _ in 0..1000 {
                let beat = store.heartbeat("pool", &lease.seat_id).await.unwrap();
                assert!(matches!(beat, HeartbeatOutcome::Renewed(_)), "{beat:?}");
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let stats = store.writer_stats();
    let commits = stats.batches.load(Ordering::Relaxed);
    let catch_ups = stats.wal_catch_ups.load(Ordering::Relaxed);
    // The file only grows while the store is open: its length is the most
    // frames the WAL ever held (32-byte header, 24-byte frame headers).
    let wal_len = std::fs::metadata(db.sqlite_path().with_extension("db-wal"))
        .unwrap()
        .len();
    let most_frames = (wal_len - 32) / (24 + 1024);
    store.close().await;
    assert!(catch_ups >= 1, "the writer never caught up");
    // Every commit appends at least one frame, so a WAL that never held as
    // many frames as there were commits has started over.
    assert!(
        most_frames < commits,
        "{commits} commits, yet the WAL once held {most_frames} frames"
    );
}

/// Found by the model-based test: if the server's clock steps back (an NTP
/// step), a lapsed lease must not come back to life beside the seat that
/// replaced it. The writer's time never goes backwards.
#[tokio::test]
async fn a_clock_stepping_back_never_revives_a_lapsed_lease() {
    let h = Harness::new();
    let a = h.fresh(req("cad", "a")).await;
    h.advance(secs(50));
    h.fresh(req("cad", "b")).await;
    h.fresh(req("cad", "c")).await;
    // a lapses at expires_at + skew + 1 ms; its seat goes to d.
    h.set(a.expires_at.saturating_add(secs(5) + ms(1)));
    h.fresh(req("cad", "d")).await;
    // The wall clock steps back 2 ms: by the raw predicate a is live again.
    h.set(a.expires_at.saturating_add(secs(5) - ms(1)));
    assert!(matches!(
        h.checkout(req("cad", "e")).await,
        CheckoutOutcome::Full {
            live: 3,
            seats: 3,
            ..
        }
    ));
    assert_eq!(
        h.heartbeat("cad", &a.seat_id).await,
        HeartbeatOutcome::Lost(SeatLostReason::Lapsed),
        "the lapsed lease stays lapsed"
    );
    let live: Vec<(String, u32)> = h
        .store
        .live_counts()
        .await
        .unwrap()
        .into_iter()
        .map(|(license, counts)| (license, counts.live))
        .collect();
    assert!(live.contains(&("cad".to_string(), 3)), "{live:?}");
    h.finish().await;
}

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

// ---------------------------------------------------------------------------
// Commands that share a batch
// ---------------------------------------------------------------------------

/// `caps`: 4 seats, 2 per holder, a group `team` that may hold 2 and keeps 1
/// reserved.
const CAPS: &str = r#"
[[license]]
id = "caps"
key = "caps-key"
seats = 4
ttl = "60s"
skew = "5s"
reap_grace = "15s"
max_per_holder = 2

[[license.group]]
name = "team"
holders = ["t-*"]
max = 2
reserve = 1
"#;

/// One command of a burst: as written (holder and fingerprint, the n-th
/// seat taken before it), then as sent.
enum Burst<C, R> {
    Checkout(C),
    Release(R),
}

/// A burst's command as written: (holder, fingerprint or ""), or the n-th
/// seat taken before the burst.
type Written = Burst<(&'static str, &'static str), usize>;

fn outcome(o: CheckoutOutcome) -> String {
    match o {
        CheckoutOutcome::Granted { reused: false, .. } => "granted".to_string(),
        CheckoutOutcome::Full { live, reserved, .. } => format!("full {live} reserved {reserved}"),
        CheckoutOutcome::LimitReached { limit, max, .. } => format!("{limit:?} cap {max}"),
        other => format!("{other:?}"),
    }
}

/// Commands sent at once, in order, are answered as if one by one, however
/// the writer cuts them into batches: each checkout sees the seats the
/// commands before it took and freed, for the pool, a group's reservation
/// and cap and a holder's cap. (On PostgreSQL a batch reads each count once
/// for the licenses it checks out from and follows its own writes, and
/// keeps new leases to insert them together; this is what must not drift.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commands_sent_at_once_are_answered_as_if_one_by_one() {
    use Burst::{Checkout, Release};
    let h = Harness::with(CAPS, NO_STALL);
    let burst: [(Written, &str); 13] = [
        (Checkout(("x-3", "")), "granted"),
        (Checkout(("x-4", "")), "full 4 reserved 0"),
        (Release(1), "released"),
        (Checkout(("x-4", "")), "granted"),
        (Checkout(("t-2", "")), "full 4 reserved 0"),
        // The team's member leaves: its reserved seat is free again, for
        // the team only.
        (Release(0), "released"),
        (Checkout(("x-5", "")), "full 3 reserved 1"),
        (Checkout(("t-1", "")), "granted"),
        (Release(2), "released"),
        (Checkout(("t-1", "")), "granted"),
        (Checkout(("t-1", "")), "Holder cap 2"),
        (Checkout(("t-3", "")), "Group cap 2"),
        (Checkout(("x-6", "fp")), "full 4 reserved 0"),
    ];
    let stats = h.store.writer_stats();
    let before = (
        stats.batches.load(Ordering::Relaxed),
        stats.commands.load(Ordering::Relaxed),
    );
    for round in 0..12 {
        // Before each burst: a team member and two others hold seats.
        let mut held = Vec::new();
        for holder in ["t-1", "x-1", "x-2"] {
            held.push(h.fresh(req("caps", holder)).await);
        }
        let answers = futures_util::future::join_all(burst.iter().map(|(step, _)| {
            let store = h.store.clone();
            let step = match step {
                Checkout((holder, "")) => Checkout(req("caps", holder)),
                Checkout((holder, fp)) => Checkout(req_fp("caps", holder, fp)),
                Release(n) => Release(held[*n].seat_id.clone()),
            };
            async move {
                match step {
                    Checkout(r) => outcome(store.checkout(r).await.unwrap()),
                    Release(seat) => match store.release("caps", &seat).await {
                        Ok(true) => "released".to_string(),
                        other => format!("{other:?}"),
                    },
                }
            }
        }))
        .await;
        let want: Vec<&str> = burst.iter().map(|(_, want)| *want).collect();
        assert_eq!(answers, want, "round {round}");
        assert_eq!(h.live("caps").await, 4, "round {round}");
        for seat in h.store.seats(Some("caps")).await.unwrap() {
            assert!(h.store.release("caps", &seat.seat_id).await.unwrap());
        }
    }
    let batches = stats.batches.load(Ordering::Relaxed) - before.0;
    let commands = stats.commands.load(Ordering::Relaxed) - before.1;
    assert!(
        commands > batches,
        "no batch held two commands ({commands} in {batches}): nothing here shared a batch"
    );
    h.finish().await;
}

/// `burst`: 4 seats and 1 of overage, 2 per holder, linger, a group `team`
/// that may hold 2 and keeps 1 reserved, and 1 seat lent for up to an hour
/// (not to x-3).
const BURST: &str = r#"
[[license]]
id = "burst"
key = "burst-key"
seats = 4
overage = 1
ttl = "60s"
skew = "5s"
reap_grace = "15s"
max_per_holder = 2
linger = "30s"

[[license.group]]
name = "team"
holders = ["t-*"]
max = 2
reserve = 1

[license.borrow]
max = "1h"
seats = 1
allow = ["t-*", "x-1", "x-2"]
"#;

/// One command of a random burst on `burst`.
#[derive(Debug, Clone)]
enum BurstOp {
    Checkout {
        holder: &'static str,
        fingerprint: Option<&'static str>,
        key: Option<&'static str>,
        /// Borrow for this many seconds (more than an hour is refused).
        borrow_s: Option<u64>,
    },
    /// Release, heartbeat or revoke the n-th (mod) seat held before the burst.
    Release(usize),
    Heartbeat(usize),
    Revoke(usize),
}

fn burst_op() -> impl Strategy<Value = BurstOp> {
    prop_oneof![
        6 => (
            prop::sample::select(vec!["t-1", "t-2", "x-1", "x-2", "x-3"]),
            proptest::option::weighted(0.6, prop::sample::select(vec!["fa", "fb", "fd"])),
            proptest::option::weighted(0.3, prop::sample::select(vec!["ka", "kb"])),
            proptest::option::weighted(0.4, prop::sample::select(vec![600u64, 3600, 7200])),
        )
            .prop_map(|(holder, fingerprint, key, borrow_s)| BurstOp::Checkout {
                holder,
                fingerprint,
                key,
                // A borrow names its machine (the HTTP layer demands one).
                borrow_s: borrow_s.filter(|_| fingerprint.is_some()),
            }),
        2 => (0usize..5).prop_map(BurstOp::Release),
        1 => (0usize..5).prop_map(BurstOp::Heartbeat),
        1 => (0usize..5).prop_map(BurstOp::Revoke),
    ]
}

/// A store's answer with the seat ids left out (they are random) and times
/// from `now`.
fn answer_shape(h: &Harness, op: &BurstOp, seats: &[LeaseRow]) -> impl Future<Output = String> {
    let store = h.store.clone();
    let now = h.now();
    let seat = |n: usize| seats[n % seats.len()].seat_id.clone();
    let sent = match op {
        BurstOp::Checkout {
            holder,
            fingerprint,
            key,
            borrow_s,
        } => Sent::Checkout(CheckoutRequest {
            fingerprint: fingerprint.map(str::to_string),
            idempotency_key: key.map(str::to_string),
            borrow: borrow_s.map(secs),
            ..req("burst", holder)
        }),
        BurstOp::Release(n) => Sent::Release(seat(*n)),
        BurstOp::Heartbeat(n) => Sent::Heartbeat(seat(*n)),
        BurstOp::Revoke(n) => Sent::Revoke(seat(*n)),
    };
    async move {
        match sent {
            Sent::Checkout(r) => match store.checkout(r).await.unwrap() {
                CheckoutOutcome::Granted {
                    lease,
                    reused,
                    overage,
                } => format!(
                    "granted {} {:?} {:?} {:?} expires +{}ms reused={reused} overage={overage}",
                    lease.holder,
                    lease.fingerprint,
                    lease.group,
                    lease.mode,
                    lease.expires_at.millis_since(now)
                ),
                other => format!("{other:?}"),
            },
            Sent::Release(seat) => {
                format!("release {}", store.release("burst", &seat).await.unwrap())
            }
            Sent::Heartbeat(seat) => match store.heartbeat("burst", &seat).await.unwrap() {
                HeartbeatOutcome::Renewed(l) => {
                    format!("renewed +{}ms", l.expires_at.millis_since(now))
                }
                HeartbeatOutcome::Borrowed { expires_at } => {
                    format!("borrowed until +{}ms", expires_at.millis_since(now))
                }
                other => format!("{other:?}"),
            },
            Sent::Revoke(seat) => match store.revoke(&seat, None, None, false).await.unwrap() {
                RevokeOutcome::Revoked(l) => format!("revoked {}", l.holder),
                RevokeOutcome::Borrowed(l) => format!(
                    "borrowed by {} until +{}ms",
                    l.holder,
                    l.expires_at.millis_since(now)
                ),
                other => format!("{other:?}"),
            },
        }
    }
}

/// A [`BurstOp`] as sent: its request or the seat it names.
enum Sent {
    Checkout(CheckoutRequest),
    Release(String),
    Heartbeat(String),
    Revoke(String),
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 16,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    /// A random burst of checkouts (holder and group caps, reservations,
    /// overage, fingerprints, Idempotency-Keys, borrows), releases into linger,
    /// heartbeats and revokes, some on a lapsed seat, sent at once in order, is answered exactly
    /// as the same commands sent one by one from the same state at the
    /// same time (whatever batches the writer cut): what a batch keeps
    /// between commands (on PostgreSQL: counts, new leases, renewals,
    /// leases read up front) never answers otherwise than the table would.
    #[test]
    fn a_burst_is_answered_as_its_commands_one_by_one(
        ops in prop::collection::vec(burst_op(), 4..24),
    ) {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async {
            let h = Harness::with(BURST, NO_STALL);
            let mut answers = Vec::new();
            for at_once in [true, false] {
                // The same state before each run, a quarter hour after the
                // last: a seat that lapsed 5 s ago (not yet reapable), a
                // team member, two others, and a seat left lingering by
                // x-3 on its machine.
                h.advance(secs(900));
                let mut held = vec![h.fresh(req_fp("burst", "x-4", "fe")).await];
                h.advance(secs(70));
                for (holder, fp) in [("t-1", "fa"), ("x-1", "fb"), ("x-2", "fc"), ("x-3", "fd")] {
                    held.push(h.fresh(req_fp("burst", holder, fp)).await);
                }
                assert!(h.store.release("burst", &held[4].seat_id).await.unwrap());
                let mut got = Vec::new();
                if at_once {
                    let sent: Vec<_> = ops.iter().map(|op| answer_shape(&h, op, &held)).collect();
                    got = futures_util::future::join_all(sent).await;
                } else {
                    for op in &ops {
                        got.push(answer_shape(&h, op, &held).await);
                    }
                }
                answers.push(got);
                for seat in h.store.seats(Some("burst")).await.unwrap() {
                    h.store.revoke(&seat.seat_id, None, None, true).await.unwrap();
                }
                assert_eq!(h.live("burst").await, 0);
            }
            assert_eq!(&answers[0], &answers[1], "at once (left) vs one by one (right): {ops:?}");
            h.finish().await;
        });
    }
}
