//! Files: each bad file is rejected alone, with one event naming why, and
//! the good ones stay in force; a `[[vendor]]` mistake keeps the previous
//! licenses file; a vendor's second key makes its files verify; a file
//! signed with Python's `cryptography` loads.

use std::process::Command;

use leasehold_tests::require_tool;
use leasehold_tests::vendor::{Vendor, unix_now};
use serde_json::json;

use crate::{KEYRIGHT, Rig, claims, grant, vendor_license};

/// The bad files, each with the words its rejection must say.
fn bad_files(v: &Vendor, forger: &Vendor, now: i64) -> Vec<(&'static str, String, &'static str)> {
    let stranger = Vendor::generate("stranger");
    let mut bound = claims("bound", now, grant("cad", 5));
    bound["aud"] = json!("another-servers-kid");
    let mut from_stranger = claims("strange", now, grant("cad", 5));
    from_stranger["iss"] = json!("stranger");
    let mut no_exp = claims("graceful", now, grant("cad", 5));
    no_exp["grace"] = json!(86_400);
    vec![
        ("garbage.lic", "this is not a license\n".into(), "JWS"),
        (
            "forged.lic",
            forger.sign(&claims("forged", now, grant("cad", 4))),
            "signature",
        ),
        ("bound.lic", v.sign(&bound), "aud"),
        ("stranger.lic", stranger.sign(&from_stranger), "iss"),
        ("graceless.lic", v.sign(&no_exp), "grace"),
    ]
}

/// Not a JWS, a forged signature, bound to another `kid`, an unknown `iss`,
/// `grace` without `exp`: each file rejected, once, by an `entitlement`
/// event naming why, while the good file beside them stays in force; a
/// rescan does not repeat the events; a file not named `*.lic` is ignored.
#[tokio::test]
async fn each_bad_file_is_rejected_alone_saying_why() {
    let v = Vendor::generate(KEYRIGHT);
    let forger = Vendor::generate(KEYRIGHT);
    let licenses = format!("{}{}", v.toml(), vendor_license("cad", ""));
    let now = unix_now() - 60;
    let good = v.sign(&claims("good", now, grant("cad", 2)));
    let rig = Rig::start(&licenses, &[("good.lic", good)]).await;
    rig.wait_file("good.lic", &["active"]).await;

    let bad = bad_files(&v, &forger, now);
    for (name, text, _) in &bad {
        rig.put(name, text);
    }
    rig.put("notes.txt", &v.sign(&claims("txt", now, grant("cad", 9))));
    for (name, _, why) in &bad {
        let entry = rig.wait_file(name, &["rejected"]).await;
        let error = entry["error"].as_str().unwrap_or_default();
        assert!(error.contains(why), "{name}: says {why:?}: {entry}");
        rig.wait_event(&format!("rejected {name}"), &[why]).await;
    }

    // Another change to the directory: a rescan judges the same files
    // again, and says nothing new about them.
    rig.put("more.lic", &v.sign(&claims("more", now, grant("cad", 1))));
    rig.wait_file("more.lic", &["active"]).await;
    rig.wait_event("loaded", &["more.lic"]).await;
    for (name, _, _) in &bad {
        let said = rig.events_saying(&format!("rejected {name}"), &[]).await;
        assert_eq!(said.len(), 1, "{name}: one event: {said:?}");
    }
    assert_eq!(
        rig.capacity("cad").await,
        3,
        "good 2 + more 1, nothing else"
    );
    let listing = rig.listing().await;
    let files: Vec<&str> = listing["entitlements"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["file"].as_str())
        .collect();
    assert!(!files.contains(&"notes.txt"), "only *.lic: {listing}");
}

