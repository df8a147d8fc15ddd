//! The vendor's private key: Ed25519, kept as PKCS#8 PEM (RFC 8410), the
//! form `openssl pkey` reads and writes.

use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD as B64};
use ed25519_dalek::SigningKey;
use serde_json::Value;

use super::jws::{VendorKey, sign};

/// The DER of a PKCS#8 v1 `PrivateKeyInfo` for Ed25519 (OID 1.3.101.112)
/// up to the 32-byte seed: every such key starts with these 16 bytes.
const PKCS8_PREFIX: [u8; 16] = [
    0x30, 0x2e, 0x02, 0x01, 0x00, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x04, 0x22, 0x04, 0x20,
];
const BEGIN: &str = "-----BEGIN PRIVATE KEY-----";
const END: &str = "-----END PRIVATE KEY-----";

/// A vendor's signing key.
pub struct VendorSigner(SigningKey);

impl std::fmt::Debug for VendorSigner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "VendorSigner({})", self.public_key())
    }
}

impl VendorSigner {
    /// From 32 random bytes (the caller draws them).
    pub fn from_seed(seed: &[u8; 32]) -> Self {
        VendorSigner(SigningKey::from_bytes(seed))
    }

    /// The public key, as written in `[[vendor]]`.
    pub fn public_key(&self) -> VendorKey {
        VendorKey::parse(&B64.encode(self.0.verifying_key().as_bytes()))
            .expect("an Ed25519 public key")
    }

    /// Signs `claims` (a JSON object) as an entitlement.
    pub fn sign(&self, claims: &Value) -> String {
        sign(&self.0, claims)
    }

    pub fn to_pkcs8_pem(&self) -> String {
        let mut der = PKCS8_PREFIX.to_vec();
        der.extend_from_slice(self.0.as_bytes());
        format!("{BEGIN}\n{}\n{END}\n", STANDARD.encode(der))
    }

    pub fn from_pkcs8_pem(pem: &str) -> Result<Self, String> {
        let body = pem
            .trim()
            .strip_prefix(BEGIN)
            .and_then(|rest| rest.strip_suffix(END))
            .ok_or("not a PEM private key (BEGIN PRIVATE KEY)")?;
        let der = STANDARD
            .decode(body.split_whitespace().collect::<String>())
            .map_err(|_| "the PEM body is not base64")?;
        let seed: [u8; 32] = der
            .strip_prefix(&PKCS8_PREFIX[..])
            .and_then(|seed| seed.try_into().ok())
            .ok_or("not an Ed25519 PKCS#8 private key")?;
        Ok(VendorSigner::from_seed(&seed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::entitlement::decode;
    use serde_json::json;

    #[test]
    fn a_key_survives_pem_and_its_signatures_verify() {
        let key = VendorSigner::from_seed(&[5; 32]);
        let pem = key.to_pkcs8_pem();
        assert!(
            pem.starts_with(BEGIN) && pem.trim_end().ends_with(END),
            "{pem}"
        );
        let back = VendorSigner::from_pkcs8_pem(&pem).unwrap();
        assert_eq!(back.public_key(), key.public_key());
        let jws = back.sign(&json!({"iss": "v", "jti": "x", "iat": 1, "licenses": []}));
        decode(&jws).unwrap().verify(&[key.public_key()]).unwrap();
    }

    /// RFC 8410 section 10.3's example key, as OpenSSL writes it.
    #[test]
    fn reads_the_rfc_8410_example() {
        let pem = "-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEINTuctv5E1hK1bbY8fdp+K06/nwoy/HU++CXqI9EdVhC\n-----END PRIVATE KEY-----\n";
        let key = VendorSigner::from_pkcs8_pem(pem).unwrap();
        assert_eq!(
            key.public_key().to_string(),
            "Gb9ECWmEzf6FQbrBZ9w7lshQhqowtrbLDFw4rXAxZuE"
        );
        for bad in [
            "",
            "-----BEGIN PRIVATE KEY-----\n!!\n-----END PRIVATE KEY-----",
            BEGIN,
        ] {
            assert!(VendorSigner::from_pkcs8_pem(bad).is_err(), "{bad:?}");
        }
    }
}
