//! The term: no lease outlives its license's entitlements, a term's end
//! takes every seat back and grants nothing more, and a grace period
//! grants on, marked on the lease (JSON and token) and in the views.

use std::time::Duration;

use leasehold_common::api::Lease;
use leasehold_common::token::{Jwks, verify};
use leasehold_tests::vendor::{Vendor, unix_now};
use serde_json::{Value, json};

use crate::{KEYRIGHT, Rig, claims, grant, millis, vendor_license};

/// `cad` with a 3 s TTL: heartbeats come often, so a lease's expiry meets
/// the term's end. The 2 s skew keeps a lease capped at `exp` live a
/// moment after it, so its next heartbeat hears why it is lost (`expired`:
/// the term ended) rather than that it lapsed.
fn short_ttl_license() -> String {
    "\n[[license]]\nid = \"cad\"\nkey = \"cad-key\"\nvendor = \"keyright\"\n\
     ttl = \"3s\"\nskew = \"2s\"\nreap_grace = \"5s\"\n"
        .to_string()
}

/// Heartbeats `seat` every 250 ms until it is refused (at most until
/// `until_s`): every renewal's `expires_at` must be at most `cap_ms`;
/// returns the refusal's (status, body) and whether a renewal was capped
/// (its `expires_at` exactly `cap_ms`).
async fn heartbeat_until_refused(
    rig: &Rig,
    seat: &str,
    cap_ms: i64,
    until_s: i64,
) -> ((u16, Value), bool) {
    let mut capped = false;
    loop {
        let (status, lease) = rig.heartbeat("cad", seat).await;
        if status != 200 {
            return ((status, lease), capped);
        }
        let expires = millis(&lease["expires_at"]);
        assert!(expires <= cap_ms, "a renewal past the term: {lease}");
        capped |= expires == cap_ms;
        assert!(unix_now() < until_s, "still renewed long after the term");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// A term ending seconds ahead: every lease's `expires_at` is at most the
/// term's `exp` (a renewal near the end is capped to it exactly), the
/// lease says when the seats drop; after `exp`, heartbeats are `410
/// seat_lost` (reason `expired`), checkouts `403 not_entitled`, the file
/// shows `ended` and an `ended` event is recorded.
#[tokio::test]
async fn no_lease_outlives_the_term_and_its_end_takes_every_seat() {
    let v = Vendor::generate(KEYRIGHT);
    let licenses = format!("{}{}", v.toml(), short_ttl_license());
    let rig = Rig::start(&licenses, &[]).await;
    let exp = unix_now() + 8;
    let mut term = claims("acme", unix_now(), grant("cad", 2));
    term["exp"] = json!(exp);
    rig.put("acme.lic", &v.sign(&term));
    rig.wait_file("acme.lic", &["active"]).await;
    let cap_ms = exp * 1000;

    let (status, lease) = rig.checkout("cad", "ann", json!({})).await;
    assert_eq!(status, 201, "{lease}");
    assert!(millis(&lease["expires_at"]) <= cap_ms, "{lease}");
    assert_eq!(millis(&lease["entitlement_ends_at"]), cap_ms, "{lease}");
    assert!(lease.get("grace").is_none(), "not in grace: {lease}");
    let seat = lease["seat_id"].as_str().unwrap().to_string();

    let ((status, body), capped) = heartbeat_until_refused(&rig, &seat, cap_ms, exp + 15).await;
    assert_eq!(status, 410, "{body}");
    assert_eq!(body["error"], "seat_lost", "{body}");
    assert_eq!(body["reason"], "expired", "{body}");
    assert!(unix_now() >= exp - 1, "lost before the term's end: {body}");
    assert!(capped, "a renewal near the end is capped to exp exactly");

    let (status, body) = rig.checkout("cad", "bob", json!({})).await;
    assert_eq!(status, 403, "after the term: {body}");
    assert_eq!(body["error"], "not_entitled", "{body}");
    let ended = rig.wait_file("acme.lic", &["ended"]).await;
    assert_eq!(millis(&ended["expires_at"]), cap_ms, "{ended}");
    rig.wait_event("ended", &["acme"]).await;
    let view = rig.s.license("cad").await;
    assert_eq!(view["entitled_seats"], 0, "{view}");
    assert_eq!(view["seats"], 0, "{view}");
}

/// The lease token's claims (as JSON), verified with the server's JWKS and
/// matching the lease body.
async fn verified_claims(rig: &Rig, lease: &Value) -> Value {
    let jwks: Jwks =
        serde_json::from_value(rig.s.get_json("/.well-known/jwks.json").await).expect("a JWKS");
    let body: Lease = serde_json::from_value(lease.clone()).expect("a lease");
    let claims = verify(&body.token, &jwks).expect("the token verifies");
    assert!(claims.matches(&body), "{claims:?} vs {lease}");
    serde_json::to_value(claims).expect("claims as JSON")
}

/// A term reaching its `exp` with 1 h of grace: the file turns `grace`
/// (with a `grace` event), leases granted then carry `"grace": true` in
/// their JSON and their token, `entitlement_ends_at` and every `expires_at`
/// are at most `exp + grace`, and the license shows `in_grace`.
#[tokio::test]
async fn in_grace_seats_are_granted_and_marked() {
    let v = Vendor::generate(KEYRIGHT);
    let licenses = format!("{}{}", v.toml(), vendor_license("cad", ""));
    let rig = Rig::start(&licenses, &[]).await;
    let exp = unix_now() + 3;
    let grace_s = 3600;
    let mut term = claims("acme", unix_now() - 10, grant("cad", 2));
    term["exp"] = json!(exp);
    term["grace"] = json!(grace_s);
    rig.put("acme.lic", &v.sign(&term));
    rig.wait_file("acme.lic", &["active", "grace"]).await;
    let entry = rig.wait_file("acme.lic", &["grace"]).await;
    let end_ms = (exp + grace_s) * 1000;
    assert_eq!(millis(&entry["expires_at"]), exp * 1000, "{entry}");
    assert_eq!(millis(&entry["grace_until"]), end_ms, "{entry}");
    rig.wait_event("grace", &["acme"]).await;

    let (status, lease) = rig.checkout("cad", "ann", json!({})).await;
    assert_eq!(status, 201, "in grace, granted as usual: {lease}");
    assert_eq!(lease["grace"], true, "{lease}");
    assert_eq!(millis(&lease["entitlement_ends_at"]), end_ms, "{lease}");
    assert!(millis(&lease["expires_at"]) <= end_ms, "{lease}");
    assert!(
        verified_claims(&rig, &lease).await["grace"] == true,
        "the token says so"
    );
    let seat = lease["seat_id"].as_str().unwrap();
    let (status, renewed) = rig.heartbeat("cad", seat).await;
    assert_eq!(status, 200, "{renewed}");
    assert_eq!(renewed["grace"], true, "{renewed}");
    assert_eq!(verified_claims(&rig, &renewed).await["grace"], true);

    let view = rig.s.license("cad").await;
    assert_eq!(view["in_grace"], true, "{view}");
    assert_eq!(millis(&view["entitlement_ends_at"]), end_ms, "{view}");
    assert_eq!(view["entitled_seats"], 2, "{view}");
}
