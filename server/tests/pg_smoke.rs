use std::sync::Arc;
use std::time::Duration;

use leasehold_common::{Licenses, Timestamp};
use leasehold_server::clock::ManualClock;
use leasehold_server::licenses::LicensesHandle;
use leasehold_server::store::pg::writer::DecisionClock;
use leasehold_server::store::pg::{self, ReplicaIdentity};
use leasehold_server::store::{
    CheckoutOutcome, CheckoutRequest, HeartbeatOutcome, Store, StoreOptions,
};
use leasehold_testkit::postgres::PgCluster;

const LICENSES: &str = r#"
[[license]]
id = "cad"
key = "cad-key"
seats = 2
ttl = "60s"
skew = "5s"
reap_grace = "15s"
"#;

#[tokio::test(flavor = "multi_thread")]
async fn smoke() {
    let url = PgCluster::shared().create_database();
    let config = pg::config(&url).unwrap();
    let licenses = Licenses::parse(LICENSES).unwrap();
    let identity = ReplicaIdentity {
        signing_kid: "k".into(),
        admin_token_sha256: "t".into(),
    };
    let start = pg::prepare(&config, &identity, LICENSES, &licenses).unwrap();
    let clock = ManualClock::new(Timestamp::from_millis(1_800_000_000_000));
    let handle = LicensesHandle::new(licenses);
    let store = Store::open_postgres(
        config,
        DecisionClock::Injected(clock.clone()),
        start,
        handle,
        StoreOptions {
            stall_threshold: Duration::from_secs(3600),
            ..StoreOptions::default()
        },
    )
    .unwrap();
    let mut events = store.subscribe();
    let req = |h: &str| CheckoutRequest {
        license_id: "cad".into(),
        holder: h.into(),
        fingerprint: Some(h.into()),
        idempotency_key: None,
    };
    let CheckoutOutcome::Granted { lease, .. } = store.checkout(req("a")).await.unwrap() else {
        panic!()
    };
    let _ = store.checkout(req("b")).await.unwrap();
    let full = store.checkout(req("c")).await.unwrap();
    assert!(
        matches!(full, CheckoutOutcome::Full { live: 2, .. }),
        "{full:?}"
    );
    clock.advance(Duration::from_secs(10));
    let hb = store.heartbeat("cad", &lease.seat_id).await.unwrap();
    assert!(matches!(hb, HeartbeatOutcome::Renewed(_)));
    assert!(store.release("cad", &lease.seat_id).await.unwrap());
    clock.advance(Duration::from_secs(200));
    assert_eq!(store.reap(100).await.unwrap(), 1);
    let seats = store.seats(None).await.unwrap();
    assert!(seats.is_empty());
    let all = store.events_after(0, 100).await.unwrap();
    let ids: Vec<i64> = all.iter().map(|e| e.id).collect();
    assert_eq!(ids, (1..=ids.len() as i64).collect::<Vec<_>>(), "{all:?}");
    let first = tokio::time::timeout(Duration::from_secs(3), events.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(first.id, 1, "{first:?}");
    assert_eq!(first.kind, leasehold_common::api::EventKind::Checkout);
    store.close().await;
    let _ = Arc::new(());
}
