//! The admin console driven in tmux (send-keys, capture-pane), the way an
//! admin uses it: a tmux server of its own per test, killed on drop.

use std::path::Path;
use std::process::{Command as StdCommand, Stdio};
use std::time::{Duration, Instant};

use crate::{Server, leasehold_bin, require_tool};

/// Fail (never skip) without tmux.
pub fn require_tmux() {
    require_tool(
        StdCommand::new("tmux").arg("-V"),
        "tmux (the console tests drive the console in it)",
        "install it, e.g. `apt-get install tmux`",
    );
}

/// A tmux server of its own (its own socket), killed on drop, so the test
/// neither sees nor disturbs anyone's sessions.
pub struct Tmux {
    socket: String,
    /// The console's log file, shown when a wait times out.
    log: Option<std::path::PathBuf>,
}

impl Tmux {
    pub fn start(name: &str, command: &str) -> Tmux {
        let socket = format!("leasehold-e2e-{}-{name}", std::process::id());
        let t = Tmux { socket, log: None };
        let status = t
            .cmd()
            .args([
                "new-session",
                "-d",
                "-s",
                "console",
                "-x",
                "160",
                "-y",
                "45",
                command,
            ])
            .status()
            .expect("tmux new-session");
        assert!(status.success(), "tmux new-session failed");
        t
    }

    /// Show the end of the console's `--log-file` when a wait times out
    /// (a failed request is logged there, not on the screen).
    pub fn with_log(mut self, log: &Path) -> Tmux {
        self.log = Some(log.to_path_buf());
        self
    }

    fn cmd(&self) -> StdCommand {
        let mut c = StdCommand::new("tmux");
        c.args(["-L", &self.socket]);
        c
    }

    pub fn screen(&self) -> String {
        let out = self
            .cmd()
            .args(["capture-pane", "-p", "-t", "console"])
            .output()
            .expect("capture-pane");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    pub fn keys(&self, keys: &[&str]) {
        let status = self
            .cmd()
            .args(["send-keys", "-t", "console"])
            .args(keys)
            .status()
            .expect("send-keys");
        assert!(status.success());
    }

    /// Type text literally (no key-name lookup).
    pub fn type_text(&self, text: &str) {
        let status = self
            .cmd()
            .args(["send-keys", "-t", "console", "-l", text])
            .status()
            .expect("send-keys -l");
        assert!(status.success());
    }

    pub async fn wait_for(
        &self,
        what: &str,
        timeout: Duration,
        check: impl Fn(&str) -> bool,
    ) -> String {
        let deadline = Instant::now() + timeout;
        loop {
            let screen = self.screen();
            if check(&screen) {
                return screen;
            }
            if Instant::now() > deadline {
                panic!(
                    "timed out waiting for {what}; screen:\n{screen}{}",
                    self.log_tail()
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    fn log_tail(&self) -> String {
        let Some(path) = &self.log else {
            return String::new();
        };
        let text = std::fs::read_to_string(path).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        let tail = lines[lines.len().saturating_sub(20)..].join("\n");
        format!("\n--- console log (last 20 lines) ---\n{tail}")
    }

    pub fn alive(&self) -> bool {
        self.cmd()
            .args(["has-session", "-t", "console"])
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.cmd().arg("kill-server").stderr(Stdio::null()).status();
    }
}

fn sh_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// The shell command that opens the console on `server`, logging to `log`,
/// with `extra` arguments.
pub fn console_command(server: &Server, log: &Path, extra: &str) -> String {
    format!(
        "env NO_COLOR=1 {} --server {} --token {} --log-file {} {extra}",
        sh_quote(&leasehold_bin().to_string_lossy()),
        sh_quote(&server.base),
        sh_quote(&server.admin_token),
        sh_quote(&log.to_string_lossy()),
    )
}
