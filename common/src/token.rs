//! Lease tokens: compact JWS (RFC 7515) signed with Ed25519 (`alg: EdDSA`,
//! RFC 8037), verifiable by any standard JWT library against the server's JWKS.
//!
//! The server signs; clients verify. Nothing here reads the clock: `exp` is
//! checked by the caller against its own `now`.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use ed25519_dalek::{Signature, Signer, SigningKey, VerifyingKey};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::api::Lease;

/// The `iss` of every lease token.
pub const ISSUER: &str = "leasehold";

/// The claims of a lease token.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeaseClaims {
    pub iss: String,
    /// The holder.
    pub sub: String,
    /// The license id.
    pub lic: String,
    /// The seat id.
    pub sid: String,
    /// Issued at, whole seconds since the epoch.
    pub iat: i64,
    /// Expires at, whole seconds, rounded down from the lease's `expires_at`.
    pub exp: i64,
    /// A borrowed seat: valid offline until `exp`, never renewed. Absent
    /// from a heartbeat-kept seat's token.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub borrowed: bool,
    /// Granted while the license's entitlement is in grace after its term.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub grace: bool,
}

impl LeaseClaims {
    /// The claims that sign `lease` (its `token` field is ignored).
    pub fn for_lease(lease: &Lease) -> Self {
        LeaseClaims {
            iss: ISSUER.to_string(),
            sub: lease.holder.clone(),
            lic: lease.license_id.clone(),
            sid: lease.seat_id.clone(),
            iat: lease.issued_at.as_secs_floor(),
            exp: lease.expires_at.as_secs_floor(),
            borrowed: lease.borrowed,
            grace: lease.grace,
        }
    }

    /// Does this token say what the lease body says? A client must refuse a
    /// lease whose body claims more than its signature does.
    pub fn matches(&self, lease: &Lease) -> bool {
        *self == LeaseClaims::for_lease(lease)
    }
}

/// One public key in JWK form (RFC 8037 OKP).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Jwk {
    pub kty: String,
    pub crv: String,
    pub x: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kid: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alg: Option<String>,
    #[serde(rename = "use", default, skip_serializing_if = "Option::is_none")]
    pub use_: Option<String>,
}

/// `GET /.well-known/jwks.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct Jwks {
    pub keys: Vec<Jwk>,
}

/// Why a token was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TokenError {
    #[error("token is not a compact JWS (three base64url parts)")]
    Malformed,
    #[error("token header is not acceptable: {0}")]
    BadHeader(String),
    #[error("token is signed by an unknown key")]
    UnknownKey,
    #[error("token signature does not verify")]
    BadSignature,
    #[error("token claims are not acceptable: {0}")]
    BadClaims(String),
}

#[derive(Serialize, Deserialize)]
struct Header {
    alg: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    kid: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    typ: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    crit: Option<serde_json::Value>,
}

/// The server's signing key. Holds the private key; never leaves the server.
pub struct TokenSigner {
    key: SigningKey,
    kid: String,
    header_b64: String,
}

impl std::fmt::Debug for TokenSigner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenSigner")
            .field("kid", &self.kid)
            .finish()
    }
}

impl TokenSigner {
    /// A signer from a 32-byte Ed25519 seed (the content of `signing.key`).
    pub fn from_seed(seed: &[u8; 32]) -> Self {
        let key = SigningKey::from_bytes(seed);
        let kid = jwk_thumbprint(&key.verifying_key());
        let header = Header {
            alg: "EdDSA".into(),
            kid: Some(kid.clone()),
            typ: Some("JWT".into()),
            crit: None,
        };
        let header_b64 = B64.encode(serde_json::to_vec(&header).expect("header serializes"));
        TokenSigner {
            key,
            kid,
            header_b64,
        }
    }

    pub fn kid(&self) -> &str {
        &self.kid
    }

    pub fn jwk(&self) -> Jwk {
        public_jwk(&self.key.verifying_key())
    }

    pub fn jwks(&self) -> Jwks {
        Jwks {
            keys: vec![self.jwk()],
        }
    }

    /// A compact JWS over `claims`.
    pub fn sign(&self, claims: &LeaseClaims) -> String {
        let payload = B64.encode(serde_json::to_vec(claims).expect("claims serialize"));
        let mut out = String::with_capacity(self.header_b64.len() + payload.len() + 90);
        out.push_str(&self.header_b64);
        out.push('.');
        out.push_str(&payload);
        let sig = self.key.sign(out.as_bytes());
        out.push('.');
        out.push_str(&B64.encode(sig.to_bytes()));
        out
    }
}

impl TokenSigner {
    /// A compact JWS over any claims with any header (a usage attestation's,
    /// `crate::attestation`): the same key that signs leases.
    pub fn sign_json(&self, header: &serde_json::Value, claims: &serde_json::Value) -> String {
        let mut out = B64.encode(serde_json::to_vec(header).expect("header serializes"));
        out.push('.');
        out.push_str(&B64.encode(serde_json::to_vec(claims).expect("claims serialize")));
        let sig = self.key.sign(out.as_bytes());
        out.push('.');
        out.push_str(&B64.encode(sig.to_bytes()));
        out
    }
}

