//! Hostile input: schemathesis fuzzes the real `leaseholdd` from
//! the contract in `assets/openapi.yaml`, with the settings of
//! `assets/schemathesis/schemathesis.toml` (every check: no 5xx, status
//! codes, content types, headers and bodies conform to the spec, ...).
//!
//! Needs schemathesis from PyPI; `.ci/run` installs the pinned version.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use leasehold_tests::{Server, ServerOptions, license_toml, require_tool};

/// The version `.ci/run` installs.
const PIP_INSTALL: &str = "python3 -m pip install 'schemathesis==4.32.5'";

/// The license the config pins client operations to: a big pool, so the
/// fuzzer's checkouts do not only meet `409 no_seats_available`.
#[rustfmt::skip]
const LICENSES: &str = concat!(
    license_toml!("demo-cad", seats = 100000, ttl = "60s", skew = "5s", reap_grace = "15s"),
    license_toml!("demo-ide", seats = 3, ttl = "30s", skew = "2s", reap_grace = "10s"),
);

/// Hard cap on the run (the config bounds it to about a minute).
const TIMEOUT: Duration = Duration::from_secs(420);

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root")
        .to_path_buf()
}

/// `schemathesis` on PATH, else `python3 -m schemathesis.cli`; fails the
/// test, saying how to install it, when neither runs.
fn schemathesis_command() -> Command {
    let on_path = Command::new("schemathesis")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if on_path {
        return Command::new("schemathesis");
    }
    let module = || {
        let mut cmd = Command::new("python3");
        cmd.args(["-m", "schemathesis.cli"]);
        cmd
    };
    require_tool(
        module().arg("--version"),
        "schemathesis",
        &format!("install it with `{PIP_INSTALL}`"),
    );
    module()
}

#[tokio::test(flavor = "multi_thread")]
async fn schemathesis_finds_no_server_error_and_no_contract_violation() {
    let mut cmd = schemathesis_command();
    // schemathesis sends wrong tokens on purpose (its auth checks); with
    // the default ten a minute, the failure limiter would answer 429 to
    // most of the run and leave the logic behind it untested.
    let server =
        Server::start_with(ServerOptions::new(LICENSES).arg("--auth-failures=1000000")).await;
    let root = workspace_root();
    // Run from a scratch dir: schemathesis and hypothesis keep caches in the
    // current directory.
    let scratch = tempfile::tempdir().expect("scratch dir");
    cmd.arg("--no-color")
        .arg("--config-file")
        .arg(root.join("assets/schemathesis/schemathesis.toml"))
        .arg("run")
        .arg(root.join("assets/openapi.yaml"))
        .arg("--url")
        .arg(&server.base)
        .current_dir(scratch.path())
        .env("LEASEHOLD_ADMIN_TOKEN", &server.admin_token)
        .env("LEASEHOLD_LICENSE", "demo-cad")
        .env("LEASEHOLD_LICENSE_KEY", "demo-cad-key")
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let child = cmd.spawn().expect("start schemathesis");
    let pid = child.id();
    let started = Instant::now();
    let output = tokio::time::timeout(
        TIMEOUT,
        tokio::task::spawn_blocking(move || child.wait_with_output()),
    )
    .await;
    let output = match output {
        Ok(joined) => joined.expect("join").expect("schemathesis output"),
        Err(_) => {
            let _ = Command::new("kill")
                .arg("-KILL")
                .arg(pid.to_string())
                .status();
            panic!("schemathesis did not finish within {TIMEOUT:?}");
        }
    };
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    // The summary (and any failures before it) is what a reader of CI needs.
    let summary = stdout
        .find("=== FAILURES ===")
        .or_else(|| stdout.find("=== WARNINGS ==="))
        .or_else(|| stdout.find("=== SUMMARY ==="))
        .map(|i| stdout[..i].rfind('\n').map_or(i, |n| n + 1))
        .map_or(&*stdout, |i| &stdout[i..]);
    println!(
        "schemathesis finished in {:.1}s ({}):\n{summary}",
        started.elapsed().as_secs_f64(),
        output.status
    );
    let mut problems = Vec::new();
    if !output.status.success() {
        problems.push(format!("schemathesis exited with {}", output.status));
    }
    // Belt and braces: the server must never have panicked.
    let logs = server.logs();
    if logs.contains("panicked") {
        problems.push("the server panicked".to_string());
    }
    assert!(
        problems.is_empty(),
        "{}\n--- schemathesis stdout ---\n{stdout}\n--- stderr ---\n{stderr}\n--- server log (tail) ---\n{}",
        problems.join("; "),
        logs.lines()
            .rev()
            .take(40)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect::<Vec<_>>()
            .join("\n")
    );
}
