//! Entitlement files: one compact JWS (RFC 7515), header `{"alg": "EdDSA",
//! "typ": "leasehold-entitlement"}`, signed with a vendor's Ed25519 key.
//!
//! Reading is two steps, because the vendor (`iss`) picks the keys:
//! [`decode`] checks the form and the claims, then
//! [`Unverified::verify`] checks the signature with that vendor's keys.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use ed25519_dalek::{Signature, Signer, SigningKey, VerifyingKey};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::claims::Claims;

/// The `typ` of an entitlement's header.
pub const TYP: &str = "leasehold-entitlement";

/// A vendor's public key, as written in `[[vendor]]`: base64url without
/// padding of the 32 raw bytes (the JWK `x` form).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VendorKey(VerifyingKey);

impl VendorKey {
    pub fn parse(text: &str) -> Result<VendorKey, String> {
        let bytes: [u8; 32] = B64
            .decode(text.trim())
            .ok()
            .and_then(|b| b.try_into().ok())
            .ok_or("not base64url (no padding) of 32 bytes")?;
        VerifyingKey::from_bytes(&bytes)
            .map(VendorKey)
            .map_err(|_| "not an Ed25519 public key".to_string())
    }

    pub fn as_verifying_key(&self) -> &VerifyingKey {
        &self.0
    }
}

impl std::fmt::Display for VendorKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&B64.encode(self.0.as_bytes()))
    }
}

/// The JWS in a `.lic` file: surrounding whitespace and lines that start
/// with `#` are ignored.
pub fn jws_of_file(text: &str) -> String {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.starts_with('#'))
        .collect::<String>()
}

/// A JWS whose form and claims are good, signature not yet checked.
#[derive(Debug, Clone)]
pub struct Unverified {
    jws: String,
    claims: Claims,
    payload: Value,
    signature: [u8; 64],
}

/// A verified entitlement: its claims, the JWS as signed (what the
/// vendor's application checks again), and a hash of its claims (two files
/// with the same claims are one entitlement).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entitlement {
    pub claims: Claims,
    pub jws: String,
    pub claims_hash: String,
}

/// Checks the form, the header and the claims of a compact JWS.
pub fn decode(jws: &str) -> Result<Unverified, String> {
    let mut parts = jws.split('.');
    let (Some(h), Some(p), Some(s), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err("not a compact JWS (three base64url parts)".into());
    };
    let part = |name: &str, b64: &str| {
        B64.decode(b64)
            .map_err(|_| format!("the {name} is not base64url without padding"))
    };
    let header: Value = serde_json::from_slice(&part("header", h)?)
        .map_err(|_| "the header is not JSON".to_string())?;
    check_header(&header)?;
    let payload: Value = serde_json::from_slice(&part("payload", p)?)
        .map_err(|_| "the claims are not JSON".to_string())?;
    let claims = Claims::from_json(&payload)?;
    let signature: [u8; 64] = part("signature", s)?
        .try_into()
        .map_err(|_| "the signature is not 64 bytes".to_string())?;
    Ok(Unverified {
        jws: jws.to_string(),
        claims,
        payload,
        signature,
    })
}

fn check_header(header: &Value) -> Result<(), String> {
    if header.get("alg").and_then(Value::as_str) != Some("EdDSA") {
        return Err("header alg: must be EdDSA".into());
    }
    if header.get("typ").and_then(Value::as_str) != Some(TYP) {
        return Err(format!("header typ: must be {TYP}"));
    }
    if header.get("crit").is_some() {
        return Err("header crit: not supported".into());
    }
    Ok(())
}

impl Unverified {
    pub fn claims(&self) -> &Claims {
        &self.claims
    }

    /// The claims as signed, unknown ones included.
    pub fn payload(&self) -> &Value {
        &self.payload
    }

