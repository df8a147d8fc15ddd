//! The entitlement rules over the in-memory store: a license with a vendor
//! decides by its entitlements at the decision instant, narrowed by the
//! file; versions; the lease cap; seats over a dropped grant leave at their
//! heartbeat; the `expiry` alert. A license without a vendor beside it is
//! untouched.

use std::collections::HashMap;
use std::time::Duration;

use leasehold_common::api::{EventKind, SeatLostReason};
use leasehold_common::entitlement::{Ledger, VendorSigner, decode};
use leasehold_common::policy::{Entitled, InForce};
use leasehold_common::{Licenses, Timestamp};
use serde_json::{Value, json};

use super::{EventThrottle, Rules};
use crate::store::memory::MemoryStore;
use crate::store::{CheckoutOutcome, CheckoutRequest, HeartbeatOutcome};

const NOW_S: i64 = 1_800_000_000;

fn vendor() -> VendorSigner {
    VendorSigner::from_seed(&[9; 32])
}

fn file(extra_license: &str) -> String {
    format!(
        r#"
[[vendor]]
name = "keyright"
public_key = "{}"

[[license]]
id = "cad"
key = "k"
vendor = "keyright"
ttl = "60s"
{extra_license}

[[license]]
id = "plain"
key = "p"
seats = 1
"#,
        vendor().public_key()
    )
}

/// An entitlement of keyright for `cad`, the item's fields from `item`.
fn entitlement(jti: &str, iat: i64, item: Value, top: Value) -> Value {
    let mut c = json!({"iss": "keyright", "jti": jti, "iat": iat,
                       "licenses": [{"id": "cad"}]});
    for (k, v) in item.as_object().unwrap() {
        c["licenses"][0][k] = v.clone();
    }
    for (k, v) in top.as_object().unwrap() {
        c[k] = v.clone();
    }
    c
}

struct World {
    store: MemoryStore,
    licenses: Licenses,
    throttle: EventThrottle,
    now: Timestamp,
}

impl World {
    fn new(extra_license: &str, claims: &[Value]) -> Self {
        let mut w = World {
            store: MemoryStore::default(),
            licenses: Licenses::parse(&file(extra_license)).unwrap(),
            throttle: EventThrottle::default(),
            now: Timestamp::from_millis(NOW_S * 1000),
        };
        w.entitle(claims);
        w
    }

    /// These entitlements in force (as a scan would publish them).
    fn entitle(&mut self, claims: &[Value]) {
        let keys = [vendor().public_key()];
        let es: Vec<_> = claims
            .iter()
            .map(|c| decode(&vendor().sign(c)).unwrap().verify(&keys).unwrap())
            .collect();
        let files = (0..es.len())
            .map(|i| InForce {
                file: format!("{i}.lic"),
                error: None,
            })
            .collect();
        let entitled = Entitled::new(Ledger::new(es, HashMap::new()), files, Vec::new());
        self.licenses = self.licenses.clone().with_entitled(entitled);
    }

