//! The usage a customer signs (issue 42; docs/src/entitlements.md) from
//! the command line, against the real `leaseholdd`: `leasehold report
//! --attest` writes the server's signed statement, whose figures are the
//! usage summary's over the same range; `leasehold vendor verify-usage`
//! (offline) accepts it against the entitlement bound to that server and
//! prints the figures, and refuses with exit 1 and a sentence a tampered
//! statement, another vendor's key, an entitlement bound to another server
//! and an unbound one. The README's Python snippet (PyJWT and
//! `cryptography`) is run as written on the same files.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use leasehold_tests::vendor::{Vendor, leaseholdd_kid, unix_now};
use leasehold_tests::{
    Run, Server, ServerOptions, eventually, leasehold_bin, require_tool, run_leasehold,
};
use serde_json::{Value, json};
use tempfile::TempDir;

const SOON: Duration = Duration::from_secs(15);

/// A server whose `cad` (2 seats from keyright's entitlement, bound to the
/// server's own kid) had three holders ask: two seats taken, one denial.
struct Rig {
    s: Server,
    vendor: Vendor,
    kid: String,
    /// The entitlements directory, and where the test writes its files.
    dir: TempDir,
}

impl Rig {
    async fn start() -> Rig {
        let vendor = Vendor::generate("keyright");
        let licenses = format!(
            "{}\n[[license]]\nid = \"cad\"\nkey = \"cad-key\"\nvendor = \"keyright\"\n\
             ttl = \"60s\"\nskew = \"5s\"\nreap_grace = \"15s\"\n",
            vendor.toml()
        );
        let dir = tempfile::tempdir().expect("entitlements dir");
        let options = ServerOptions::new(&licenses)
            .arg("--entitlements")
            .arg(dir.path().to_str().expect("utf-8 path"));
        let s = Server::start_with(options).await;
        let kid = s.admin_get("/v1/admin/entitlements").await["server_kid"]
            .as_str()
            .expect("server_kid")
            .to_string();
        let rig = Rig {
            s,
            vendor,
            kid,
            dir,
        };
        let bound = rig.lic("cad", &[rig.kid.as_str()]);
        std::fs::write(rig.dir.path().join("acme.lic.tmp"), bound).expect("write");
        std::fs::rename(
            rig.dir.path().join("acme.lic.tmp"),
            rig.dir.path().join("acme.lic"),
        )
        .expect("rename");
        eventually(SOON, "cad entitled to 2 seats", || async {
            let view = rig.s.admin_get("/v1/admin/licenses").await;
            let cad = view["licenses"]
                .as_array()?
                .iter()
                .find(|l| l["id"] == "cad")?;
            (cad["entitled_seats"] == 2).then_some(())
        })
        .await;
        for holder in ["ann", "bob", "cy"] {
            let resp = rig
                .s
                .checkout("cad", "cad-key", json!({"holder": holder}))
                .await;
            let want = if holder == "cy" { 409 } else { 201 };
            assert_eq!(resp.status().as_u16(), want, "{holder}");
        }
        // Seat-hours well above 1e-4, which Python and Rust print alike.
        tokio::time::sleep(Duration::from_secs(2)).await;
        rig
    }

    /// keyright's entitlement `acme` for Acme granting 2 seats of `license`,
    /// bound to `aud` (none: unbound), as a `.lic` file's text.
    fn lic(&self, license: &str, aud: &[&str]) -> String {
        let mut claims = json!({
            "iss": "keyright", "jti": "acme", "sub": "Acme", "iat": unix_now() - 60,
            "licenses": [{"id": license, "seats": 2}],
        });
        if !aud.is_empty() {
            claims["aud"] = json!(aud);
        }
        format!(
            "# keyright's entitlement for Acme\n{}\n",
            self.vendor.sign(&claims)
        )
    }

    /// A file of the test's directory (beside the entitlements, which only
    /// `*.lic` files there would change).
    fn file(&self, name: &str, text: &str) -> String {
        let path = self.dir.path().join("out").join(name);
        std::fs::create_dir_all(path.parent().unwrap()).expect("mkdir");
        std::fs::write(&path, text).expect("write");
        path.to_str().expect("utf-8").to_string()
    }

    fn out(&self, name: &str) -> PathBuf {
        let dir = self.dir.path().join("out");
        std::fs::create_dir_all(&dir).expect("mkdir");
        dir.join(name)
    }

    async fn leasehold(&self, token: &str, args: &[&str]) -> Run {
        run_leasehold(&self.s, Some(token), &std::env::temp_dir(), args).await
    }

