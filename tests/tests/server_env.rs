//! `LEASEHOLD_SERVER` against the real `leaseholdd`: with only the variable
//! set (no `--server`), the one-shot commands, `borrow`, `return`,
//! `simulate` and the console all talk to that server; `--server` wins over
//! it; a bad URL in it is a usage error naming it; `--help` shows it.

use std::path::Path;
use std::process::{Output, Stdio};
use std::time::Duration;

use leasehold_tests::tmux::{Tmux, require_tmux};
use leasehold_tests::{LENDING, Server, leasehold_bin};
use serde_json::Value;
use tokio::process::Command;

/// Nothing listens on loopback port 1: a server URL that must not be used.
const NOWHERE: &str = "http://127.0.0.1:1";

/// `leasehold ARGS` in `cwd` with `LEASEHOLD_SERVER` set to `server` (or
/// unset) and no token or data dir from the test's own environment;
/// bounded to 30 s.
async fn leasehold(server: Option<&str>, cwd: &Path, args: &[&str]) -> Output {
    let bin = leasehold_bin();
    assert!(
        bin.exists(),
        "{} not built: run `cargo build -p leasehold-tui` first",
        bin.display()
    );
    let mut cmd = Command::new(&bin);
    cmd.args(args)
        .current_dir(cwd)
        .env_remove("LEASEHOLD_SERVER")
        .env_remove("LEASEHOLD_ADMIN_TOKEN")
        .env_remove("LEASEHOLD_DATA_DIR")
        .env("NO_COLOR", "1")
        .stdin(Stdio::null());
    if let Some(s) = server {
        cmd.env("LEASEHOLD_SERVER", s);
    }
    tokio::time::timeout(Duration::from_secs(30), cmd.output())
        .await
        .expect("leasehold finished within 30 s")
        .expect("run leasehold")
}