/// A licenses file with a `[[vendor]]` mistake (a malformed key, a license
/// naming an unknown vendor) is rejected whole, naming the field, and the
/// previous one stays in force; a vendor's second key makes the file it
/// signed verify.
#[tokio::test]
async fn a_vendor_mistake_keeps_the_previous_licenses_file() {
    let v = Vendor::generate(KEYRIGHT);
    let rotated = Vendor::generate(KEYRIGHT);
    let licenses = format!("{}{}", v.toml(), vendor_license("cad", ""));
    let now = unix_now() - 60;
    let rig = Rig::start(
        &licenses,
        &[
            ("good.lic", v.sign(&claims("good", now, grant("cad", 2)))),
            (
                "new-key.lic",
                rotated.sign(&claims("new", now, grant("cad", 4))),
            ),
        ],
    )
    .await;
    rig.wait_file("good.lic", &["active"]).await;
    rig.wait_file("new-key.lic", &["rejected"]).await;

    let key_line = format!("public_key = \"{}\"", v.public_key());
    // Each mistake, the field it must name, and a word of this mistake's
    // message (so a replica's late event for the previous one is not it).
    let mistakes = [
        (
            licenses.replace(&key_line, "public_key = \"not-a-key\""),
            "vendor.public_key",
            "not-a-key",
        ),
        (
            licenses.replace("vendor = \"keyright\"", "vendor = \"nobody\""),
            "vendor",
            "nobody",
        ),
        (
            format!("{licenses}{}", v.toml()),
            "vendor.name",
            "another vendor",
        ),
    ];
    let mut seen = 0;
    for (text, field, word) in &mistakes {
        rig.rewrite_licenses(text);
        let rejected = leasehold_tests::eventually(crate::SHOWS_WITHIN, field, || async {
            rig.s.events_of("config").await.into_iter().find(|e| {
                let detail = e["detail"].as_str().unwrap_or_default();
                e["id"].as_i64() > Some(seen)
                    && detail.contains("rejected")
                    && detail.contains(word)
            })
        })
        .await;
        seen = rejected["id"].as_i64().unwrap();
        let detail = rejected["detail"].as_str().unwrap();
        assert!(detail.contains(field), "names {field}: {detail}");
        assert_eq!(rig.capacity("cad").await, 2, "{field}: still in force");
        let good = rig.wait_file("good.lic", &["active"]).await;
        assert!(good["error"].is_null(), "{good}");
    }

    // The vendor rotates its key: both listed, the new file verifies.
    let both = format!(
        "public_key = [\"{}\", \"{}\"]",
        v.public_key(),
        rotated.public_key()
    );
    rig.rewrite_licenses(&licenses.replace(&key_line, &both));
    rig.wait_file("new-key.lic", &["active"]).await;
    rig.wait_entitled("cad", 6).await;
    assert_eq!(rig.capacity("cad").await, 6);
}

/// A Python script that makes a vendor key with `cryptography`, prints its
/// public key as `[[vendor]]` writes it, and signs a compact JWS by hand
/// (argv: the path to write, the claims as JSON).
const PYTHON_SIGNS: &str = r##"
import base64, json, sys
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
b64 = lambda b: base64.urlsafe_b64encode(b).decode().rstrip("=")
key = Ed25519PrivateKey.generate()
head = b64(json.dumps({"alg": "EdDSA", "typ": "leasehold-entitlement"}).encode())
body = b64(sys.argv[2].encode())
sig = b64(key.sign(f"{head}.{body}".encode()))
with open(sys.argv[1], "w") as f:
    f.write(f"# signed in Python\n{head}.{body}.{sig}\n")
print(b64(key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)))
"##;

/// A file and a vendor key made by Python's `cryptography` (header, claims
/// and signature built by hand, after a comment line) load and grant what
/// they say; other claims and item fields are ignored.
#[tokio::test]
async fn a_file_signed_with_python_cryptography_loads() {
    require_tool(
        Command::new("python3").args(["-c", "import cryptography"]),
        "python3 with cryptography",
        "`python3 -m pip install -r assets/examples/requirements.txt`",
    );
    let made = tempfile::tempdir().unwrap();
    let file = made.path().join("py.lic");
    let claims = json!({
        "iss": KEYRIGHT, "jti": "py-2026", "iat": unix_now() - 60,
        "sub": "Python Corp", "exp": unix_now() + 86_400, "grace": 3600,
        "licenses": [{"id": "cad", "seats": 2, "edition": "pro"}],
        "x-vendor-note": "ignored by the server",
    });
    let out = Command::new("python3")
        .args(["-c", PYTHON_SIGNS])
        .arg(&file)
        .arg(claims.to_string())
        .output()
        .expect("run python3");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let public_key = String::from_utf8(out.stdout).unwrap().trim().to_string();
    assert_eq!(public_key.len(), 43, "32 bytes of base64url: {public_key}");
    let text = std::fs::read_to_string(&file).unwrap();

    let licenses = format!(
        "\n[[vendor]]\nname = \"{KEYRIGHT}\"\npublic_key = \"{public_key}\"\n{}",
        vendor_license("cad", "")
    );
    let rig = Rig::start(&licenses, &[("py.lic", text)]).await;
    let entry = rig.wait_file("py.lic", &["active"]).await;
    assert_eq!(entry["id"], "py-2026", "{entry}");
    assert_eq!(entry["customer"], "Python Corp", "{entry}");
    assert_eq!(entry["licenses"][0]["seats"], 2, "{entry}");
    assert_eq!(rig.capacity("cad").await, 2);
    rig.wait_event("loaded", &["py-2026", "py.lic"]).await;
}