/// Verify a compact JWS's EdDSA signature with `jwk`; its header and
/// payload, decoded, if it holds.
pub fn verify_with_jwk(
    jws: &str,
    jwk: &Jwk,
) -> Result<(serde_json::Value, serde_json::Value), String> {
    let mut parts = jws.split('.');
    let (Some(h), Some(p), Some(s), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err("not a compact JWS (three base64url parts)".into());
    };
    let key = verifying_key(jwk).ok_or("the key is not an Ed25519 public key")?;
    let sig: [u8; 64] = B64
        .decode(s)
        .ok()
        .and_then(|b| b.try_into().ok())
        .ok_or("the signature is not base64url of 64 bytes")?;
    key.verify_strict(
        format!("{h}.{p}").as_bytes(),
        &ed25519_dalek::Signature::from_bytes(&sig),
    )
    .map_err(|_| "the signature does not verify with that key".to_string())?;
    let decode = |part: &str, what: &str| -> Result<serde_json::Value, String> {
        B64.decode(part)
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .ok_or(format!("the {what} is not base64url JSON"))
    };
    Ok((decode(h, "header")?, decode(p, "payload")?))
}

fn public_jwk(key: &VerifyingKey) -> Jwk {
    Jwk {
        kty: "OKP".into(),
        crv: "Ed25519".into(),
        x: B64.encode(key.as_bytes()),
        kid: Some(jwk_thumbprint(key)),
        alg: Some("EdDSA".into()),
        use_: Some("sig".into()),
    }
}

/// RFC 7638 JWK thumbprint of an Ed25519 key: the `kid`.
fn jwk_thumbprint(key: &VerifyingKey) -> String {
    // Members in lexicographic order, no whitespace, as RFC 7638 demands.
    let canonical = format!(
        r#"{{"crv":"Ed25519","kty":"OKP","x":"{}"}}"#,
        B64.encode(key.as_bytes())
    );
    B64.encode(Sha256::digest(canonical.as_bytes()))
}

/// Verify a lease token against a JWKS and return its claims. Checks the
/// structure, `alg`, the key, the signature and `iss`; the caller checks `exp`
/// against its own clock and the claims against the lease body.
pub fn verify(token: &str, jwks: &Jwks) -> Result<LeaseClaims, TokenError> {
    let mut parts = token.split('.');
    let (Some(h), Some(p), Some(s), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(TokenError::Malformed);
    };
    let header_bytes = B64.decode(h).map_err(|_| TokenError::Malformed)?;
    let payload_bytes = B64.decode(p).map_err(|_| TokenError::Malformed)?;
    let sig_bytes = B64.decode(s).map_err(|_| TokenError::Malformed)?;

    let header: Header =
        serde_json::from_slice(&header_bytes).map_err(|e| TokenError::BadHeader(e.to_string()))?;
    if header.alg != "EdDSA" {
        return Err(TokenError::BadHeader(format!(
            "alg {:?} is not EdDSA",
            header.alg
        )));
    }
    if header.crit.is_some() {
        return Err(TokenError::BadHeader("crit is not supported".into()));
    }
    let jwk = match &header.kid {
        Some(kid) => jwks.keys.iter().find(|k| k.kid.as_deref() == Some(kid)),
        None if jwks.keys.len() == 1 => jwks.keys.first(),
        None => None,
    }
    .ok_or(TokenError::UnknownKey)?;
    let key = verifying_key(jwk).ok_or(TokenError::UnknownKey)?;

    let sig_array: [u8; 64] = sig_bytes
        .as_slice()
        .try_into()
        .map_err(|_| TokenError::BadSignature)?;
    let signed_len = h.len() + 1 + p.len();
    key.verify_strict(
        &token.as_bytes()[..signed_len],
        &Signature::from_bytes(&sig_array),
    )
    .map_err(|_| TokenError::BadSignature)?;

    let claims: LeaseClaims =
        serde_json::from_slice(&payload_bytes).map_err(|e| TokenError::BadClaims(e.to_string()))?;
    if claims.iss != ISSUER {
        return Err(TokenError::BadClaims(format!(
            "iss {:?} is not {ISSUER:?}",
            claims.iss
        )));
    }
    Ok(claims)
}

/// The RFC 7638 thumbprint of a JWK's key, computed from the key itself
/// (not its `kid` field): what a `kid` must be for the key to be the one
/// it names. `None` if the JWK is no Ed25519 key.
pub fn thumbprint(jwk: &Jwk) -> Option<String> {
    verifying_key(jwk).map(|k| jwk_thumbprint(&k))
}

/// The `kid` in a compact JWS's header, unverified.
pub fn header_kid(token: &str) -> Option<String> {
    let header = B64.decode(token.split('.').next()?).ok()?;
    serde_json::from_slice::<Header>(&header).ok()?.kid
}

