//! The webhook outbox and the alerts across two replicas of one PostgreSQL
//! database (two store handles, each with its own writer, deciding on one
//! manual clock): they claim disjoint sets of deliveries, an alert's
//! transition happens once (one event, one delivery per webhook) when both
//! evaluate at once, a claim left by a replica that died is taken by the
//! other after `CLAIM_FOR`, and a forwarded event's body carries the id the
//! commit gave it. PostgreSQL only, whatever `LEASEHOLD_TEST_STORE` says.

#[allow(dead_code)] // each test binary uses a part of it
mod support;

use std::collections::HashSet;
use std::sync::Arc;

use leasehold_common::Licenses;
use leasehold_common::alerts::{DeliveryStatus, DeliveryType};
use leasehold_common::api::EventKind;
use leasehold_server::clock::ManualClock;
use leasehold_server::licenses::LicensesHandle;
use leasehold_server::store::outbox::{CLAIM_FOR, DeliveriesQuery, DeliveryRow};
use leasehold_server::store::{CheckoutOutcome, CheckoutRequest, Store};
use support::{NO_STALL, TestDb, at};

const LICENSES: &str = r#"
[[webhook]]
name = "ops"
url = "http://127.0.0.1:9/ops"
secret = "a-long-random-string"
events = ["checkout"]

[[webhook]]
name = "team"
url = "http://127.0.0.1:9/team"
secret = "another-long-random-string"
format = "slack"

[[license]]
id = "tiny"
key = "tiny-key"
seats = 1
ttl = "60s"
skew = "5s"
reap_grace = "15s"

[[license.alert]]
name = "tiny-full"
when = "full"
for = "2s"

[[license.alert]]
name = "tiny-denied"
when = "denials"
count = 1
within = "1m"

[[license]]
id = "wide"
key = "wide-key"
seats = 50
ttl = "60s"
skew = "5s"
reap_grace = "15s"
"#;

/// Two replicas of one database, on one manual clock.
struct Replicas {
    clock: Arc<ManualClock>,
    a: Store,
    b: Store,
    _db: TestDb,
}

impl Replicas {
    fn start() -> Replicas {
        let db = TestDb::postgres();
        let clock = ManualClock::new(at(0));
        let open = || {
            let licenses = LicensesHandle::new(Licenses::parse(LICENSES).unwrap());
            db.open(LICENSES, &licenses, &clock, NO_STALL).unwrap()
        };
        let (a, b) = (open(), open());
        Replicas {
            clock,
            a,
            b,
            _db: db,
        }
    }

    fn set(&self, offset_ms: i64) {
        self.clock.set(at(offset_ms));
    }

    async fn all_deliveries(&self) -> Vec<DeliveryRow> {
        self.a
            .deliveries_page(DeliveriesQuery {
                limit: 1_000,
                ..DeliveriesQuery::default()
            })
            .await
            .unwrap()
    }
}

fn req(license: &str, holder: &str) -> CheckoutRequest {
    CheckoutRequest {
        license_id: license.into(),
        holder: holder.into(),
        fingerprint: None,
        idempotency_key: None,
        borrow: None,
        version: None,
    }
}

#[tokio::test]
async fn two_replicas_claim_disjoint_sets() {
    let r = Replicas::start();
    let mut queued = HashSet::new();
    for i in 0..24 {
        let on = if i % 2 == 0 { &r.a } else { &r.b };
        queued.insert(on.queue_test_delivery("ops".into()).await.unwrap());
    }
    let (mut by_a, mut by_b) = (Vec::new(), Vec::new());
    loop {
        let (a, b) = tokio::join!(r.a.claim_deliveries(3), r.b.claim_deliveries(3));
        let (a, b) = (a.unwrap(), b.unwrap());
        if a.is_empty() && b.is_empty() {
            break;
        }
        by_a.extend(a.into_iter().map(|d| d.id));
        by_b.extend(b.into_iter().map(|d| d.id));
    }
    let a: HashSet<_> = by_a.iter().cloned().collect();
    let b: HashSet<_> = by_b.iter().cloned().collect();
    assert_eq!(a.len(), by_a.len(), "A claimed one twice");
    assert_eq!(b.len(), by_b.len(), "B claimed one twice");
    assert!(a.is_disjoint(&b), "both claimed {:?}", a.intersection(&b));
    let all: HashSet<_> = a.union(&b).cloned().collect();
    assert_eq!(all, queued);
    assert!(!r.a.deliveries_due(at(0)).await.unwrap());
}

