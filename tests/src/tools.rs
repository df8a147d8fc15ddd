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
/// alone. The library is preloaded directly: the `faketime` wrapper stays
/// the parent of the program (the harness would kill it instead of the
/// server), and it leaves a named semaphore in /dev/shm behind now and
/// then, so a later wrapper whose pid is reused fails with "sem_open: File
/// exists". Fails the test unless the library moves a program's clock.
pub fn faketime_env(offset: &str) -> Vec<(String, String)> {
    let preload = libfaketime();
    [
        ("LD_PRELOAD", preload.as_str()),
        ("FAKETIME", offset),
        ("FAKETIME_DONT_FAKE_MONOTONIC", "1"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect()
}

/// Where libfaketime is (`LEASEHOLD_LIBFAKETIME`, else the distributions'
/// places), checked by running `date` a day ahead under it.
fn libfaketime() -> String {
    let found = std::env::var("LEASEHOLD_LIBFAKETIME").ok().or_else(|| {
        [
            "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1",
            "/usr/lib/aarch64-linux-gnu/faketime/libfaketime.so.1",
            "/usr/lib64/faketime/libfaketime.so.1",
            "/usr/lib/faketime/libfaketime.so.1",
            "/usr/local/lib/faketime/libfaketime.so.1",
        ]
        .into_iter()
        .find(|p| std::path::Path::new(p).exists())
        .map(str::to_string)
    });
    let how = "`apt-get install faketime`";
    let lib = found.unwrap_or_else(|| {
        panic!("needs libfaketime: {how} (bash .ci/run does); set LEASEHOLD_LIBFAKETIME if it is elsewhere")
    });
    let ahead = Command::new("date")
        .arg("+%s")
        .env("LD_PRELOAD", &lib)
        .env("FAKETIME", "+1d")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse::<i64>().ok());
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock after 1970")
        .as_secs() as i64;
    let moved = ahead.is_some_and(|t| (t - now - 86_400).abs() < 60);
    assert!(
        moved,
        "needs libfaketime: {how} (bash .ci/run does)\n{lib} did not move `date` a day ahead: {ahead:?} vs {now}"
    );
    lib
}

/// libfaketime names a semaphore and a shared-memory object after its
/// process and removes them at exit; a process killed with SIGKILL leaves
/// them behind, so the harness removes them once `pid` is reaped.
pub(crate) fn forget_libfaketime_objects(pid: u32) {
    for name in [
        format!("/dev/shm/sem.faketime_sem_{pid}"),
        format!("/dev/shm/faketime_shm_{pid}"),
    ] {
        let _ = std::fs::remove_file(name);
    }
}
