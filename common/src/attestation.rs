//! A usage attestation: the usage summary's figures for one license and
//! range, signed by the server's lease key (a compact JWS, header
//! `{"alg": "EdDSA", "typ": "leasehold-usage", "kid", "jwk"}`), so a
//! customer can hand them to the vendor offline. It proves that these
//! figures came out of the server holding that key, unaltered since, and
//! that the customer handed them over; whoever controls that server could
//! sign other figures.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::time::Timestamp;
use crate::token::{Jwk, TokenSigner, thumbprint, verify_with_jwk};

/// The header's `typ`.
pub const TYP: &str = "leasehold-usage";

/// The claims: the usage summary's figures over `[from, to)`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UsageAttestation {
    /// Always `"leasehold"`.
    pub iss: String,
    /// Signed at, whole seconds.
    pub iat: i64,
    /// The license id.
    pub lic: String,
    pub from: Timestamp,
    pub to: Timestamp,
    /// Where the server's history covers the range from.
    pub covered_from: Timestamp,
    /// The effective seats at `to`.
    pub seats: u32,
    pub peak: u32,
    pub over_s: f64,
    pub seat_hours: f64,
    pub true_denials: u64,
    pub denied_holders: u64,
    /// The `jti`s of the entitlements active in the range.
    pub entitlements: Vec<String>,
}

/// Sign `claims` with the server's lease key.
pub fn sign(signer: &TokenSigner, claims: &UsageAttestation) -> String {
    let header = json!({"alg": "EdDSA", "typ": TYP, "kid": signer.kid(), "jwk": signer.jwk()});
    signer.sign_json(
        &header,
        &serde_json::to_value(claims).expect("claims serialize"),
    )
}

/// A verified attestation: its claims and the `kid` of the key that
/// signed it (computed from the key itself, never taken on trust).
#[derive(Debug, Clone, PartialEq)]
pub struct Attested {
    pub claims: UsageAttestation,
    pub kid: String,
}

/// Verify an attestation with the key in its own header. Only says it is
/// intact; whether that key is the entitled server's is the caller's
/// question (its `kid` against the entitlement's `aud`).
pub fn verify(jws: &str) -> Result<Attested, String> {
    let header_part = jws.trim().split('.').next().unwrap_or_default();
    let header: Value = {
        use base64::Engine;
        base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(header_part)
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .ok_or("not a compact JWS: its header is not base64url JSON")?
    };
    if header["typ"] != TYP || header["alg"] != "EdDSA" {
        return Err(format!("not a usage attestation (typ {TYP:?}, alg EdDSA)"));
    }
    let jwk: Jwk = serde_json::from_value(header["jwk"].clone())
        .map_err(|_| "its header carries no jwk (the server's public key)")?;
    let kid = thumbprint(&jwk).ok_or("its jwk is not an Ed25519 public key")?;
    let (_, payload) = verify_with_jwk(jws.trim(), &jwk)?;
    let claims: UsageAttestation =
        serde_json::from_value(payload).map_err(|e| format!("its claims: {e}"))?;
    if claims.iss != "leasehold" {
        return Err("its iss is not \"leasehold\"".into());
    }
    Ok(Attested { claims, kid })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claims() -> UsageAttestation {
        UsageAttestation {
            iss: "leasehold".into(),
            iat: 1_800_000_000,
            lic: "cad".into(),
            from: Timestamp::from_millis(1_797_000_000_000),
            to: Timestamp::from_millis(1_800_000_000_000),
            covered_from: Timestamp::from_millis(1_797_000_000_000),
            seats: 10,
            peak: 12,
            over_s: 3600.0,
            seat_hours: 1234.5,
            true_denials: 4,
            denied_holders: 2,
            entitlements: vec!["acme".into()],
        }
    }

    #[test]
    fn an_attestation_verifies_with_the_key_that_signed_it_and_names_its_kid() {
        let signer = TokenSigner::from_seed(&[3; 32]);
        let jws = sign(&signer, &claims());
        let attested = verify(&jws).unwrap();
        assert_eq!(attested.claims, claims());
        assert_eq!(attested.kid, signer.kid());
    }

    #[test]
    fn a_tampered_or_foreign_attestation_is_refused() {
        let signer = TokenSigner::from_seed(&[3; 32]);
        let jws = sign(&signer, &claims());
        let parts: Vec<&str> = jws.split('.').collect();
        // Other figures under the same signature.
        let mut more = claims();
        more.seat_hours = 1.0;
        let forged_payload = {
            use base64::Engine;
            base64::engine::general_purpose::URL_SAFE_NO_PAD
                .encode(serde_json::to_vec(&more).unwrap())
        };
        let tampered = format!("{}.{}.{}", parts[0], forged_payload, parts[2]);
        assert!(verify(&tampered).unwrap_err().contains("does not verify"));
        // Another server's signature under this server's key in the header.
        let other = TokenSigner::from_seed(&[4; 32]);
        let theirs = sign(&other, &claims());
        let mixed = format!("{}.{}", parts[0], theirs.split_once('.').unwrap().1);
        assert!(verify(&mixed).unwrap_err().contains("does not verify"));
        // A lease token is no attestation.
        assert!(verify("e30.e30.AA").is_err());
    }
}
