//! The `leasehold` binary's command line, without a server.
//!
//! Besides what they check, these tests make `cargo test --workspace` build
//! the `leasehold` binary, which the end-to-end tests in `tests/tests/console.rs`
//! run from `target/<profile>/`.

use std::process::{Command, Output};

fn leasehold(args: &[&str], cwd: &std::path::Path) -> Output {
    leasehold_with_server_env(None, args, cwd)
}

/// `leasehold ARGS` with `LEASEHOLD_SERVER` set to `server` (else unset),
/// and no admin token from the environment.
fn leasehold_with_server_env(server: Option<&str>, args: &[&str], cwd: &std::path::Path) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_leasehold"));
    cmd.args(args)
        .current_dir(cwd)
        .env_remove("LEASEHOLD_ADMIN_TOKEN")
        .env_remove("LEASEHOLD_SERVER");
    if let Some(s) = server {
        cmd.env("LEASEHOLD_SERVER", s);
    }
    cmd.output().expect("run leasehold")
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn help_lists_the_one_shot_commands() {
    let out = leasehold(&["--help"], &std::env::temp_dir());
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    for cmd in [
        "status",
        "seats",
        "events",
        "revoke",
        "report",
        "entitlements",
        "--server",
        "--token",
        "--read-only",
    ] {
        assert!(help.contains(cmd), "{cmd} missing from --help:\n{help}");
    }
    assert!(help.contains("LEASEHOLD_ADMIN_TOKEN"), "{help}");
    assert!(help.contains("[env: LEASEHOLD_SERVER=]"), "{help}");
}

/// Which server a command tried: nothing listens on loopback ports 1 and 2,
/// so each run fails with one line naming the URL it used.
#[test]
fn server_comes_from_the_flag_then_leasehold_server_then_the_default() {
    let dir = std::env::temp_dir();
    let (flag, env) = ("http://127.0.0.1:1", "http://127.0.0.1:2");
    let tried = |env_value: Option<&str>, args: &[&str]| {
        let out = leasehold_with_server_env(env_value, args, &dir);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{err}");
        err
    };
    let status = ["status", "--token", "t"];
    let with_flag = [&status[..], &["--server", flag]].concat();

    // The flag wins over the variable (before or after the subcommand).
    let err = tried(Some(env), &with_flag);
    assert!(
        err.contains(&format!("cannot reach the server at {flag}:")),
        "{err}"
    );
    let err = tried(Some(env), &["--server", flag, "seats", "--token", "t"]);
    assert!(err.contains(&format!("at {flag}:")), "{err}");
    // The variable, when there is no flag: for every command that talks to
    // a server.
    #[rustfmt::skip]
    let commands: [&[&str]; 10] = [
        &status,
        &["entitlements", "--token", "t"],
        &["entitlements", "--json", "--token", "t"],
        &["seats", "--token", "t"],
        &["events", "--token", "t"],
        &["revoke", "abc", "--token", "t"],
        &["report", "--token", "t"],
        &["borrow", "--license", "l", "--key", "k", "--holder", "h", "--fingerprint", "f", "--for", "1h"],
        &["return", "--license", "l", "--key", "k", "abc"],
        &["simulate", "--license", "l", "--key", "k", "--duration", "1s", "--token", "t"],
    ];
    for args in commands {
        let err = tried(Some(env), args);
        assert!(
            err.contains("127.0.0.1:2") && !err.contains("7400"),
            "{args:?}: {err}"
        );
    }
    // Neither: the default.
    let out = leasehold_with_server_env(None, &status, &dir);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("http://127.0.0.1:7400"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_bad_server_url_is_a_usage_error_naming_flag_or_variable() {
    let dir = std::env::temp_dir();
    let out = leasehold_with_server_env(Some("ftp://x"), &["seats"], &dir);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.starts_with(
            "error: invalid value 'ftp://x' for LEASEHOLD_SERVER (read when --server is not \
             given): not an http:// or https:// URL; e.g. http://127.0.0.1:7400"
        ),
        "{err}"
    );
    let out = leasehold_with_server_env(
        Some(""),
        &["return", "--license", "l", "--key", "k", "abc"],
        &dir,
    );
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("for LEASEHOLD_SERVER") && err.contains("it is empty"),
        "{err}"
    );

    let out = leasehold_with_server_env(None, &["seats", "--server", "ftp://x"], &dir);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.starts_with("error: invalid value 'ftp://x' for '--server <URL>': not an http"),
        "{err}"
    );
    assert!(!err.contains("LEASEHOLD_SERVER"), "{err}");
    // A good flag over a bad variable: the variable is not even read.
    let out = leasehold_with_server_env(
        Some("ftp://x"),
        &["seats", "--token", "t", "--server", "http://127.0.0.1:1"],
        &dir,
    );
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains("cannot reach the server at http://127.0.0.1:1"));
}

#[test]
fn report_help_states_the_verdict_thresholds() {
    use leasehold_tui::report::verdict::{SHORT_FULL_PCT, SURPLUS_PEAK_PCT};
    let out = leasehold(&["report", "--help"], &std::env::temp_dir());
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    for needle in [
        format!(">= {SHORT_FULL_PCT}% of the range"),
        format!("<= {SURPLUS_PEAK_PCT}% of the seats"),
        "at least 7 days".to_string(),
        "--from".to_string(),
        "--csv".to_string(),
    ] {
        assert!(help.contains(&needle), "{needle} missing:\n{help}");
    }
    let out = leasehold(&["report", "--json", "--csv"], &std::env::temp_dir());
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let out = leasehold(&["report", "--from", "yesterday"], &std::env::temp_dir());
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
}

#[test]
fn usage_errors_exit_2() {
    let out = leasehold(&["revoke"], &std::env::temp_dir());
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let out = leasehold(
        &["revoke", "abc", "--block", "forever"],
        &std::env::temp_dir(),
    );
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
}

#[test]
fn no_token_and_no_server_are_one_line_each() {
    let empty = std::env::temp_dir().join(format!("leasehold-cli-{}", std::process::id()));
    std::fs::create_dir_all(&empty).unwrap();

    let out = leasehold(&["status"], &empty);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(err.starts_with("leasehold: no admin token"), "{err}");

    // Port 1 on loopback: nothing listens there.
    let out = leasehold(
        &["seats", "--server", "http://127.0.0.1:1", "--token", "t"],
        &empty,
    );
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(
        err.contains("cannot reach the server at http://127.0.0.1:1"),
        "{err}"
    );
    std::fs::remove_dir_all(&empty).unwrap();
}
