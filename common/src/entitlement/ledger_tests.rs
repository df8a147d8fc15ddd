//! The ledger against the brief's rules, and a property test of
//! `next_drop` against a second-by-second scan.

use std::collections::HashMap;

use ed25519_dalek::SigningKey;
use proptest::prelude::*;
use serde_json::{Value, json};

use super::*;

const T: i64 = 1_800_000_000; // seconds
fn ms(s: i64) -> i64 {
    s * 1000
}

fn entitlement(claims: Value) -> Entitlement {
    let key = SigningKey::from_bytes(&[7; 32]);
    let vendor = VendorKey::parse(&{
        use base64::Engine;
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(key.verifying_key().as_bytes())
    })
    .unwrap();
    decode(&sign(&key, &claims))
        .unwrap()
        .verify(&[vendor])
        .unwrap()
}

fn cad(jti: &str, iat: i64, seats: u32, extra: Value) -> Entitlement {
    let mut c = json!({"iss": "keyright", "jti": jti, "iat": iat,
                       "licenses": [{"id": "cad", "seats": seats}]});
    for (k, v) in extra.as_object().unwrap() {
        c[k] = v.clone();
    }
    entitlement(c)
}

fn ledger(es: Vec<Entitlement>) -> Ledger {
    Ledger::new(es, HashMap::new())
}

#[test]
fn different_ids_add_up_and_a_term_ends() {
    let l = ledger(vec![
        cad("perpetual", T - 100, 10, json!({})),
        cad("until-march", T - 100, 5, json!({"exp": T + 3600})),
    ]);
    let now = l.grant("keyright", "cad", ms(T));
    assert_eq!(now.seats, 15);
    assert_eq!(now.lease_cap_ms, None, "a perpetual one grants: no cap");
    assert_eq!(l.grant("keyright", "cad", ms(T + 3600)).seats, 10);
    assert_eq!(l.next_drop("keyright", "cad", ms(T)), Some(ms(T + 3600)));
    assert_eq!(l.next_drop("keyright", "cad", ms(T + 3600)), None);
    assert_eq!(
        l.grant("other", "cad", ms(T)).seats,
        0,
        "another vendor's license"
    );
    assert_eq!(l.grant("keyright", "ide", ms(T)), Grant::default());
}

#[test]
fn grace_grants_as_usual_and_caps_the_lease() {
    let l = ledger(vec![cad(
        "acme",
        T - 100,
        4,
        json!({"exp": T, "grace": 600}),
    )]);
    let before = l.grant("keyright", "cad", ms(T - 1));
    assert!(!before.in_grace);
    assert_eq!(before.lease_cap_ms, Some(ms(T + 600)));
    let grace = l.grant("keyright", "cad", ms(T));
    assert!(grace.in_grace && grace.seats == 4);
    assert_eq!(l.states(ms(T)), [State::Grace]);
    assert_eq!(l.states(ms(T + 600)), [State::Ended]);
    assert!(!l.grant("keyright", "cad", ms(T + 600)).is_entitled());
}

#[test]
fn a_renewal_replaces_from_its_nbf_and_never_adds() {
    let old = cad("acme", T - 1000, 10, json!({"exp": T + 100}));
    let renewal = cad(
        "acme",
        T - 10,
        12,
        json!({"nbf": T + 50, "exp": T + 99_999}),
    );
    let l = ledger(vec![old, renewal]);
    assert_eq!(
        l.grant("keyright", "cad", ms(T)).seats,
        10,
        "the old one until nbf"
    );
    assert_eq!(l.states(ms(T)), [State::Active, State::NotYet]);
    assert_eq!(l.grant("keyright", "cad", ms(T + 50)).seats, 12, "never 22");
    assert_eq!(l.states(ms(T + 50)), [State::Replaced, State::Active]);
    // The renewal installed moves the drop past the old term's end.
    assert_eq!(l.next_drop("keyright", "cad", ms(T)), Some(ms(T + 99_999)));
}

#[test]
fn the_store_remembers_a_newer_one_after_its_file_is_gone() {
    let old = cad("acme", T - 1000, 50, json!({}));
    let newest = HashMap::from([(
        ("keyright".to_string(), "acme".to_string()),
        Newest {
            iat: T - 10,
            nbf: None,
        },
    )]);
    let l = Ledger::new(vec![old], newest);
    assert_eq!(l.states(ms(T)), [State::Replaced]);
    assert_eq!(l.grant("keyright", "cad", ms(T)).seats, 0);
}

