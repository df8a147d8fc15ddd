//! The vendor's tool, run as a binary: `leasehold vendor keygen`, `vendor
//! sign` (fresh, `--renew`, `--withdraw`) and `entitlement inspect`; its
//! key read by `openssl pkey`, its files read by PyJWT, and a file signed
//! with Python's `cryptography` checked by the tool.

use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;

/// A fresh temp directory, removed when dropped.
struct Dir(tempfile::TempDir);

impl Dir {
    fn new() -> Dir {
        Dir(tempfile::tempdir().expect("a temp dir"))
    }

    fn path(&self, file: &str) -> String {
        self.0.path().join(file).to_string_lossy().into_owned()
    }
}

fn leasehold(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_leasehold"))
        .args(args)
        .env_remove("LEASEHOLD_ADMIN_TOKEN")
        .output()
        .expect("run leasehold")
}

fn ok(out: Output) -> String {
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "stdout:\n{text}\nstderr:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    text
}

/// The public key `keygen` printed on its `public_key = "…"` line.
fn keygen(dir: &Dir) -> String {
    let printed = ok(leasehold(&[
        "vendor",
        "keygen",
        "--out",
        &dir.path("vendor.key"),
        "--name",
        "keyright",
    ]));
    assert!(
        printed.contains("[[vendor]]\nname = \"keyright\""),
        "{printed}"
    );
    printed
        .lines()
        .find_map(|l| l.strip_prefix("public_key = \""))
        .and_then(|k| k.strip_suffix('"'))
        .expect(&printed)
        .to_string()
}

fn inspect_json(file: &str, key: &str) -> Value {
    serde_json::from_str(&ok(leasehold(&[
        "entitlement",
        "inspect",
        file,
        "--vendor-key",
        key,
        "--json",
    ])))
    .unwrap()
}

#[test]
fn keygen_sign_inspect_renew_and_withdraw() {
    let dir = Dir::new();
    let public = keygen(&dir);
    let key = dir.path("vendor.key");
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&key).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "only its owner reads the private key");
    let again = leasehold(&["vendor", "keygen", "--out", &key]);
    assert!(
        !again.status.success(),
        "an existing key is never overwritten"
    );

    let lic = dir.path("acme.lic");
    let wrote = ok(leasehold(&[
        "vendor",
        "sign",
        "--key",
        &key,
        "--vendor",
        "keyright",
        "--id",
        "acme-2026",
        "--license",
        "cad=10",
        "--license",
        "ide=3",
        "--customer",
        "Acme",
        "--versions",
        ">=2025.1, <2027",
        "--expires",
        "2027-01-01T00:00:00Z",
        "--grace",
        "14d",
        "--borrow",
        "3d:2",
        "--bind",
        "kid-a",
        "--out",
        &lic,
    ]));
    assert!(
        wrote.contains("keyright/acme-2026 for Acme: cad 10, ide 3; until 2027-01-01T00:00:00Z"),
        "{wrote}"
    );
    let signed = inspect_json(&lic, &public);
    assert_eq!(signed["verified"], true);
    let c = &signed["claims"];
    assert_eq!(
        (c["iss"].as_str(), c["jti"].as_str(), c["sub"].as_str()),
        (Some("keyright"), Some("acme-2026"), Some("Acme"))
    );
    assert_eq!(
        (c["exp"].as_i64(), c["grace"].as_i64()),
        (Some(1_798_761_600), Some(14 * 86_400))
    );
    assert_eq!(c["aud"], serde_json::json!(["kid-a"]));
    assert_eq!(
        c["licenses"][0],
        serde_json::json!({"id": "cad", "seats": 10, "versions": ">=2025.1, <2027", "borrow": {"max": 259_200, "seats": 2}})
    );
    let words = ok(leasehold(&[
        "entitlement",
        "inspect",
        &lic,
        "--vendor-key",
        &public,
    ]));
    assert!(words.contains("verifies with the vendor key"), "{words}");
    assert!(
        words.contains("cad 10 seats, versions >=2025.1, <2027"),
        "{words}"
    );

    // Another vendor's key: the claims are printed, the exit is 1.
    let other = Dir::new();
    let stranger = keygen(&other);
    let refused = leasehold(&["entitlement", "inspect", &lic, "--vendor-key", &stranger]);
    assert_eq!(refused.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&refused.stdout).contains("does not verify"));

    // A renewal keeps the id and the rest, sets what it names, and is newer.
    let renewed = dir.path("acme-renewed.lic");
    ok(leasehold(&[
        "vendor",
        "sign",
        "--key",
        &key,
        "--renew",
        &lic,
        "--license",
        "cad=12",
        "--expires",
        "2028-01-01T00:00:00Z",
        "--out",
        &renewed,
    ]));
    let r = &inspect_json(&renewed, &public)["claims"];
    assert_eq!(r["jti"], "acme-2026");
    assert_eq!(r["licenses"][0]["seats"], 12);
    assert_eq!(r["licenses"][1]["seats"], 3);
    assert_eq!(r["exp"], 1_830_297_600);
    assert!(r["iat"].as_i64() >= c["iat"].as_i64());

    let tomb = dir.path("acme-withdrawn.lic");
    ok(leasehold(&[
        "vendor",
        "sign",
        "--key",
        &key,
        "--withdraw",
        &lic,
        "--out",
        &tomb,
    ]));
    let t = &inspect_json(&tomb, &public)["claims"];
    assert_eq!(
        (t["jti"].as_str(), t["licenses"].as_array().map(Vec::len)),
        (Some("acme-2026"), Some(0))
    );

    // What the server would refuse, the tool refuses to sign.
    for (bad, says) in [
        (vec!["--id", "has space", "--license", "cad=1"], "claim jti"),
        (vec!["--id", "x", "--license", "cad=0"], "seats"),
        (
            vec!["--id", "x", "--license", "cad=1", "--versions", "~2"],
            "versions",
        ),
        (vec!["--id", "x"], "no --license"),
    ] {
        let out_file = dir.path("bad.lic");
        let args = [
            &[
                "vendor",
                "sign",
                "--key",
                key.as_str(),
                "--vendor",
                "keyright",
                "--out",
                &out_file,
            ][..],
            &bad[..],
        ]
        .concat();
        let out = leasehold(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success() && err.contains(says),
            "{bad:?}: {err}"
        );
        assert!(!Path::new(&out_file).exists());
    }
}

