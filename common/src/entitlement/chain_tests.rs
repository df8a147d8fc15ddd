//! The chain check: a good chain passes, and each way of breaking one
//! (forged, replaced, expired, bound to another server, another license,
//! another version, a lease past the term, a server claiming another's
//! kid) is refused, by name and by a property test over random chains.

use proptest::prelude::*;
use serde_json::{Value, json};

use super::chain::{NotEntitled, Pins, check_chain};
use super::keys::VendorSigner;
use crate::token::{Jwks, LeaseClaims, TokenSigner};

const NOW_S: i64 = 1_800_000_000;

fn vendor() -> VendorSigner {
    VendorSigner::from_seed(&[1; 32])
}

fn server() -> TokenSigner {
    TokenSigner::from_seed(&[2; 32])
}

/// A lease of `cad` expiring `ttl_s` from now, signed by `signer`.
fn lease(signer: &TokenSigner, license: &str, ttl_s: i64) -> String {
    signer.sign(&LeaseClaims {
        iss: "leasehold".into(),
        sub: "ann".into(),
        lic: license.into(),
        sid: "seat".into(),
        iat: NOW_S,
        exp: NOW_S + ttl_s,
        borrowed: false,
        grace: false,
    })
}

fn entitlement(f: impl FnOnce(&mut Value)) -> String {
    let mut c = json!({"iss": "keyright", "jti": "acme", "iat": NOW_S - 100,
        "exp": NOW_S + 3600, "aud": [server().kid()],
        "licenses": [{"id": "cad", "seats": 5, "versions": ">=2026, <2027"}]});
    f(&mut c);
    vendor().sign(&c)
}

fn check(
    token: &str,
    jwks: &Jwks,
    list: &[String],
    version: Option<&str>,
) -> Result<(), NotEntitled> {
    let keys = [vendor().public_key()];
    let pins = Pins {
        vendor_keys: &keys,
        version,
    };
    check_chain(token, jwks, list, pins, NOW_S * 1000).map(|_| ())
}

#[test]
fn a_good_chain_is_entitled_and_says_by_what() {
    let keys = [vendor().public_key()];
    let pins = Pins {
        vendor_keys: &keys,
        version: Some("2026.2"),
    };
    let by = check_chain(
        &lease(&server(), "cad", 60),
        &server().jwks(),
        &[entitlement(|_| {})],
        pins,
        NOW_S * 1000,
    )
    .unwrap();
    assert_eq!((by.vendor.as_str(), by.id.as_str()), ("keyright", "acme"));
    assert_eq!(by.ends_at_ms, Some((NOW_S + 3600) * 1000));
    assert!(!by.in_grace);
}

#[test]
fn each_broken_link_is_refused_by_name() {
    let jwks = server().jwks();
    let token = lease(&server(), "cad", 60);
    let v = Some("2026.2");
    let forged = VendorSigner::from_seed(&[9; 32]).sign(&json!({"iss": "keyright", "jti": "acme",
        "iat": NOW_S, "licenses": [{"id": "cad", "seats": 500}]}));
    assert_eq!(
        check(&token, &jwks, &[forged], v),
        Err(NotEntitled::NoneVerifies)
    );
    let other_license = entitlement(|c| c["licenses"][0]["id"] = json!("ide"));
    assert_eq!(
        check(&token, &jwks, &[other_license], v),
        Err(NotEntitled::NotForLicense("cad".into()))
    );
    let ended = entitlement(|c| c["exp"] = json!(NOW_S - 1));
    assert_eq!(
        check(&token, &jwks, &[ended], v),
        Err(NotEntitled::NotInForce)
    );
    let in_grace = entitlement(|c| {
        c["exp"] = json!(NOW_S - 1);
        c["grace"] = json!(600);
    });
    assert_eq!(check(&token, &jwks, &[in_grace], v), Ok(()));
    // A newer file of the same id without this license replaces the old one.
    let renewal = entitlement(|c| {
        c["iat"] = json!(NOW_S - 10);
        c["licenses"][0]["id"] = json!("ide");
    });
    assert_eq!(
        check(&token, &jwks, &[entitlement(|_| {}), renewal], v),
        Err(NotEntitled::NotInForce)
    );
    let elsewhere = entitlement(|c| c["aud"] = json!("another-kid"));
    assert_eq!(
        check(&token, &jwks, &[elsewhere], v),
        Err(NotEntitled::BoundElsewhere(server().kid().into()))
    );
    let e = [entitlement(|_| {})];
    for version in [Some("2027"), Some("2026-beta"), None] {
        assert!(
            matches!(
                check(&token, &jwks, &e, version),
                Err(NotEntitled::Version { .. })
            ),
            "{version:?}"
        );
    }
    let long_lease = lease(&server(), "cad", 3601);
    assert_eq!(
        check(&long_lease, &jwks, &e, v),
        Err(NotEntitled::OutlivesTerm)
    );
}