/// stdout of a run that must succeed.
fn ok(out: &Output, what: &str) -> String {
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{what} failed\nstdout:\n{stdout}\nstderr:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

async fn seat_state(server: &Server, seat: &str) -> Option<String> {
    server
        .seats(Some("lab"))
        .await
        .into_iter()
        .find(|s| s["seat_id"] == seat)
        .map(|s| s["state"].as_str().unwrap().to_string())
}

#[tokio::test]
async fn one_shot_commands_borrow_and_return_use_leasehold_server() {
    let server = Server::start(LENDING).await;
    let dir = tempfile::tempdir().unwrap();
    let env = Some(server.base.as_str());
    let token = server.admin_token.as_str();

    // Borrow with only the variable: the seat is out on this server.
    #[rustfmt::skip]
    let borrow = [
        "borrow", "--license", "lab", "--key", "lab-key", "--holder", "alice",
        "--fingerprint", "alice-laptop", "--for", "1h", "--json",
    ];
    let lease: Value =
        serde_json::from_str(&ok(&leasehold(env, dir.path(), &borrow).await, "borrow")).unwrap();
    let seat = lease["seat_id"].as_str().unwrap().to_string();
    assert_eq!(
        seat_state(&server, &seat).await.as_deref(),
        Some("borrowed")
    );

    // One-shot admin commands see it there.
    let seats: Value = serde_json::from_str(&ok(
        &leasehold(env, dir.path(), &["seats", "--json", "--token", token]).await,
        "seats",
    ))
    .unwrap();
    assert!(
        seats["seats"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s["seat_id"] == seat.as_str() && s["state"] == "borrowed"),
        "{seats}"
    );
    let status = ok(
        &leasehold(env, dir.path(), &["status", "--token", token]).await,
        "status",
    );
    assert!(
        status.contains(&format!("server {}", server.base)) && status.contains("lab"),
        "{status}"
    );

    // `--server` wins over the variable: with it pointing nowhere, the
    // flag's server still answers.
    let flag = leasehold(
        Some(NOWHERE),
        dir.path(),
        &[
            "status",
            "--json",
            "--token",
            token,
            "--server",
            &server.base,
        ],
    )
    .await;
    let licenses: Value = serde_json::from_str(&ok(&flag, "status --server")).unwrap();
    assert_eq!(licenses["licenses"][0]["id"], "lab", "{licenses}");
    // ... and without the flag, the variable's server is the one tried.
    let nowhere = leasehold(Some(NOWHERE), dir.path(), &["status", "--token", token]).await;
    let err = String::from_utf8_lossy(&nowhere.stderr);
    assert_eq!(nowhere.status.code(), Some(1), "{err}");
    assert!(
        err.contains(&format!("cannot reach the server at {NOWHERE}")),
        "{err}"
    );

    // Return with only the variable: freed at once.
    #[rustfmt::skip]
    let out = ok(
        &leasehold(env, dir.path(), &["return", "--license", "lab", "--key", "lab-key", &seat]).await,
        "return",
    );
    assert_eq!(out.trim(), format!("returned seat {seat}"));
    assert_eq!(seat_state(&server, &seat).await, None);
}

#[tokio::test]
async fn simulate_uses_leasehold_server() {
    let server = Server::start(LENDING).await;
    #[rustfmt::skip]
    let out = leasehold(Some(&server.base), &std::env::temp_dir(), &[
        "simulate", "--token", &server.admin_token, "--license", "lab", "--key", "lab-key",
        "--clients", "3", "--duration", "2s", "--seed", "7", "--json",
    ])
    .await;
    let stdout = ok(&out, "simulate");
    let summary: Value = serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"));
    assert_eq!(summary["server"], server.base.as_str(), "{summary}");
    assert_eq!(
        summary["admin"], true,
        "the token worked on that server: {summary}"
    );
    assert_eq!(
        summary["seats"], 3,
        "the pool size came from that server: {summary}"
    );
    let checkouts = server
        .events()
        .await
        .iter()
        .filter(|e| e["license_id"] == "lab" && e["kind"] == "checkout")
        .count();
    assert!(checkouts >= 1, "the simulated clients checked out there");
}

#[tokio::test]
async fn a_bad_leasehold_server_is_a_usage_error_naming_it() {
    let dir = std::env::temp_dir();
    #[rustfmt::skip]
    let borrow = [
        "borrow", "--license", "l", "--key", "k", "--holder", "h", "--fingerprint", "f",
        "--for", "1h",
    ];
    for args in [&["seats"][..], &borrow, &["simulate", "--duration", "1s"]] {
        let out = leasehold(Some("localhost:7400"), &dir, args).await;
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.starts_with(
                "error: invalid value 'localhost:7400' for LEASEHOLD_SERVER (read when \
                 --server is not given): not an http:// or https:// URL"
            ),
            "{args:?}: {err}"
        );
    }
    // The same check on the flag names the flag.
    let out = leasehold(None, &dir, &["seats", "--server", "localhost:7400"]).await;
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.starts_with("error: invalid value 'localhost:7400' for '--server <URL>'"),
        "{err}"
    );

    // --help names the variable, and shows its value when set.
    let help = ok(&leasehold(None, &dir, &["--help"]).await, "--help");
    assert!(help.contains("[env: LEASEHOLD_SERVER=]"), "{help}");
    let help = ok(
        &leasehold(Some("https://lh.example.com"), &dir, &["seats", "--help"]).await,
        "seats --help",
    );
    assert!(
        help.contains("[env: LEASEHOLD_SERVER=https://lh.example.com]"),
        "{help}"
    );
}

fn sh_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

#[tokio::test]
async fn the_console_uses_leasehold_server() {
    require_tmux();
    let server = Server::start(LENDING).await;
    let logs = tempfile::tempdir().unwrap();
    // No --server: only the variable says where the server is.
    let command = format!(
        "env -u LEASEHOLD_DATA_DIR NO_COLOR=1 LEASEHOLD_SERVER={} {} --token {} --log-file {}",
        sh_quote(&server.base),
        sh_quote(&leasehold_bin().to_string_lossy()),
        sh_quote(&server.admin_token),
        sh_quote(&logs.path().join("console.log").to_string_lossy()),
    );
    let tmux = Tmux::start("server-env", &command);
    let screen = tmux
        .wait_for("the console connected", Duration::from_secs(20), |s| {
            s.contains("● connected") && s.contains("lab")
        })
        .await;
    assert!(screen.contains(&server.base), "{screen}");
    tmux.keys(&["q"]);
}
