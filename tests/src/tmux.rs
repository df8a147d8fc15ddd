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
}

impl Tmux {
    pub fn start(name: &str, command: &str) -> Tmux {
        let socket = format!("leasehold-e2e-{}-{name}", std::process::id());
        let t = Tmux { socket };
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
                panic!("timed out waiting for {what}; screen:\n{screen}");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
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