    /// `GET /v1/admin/usage/attestation` over `from..to`, as the server
    /// answers it.
    async fn attestation(&self, from: &str, to: &str) -> String {
        let resp = self
            .s
            .client()
            .get(self.s.url(&format!(
                "/v1/admin/usage/attestation?license=cad&from={from}&to={to}"
            )))
            .bearer_auth(&self.s.admin_token)
            .send()
            .await
            .expect("attestation");
        assert_eq!(resp.status(), 200);
        resp.text().await.expect("text").trim().to_string()
    }
}

/// `leasehold ARGS` with no server at all (an address nothing listens on).
fn offline(args: &[&str]) -> Run {
    let out = Command::new(leasehold_bin())
        .args(args)
        .env("LEASEHOLD_SERVER", "http://127.0.0.1:9")
        .env_remove("LEASEHOLD_ADMIN_TOKEN")
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .output()
        .expect("run leasehold");
    Run::from(out)
}

fn ok(run: &Run, what: &str) {
    assert_eq!(
        run.code,
        Some(0),
        "{what}\nstdout:\n{}\nstderr:\n{}",
        run.stdout,
        run.stderr
    );
}

/// Exit 1 and one line on stderr: `leasehold: ` and the sentence.
fn refused(run: &Run, sentence: &str) {
    assert_eq!(run.code, Some(1), "{run:?}");
    assert!(run.stdout.is_empty(), "{run:?}");
    let line = run.stderr.trim_end();
    assert!(!line.contains('\n'), "one line: {run:?}");
    assert!(
        line.starts_with(&format!("leasehold: {sentence}")),
        "want {sentence:?}, got {line:?}"
    );
}

/// Seat-hours as the tool prints them: to the hundredth, and as signed
/// when that rounds them (a test's are a few seat-seconds).
fn hours(h: f64) -> String {
    let rounded = format!("{h:.2}");
    if rounded.parse::<f64>() == Ok(h) {
        rounded
    } else {
        format!("{rounded} ({h} as signed)")
    }
}

/// The claims of a compact JWS, unverified (for comparing figures).
fn claims_of(jws: &str) -> Value {
    let attested = leasehold_common::attestation::verify(jws).expect("it verifies");
    serde_json::to_value(attested.claims).expect("claims")
}

/// Now, as RFC 3339: a `to` already past when each view reads the range,
/// so sessions still open count up to it in both alike.
fn past_to() -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("after 1970");
    leasehold_common::Timestamp::from_millis(now.as_millis() as i64).to_rfc3339()
}

fn millis(rfc3339: &str) -> i64 {
    leasehold_common::Timestamp::parse_rfc3339(rfc3339)
        .expect("RFC 3339")
        .as_millis()
}