    fn run<R>(&mut self, f: impl FnOnce(&mut Rules<'_, MemoryStore>) -> R) -> R {
        let mut rules = Rules::new(
            &mut self.store,
            self.now,
            &self.licenses,
            &mut self.throttle,
        );
        f(&mut rules)
    }

    fn checkout(&mut self, license: &str, holder: &str, version: Option<&str>) -> CheckoutOutcome {
        let req = CheckoutRequest {
            license_id: license.into(),
            holder: holder.into(),
            fingerprint: None,
            idempotency_key: None,
            borrow: None,
            version: version.map(str::to_string),
        };
        self.run(|r| r.checkout(&req, &[], true)).unwrap()
    }

    fn seat(&mut self, holder: &str) -> (String, Timestamp) {
        match self.checkout("cad", holder, None) {
            CheckoutOutcome::Granted { lease, .. } => (lease.seat_id, lease.expires_at),
            other => panic!("not granted: {other:?}"),
        }
    }

    fn heartbeat(&mut self, seat: &str) -> HeartbeatOutcome {
        self.run(|r| r.heartbeat("cad", seat, None)).unwrap()
    }

    fn advance(&mut self, s: u64) {
        self.now = self.now.saturating_add(Duration::from_secs(s));
    }
}

#[test]
fn entitled_seats_add_up_and_the_file_only_narrows() {
    let a = entitlement("a", NOW_S - 60, json!({"seats": 2}), json!({}));
    let b = entitlement("b", NOW_S - 60, json!({"seats": 1}), json!({}));
    let mut w = World::new("", &[a.clone(), b.clone()]);
    for who in ["x", "y", "z"] {
        w.seat(who);
    }
    assert!(matches!(
        w.checkout("cad", "w", None),
        CheckoutOutcome::Full { seats: 3, .. }
    ));
    let mut narrowed = World::new("seats = 2", &[a, b]);
    narrowed.seat("x");
    narrowed.seat("y");
    assert!(matches!(
        narrowed.checkout("cad", "z", None),
        CheckoutOutcome::Full { seats: 2, .. }
    ));
    // The license without a vendor beside it: its own seats, as always.
    assert!(matches!(
        w.checkout("plain", "p", None),
        CheckoutOutcome::Granted { .. }
    ));
    assert!(matches!(
        w.checkout("plain", "q", None),
        CheckoutOutcome::Full { seats: 1, .. }
    ));
}

#[test]
fn nothing_entitled_is_not_entitled_and_versions_are_checked() {
    let mut w = World::new("", &[]);
    assert_eq!(w.checkout("cad", "x", None), CheckoutOutcome::NotEntitled);
    let ranged = entitlement(
        "a",
        NOW_S - 60,
        json!({"seats": 2, "versions": ">=2025.1, <2027"}),
        json!({}),
    );
    w.entitle(&[ranged]);
    let refused = |o: CheckoutOutcome| matches!(o, CheckoutOutcome::VersionNotEntitled { versions } if versions == ">=2025.1, <2027");
    assert!(refused(w.checkout("cad", "x", None)));
    assert!(refused(w.checkout("cad", "x", Some("2027"))));
    assert_eq!(
        w.checkout("cad", "x", Some("2026.x")),
        CheckoutOutcome::InvalidVersion
    );
    assert!(matches!(
        w.checkout("cad", "x", Some("2026.2")),
        CheckoutOutcome::Granted { .. }
    ));
    // A license without a range (or a vendor) ignores the version.
    assert!(matches!(
        w.checkout("plain", "p", Some("nonsense")),
        CheckoutOutcome::Granted { .. }
    ));
}

#[test]
fn no_lease_outlives_the_term_and_grace_then_nothing_is_granted() {
    let exp = NOW_S + 30;
    let term = entitlement(
        "a",
        NOW_S - 60,
        json!({"seats": 2}),
        json!({"exp": exp, "grace": 20}),
    );
    let mut w = World::new("", &[term]);
    let (seat, expires) = w.seat("x");
    assert_eq!(
        expires,
        Timestamp::from_millis(NOW_S * 1000 + 50_000),
        "capped at exp + grace"
    );
    w.advance(35);
    match w.heartbeat(&seat) {
        HeartbeatOutcome::Renewed(row) => {
            assert_eq!(row.expires_at, Timestamp::from_millis((exp + 20) * 1000))
        }
        other => panic!("{other:?}"),
    }
    w.advance(16);
    assert_eq!(w.checkout("cad", "y", None), CheckoutOutcome::NotEntitled);
    // Still live by its expiry and skew, but nothing is entitled: it leaves.
    assert_eq!(
        w.heartbeat(&seat),
        HeartbeatOutcome::Lost(SeatLostReason::Expired)
    );
}

#[test]
fn the_expiry_alert_fires_before_the_drop_and_a_renewal_resolves_it() {
    let alert = "[[license.alert]]\nname = \"cad-expiry\"\nwhen = \"expiry\"\nbefore = \"1m\"\n";
    let exp = NOW_S + 120;
    let term = entitlement("a", NOW_S - 60, json!({"seats": 2}), json!({"exp": exp}));
    let mut w = World::new(alert, &[term]);
    let tick = |w: &mut World| -> Vec<String> {
        let mut rules = Rules::new(&mut w.store, w.now, &w.licenses, &mut w.throttle);
        rules.evaluate_alerts(&HashMap::new()).unwrap();
        rules
            .events
            .iter()
            .filter(|e| e.kind == EventKind::Alert)
            .map(|e| e.detail.clone().unwrap())
            .collect()
    };
    assert!(tick(&mut w).is_empty(), "two minutes ahead: quiet");
    w.advance(61);
    assert_eq!(tick(&mut w), vec!["firing cad-expiry"]);
    assert!(tick(&mut w).is_empty(), "once per episode");
    // A renewal (same id, newer, a year on) moves the drop past `before`.
    let renewed = entitlement(
        "a",
        NOW_S + 61,
        json!({"seats": 2}),
        json!({"exp": exp + 31_536_000}),
    );
    w.entitle(&[renewed]);
    assert_eq!(tick(&mut w), vec!["resolved cad-expiry"]);
}

#[test]
fn seats_over_a_dropped_grant_leave_newest_first_at_their_heartbeat() {
    let three = entitlement("a", NOW_S - 60, json!({"seats": 3}), json!({}));
    let mut w = World::new("", &[three]);
    let mut seats = Vec::new();
    for holder in ["old", "mid", "new"] {
        seats.push(w.seat(holder).0);
        w.advance(1);
    }
    w.entitle(&[entitlement("a", NOW_S - 30, json!({"seats": 1}), json!({}))]);
    w.advance(1);
    // The oldest renews; the two newest are over the count and leave.
    assert!(matches!(
        w.heartbeat(&seats[0]),
        HeartbeatOutcome::Renewed(_)
    ));
    assert_eq!(
        w.heartbeat(&seats[2]),
        HeartbeatOutcome::Lost(SeatLostReason::Expired)
    );
    assert_eq!(
        w.heartbeat(&seats[1]),
        HeartbeatOutcome::Lost(SeatLostReason::Expired)
    );
    let live = w.run(|r| r.live_counts()).unwrap();
    let cad = live.iter().find(|(id, _)| id == "cad").unwrap();
    assert_eq!(cad.1.live, 1);
    assert!(w.store.events.iter().any(|e| e.kind == EventKind::Lost));
}

#[test]
fn reserves_shrink_from_the_last_group_to_fit_the_entitled_seats() {
    let groups = "[[license.group]]\nname = \"a\"\nholders = [\"a*\"]\nreserve = 2\n\
                  [[license.group]]\nname = \"b\"\nholders = [\"b*\"]\nreserve = 2\n";
    let two = entitlement("a", NOW_S - 60, json!({"seats": 3}), json!({}));
    let w = World::new(&format!("seats = 4\n{groups}"), &[two]);
    let lic = w.licenses.get("cad").unwrap();
    let effective = super::effective(&w.licenses, lic, w.now);
    let reserves: Vec<u32> = effective.lic.groups.iter().map(|g| g.reserve).collect();
    assert_eq!((effective.lic.policy.seats, reserves), (3, vec![2, 1]));
}