fn verifying_key(jwk: &Jwk) -> Option<VerifyingKey> {
    if jwk.kty != "OKP" || jwk.crv != "Ed25519" {
        return None;
    }
    let bytes: [u8; 32] = B64.decode(&jwk.x).ok()?.try_into().ok()?;
    VerifyingKey::from_bytes(&bytes).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::Timestamp;

    fn signer(n: u8) -> TokenSigner {
        TokenSigner::from_seed(&[n; 32])
    }

    fn claims() -> LeaseClaims {
        LeaseClaims {
            iss: ISSUER.into(),
            sub: "alice".into(),
            lic: "demo-cad".into(),
            sid: "00112233445566778899aabbccddeeff".into(),
            iat: 1_795_960_800,
            exp: 1_795_960_860,
            borrowed: false,
            grace: false,
        }
    }

    fn tamper_payload(token: &str, f: impl FnOnce(&mut serde_json::Value)) -> String {
        let parts: Vec<&str> = token.split('.').collect();
        let mut v: serde_json::Value =
            serde_json::from_slice(&B64.decode(parts[1]).unwrap()).unwrap();
        f(&mut v);
        format!(
            "{}.{}.{}",
            parts[0],
            B64.encode(serde_json::to_vec(&v).unwrap()),
            parts[2]
        )
    }

    #[test]
    fn round_trip() {
        let s = signer(1);
        let token = s.sign(&claims());
        assert_eq!(verify(&token, &s.jwks()), Ok(claims()));
    }

    #[test]
    fn header_names_alg_and_kid_and_jwk_is_standard() {
        let s = signer(1);
        let token = s.sign(&claims());
        let header: serde_json::Value =
            serde_json::from_slice(&B64.decode(token.split('.').next().unwrap()).unwrap()).unwrap();
        assert_eq!(header["alg"], "EdDSA");
        assert_eq!(header["kid"], s.kid());
        let jwk = serde_json::to_value(s.jwk()).unwrap();
        assert_eq!(jwk["kty"], "OKP");
        assert_eq!(jwk["crv"], "Ed25519");
        assert_eq!(jwk["kid"], s.kid());
        assert_eq!(jwk["use"], "sig");
        assert_eq!(B64.decode(jwk["x"].as_str().unwrap()).unwrap().len(), 32);
    }

    #[test]
    fn rejects_tampered_payload() {
        let s = signer(1);
        let token = s.sign(&claims());
        let longer = tamper_payload(&token, |v| v["exp"] = (1_795_960_860i64 + 3600).into());
        assert_eq!(verify(&longer, &s.jwks()), Err(TokenError::BadSignature));
        let other_holder = tamper_payload(&token, |v| v["sub"] = "mallory".into());
        assert_eq!(
            verify(&other_holder, &s.jwks()),
            Err(TokenError::BadSignature)
        );
    }

    #[test]
    fn rejects_wrong_key() {
        let token = signer(1).sign(&claims());
        // Same kid claimed, different key material: the signature fails.
        let mut jwks = signer(2).jwks();
        jwks.keys[0].kid = Some(signer(1).kid().to_string());
        assert_eq!(verify(&token, &jwks), Err(TokenError::BadSignature));
        assert_eq!(
            verify(&token, &signer(2).jwks()),
            Err(TokenError::UnknownKey)
        );
    }

    #[test]
    fn rejects_alg_none_and_other_algs() {
        let s = signer(1);
        let token = s.sign(&claims());
        let payload = token.split('.').nth(1).unwrap();
        for alg in ["none", "HS256", "eddsa"] {
            let header = B64.encode(format!(r#"{{"alg":"{alg}","kid":"{}"}}"#, s.kid()));
            let forged = format!("{header}.{payload}.");
            assert!(
                matches!(verify(&forged, &s.jwks()), Err(TokenError::BadHeader(_))),
                "alg {alg} accepted"
            );
        }
    }

    #[test]
    fn rejects_truncated_and_garbage() {
        let s = signer(1);
        let token = s.sign(&claims());
        for bad in [
            "",
            "a.b",
            "a.b.c.d",
            &token[..token.len() - 5],
            &token[..token.rfind('.').unwrap()],
            "!!!.???.***",
        ] {
            assert!(verify(bad, &s.jwks()).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn swapped_token_does_not_match_the_other_lease() {
        let s = signer(1);
        let lease = |sid: &str| Lease {
            license_id: "demo-cad".into(),
            seat_id: sid.into(),
            holder: "alice".into(),
            fingerprint: None,
            issued_at: Timestamp::from_millis(1_795_960_800_000),
            expires_at: Timestamp::from_millis(1_795_960_860_999),
            overage: false,
            borrowed: false,
            grace: false,
            entitlement_ends_at: None,
            token: String::new(),
        };
        let a = lease("aa");
        let b = lease("bb");
        let token_a = s.sign(&LeaseClaims::for_lease(&a));
        let claims = verify(&token_a, &s.jwks()).unwrap();
        assert!(claims.matches(&a));
        assert!(
            !claims.matches(&b),
            "a token for seat aa must not vouch for seat bb"
        );
        assert_eq!(claims.exp, 1_795_960_860, "exp is rounded down");
    }
}
