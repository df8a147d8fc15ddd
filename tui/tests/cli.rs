//! The `leasehold` binary's command line, without a server.
//!
//! Besides what they check, these tests make `cargo test --workspace` build
//! the `leasehold` binary, which the end-to-end tests in `tests/tests/console.rs`
//! run from `target/<profile>/`.

use std::process::{Command, Output};

fn leasehold(args: &[&str], cwd: &std::path::Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_leasehold"))
        .args(args)
        .current_dir(cwd)
        .env_remove("LEASEHOLD_ADMIN_TOKEN")
        .output()
        .expect("run leasehold")
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
        "--server",
        "--token",
        "--read-only",
    ] {
        assert!(help.contains(cmd), "{cmd} missing from --help:\n{help}");
    }
    assert!(help.contains("LEASEHOLD_ADMIN_TOKEN"), "{help}");
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
