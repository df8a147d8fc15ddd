//! Starting and stopping `leaseholdd` processes: spawn and wait for its
//! "listening on" line, run it to its exit, send it signals.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::tools::leaseholdd_bin;

pub(crate) fn signal(pid: u32, name: &str) {
    let _ = Command::new("kill")
        .arg(format!("-{name}"))
        .arg(pid.to_string())
        .status();
}

/// Spawn `cmd` (a `leaseholdd`) with stderr piped and wait until it logs
/// `listening on http://ADDR`; returns the child and ADDR. Its stderr keeps
/// being drained into `on_line` for the whole run, so it never blocks on a
/// full pipe.
pub fn spawn_until_listening(
    cmd: &mut Command,
    timeout: Duration,
    mut on_line: impl FnMut(&str) + Send + 'static,
) -> Result<(Child, String), String> {
    let mut child = cmd
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start {:?}: {e}", cmd.get_program()))?;
    let stderr = child.stderr.take().expect("piped stderr");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut tx = Some(tx);
        for line in BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            if let Some(rest) = line.split("listening on http://").nth(1)
                && let Some(tx) = tx.take()
            {
                let _ = tx.send(rest.trim().to_string());
            }
            on_line(&line);
        }
    });
    let deadline = Instant::now() + timeout;
    loop {
        if let Ok(addr) = rx.recv_timeout(Duration::from_millis(50)) {
            return Ok((child, addr));
        }
        if let Ok(Some(status)) = child.try_wait() {
            return Err(format!("leaseholdd exited during start-up: {status}"));
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            return Err(format!(
                "leaseholdd did not report 'listening on' within {timeout:?}"
            ));
        }
    }
}

/// Run `leaseholdd` with `args` to completion (for start-up failures) and
/// return (exit status, stderr).
pub fn run_leaseholdd_expecting_exit(args: &[&str], timeout: Duration) -> (ExitStatus, String) {
    let mut child = Command::new(leaseholdd_bin())
        .args(args)
        .env_remove("LEASEHOLD_ADMIN_TOKEN")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn leaseholdd");
    let deadline = Instant::now() + timeout;
    loop {
        if let Ok(Some(_)) = child.try_wait() {
            break;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let out = child.wait_with_output().expect("output");
            panic!(
                "leaseholdd {args:?} did not exit within {timeout:?}; stderr:\n{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().expect("output");
    (
        out.status,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}
