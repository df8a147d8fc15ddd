use leasehold_common::Timestamp;
use leasehold_common::attestation::{UsageAttestation, sign};
use leasehold_common::entitlement::VendorSigner;
use leasehold_common::token::TokenSigner;
use serde_json::{Value, json};

use super::*;

fn figures(lic: &str) -> UsageAttestation {
    UsageAttestation {
        iss: "leasehold".into(),
        iat: 1_800_000_000,
        lic: lic.into(),
        from: Timestamp::parse_rfc3339("2026-01-01T00:00:00Z").unwrap(),
        to: Timestamp::parse_rfc3339("2026-01-31T00:00:00Z").unwrap(),
        covered_from: Timestamp::parse_rfc3339("2026-01-03T00:00:00Z").unwrap(),
        seats: 10,
        peak: 12,
        over_s: 3600.0,
        seat_hours: 1234.5,
        true_denials: 4,
        denied_holders: 2,
        entitlements: vec!["acme".into()],
    }
}

fn names() -> Names {
    Names {
        statement: "usage.jws".into(),
        entitlement: "acme.lic".into(),
    }
}

/// keyright's entitlement for Acme: cad 10, bound to `aud` (none: any
/// server), as `vendor sign` writes it (a `#` line first).
fn lic(vendor: &VendorSigner, aud: &[&str]) -> String {
    let mut claims = json!({
        "iss": "keyright", "jti": "acme", "sub": "Acme", "iat": 1_790_000_000,
        "licenses": [{"id": "cad", "seats": 10}],
    });
    if !aud.is_empty() {
        claims["aud"] = Value::from(aud.to_vec());
    }
    format!("# Leasehold entitlement\n{}\n", vendor.sign(&claims))
}

struct World {
    vendor: VendorSigner,
    server: TokenSigner,
}

impl World {
    fn new() -> World {
        World {
            vendor: VendorSigner::from_seed(&[1; 32]),
            server: TokenSigner::from_seed(&[2; 32]),
        }
    }

    fn bound(&self) -> String {
        lic(&self.vendor, &["standby-kid", self.server.kid()])
    }

    fn check(&self, statement: &str, lic: &str) -> Result<Checked, String> {
        check(statement, lic, &self.vendor.public_key(), &names())
    }
}

#[test]
fn an_honest_statement_checks_and_reads_in_words() {
    let w = World::new();
    let statement = sign(&w.server, &figures("cad"));
    let checked = w.check(&format!("{statement}\n"), &w.bound()).unwrap();
    assert_eq!(checked.attested.claims, figures("cad"));
    assert_eq!(checked.attested.kid, w.server.kid());
    let mut out = Vec::new();
    write_words(&mut out, &checked, &names()).unwrap();
    let text = String::from_utf8(out).unwrap();
    let kid = w.server.kid();
    for line in [
        format!(
            "verified     usage.jws is intact, signed by server {kid}, which acme.lic is bound to"
        ),
        "entitlement  keyright/acme for Acme: cad 10; perpetual".into(),
        "license      cad".into(),
        "range        2026-01-01T00:00:00Z to 2026-01-31T00:00:00Z".into(),
        "history      from 2026-01-03T00:00:00Z only: the server recorded nothing before".into(),
        "seats        10 at the end of the range".into(),
        "peak         12 seats in use at once".into(),
        "over         1h00m in use beyond the seats (3600 s)".into(),
        "seat-hours   1234.50".into(),
        "denials      4 true denials, to 2 holders".into(),
        "entitlements acme (in force in the range)".into(),
    ] {
        assert!(text.lines().any(|l| l == line), "no {line:?} in:\n{text}");
    }
    assert!(
        text.contains("signed       2027-01-15T08:00:00Z ("),
        "{text}"
    );
}

#[test]
fn each_failure_is_one_sentence_saying_which() {
    let w = World::new();
    let statement = sign(&w.server, &figures("cad"));
    // Other figures under the server's signature of these.
    let other = sign(
        &w.server,
        &UsageAttestation {
            seat_hours: 1.0,
            ..figures("cad")
        },
    );
    let parts: Vec<&str> = statement.split('.').collect();
    let tampered = format!(
        "{}.{}.{}",
        parts[0],
        other.split('.').nth(1).unwrap(),
        parts[2]
    );
    let err = w.check(&tampered, &w.bound()).unwrap_err();
    assert_eq!(
        err,
        "usage.jws has been tampered with: its signature does not verify with the server key it names"
    );

    let stranger = VendorSigner::from_seed(&[9; 32]);
    let err = w
        .check(&statement, &lic(&stranger, &[w.server.kid()]))
        .unwrap_err();
    assert!(
        err.starts_with(
            "acme.lic does not verify with this vendor key: it was signed with another vendor's key"
        ),
        "{err}"
    );

    let err = w.check(&statement, &lic(&w.vendor, &[])).unwrap_err();
    assert!(
        err.starts_with("acme.lic is not bound to a server (it has no aud)"),
        "{err}"
    );

    let elsewhere = TokenSigner::from_seed(&[3; 32]);
    let theirs = sign(&elsewhere, &figures("cad"));
    let err = w.check(&theirs, &w.bound()).unwrap_err();
    assert_eq!(
        err,
        format!(
            "usage.jws is a statement from another server: it was signed by server {}, which \
             acme.lic is not bound to (it names standby-kid, {})",
            elsewhere.kid(),
            w.server.kid()
        )
    );

    let ide = sign(&w.server, &figures("ide"));
    let err = w.check(&ide, &w.bound()).unwrap_err();
    assert_eq!(
        err,
        "usage.jws reports license ide, which acme.lic does not grant (it grants cad)"
    );

    let err = w.check("not a statement", &w.bound()).unwrap_err();
    assert!(
        err.starts_with("usage.jws is not a usage statement: "),
        "{err}"
    );
    let err = w.check(&statement, "# nothing\n").unwrap_err();
    assert!(
        err.starts_with("acme.lic is not an entitlement file: "),
        "{err}"
    );
}
