//! What a vendor's application and a vendor read from a customer's server
//! (issue 42): a license's entitlements, which check as a chain from the
//! vendor's key to the lease; and a usage attestation, the usage view's
//! own figures signed with the server's lease key.

use leasehold_common::attestation;
use leasehold_common::entitlement::{Pins, VendorKey, check_chain};
use leasehold_common::token::Jwks;
use serde_json::{Value, json};

use super::{KEYRIGHT, Rig, claims, grant, key, vendor_license};
use leasehold_tests::vendor::{Vendor, unix_now};

/// `GET /v1/licenses/{id}/entitlements` answers, behind the license's own
/// key, the JWS of each entitlement that grants it now; they check as a
/// chain with the lease and the server's JWKS; a license without a vendor
/// has none.
#[tokio::test]
async fn a_license_gives_its_application_the_entitlements_that_grant_it() {
    let v = Vendor::generate(KEYRIGHT);
    let plain = "\n[[license]]\nid = \"plain\"\nkey = \"plain-key\"\nseats = 2\n";
    let licenses = format!("{}{}{plain}", v.toml(), vendor_license("cad", ""));
    let t0 = unix_now() - 60;
    let mut ended = claims("old", t0 - 7200, grant("cad", 1));
    ended["exp"] = json!(t0 - 3600);
    let rig = Rig::start(
        &licenses,
        &[
            ("acme.lic", v.sign(&claims("acme", t0, grant("cad", 3)))),
            ("old.lic", v.sign(&ended)),
        ],
    )
    .await;
    rig.wait_entitled("cad", 3).await;
    let http = reqwest::Client::new();
    let get = |license: &str, key: Option<String>| {
        let mut req = http.get(format!("{}/v1/licenses/{license}/entitlements", rig.s.base));
        if let Some(key) = key {
            req = req.bearer_auth(key);
        }
        req.send()
    };
    let resp = get("cad", None).await.expect("request");
    assert_eq!(resp.status(), 401);
    let resp = get("cad", Some(key("plain"))).await.expect("request");
    assert_eq!(resp.status(), 401, "another license's key");
    let answer: Value = get("cad", Some(key("cad")))
        .await
        .expect("request")
        .json()
        .await
        .expect("json");
    let jws: Vec<String> = serde_json::from_value(answer["entitlements"].clone()).unwrap();
    assert_eq!(jws.len(), 1, "only the one in force: {answer}");
    let plain_answer: Value = get("plain", Some(key("plain")))
        .await
        .expect("request")
        .json()
        .await
        .expect("json");
    assert_eq!(plain_answer, json!({"entitlements": []}));

    let (status, lease) = rig.checkout("cad", "ann", json!({})).await;
    assert_eq!(status, 201, "{lease}");
    let jwks: Jwks = reqwest::get(format!("{}/.well-known/jwks.json", rig.s.base))
        .await
        .expect("jwks")
        .json()
        .await
        .expect("jwks json");
    let keys = [VendorKey::parse(&v.public_key()).unwrap()];
    let pins = Pins {
        vendor_keys: &keys,
        version: None,
    };
    let now_ms = unix_now() * 1000;
    let token = lease["token"].as_str().unwrap();
    let entitled = check_chain(token, &jwks, &jws, pins, now_ms);
    assert!(entitled.is_ok(), "{entitled:?}");
    let other = [VendorKey::parse(&Vendor::generate("other").public_key()).unwrap()];
    let forged = check_chain(
        token,
        &jwks,
        &jws,
        Pins {
            vendor_keys: &other,
            version: None,
        },
        now_ms,
    );
    assert!(forged.is_err(), "another vendor's key: {forged:?}");
}

/// The attestation's figures are the usage view's over the same range,
/// signed by the key whose `kid` the server's entitlements view names; a
/// plain license's is the same figures with no entitlements.
#[tokio::test]
async fn a_usage_attestation_signs_the_usage_views_figures() {
    let v = Vendor::generate(KEYRIGHT);
    let licenses = format!("{}{}", v.toml(), vendor_license("cad", ""));
    let t0 = unix_now() - 60;
    let rig = Rig::start(
        &licenses,
        &[("acme.lic", v.sign(&claims("acme", t0, grant("cad", 2))))],
    )
    .await;
    rig.wait_entitled("cad", 2).await;
    for who in ["ann", "bob", "cy"] {
        rig.checkout("cad", who, json!({})).await;
    }
    let kid = rig.listing().await["server_kid"]
        .as_str()
        .unwrap()
        .to_string();
    let from = "2026-01-01T00:00:00Z";
    // A `to` already past when both views read the range: sessions still
    // open count up to it in each, the same.
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    let to = leasehold_common::Timestamp::from_millis(now_ms).to_rfc3339();
    let range = format!("license=cad&from={from}&to={to}");
    let resp = reqwest::Client::new()
        .get(format!("{}/v1/admin/usage/attestation?{range}", rig.s.base))
        .bearer_auth(&rig.s.admin_token)
        .send()
        .await
        .expect("attestation");
    assert_eq!(resp.status(), 200);
    let jws = resp.text().await.expect("text");
    let attested = attestation::verify(&jws).expect("it verifies");
    assert_eq!(attested.kid, kid, "signed with the server's lease key");
    let usage = rig.s.admin_get(&format!("/v1/admin/usage?{range}")).await;
    let s = &usage["summary"];
    let c = &attested.claims;
    assert_eq!(c.lic, "cad");
    assert_eq!(json!(c.seats), s["seats"], "{usage}");
    assert_eq!(json!(c.peak), s["peak"]);
    assert_eq!(json!(c.over_s), s["over_s"]);
    assert_eq!(json!(c.seat_hours).as_f64(), s["seat_hours"].as_f64());
    assert_eq!(json!(c.true_denials), s["true_denials"]);
    assert_eq!(json!(c.denied_holders), s["denied_holders"]);
    assert_eq!((c.seats, c.peak, c.true_denials), (2, 2, 1), "{usage}");
    assert_eq!(c.entitlements, vec!["acme".to_string()]);
}
