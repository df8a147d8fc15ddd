//! The `Leasehold-Signature` header, as Stripe signs: `t=<unix seconds>,
//! v1=<lowercase hex HMAC-SHA256(secret, "<t>.<raw body>")>`. A receiver
//! recomputes it over the body bytes it got and compares in constant time;
//! `t` lets it refuse old replays.

use hmac::{Hmac, Mac};
use sha2::Sha256;

/// The header's name.
pub const SIGNATURE_HEADER: &str = "Leasehold-Signature";

/// The header's value for `body` sent at `t` (unix seconds).
pub fn signature(secret: &str, t: i64, body: &[u8]) -> String {
    format!("t={t},v1={}", hex::encode(mac(secret, t, body)))
}

fn mac(secret: &str, t: i64, body: &[u8]) -> [u8; 32] {
    // HMAC takes a key of any length: `new_from_slice` cannot fail for it.
    let mut m = <Hmac<Sha256> as Mac>::new_from_slice(secret.as_bytes())
        .expect("HMAC takes a key of any length");
    m.update(t.to_string().as_bytes());
    m.update(b".");
    m.update(body);
    m.finalize().into_bytes().into()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Computed apart from this code, with Python's standard library:
    /// `hmac.new(b"a-long-random-string", b"1700000000." + body,
    /// hashlib.sha256).hexdigest()`.
    #[test]
    fn matches_an_independently_computed_vector() {
        let body = br#"{"id":"0123456789abcdef0123456789abcdef","text":"hi"}"#;
        assert_eq!(
            signature("a-long-random-string", 1_700_000_000, body),
            "t=1700000000,v1=f8e90473ae3862f178893a1350297bccc7c096f9862b9e247c0c924041a0ff27"
        );
    }

    #[test]
    fn time_and_body_both_count() {
        let s = |t, body: &[u8]| signature("a-long-random-string", t, body);
        assert_ne!(s(1, b"{}"), s(2, b"{}"));
        assert_ne!(s(1, b"{}"), s(1, b"{ }"));
        assert!(!s(1, b"{}").contains("a-long-random-string"));
    }
}