#[test]
fn a_tombstone_withdraws_and_the_same_claims_count_once() {
    let tomb = entitlement(json!({"iss": "keyright", "jti": "acme", "iat": T, "licenses": []}));
    let l = ledger(vec![cad("acme", T - 5, 10, json!({})), tomb]);
    assert_eq!(l.grant("keyright", "cad", ms(T)).seats, 0);
    let twice = ledger(vec![cad("a", T, 3, json!({})), cad("a", T, 3, json!({}))]);
    assert_eq!(twice.grant("keyright", "cad", ms(T)).seats, 3);
}

#[test]
fn the_newest_range_decides_and_a_differing_one_is_a_conflict() {
    let item = |range: &str| json!([{"id": "cad", "seats": 5, "versions": range}]);
    let older = entitlement(
        json!({"iss": "keyright", "jti": "a", "iat": T - 10, "licenses": item(">=2025, <2026")}),
    );
    let newer = entitlement(
        json!({"iss": "keyright", "jti": "b", "iat": T, "licenses": item(">=2026, <2027")}),
    );
    let l = ledger(vec![older, newer]);
    let g = l.grant("keyright", "cad", ms(T));
    assert_eq!(g.seats, 5);
    assert_eq!(g.versions.unwrap().to_string(), ">=2026, <2027");
    assert_eq!(g.from, ["b"]);
    assert_eq!(l.states(ms(T)), [State::Conflict, State::Active]);
}

#[test]
fn overage_adds_and_borrowing_takes_the_largest_of_each() {
    let l = ledger(vec![
        entitlement(
            json!({"iss": "keyright", "jti": "a", "iat": T, "licenses": [
            {"id": "cad", "seats": 2, "overage": 1, "borrow": {"max": 3600, "seats": 1}}]}),
        ),
        entitlement(
            json!({"iss": "keyright", "jti": "b", "iat": T, "licenses": [
            {"id": "cad", "seats": 2, "overage": 2, "borrow": {"max": 60, "seats": 4}}]}),
        ),
        cad("c", T, 1, json!({})),
    ]);
    let g = l.grant("keyright", "cad", ms(T));
    assert_eq!((g.seats, g.overage), (5, 3));
    assert_eq!(
        g.borrow,
        Some(BorrowGrant {
            max_s: 3600,
            seats: 4
        })
    );
    assert!(
        ledger(vec![cad("c", T, 1, json!({}))])
            .grant("keyright", "cad", ms(T))
            .borrow
            .is_none()
    );
}

fn arb_entitlement() -> impl Strategy<Value = Entitlement> {
    (
        0..3u8,
        0..40i64,
        1..20u32,
        proptest::option::of(0..60i64),
        proptest::option::of(1..60i64),
        0..20i64,
    )
        .prop_map(|(jti, iat, seats, nbf, len, grace)| {
            let mut c = json!({"iss": "keyright", "jti": format!("j{jti}"), "iat": T + iat,
                               "licenses": [{"id": "cad", "seats": seats}]});
            if let Some(nbf) = nbf {
                c["nbf"] = json!(T + nbf);
            }
            if let Some(len) = len {
                c["exp"] = json!(T + nbf.unwrap_or(0) + len);
                c["grace"] = json!(grace);
            }
            entitlement(c)
        })
}

proptest! {
    /// `next_drop` is the first second at which the seats are fewer than
    /// a second before, found by scanning every second.
    #[test]
    fn next_drop_is_the_first_fall_of_a_scan(
        es in proptest::collection::vec(arb_entitlement(), 0..5),
        from in 0..100i64,
    ) {
        let l = ledger(es);
        let seats = |s: i64| l.grant("keyright", "cad", ms(T + s)).seats;
        let scanned = (from + 1..200).find(|&s| seats(s) < seats(s - 1)).map(|s| ms(T + s));
        prop_assert_eq!(l.next_drop("keyright", "cad", ms(T + from)), scanned);
        // Granting entitlements never outlast the cap they set.
        let g = l.grant("keyright", "cad", ms(T + from));
        if let Some(cap) = g.lease_cap_ms {
            prop_assert!(cap > ms(T + from));
        }
    }
}