/// Both replicas evaluate at once, each transition in turn: the first
/// state of an alert (no row yet), firing after `for`, resolving.
#[tokio::test]
async fn an_alert_transition_happens_once_when_both_evaluate() {
    let r = Replicas::start();
    let seat = match r.a.checkout(req("tiny", "alice")).await.unwrap() {
        CheckoutOutcome::Granted { lease, .. } => lease,
        other => panic!("{other:?}"),
    };
    // A denial: `tiny-denied` fires at its first evaluation, `tiny-full`
    // starts holding.
    let refused = r.b.checkout(req("tiny", "bob")).await.unwrap();
    assert!(!matches!(refused, CheckoutOutcome::Granted { .. }));
    let both = || async {
        let (a, b) = tokio::join!(r.a.tick(), r.b.tick());
        a.unwrap();
        b.unwrap();
    };
    both().await;
    r.set(2_000);
    both().await;
    both().await;
    assert!(r.a.release("tiny", &seat.seat_id).await.unwrap());
    r.set(61_000);
    both().await;
    both().await;

    let events = r.a.events_after(0, 1_000).await.unwrap();
    let mut transitions: Vec<&str> = events
        .iter()
        .filter(|e| e.kind == EventKind::Alert)
        .filter_map(|e| e.detail.as_deref())
        .collect();
    transitions.sort();
    assert_eq!(
        transitions,
        [
            "firing tiny-denied",
            "firing tiny-full",
            "resolved tiny-denied",
            "resolved tiny-full"
        ]
    );
    let deliveries = r.all_deliveries().await;
    let mut alerts: Vec<(String, DeliveryType)> = deliveries
        .iter()
        .filter(|d| d.view.kind != DeliveryType::Event)
        .map(|d| (d.view.webhook.clone(), d.view.kind))
        .collect();
    alerts.sort_by_key(|(w, k)| (w.clone(), k.as_str()));
    let each = [
        DeliveryType::AlertFiring,
        DeliveryType::AlertFiring,
        DeliveryType::AlertResolved,
        DeliveryType::AlertResolved,
    ];
    let want: Vec<(String, DeliveryType)> = ["ops", "team"]
        .into_iter()
        .flat_map(|w| each.iter().map(move |k| (w.to_string(), *k)))
        .collect();
    assert_eq!(alerts, want);
    let states = r.b.alert_states().await.unwrap();
    assert_eq!(states.len(), 2);
    assert!(states.iter().all(|s| s.firing_since.is_none()));
}

#[tokio::test]
async fn a_claim_left_by_a_dead_replica_is_taken_after_claim_for() {
    let r = Replicas::start();
    let id = r.a.queue_test_delivery("team".into()).await.unwrap();
    let claimed = r.a.claim_deliveries(8).await.unwrap();
    assert_eq!(claimed.len(), 1);
    assert_eq!(claimed[0].id, id);
    // A dies with its claim.
    r.a.close().await;
    let claim_ms = CLAIM_FOR.as_millis() as i64;
    assert!(r.b.claim_deliveries(8).await.unwrap().is_empty());
    r.set(claim_ms - 1);
    assert!(!r.b.deliveries_due(at(claim_ms - 1)).await.unwrap());
    assert!(r.b.claim_deliveries(8).await.unwrap().is_empty());
    r.set(claim_ms);
    assert!(r.b.deliveries_due(at(claim_ms)).await.unwrap());
    let taken = r.b.claim_deliveries(8).await.unwrap();
    assert_eq!(taken.len(), 1);
    assert_eq!(taken[0].id, id);
    assert_eq!(taken[0].attempts, 0);
    assert_eq!(taken[0].body, claimed[0].body, "the same bytes");
    let record = r.b.record_attempt(taken[0].clone(), Ok(())).await.unwrap();
    assert_eq!(record.status, DeliveryStatus::Delivered);
    let stats = r.b.webhook_stats().await.unwrap();
    assert_eq!(stats.len(), 1);
    assert_eq!((stats[0].pending, stats[0].delivered), (0, 1));
    assert_eq!(stats[0].last_success_at, Some(at(claim_ms)));
}

/// Checkouts on both replicas at once, batched as they come: each
/// forwarded event's body names the id its commit gave it.
#[tokio::test]
async fn a_forwarded_event_carries_the_id_its_commit_gave_it() {
    let r = Replicas::start();
    let mut calls = Vec::new();
    for i in 0..20 {
        let on = if i % 2 == 0 { &r.a } else { &r.b };
        calls.push(on.checkout(req("wide", &format!("h{i}"))));
    }
    for outcome in futures_util::future::join_all(calls).await {
        assert!(matches!(outcome.unwrap(), CheckoutOutcome::Granted { .. }));
    }
    let events = r.a.events_after(0, 1_000).await.unwrap();
    let mut seen = 0;
    loop {
        let due = r.b.claim_deliveries(8).await.unwrap();
        if due.is_empty() {
            break;
        }
        for d in due {
            let body: serde_json::Value = serde_json::from_str(&d.body).unwrap();
            let id = body["event"]["id"].as_i64().unwrap();
            let event = events.iter().find(|e| e.id == id).unwrap();
            assert_eq!(body["event"]["seat_id"].as_str(), event.seat_id.as_deref());
            assert_eq!(body["event"]["kind"], "checkout");
            seen += 1;
        }
    }
    assert_eq!(seen, 20);
}