fn python(script: &str, args: &[&str]) -> String {
    let out = Command::new("python3").arg("-c").arg(script).args(args).output().unwrap_or_else(|e| {
        panic!("python3 is needed (with PyJWT and cryptography: pip install -r assets/examples/requirements.txt): {e}")
    });
    ok(out)
}

#[test]
fn any_jws_library_reads_and_makes_these_files() {
    let dir = Dir::new();
    let public = keygen(&dir);
    let key = dir.path("vendor.key");
    let lic = dir.path("a.lic");
    ok(leasehold(&[
        "vendor",
        "sign",
        "--key",
        &key,
        "--vendor",
        "keyright",
        "--id",
        "a",
        "--license",
        "cad=4",
        "--out",
        &lic,
    ]));

    // OpenSSL reads the private key and derives the same public key.
    let der = Command::new("openssl")
        .args(["pkey", "-in", &key, "-pubout", "-outform", "DER"])
        .output()
        .expect("openssl is needed");
    assert!(
        der.status.success(),
        "{}",
        String::from_utf8_lossy(&der.stderr)
    );
    let raw = &der.stdout[der.stdout.len() - 32..];
    let from_openssl = python(
        "import base64,sys; print(base64.urlsafe_b64encode(bytes.fromhex(sys.argv[1])).decode().rstrip('='))",
        &[&hex(raw)],
    );
    assert_eq!(from_openssl.trim(), public);

    // PyJWT verifies the tool's file with the printed public key.
    let read = python(
        r##"
import base64, jwt, sys
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
text = open(sys.argv[1]).read()
token = "".join(l.strip() for l in text.splitlines() if not l.strip().startswith("#"))
raw = base64.urlsafe_b64decode(sys.argv[2] + "=" * (-len(sys.argv[2]) % 4))
key = Ed25519PublicKey.from_public_bytes(raw)
print(jwt.get_unverified_header(token)["typ"], jwt.decode(token, key, algorithms=["EdDSA"])["licenses"][0]["seats"])
"##,
        &[&lic, &public],
    );
    assert_eq!(read.trim(), "leasehold-entitlement 4");

    // A file signed by Python's cryptography (with the same PEM key) passes
    // the tool's check; with a claim changed after signing, it fails.
    let made = python(
        r##"
import base64, json, sys
from cryptography.hazmat.primitives.serialization import load_pem_private_key
key = load_pem_private_key(open(sys.argv[1], "rb").read(), None)
b64 = lambda b: base64.urlsafe_b64encode(b).decode().rstrip("=")
head = b64(json.dumps({"alg": "EdDSA", "typ": "leasehold-entitlement"}).encode())
body = b64(json.dumps({"iss": "keyright", "jti": "py", "iat": 1800000000, "licenses": [{"id": "cad", "seats": 7}]}).encode())
sig = b64(key.sign(f"{head}.{body}".encode()))
open(sys.argv[2], "w").write(f"# made in Python\n{head}.{body}.{sig}\n")
forged = b64(json.dumps({"iss": "keyright", "jti": "py", "iat": 1800000000, "licenses": [{"id": "cad", "seats": 70}]}).encode())
open(sys.argv[3], "w").write(f"{head}.{forged}.{sig}\n")
print("ok")
"##,
        &[&key, &dir.path("py.lic"), &dir.path("forged.lic")],
    );
    assert_eq!(made.trim(), "ok");
    assert_eq!(
        inspect_json(&dir.path("py.lic"), &public)["claims"]["licenses"][0]["seats"],
        7
    );
    let forged = leasehold(&[
        "entitlement",
        "inspect",
        &dir.path("forged.lic"),
        "--vendor-key",
        &public,
    ]);
    assert_eq!(
        forged.status.code(),
        Some(1),
        "a changed claim breaks the signature"
    );
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
