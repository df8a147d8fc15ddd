//! The programs the suites run: where the workspace's built binaries are,
//! and the external tools (tmux, chromedriver, ...) a test needs.

use std::path::PathBuf;
use std::process::{Command, Stdio};

/// Fails the test, saying how to get it, unless `check` runs and exits 0.
/// A test whose tool or permission is missing fails instead of passing
/// unseen; `bash .ci/run` installs everything the suite needs.
pub fn require_tool(check: &mut Command, need: &str, how: &str) {
    let detail = match check.stdin(Stdio::null()).output() {
        Ok(out) if out.status.success() => return,
        Ok(out) => format!(
            "{:?} exited with {}: {}",
            check.get_program(),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ),
        Err(e) => format!("cannot run {:?}: {e}", check.get_program()),
    };
    panic!(
        "needs {need}: {how} (bash .ci/run does)
{detail}"
    );
}

/// Directory holding the workspace's built binaries.
pub fn bin_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("LEASEHOLD_BIN_DIR") {
        return PathBuf::from(dir);
    }
    let exe = std::env::current_exe().expect("current exe");
    // target/debug/deps/<test>-<hash> → target/debug
    let mut dir = exe.parent().expect("exe dir").to_path_buf();
    if dir.ends_with("deps") {
        dir.pop();
    }
    dir
}

pub fn leaseholdd_bin() -> PathBuf {
    bin_dir().join("leaseholdd")
}

pub fn leasehold_bin() -> PathBuf {
    bin_dir().join("leasehold")
}

/// The environment that runs a program under libfaketime with its wall
/// clock moved by `offset` (`"-1d"`, `"+2h"`), its monotonic clock left
/// alone: the library the `faketime` wrapper preloads, found by asking it.
/// (The wrapper itself is not used: it stays the parent of the program, so
/// the harness would kill it instead of the server.) Fails the test
/// without faketime.
pub fn faketime_env(offset: &str) -> Vec<(String, String)> {
    require_tool(
        Command::new("faketime").args(["-f", "+0", "true"]),
        "faketime (libfaketime)",
        "`apt-get install faketime`",
    );
    let out = Command::new("faketime")
        .args(["-f", "+0", "printenv", "LD_PRELOAD"])
        .output()
        .expect("run faketime");
    let preload = String::from_utf8(out.stdout).unwrap().trim().to_string();
    assert!(
        preload.contains("libfaketime"),
        "faketime preloads libfaketime: {preload:?}"
    );
    [
        ("LD_PRELOAD", preload.as_str()),
        ("FAKETIME", offset),
        ("FAKETIME_DONT_FAKE_MONOTONIC", "1"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect()
}