#[tokio::test]
async fn report_attest_writes_the_usage_summary_signed_and_verify_usage_checks_it() {
    let rig = Rig::start().await;
    let to = past_to();
    let usage = rig.out("usage.jws");
    let usage_s = usage.to_str().unwrap();
    let args = [
        "report",
        "--attest",
        "--license",
        "cad",
        "--from",
        "30d",
        "--to",
        &to,
        "--out",
        usage_s,
    ];
    // A viewer's token is enough, as for `report`.
    let run = rig.leasehold(&rig.s.viewer_token(), &args).await;
    ok(&run, "report --attest");
    let jws = std::fs::read_to_string(&usage).expect("usage.jws written");
    let c = claims_of(jws.trim());
    let (from, to_echo) = (c["from"].as_str().unwrap(), c["to"].as_str().unwrap());
    assert_eq!(to_echo, to, "the range asked for: {c}");
    let span = millis(&to) - millis(from);
    // 30 days back from the server's now, a moment after `to`.
    let month = 30 * 86_400_000;
    assert!((month - 60_000..=month).contains(&span), "{c}");

    // The figures are the usage summary's over the same range.
    let summary = rig
        .s
        .admin_get(&format!("/v1/admin/usage?license=cad&from={from}&to={to}"))
        .await["summary"]
        .clone();
    for figure in ["seats", "peak", "over_s", "true_denials", "denied_holders"] {
        assert_eq!(c[figure], summary[figure], "{figure}: {c} vs {summary}");
    }
    assert_eq!(c["seat_hours"].as_f64(), summary["seat_hours"].as_f64());
    let covered = match &summary["covered_from"] {
        Value::Null => json!(from),
        t => t.clone(),
    };
    assert_eq!(c["covered_from"], covered, "{summary}");
    assert_eq!((&c["seats"], &c["peak"]), (&json!(2), &json!(2)), "{c}");
    assert_eq!(c["true_denials"], 1, "cy was denied: {c}");
    assert_eq!(c["lic"], "cad");
    assert_eq!(c["entitlements"], json!(["acme"]));
    let seat_hours = c["seat_hours"].as_f64().unwrap();
    assert!(seat_hours > 0.0, "{c}");
    assert_eq!(
        run.stdout,
        format!(
            "wrote {usage_s}: cad {}Z to {}Z: 2 seats, peak 2, 0s over, {} seat-hours, \
             1 true denial (1 holder); signed by server {}\n",
            &from[..19],
            &to[..19],
            hours(seat_hours),
            rig.kid
        )
    );

    // Never over an existing file.
    let again = rig.leasehold(&rig.s.admin_token, &args).await;
    refused(&again, &format!("{usage_s} exists: not overwritten"));
    assert_eq!(std::fs::read_to_string(&usage).unwrap(), jws);

    // verify-usage, offline: accepted, the figures in words.
    let bound = rig.file("acme.lic", &rig.lic("cad", &["standby", &rig.kid]));
    let key = rig.vendor.public_key();
    let run = offline(&[
        "vendor",
        "verify-usage",
        usage_s,
        "--entitlement",
        &bound,
        "--vendor-key",
        &key,
    ]);
    ok(&run, "verify-usage");
    for line in [
        format!(
            "verified     {usage_s} is intact, signed by server {}, which {bound} is bound to",
            rig.kid
        ),
        "entitlement  keyright/acme for Acme: cad 2; perpetual".to_string(),
        "license      cad".to_string(),
        "seats        2 at the end of the range".to_string(),
        "peak         2 seats in use at once".to_string(),
        "over         0s in use beyond the seats (0 s)".to_string(),
        format!("seat-hours   {}", hours(seat_hours)),
        "denials      1 true denial, to 1 holder".to_string(),
        "entitlements acme (in force in the range)".to_string(),
    ] {
        assert!(
            run.stdout.lines().any(|l| l == line),
            "no {line:?} in:\n{}",
            run.stdout
        );
    }
    // The key may come from a file holding the [[vendor]] lines.
    let key_file = rig.file("keyright.toml", &rig.vendor.toml());
    let run = offline(&[
        "vendor",
        "verify-usage",
        usage_s,
        "--entitlement",
        &bound,
        "--vendor-key",
        &format!("@{key_file}"),
    ]);
    ok(&run, "verify-usage --vendor-key @FILE");
}

/// Each refusal: exit 1, the sentence saying which check failed.
#[tokio::test]
async fn verify_usage_refuses_what_does_not_hold_saying_which() {
    let rig = Rig::start().await;
    let jws = rig.attestation("2026-01-01T00:00:00Z", &past_to()).await;
    let usage = rig.file("usage.jws", &format!("{jws}\n"));
    let bound = rig.file("acme.lic", &rig.lic("cad", &[&rig.kid]));
    let key = rig.vendor.public_key();
    let verify = |statement: &str, lic: &str, key: &str| {
        offline(&[
            "vendor",
            "verify-usage",
            statement,
            "--entitlement",
            lic,
            "--vendor-key",
            key,
        ])
    };
    ok(&verify(&usage, &bound, &key), "the honest statement");

    // Other figures (another range's) under this statement's signature.
    let other = rig.attestation("2026-02-01T00:00:00Z", &past_to()).await;
    let parts: Vec<&str> = jws.split('.').collect();
    let spliced = format!(
        "{}.{}.{}",
        parts[0],
        other.split('.').nth(1).unwrap(),
        parts[2]
    );
    assert_ne!(spliced, jws);
    let tampered = rig.file("tampered.jws", &spliced);
    refused(
        &verify(&tampered, &bound, &key),
        &format!(
            "{tampered} has been tampered with: its signature does not verify with the server \
             key it names"
        ),
    );

    // The entitlement checked with another vendor's key.
    let stranger = Vendor::generate("keyright").public_key();
    refused(
        &verify(&usage, &bound, &stranger),
        &format!(
            "{bound} does not verify with this vendor key: it was signed with another \
             vendor's key, or altered since"
        ),
    );

    // An entitlement bound to another server: its kid, from its data dir.
    let elsewhere = tempfile::tempdir().expect("another data dir");
    let other_kid = leaseholdd_kid(elsewhere.path());
    assert_ne!(other_kid, rig.kid);
    let theirs = rig.file("theirs.lic", &rig.lic("cad", &[&other_kid]));
    refused(
        &verify(&usage, &theirs, &key),
        &format!(
            "{usage} is a statement from another server: it was signed by server {}, which \
             {theirs} is not bound to (it names {other_kid})",
            rig.kid
        ),
    );

    // An unbound entitlement proves nothing about which server signed.
    let unbound = rig.file("unbound.lic", &rig.lic("cad", &[]));
    refused(
        &verify(&usage, &unbound, &key),
        &format!("{unbound} is not bound to a server (it has no aud)"),
    );

    // Bound to this server, but for another license.
    let ide = rig.file("ide.lic", &rig.lic("ide", &[&rig.kid]));
    refused(
        &verify(&usage, &ide, &key),
        &format!("{usage} reports license cad, which {ide} does not grant (it grants ide)"),
    );
}

