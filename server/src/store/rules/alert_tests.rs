//! The alert state machine and the outbox, over the in-memory store: each
//! transition once, an `alert` event and a delivery per webhook with it,
//! events forwarded by kind, the retry schedule as stored.

use std::collections::HashMap;
use std::time::Duration;

use leasehold_common::alerts::{DeliveryBody, DeliveryStatus, DeliveryType};
use leasehold_common::api::{Event, EventKind};
use leasehold_common::{Licenses, Timestamp};

use super::{EventThrottle, Rules};
use crate::store::CheckoutOutcome;
use crate::store::CheckoutRequest;
use crate::store::memory::MemoryStore;

const FILE: &str = r#"
[[webhook]]
name = "ops"
url = "http://127.0.0.1:9/hook"
secret = "0123456789abcdef"
events = ["revoke"]

[[webhook]]
name = "chat"
url = "http://127.0.0.1:9/chat"
secret = "0123456789abcdef"
format = "slack"

[[license]]
id = "cad"
key = "k"
seats = 2
ttl = "60s"

[[license.alert]]
name = "cad-busy"
when = "usage"
percent = 50
for = "10s"

[[license.alert]]
name = "cad-full"
when = "full"
for = "5s"
webhooks = ["chat"]

[[license.alert]]
name = "cad-denied"
when = "denials"
count = 2
within = "1m"
webhooks = ["ops"]
"#;

struct World {
    store: MemoryStore,
    licenses: Licenses,
    throttle: EventThrottle,
    now: Timestamp,
}

impl World {
    fn new() -> Self {
        World {
            store: MemoryStore::default(),
            licenses: Licenses::parse(FILE).unwrap(),
            throttle: EventThrottle::default(),
            now: Timestamp::from_millis(1_000_000_000),
        }
    }

    fn run<R>(&mut self, f: impl FnOnce(&mut Rules<'_, MemoryStore>) -> R) -> (R, Vec<Event>) {
        let mut rules = Rules::new(
            &mut self.store,
            self.now,
            &self.licenses,
            &mut self.throttle,
        );
        let r = f(&mut rules);
        (r, rules.events)
    }

    fn tick(&mut self) -> Vec<String> {
        let (r, events) = self.run(|r| r.evaluate_alerts(&HashMap::new()));
        r.unwrap();
        events
            .iter()
            .map(|e| {
                assert_eq!(e.kind, EventKind::Alert);
                e.detail.clone().unwrap()
            })
            .collect()
    }

    fn checkout(&mut self, holder: &str) -> CheckoutOutcome {
        let req = CheckoutRequest {
            license_id: "cad".into(),
            holder: holder.into(),
            fingerprint: None,
            idempotency_key: None,
            borrow: None,
            version: None,
        };
        self.run(|r| r.checkout(&req, &[], true)).0.unwrap()
    }

    fn seat(outcome: CheckoutOutcome) -> String {
        match outcome {
            CheckoutOutcome::Granted { lease, .. } => lease.seat_id,
            other => panic!("not granted: {other:?}"),
        }
    }

    fn advance(&mut self, s: u64) {
        self.now = self.now.saturating_add(Duration::from_secs(s));
    }

    fn bodies(&self, webhook: &str) -> Vec<String> {
        self.store
            .deliveries
            .iter()
            .filter(|d| d.delivery.webhook == webhook)
            .map(|d| d.delivery.body.clone())
            .collect()
    }
}

#[test]
fn usage_fires_once_after_its_for_and_resolves_once() {
    let mut w = World::new();
    assert!(w.tick().is_empty());
    let a = World::seat(w.checkout("alice"));
    assert!(w.tick().is_empty(), "holds, but not yet for 10 s");
    w.advance(9);
    assert!(w.tick().is_empty());
    w.advance(1);
    assert_eq!(w.tick(), ["firing cad-busy"]);
    w.advance(1);
    assert!(w.tick().is_empty(), "never twice while it fires");

    // Every webhook by default: one delivery each, same sentence.
    let ops = w.bodies("ops");
    assert_eq!(ops.len(), 1);
    let body: DeliveryBody = serde_json::from_str(&ops[0]).unwrap();
    assert_eq!(body.kind, DeliveryType::AlertFiring);
    assert_eq!(body.license_id.as_deref(), Some("cad"));
    assert_eq!(body.alert.as_ref().unwrap().percent, Some(50));
    assert!(body.event.is_none());
    assert_eq!(
        body.text,
        "cad-busy firing: 1 of 2 seats on cad in use (at least 50 %) for 10s"
    );
    assert_eq!(body.id, w.store.deliveries[0].delivery.id);
    let chat = w.bodies("chat");
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&chat[0]).unwrap(),
        serde_json::json!({ "text": body.text }),
        "slack: the same sentence, byte for byte"
    );

    w.run(|r| r.release("cad", &a)).0.unwrap();
    assert_eq!(w.tick(), ["resolved cad-busy"]);
    assert!(w.tick().is_empty());
    let resolved: DeliveryBody = serde_json::from_str(&w.bodies("ops")[1]).unwrap();
    assert_eq!(resolved.kind, DeliveryType::AlertResolved);
    assert!(
        resolved.text.starts_with("cad-busy resolved: "),
        "{}",
        resolved.text
    );
}