#[test]
fn a_server_cannot_claim_another_servers_kid() {
    // An unentitled server signs with its own key but names the entitled
    // server's kid, in its token's header and in its JWKS.
    let impostor = TokenSigner::from_seed(&[3; 32]);
    let mut jwks = impostor.jwks();
    jwks.keys[0].kid = Some(server().kid().to_string());
    let b64 = |b: &[u8]| {
        use base64::Engine;
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(b)
    };
    let honest = lease(&impostor, "cad", 60);
    let payload = honest.split('.').nth(1).unwrap();
    let header = b64(json!({"alg": "EdDSA", "typ": "JWT", "kid": server().kid()})
        .to_string()
        .as_bytes());
    let signed = format!("{header}.{payload}");
    let sig = ed25519_dalek::Signer::sign(
        &ed25519_dalek::SigningKey::from_bytes(&[3; 32]),
        signed.as_bytes(),
    );
    let token = format!("{signed}.{}", b64(&sig.to_bytes()));
    let e = [entitlement(|_| {})];
    assert!(matches!(
        check(&token, &jwks, &e, Some("2026.2")),
        Err(NotEntitled::LeaseToken(_))
    ));
    // The same token checked against the real server's keys: no signature.
    assert!(matches!(
        check(&token, &server().jwks(), &e, Some("2026.2")),
        Err(NotEntitled::LeaseToken(_))
    ));
    // Its own kid is honest, but the entitlement is bound elsewhere.
    let honest = lease(&impostor, "cad", 60);
    assert_eq!(
        check(&honest, &impostor.jwks(), &e, Some("2026.2")),
        Err(NotEntitled::BoundElsewhere(impostor.kid().into()))
    );
}

/// One way to break a good chain.
#[derive(Debug, Clone, Copy)]
enum Break {
    None,
    Forged,
    Ended,
    Replaced,
    OtherServer,
    OtherLicense,
    OtherVersion,
    LeasePastTerm,
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    #[test]
    fn only_an_unbroken_chain_is_entitled(
        brk in prop_oneof![Just(Break::None), Just(Break::Forged), Just(Break::Ended),
            Just(Break::Replaced), Just(Break::OtherServer), Just(Break::OtherLicense),
            Just(Break::OtherVersion), Just(Break::LeasePastTerm)],
        seats in 1..50u32,
        term_s in 120..100_000i64,
        bound in any::<bool>(),
        extra in 0..3usize,
    ) {
        let aud = if bound { json!([server().kid()]) } else { Value::Null };
        let good = |c: &mut Value| {
            c["licenses"][0]["seats"] = json!(seats);
            c["exp"] = json!(NOW_S + term_s);
            c["aud"] = aud.clone();
        };
        let mut list: Vec<String> = (0..extra)
            .map(|i| entitlement(|c| { c["jti"] = json!(format!("other-{i}")); c["licenses"][0]["id"] = json!("ide"); }))
            .collect();
        let mut token = lease(&server(), "cad", 60);
        let mut version = "2026.5";
        match brk {
            Break::None => list.push(entitlement(good)),
            Break::Forged => list.push(VendorSigner::from_seed(&[8; 32]).sign(
                &json!({"iss": "keyright", "jti": "acme", "iat": NOW_S, "licenses": [{"id": "cad", "seats": seats}]}))),
            Break::Ended => list.push(entitlement(|c| { good(c); c["exp"] = json!(NOW_S - term_s); })),
            Break::Replaced => {
                list.push(entitlement(good));
                list.push(entitlement(|c| { good(c); c["iat"] = json!(NOW_S - 1); c["licenses"][0]["id"] = json!("ide"); }));
            }
            Break::OtherServer => list.push(entitlement(|c| { good(c); c["aud"] = json!(["elsewhere"]); })),
            Break::OtherLicense => token = lease(&server(), "ide-pro", 60),
            Break::OtherVersion => version = "2027.1",
            Break::LeasePastTerm => token = lease(&server(), "cad", term_s + 1),
        }
        if matches!(brk, Break::OtherLicense | Break::OtherVersion | Break::LeasePastTerm) {
            list.push(entitlement(good));
        }
        let got = check(&token, &server().jwks(), &list, Some(version));
        prop_assert_eq!(got.is_ok(), matches!(brk, Break::None), "{:?}: {:?}", brk, got);
    }
}
