//! The console's holders table paged by the server, end to end: the real
//! `leasehold` in tmux against the real `leaseholdd` holding a few thousand
//! seats. The console holds two pages at a time, so End, PgDn, the filter
//! and a checkout made elsewhere all go through
//! `GET /v1/admin/seats?q=&sort=&order=&limit=&after=`. Fails, saying so,
//! without tmux.

use std::path::Path;
use std::process::{Command as StdCommand, Stdio};
use std::time::{Duration, Instant};

use leasehold_tests::{Server, leasehold_bin, require_tool};
use serde_json::json;

const N: usize = 3_000;

#[tokio::test]
async fn the_console_pages_thousands_of_holders_through_the_server() {
    require_tool(
        StdCommand::new("tmux").arg("-V"),
        "tmux (the console tests drive the console in it)",
        "install it, e.g. `apt-get install tmux`",
    );
    let server = Server::start(concat!(
        "\n[[license]]\nid = \"big\"\nkey = \"big-key\"\nseats = 5000\n",
        "ttl = \"1h\"\nskew = \"5s\"\nreap_grace = \"15s\"\n"
    ))
    .await;
    preload(&server, "big", N).await;
    let logs = tempfile::tempdir().unwrap();
    let tmux = Tmux::start(
        "paging",
        &console_command(&server, &logs.path().join("c.log")),
    );

    // The first page, then sorted by holder (the selection stays on its
    // seat, so Home for the top): the first name.
    tmux.wait_for("the first page", Duration::from_secs(20), |s| {
        s.contains(&format!("Holders {N} of {N}"))
    })
    .await;
    tmux.keys(&["s"]);
    tmux.wait_for("sorted by holder", Duration::from_secs(10), |s| {
        s.contains("sort: holder")
    })
    .await;
    tmux.keys(&["Home"]);
    tmux.wait_for("the first holder", Duration::from_secs(10), |s| {
        s.contains("user-000000")
    })
    .await;

    // End: the last holder, without walking the pages in between.
    tmux.keys(&["End"]);
    tmux.wait_for("the last holder after End", Duration::from_secs(10), |s| {
        s.contains(&last()) && !s.contains("user-000000")
    })
    .await;

    // Home, then PgDn page after page to the last holder.
    tmux.keys(&["Home"]);
    tmux.wait_for("the first holder again", Duration::from_secs(10), |s| {
        s.contains("user-000000")
    })
    .await;
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let screen = tmux.screen();
        if screen.contains(&last()) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "PgDn never reached {}; screen:\n{screen}",
            last()
        );
        tmux.keys(&["PageDown"; 5]);
        tokio::time::sleep(Duration::from_millis(150)).await;
    }

    // The filter goes to the server and finds one holder among thousands.
    tmux.keys(&["/"]);
    tmux.type_text("user-001234");
    tmux.keys(&["Enter"]);
    let screen = tmux
        .wait_for("the filtered holder", Duration::from_secs(10), |s| {
            s.contains(&format!("Holders 1 of {N}")) && s.contains("user-001234")
        })
        .await;
    assert!(!screen.contains("user-001235"), "{screen}");
    tmux.keys(&["Escape"]);
    tmux.wait_for("the filter cleared", Duration::from_secs(10), |s| {
        s.contains("user-000000")
    })
    .await;

    // A checkout over HTTP shows without a key press (SSE, then a refetch);
    // sorted by holder it is the first row.
    server
        .take_seat("big", "big-key", json!({ "holder": "aaa-new-holder" }))
        .await;
    tmux.wait_for("the new holder", Duration::from_secs(10), |s| {
        s.contains("aaa-new-holder") && s.contains(&format!("Holders {} of {}", N + 1, N + 1))
    })
    .await;

    tmux.keys(&["q"]);
}

fn last() -> String {
    format!("user-{:06}", N - 1)
}

/// `n` checkouts of `license`, 64 at a time.
async fn preload(server: &Server, license: &str, n: usize) {
    use futures_util::StreamExt;
    let client = server.client();
    let url = server.url(&format!("/v1/licenses/{license}/seats"));
    let key = format!("Bearer {license}-key");
    let ok = futures_util::stream::iter(0..n)
        .map(|i| {
            let req = client
                .post(&url)
                .header("authorization", &key)
                .json(&json!({ "holder": format!("user-{i:06}") }));
            async move { req.send().await.map(|r| r.status().as_u16()) }
        })
        .buffer_unordered(64)
        .filter(|r| std::future::ready(matches!(r, Ok(201))))
        .count()
        .await;
    assert_eq!(ok, n, "every preload checkout granted");
}

fn console_command(server: &Server, log: &Path) -> String {
    let q = |s: &str| format!("'{}'", s.replace('\'', r"'\''"));
    format!(
        "env NO_COLOR=1 {} --server {} --token {} --log-file {}",
        q(&leasehold_bin().to_string_lossy()),
        q(&server.base),
        q(&server.admin_token),
        q(&log.to_string_lossy()),
    )
}

/// A tmux server of its own (its own socket), killed on drop.
struct Tmux {
    socket: String,
}

impl Tmux {
    fn start(name: &str, command: &str) -> Tmux {
        let t = Tmux {
            socket: format!("leasehold-e2e-{}-{name}", std::process::id()),
        };
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
            ])
            .arg(command)
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

    fn screen(&self) -> String {
        let out = self
            .cmd()
            .args(["capture-pane", "-p", "-t", "console"])
            .output()
            .expect("capture-pane");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn keys(&self, keys: &[&str]) {
        let status = self
            .cmd()
            .args(["send-keys", "-t", "console"])
            .args(keys)
            .status()
            .expect("send-keys");
        assert!(status.success());
    }

    fn type_text(&self, text: &str) {
        let status = self
            .cmd()
            .args(["send-keys", "-t", "console", "-l", text])
            .status()
            .expect("send-keys -l");
        assert!(status.success());
    }

    async fn wait_for(
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
            assert!(
                Instant::now() < deadline,
                "timed out waiting for {what}; screen:\n{screen}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.cmd().arg("kill-server").stderr(Stdio::null()).status();
    }
}