    /// Verifies the signature with any of `keys` (a vendor rotating its key
    /// lists both).
    pub fn verify(self, keys: &[VendorKey]) -> Result<Entitlement, String> {
        let signed = &self.jws.as_bytes()[..self.jws.rfind('.').unwrap_or(0)];
        let signature = Signature::from_bytes(&self.signature);
        if !keys
            .iter()
            .any(|k| k.0.verify_strict(signed, &signature).is_ok())
        {
            return Err(format!(
                "the signature does not verify with vendor {}'s keys",
                self.claims.iss
            ));
        }
        // serde_json's map is ordered by key: the same claims give the same
        // text, whatever order the vendor's tool wrote them in.
        let canonical = serde_json::to_vec(&self.payload).expect("a JSON value serializes");
        Ok(Entitlement {
            claims: self.claims,
            jws: self.jws,
            claims_hash: hex(&Sha256::digest(canonical)),
        })
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The vendor's side: signs claims (a JSON object) as an entitlement.
pub fn sign(key: &SigningKey, claims: &Value) -> String {
    let header = json!({"alg": "EdDSA", "typ": TYP});
    let mut out = format!(
        "{}.{}",
        B64.encode(header.to_string()),
        B64.encode(claims.to_string())
    );
    let signature = key.sign(out.as_bytes());
    out.push('.');
    out.push_str(&B64.encode(signature.to_bytes()));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(n: u8) -> SigningKey {
        SigningKey::from_bytes(&[n; 32])
    }

    fn vendor_key(n: u8) -> VendorKey {
        VendorKey::parse(&B64.encode(key(n).verifying_key().as_bytes())).unwrap()
    }

    fn claims() -> Value {
        json!({"iss": "keyright", "jti": "acme", "iat": 1_780_000_000,
               "licenses": [{"id": "cad", "seats": 10}]})
    }

    #[test]
    fn a_signed_file_verifies_with_any_of_the_vendors_keys() {
        let jws = sign(&key(1), &claims());
        let file = format!("# acme's cad seats\n\n  {}\n{}\n", &jws[..20], &jws[20..]);
        let e = decode(&jws_of_file(&file))
            .unwrap()
            .verify(&[vendor_key(9), vendor_key(1)])
            .unwrap();
        assert_eq!(e.jws, jws);
        assert_eq!(e.claims.grant_for("cad").unwrap().seats, 10);
        let err = decode(&jws).unwrap().verify(&[vendor_key(2)]).unwrap_err();
        assert!(err.contains("signature does not verify"), "{err}");
    }

    #[test]
    fn the_same_claims_hash_alike_whatever_their_order() {
        let reordered: Value =
            serde_json::from_str(r#"{"licenses":[{"seats":10,"id":"cad"}],"iat":1780000000,"jti":"acme","iss":"keyright"}"#)
                .unwrap();
        let a = decode(&sign(&key(1), &claims()))
            .unwrap()
            .verify(&[vendor_key(1)])
            .unwrap();
        let b = decode(&sign(&key(1), &reordered))
            .unwrap()
            .verify(&[vendor_key(1)])
            .unwrap();
        assert_eq!(a.claims_hash, b.claims_hash);
        let mut more = claims();
        more["licenses"][0]["seats"] = json!(11);
        let c = decode(&sign(&key(1), &more))
            .unwrap()
            .verify(&[vendor_key(1)])
            .unwrap();
        assert_ne!(a.claims_hash, c.claims_hash);
    }

    #[test]
    fn a_tampered_or_malformed_file_is_refused_saying_why() {
        let jws = sign(&key(1), &claims());
        let (head, rest) = jws.split_once('.').unwrap();
        let (_, sig) = rest.split_once('.').unwrap();
        let mut richer = claims();
        richer["licenses"][0]["seats"] = json!(1000);
        let forged = format!("{head}.{}.{sig}", B64.encode(richer.to_string()));
        let err = decode(&forged)
            .unwrap()
            .verify(&[vendor_key(1)])
            .unwrap_err();
        assert!(err.contains("does not verify"), "{err}");

        let lease_header = B64.encode(r#"{"alg":"EdDSA","typ":"JWT"}"#);
        let none_header = B64.encode(r#"{"alg":"none","typ":"leasehold-entitlement"}"#);
        for (bad, says) in [
            ("abc".to_string(), "three base64url parts"),
            (format!("{lease_header}.{rest}"), "header typ"),
            (format!("{none_header}.{rest}"), "header alg"),
            (format!("!!.{rest}"), "header is not base64url"),
            (
                format!("{head}.{}.{sig}", B64.encode("[1]")),
                "not a JSON object",
            ),
            (
                format!("{head}.{}.AAAA", B64.encode(claims().to_string())),
                "64 bytes",
            ),
        ] {
            let err = decode(&bad).unwrap_err();
            assert!(err.contains(says), "{err:?} should say {says:?}");
        }
    }

    #[test]
    fn a_vendor_key_is_32_bytes_of_base64url() {
        let k = vendor_key(3);
        assert_eq!(VendorKey::parse(&k.to_string()).unwrap(), k);
        for bad in [
            "",
            "abc",
            "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo=",
            "+/+/",
        ] {
            assert!(VendorKey::parse(bad).is_err(), "{bad:?}");
        }
    }
}