#[test]
fn a_condition_broken_before_its_for_starts_over() {
    let mut w = World::new();
    let a = World::seat(w.checkout("alice"));
    w.tick();
    w.advance(8);
    w.run(|r| r.release("cad", &a)).0.unwrap();
    assert!(w.tick().is_empty());
    World::seat(w.checkout("alice"));
    w.advance(1);
    assert!(w.tick().is_empty());
    w.advance(9);
    assert!(w.tick().is_empty(), "9 s since it held again");
    w.advance(1);
    assert_eq!(w.tick(), ["firing cad-busy"]);
}

#[test]
fn full_counts_every_seat_and_goes_only_to_its_webhooks() {
    let mut w = World::new();
    World::seat(w.checkout("a"));
    World::seat(w.checkout("b"));
    w.tick();
    w.advance(5);
    let fired = w.tick();
    assert!(fired.contains(&"firing cad-full".to_string()), "{fired:?}");
    let full: Vec<String> = w
        .bodies("chat")
        .into_iter()
        .filter(|b| b.contains("cad-full"))
        .collect();
    assert_eq!(
        full,
        [r#"{"text":"cad-full firing: no free seat on cad for 5s"}"#]
    );
    assert!(
        !w.bodies("ops").iter().any(|b| b.contains("cad-full")),
        "webhooks = [\"chat\"] only"
    );
}

#[test]
fn denials_fire_at_the_count_within_the_window_and_resolve_as_it_empties() {
    let mut w = World::new();
    World::seat(w.checkout("a"));
    World::seat(w.checkout("b"));
    assert!(matches!(w.checkout("c"), CheckoutOutcome::Full { .. }));
    let ticks = w.tick();
    assert!(!ticks.iter().any(|t| t.contains("cad-denied")), "{ticks:?}");
    w.advance(30);
    assert!(matches!(w.checkout("c"), CheckoutOutcome::Full { .. }));
    assert!(w.tick().contains(&"firing cad-denied".to_string()));
    w.advance(29);
    assert!(!w.tick().iter().any(|t| t.contains("cad-denied")));
    w.advance(1);
    assert!(
        w.tick().contains(&"resolved cad-denied".to_string()),
        "the first denial left the minute"
    );
}

#[test]
fn an_alert_removed_from_the_file_is_forgotten_without_a_transition() {
    let mut w = World::new();
    World::seat(w.checkout("a"));
    w.tick();
    w.advance(10);
    assert_eq!(w.tick(), ["firing cad-busy"]);
    w.licenses =
        Licenses::parse(&FILE.replace("name = \"cad-busy\"", "name = \"renamed\"")).unwrap();
    w.tick();
    assert!(!w.store.alert_states.contains_key("cad-busy"));
    assert!(w.store.alert_states.contains_key("renamed"));
}

#[test]
fn events_are_forwarded_by_kind_in_the_same_command() {
    let mut w = World::new();
    let seat = World::seat(w.checkout("alice"));
    assert!(
        w.store.deliveries.is_empty(),
        "checkout is not a kind any webhook forwards"
    );
    let (r, events) = w.run(|r| r.revoke(&seat, Some("stuck".into()), None, false));
    r.unwrap();
    let revoke = events.iter().find(|e| e.kind == EventKind::Revoke).unwrap();
    let ops = w.bodies("ops");
    assert_eq!(ops.len(), 1, "ops forwards revoke");
    assert!(w.bodies("chat").is_empty(), "chat forwards nothing");
    let body: DeliveryBody = serde_json::from_str(&ops[0]).unwrap();
    assert_eq!(body.kind, DeliveryType::Event);
    assert_eq!(body.event.as_ref(), Some(revoke));
    assert!(body.text.starts_with("revoke on cad"), "{}", body.text);
}

#[test]
fn attempts_follow_the_schedule_and_a_removed_webhook_fails_at_once() {
    let mut w = World::new();
    let id = w.run(|r| r.queue_test("ops")).0.unwrap();
    assert!(matches!(
        w.run(|r| r.queue_test("nope")).0,
        Err(crate::store::StoreError::UnknownWebhook(_))
    ));
    let due = w.run(|r| r.claim_deliveries(8)).0.unwrap();
    assert_eq!(due.len(), 1);
    assert_eq!(due[0].id, id);
    assert!(
        w.run(|r| r.claim_deliveries(8)).0.unwrap().is_empty(),
        "claimed"
    );

    let record = w
        .run(|r| r.record_attempt(&due[0], Err("HTTP 500".into())))
        .0
        .unwrap();
    assert_eq!(record.status, DeliveryStatus::Pending);
    assert!(
        w.run(|r| r.claim_deliveries(8)).0.unwrap().is_empty(),
        "due in 1 s"
    );
    w.advance(1);
    let again = w.run(|r| r.claim_deliveries(8)).0.unwrap();
    assert_eq!(again[0].attempts, 1);
    assert_eq!(
        again[0].body, due[0].body,
        "the same bytes on every attempt"
    );

    w.licenses = Licenses::parse(
        &FILE
            .replace("name = \"ops\"", "name = \"other\"")
            .replace("webhooks = [\"ops\"]", "webhooks = [\"other\"]"),
    )
    .unwrap();
    let record = w
        .run(|r| r.record_attempt(&again[0], Err("x".into())))
        .0
        .unwrap();
    assert_eq!(record.status, DeliveryStatus::Failed);
    assert!(
        record
            .error
            .unwrap()
            .contains("no longer in the licenses file")
    );
}

#[test]
fn full_counts_the_waiters_in_line_as_spoken_for() {
    let mut w = World::new();
    World::seat(w.checkout("a"));
    let line = HashMap::from([(
        "cad".to_string(),
        vec![crate::store::Waiter {
            holder: "b".into(),
            fingerprint: None,
        }],
    )]);
    let full_after_5s = |w: &mut World, waiting: &HashMap<String, Vec<crate::store::Waiter>>| {
        w.run(|r| r.evaluate_alerts(waiting)).0.unwrap();
        w.advance(5);
        let (r, events) = w.run(|r| r.evaluate_alerts(waiting));
        r.unwrap();
        events
            .iter()
            .any(|e| e.detail.as_deref() == Some("firing cad-full"))
    };
    assert!(
        !full_after_5s(&mut w, &HashMap::new()),
        "one seat of two is free"
    );
    assert!(full_after_5s(&mut w, &line), "the waiter ahead takes it");
}
