//! `leasehold borrow` and `leasehold return` against the real `leaseholdd`:
//! the lease printed, the token written 0600 and verifiable offline against
//! the JWKS, the seat borrowed on the server (heartbeat 409 `borrowed`), each
//! refusal as one clear line, and the early return freeing the seat.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use leasehold_common::token::{Jwks, verify};
use leasehold_tests::{Run, Server, run_leasehold};
use serde_json::Value;

const LICENSES: &str = r#"
[[license]]
id = "lend"
key = "lend-key"
seats = 3
ttl = "60s"
skew = "1s"
reap_grace = "2s"

[license.borrow]
max = "1h"
seats = 1
allow = ["alice", "bob"]

[[license]]
id = "plain"
key = "plain-key"
seats = 3
ttl = "60s"
skew = "1s"
reap_grace = "2s"
"#;

/// `leasehold ARGS` with no admin token: borrowing needs only the key.
async fn leasehold(server: &Server, cwd: &Path, args: &[&str]) -> Run {
    run_leasehold(server, None, cwd, args).await
}

fn borrow_args<'a>(license: &'a str, holder: &'a str, fp: &'a str, dur: &'a str) -> Vec<&'a str> {
    let key = if license == "lend" {
        "lend-key"
    } else {
        "plain-key"
    };
    #[rustfmt::skip]
    let args = vec![
        "borrow", "--license", license, "--key", key, "--holder", holder,
        "--fingerprint", fp, "--for", dur,
    ];
    args
}

fn ok(run: &Run, what: &str) -> String {
    assert_eq!(
        run.code,
        Some(0),
        "{what} failed\nstdout:\n{}\nstderr:\n{}",
        run.stdout,
        run.stderr
    );
    run.stdout.clone()
}

/// A refusal: a non-zero exit and one `leasehold: ` line on stderr.
fn refused(run: &Run, what: &str) -> String {
    assert!(
        run.code.is_some_and(|c| c != 0),
        "{what} should fail; stdout:\n{}",
        run.stdout
    );
    let err = run.stderr.trim_end();
    assert_eq!(err.lines().count(), 1, "{what}: one line on stderr:\n{err}");
    assert!(err.starts_with("leasehold: "), "{err}");
    err.to_string()
}

async fn seat_state(server: &Server, seat: &str) -> Option<String> {
    server
        .seats(Some("lend"))
        .await
        .into_iter()
        .find(|s| s["seat_id"] == seat)
        .map(|s| s["state"].as_str().unwrap().to_string())
}

#[tokio::test]
async fn borrow_writes_a_verifiable_token_and_return_frees_the_seat() {
    let server = Server::start(LICENSES).await;
    let dir = tempfile::tempdir().unwrap();
    let token_file = dir.path().join("seat.jwt");
    let mut args = borrow_args("lend", "alice", "alice-laptop", "30m");
    args.extend(["--out", token_file.to_str().unwrap(), "--json"]);
    let lease: Value =
        serde_json::from_str(&ok(&leasehold(&server, dir.path(), &args).await, "borrow")).unwrap();
    assert_eq!(lease["borrowed"], true);
    let seat = lease["seat_id"].as_str().unwrap().to_string();

    // The token file: 0600, the lease's token, and it verifies offline
    // with `borrowed` and an `exp` 30 minutes after issue.
    let mode = std::fs::metadata(&token_file).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    let token = std::fs::read_to_string(&token_file).unwrap();
    assert_eq!(token.trim(), lease["token"].as_str().unwrap());
    let jwks: Jwks =
        serde_json::from_value(server.get_json("/.well-known/jwks.json").await).unwrap();
    let claims = verify(token.trim(), &jwks).expect("the token verifies against the JWKS");
    assert!(claims.borrowed, "{claims:?}");
    assert_eq!(claims.sid, seat);
    assert_eq!(claims.exp - claims.iat, 1800, "{claims:?}");

    // On the server: borrowed, and not renewed by a heartbeat.
    assert_eq!(
        seat_state(&server, &seat).await.as_deref(),
        Some("borrowed")
    );
    let hb = server.heartbeat("lend", "lend-key", &seat).await;
    assert_eq!(hb.status(), 409);
    let body: Value = hb.json().await.unwrap();
    assert_eq!(body["error"], "borrowed");

    // The one seat `lend` lends is out: bob is told so, in one line.
    let err = refused(
        &leasehold(
            &server,
            dir.path(),
            &borrow_args("lend", "bob", "bob-pc", "10m"),
        )
        .await,
        "a second borrow",
    );
    assert!(
        err.contains("1 seat(s) of \"lend\" are borrowed already"),
        "{err}"
    );
    assert!(err.contains("409 limit_reached"), "{err}");

    // The early return: the seat is gone at once, and bob may borrow.
    #[rustfmt::skip]
    let out = ok(
        &leasehold(&server, dir.path(), &["return", "--license", "lend", "--key", "lend-key", &seat]).await,
        "return",
    );
    assert_eq!(out.trim(), format!("returned seat {seat}"));
    assert_eq!(
        seat_state(&server, &seat).await,
        None,
        "freed at once, no linger"
    );
    let out = ok(
        &leasehold(
            &server,
            dir.path(),
            &borrow_args("lend", "bob", "bob-pc", "10m"),
        )
        .await,
        "bob's borrow",
    );
    assert!(out.starts_with("borrowed seat "), "{out}");
    assert!(
        out.contains("  borrowed true") && out.contains("(10m00s from now)"),
        "{out}"
    );
}

#[tokio::test]
async fn every_refusal_is_one_clear_line() {
    let server = Server::start(LICENSES).await;
    let dir = tempfile::tempdir().unwrap();
    let too_long = refused(
        &leasehold(
            &server,
            dir.path(),
            &borrow_args("lend", "alice", "a-fp", "3d"),
        )
        .await,
        "longer than borrow.max",
    );
    assert!(
        too_long.contains("borrow_s must be 1 to 3600") && too_long.contains("400 invalid_request"),
        "{too_long}"
    );
    let outsider = refused(
        &leasehold(
            &server,
            dir.path(),
            &borrow_args("lend", "carol", "c-fp", "10m"),
        )
        .await,
        "not in borrow.allow",
    );
    assert!(outsider.contains("403 not_allowed"), "{outsider}");
    let no_borrow = refused(
        &leasehold(
            &server,
            dir.path(),
            &borrow_args("plain", "alice", "a-fp", "10m"),
        )
        .await,
        "a license that lends nothing",
    );
    assert!(
        no_borrow.contains("\"plain\" lends no seats") && no_borrow.contains("[license.borrow]"),
        "{no_borrow}"
    );
    let wrong_key = refused(
        &leasehold(
            &server,
            dir.path(),
            &["return", "--license", "lend", "--key", "nope", "abc"],
        )
        .await,
        "a wrong key",
    );
    assert!(wrong_key.contains("unauthorized"), "{wrong_key}");
    assert!(
        server.seats(None).await.is_empty(),
        "no refusal took a seat"
    );
}

#[tokio::test]
async fn a_symlinked_token_file_is_refused_before_anything_is_borrowed() {
    let server = Server::start(LICENSES).await;
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("elsewhere");
    std::fs::write(&target, "keep").unwrap();
    let link = dir.path().join("seat.jwt");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let mut args = borrow_args("lend", "alice", "a-fp", "10m");
    args.extend(["--out", link.to_str().unwrap()]);
    let err = refused(&leasehold(&server, dir.path(), &args).await, "a symlink");
    assert!(err.contains("symlink"), "{err}");
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep");
    assert!(server.seats(None).await.is_empty(), "nothing borrowed");
}