/// The README's snippet, as written there, accepts the statement and
/// refuses the same three frauds.
#[tokio::test]
async fn the_readme_python_snippet_verifies_an_attestation() {
    require_tool(
        Command::new("python3").args(["-c", "import jwt, cryptography"]),
        "python3 with PyJWT and cryptography",
        "python3 -m pip install -r assets/examples/requirements.txt",
    );
    let rig = Rig::start().await;
    let jws = rig.attestation("2026-01-01T00:00:00Z", &past_to()).await;
    let c = claims_of(&jws);
    let script = rig.file("verify.py", &readme_snippet());
    let usage = rig.file("usage.jws", &format!("{jws}\n"));
    let bound = rig.file("acme.lic", &rig.lic("cad", &[&rig.kid]));
    let key = rig.vendor.public_key();
    let python = |usage: &str, lic: &str, key: &str| {
        Run::from(
            Command::new("python3")
                .args([script.as_str(), usage, lic, key])
                .stdin(Stdio::null())
                .output()
                .expect("run python3"),
        )
    };
    let run = python(&usage, &bound, &key);
    ok(&run, "the snippet on an honest statement");
    assert!(run.stdout.contains("'lic': 'cad'"), "{}", run.stdout);
    // The figure as Python read it: within a rounding of serde_json's
    // (which, without its float_roundtrip feature, may read the last digit
    // one ulp apart).
    let printed: f64 = run
        .stdout
        .split("'seat_hours': ")
        .nth(1)
        .and_then(|rest| rest.split([',', '}']).next())
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("seat_hours in {}", run.stdout));
    let signed = c["seat_hours"].as_f64().expect("seat_hours");
    assert!(
        (printed - signed).abs() <= signed.abs() * 1e-12,
        "seat_hours {printed} printed, {signed} signed: {}",
        run.stdout
    );

    let other = rig.attestation("2026-02-01T00:00:00Z", &past_to()).await;
    let parts: Vec<&str> = jws.split('.').collect();
    let spliced = format!(
        "{}.{}.{}",
        parts[0],
        other.split('.').nth(1).unwrap(),
        parts[2]
    );
    let tampered = rig.file("tampered.jws", &spliced);
    let stranger = Vendor::generate("keyright").public_key();
    let theirs = rig.file("theirs.lic", &rig.lic("cad", &["another-servers-kid"]));
    let unbound = rig.file("unbound.lic", &rig.lic("cad", &[]));
    let ide = rig.file("ide.lic", &rig.lic("ide", &[&rig.kid]));
    for (what, run, says) in [
        (
            "tampered",
            python(&tampered, &bound, &key),
            "InvalidSignatureError",
        ),
        (
            "another vendor",
            python(&usage, &bound, &stranger),
            "InvalidSignatureError",
        ),
        (
            "another server",
            python(&usage, &theirs, &key),
            "InvalidAudienceError",
        ),
        (
            "unbound",
            python(&usage, &unbound, &key),
            "MissingRequiredClaimError",
        ),
        ("another license", python(&usage, &ide, &key), "not granted"),
    ] {
        assert_ne!(run.code, Some(0), "{what}: {run:?}");
        assert!(
            run.stderr.contains(says),
            "{what}: {says} in {}",
            run.stderr
        );
    }
}

/// The ```python block after the README's `verify-usage.py` marker.
fn readme_snippet() -> String {
    let readme = std::fs::read_to_string(repo().join("README.md")).expect("README.md");
    let (_, after) = readme
        .split_once("<!-- verify-usage.py:")
        .expect("the README marks its Python snippet");
    let (_, code) = after
        .split_once("```python\n")
        .expect("a python block follows the marker");
    let (code, _) = code.split_once("```").expect("the block ends");
    assert!(code.lines().count() <= 10, "ten lines at most:\n{code}");
    code.to_string()
}

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the tests crate sits in the repo")
}
