//! `leasehold simulate` against the real server: a short run on a 1 s TTL
//! pool shows every behaviour, the server's log has checkouts, releases,
//! denials, a reap of a crashed client, a revoke and a borrow returned
//! early, and the pool is never exceeded (borrowed seats counted).
//!
//! The run asserts only what its plan forces. With `--seed 1`, the eight
//! clients' plan (pinned by `the_end_to_end_plan_crowds_a_four_seat_pool`
//! in `tui/src/simulate/plan.rs`) has seven clients ask for a seat in the
//! first 0.8 s, five of them before anyone can have released (steady,
//! flaky and the crasher never release early, the borrower borrows in the
//! first 80 ms and is out at least 1.2 s, a releaser works at least 0.4 s):
//! on four seats, one is denied. Whether the late arrival then
//! waits or finds a seat free is timing, so that is not asserted.
//!
//! On a pool with an `idle_timeout`, the plan gains an idle client (never
//! back) and a returner (back after twice the timeout, pinned by
//! `the_end_to_end_idle_plan_is_reclaimed_and_back_within_the_run`): both
//! are reclaimed, and the returner takes a seat again.

use std::process::{Output, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use leasehold_tests::{Server, ServerOptions, eventually, leasehold_bin};
use serde_json::Value;
use tokio::process::Command;

const LICENSES: &str = r#"
[[license]]
id = "sim"
key = "sim-key"
seats = 4
ttl = "1s"
skew = "0s"
reap_grace = "300ms"

[license.borrow]
max = "10m"
seats = 1
"#;

/// A server with the `sim` pool, reaping every 100 ms so a crashed client's
/// seat goes soon after it lapses.
async fn start_server() -> Server {
    Server::start_with(
        ServerOptions::new(LICENSES)
            .arg("--reap-interval")
            .arg("100ms"),
    )
    .await
}

/// `leasehold simulate --server BASE ARGS`, with no token from the
/// environment; bounded to 30 s.
async fn simulate(s: &Server, args: &[&str]) -> Output {
    simulate_with_env(s, args, &[]).await
}

/// [`simulate`] with `env` set (and no other data dir or token from the
/// environment), run outside the repo root.
async fn simulate_with_env(s: &Server, args: &[&str], env: &[(&str, &str)]) -> Output {
    let bin = leasehold_bin();
    assert!(
        bin.exists(),
        "{} not built: run `cargo build -p leasehold-tui` first",
        bin.display()
    );
    // Longer than the bound on a run in simulate_shows_every_behaviour_...
    tokio::time::timeout(
        Duration::from_secs(60),
        Command::new(&bin)
            .args(["simulate", "--server", &s.base])
            .args(args)
            .current_dir(std::env::temp_dir())
            .env_remove("LEASEHOLD_ADMIN_TOKEN")
            .env_remove("LEASEHOLD_DATA_DIR")
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .output(),
    )
    .await
    .expect("simulate finished within 30 s")
    .expect("run leasehold simulate")
}

/// The kinds of the server's events about `sim`, oldest first.
async fn event_kinds(s: &Server) -> Vec<String> {
    s.events()
        .await
        .iter()
        .filter(|e| e["license_id"] == "sim")
        .map(|e| e["kind"].as_str().expect("kind").to_string())
        .collect()
}

/// Polls the server's live count of `sim` until stopped, keeping the highest.
struct LiveWatch {
    done: Arc<AtomicBool>,
    max_live: Arc<AtomicU64>,
    task: tokio::task::JoinHandle<()>,
}

impl LiveWatch {
    fn start(s: &Arc<Server>) -> LiveWatch {
        let done = Arc::new(AtomicBool::new(false));
        let max_live = Arc::new(AtomicU64::new(0));
        let task = {
            let (s, done, max_live) = (s.clone(), done.clone(), max_live.clone());
            tokio::spawn(async move {
                while !done.load(Ordering::Relaxed) {
                    max_live.fetch_max(s.live("sim").await, Ordering::Relaxed);
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            })
        };
        LiveWatch {
            done,
            max_live,
            task,
        }
    }

    /// Stop watching; the highest live count seen.
    async fn stop(self) -> u64 {
        self.done.store(true, Ordering::Relaxed);
        self.task.await.unwrap();
        self.max_live.load(Ordering::Relaxed)
    }
}

/// What the simulator's JSON summary must say after the seeded run (`ctx`
/// is everything to show when it does not).
fn assert_summary_shows_every_behaviour(summary: &Value, ctx: &str) {
    assert_eq!(summary["clients"], 8, "{ctx}");
    assert_eq!(summary["seats"], 4, "{ctx}");
    assert_eq!(summary["seed"], 1, "{ctx}");
    assert_eq!(summary["admin"], true, "{ctx}");
    for b in ["steady", "releaser", "crasher", "flaky", "late", "borrower"] {
        assert!(
            summary["behaviours"][b]["clients"].as_u64().unwrap_or(0) >= 1,
            "ran {b}: {ctx}"
        );
    }
    let ev = |k: &str| summary["events"][k].as_u64().unwrap_or(0);
    assert!(ev("checkout") + ev("granted") >= 5, "{ctx}");
    assert!(ev("crash") >= 1, "a client crashed: {ctx}");
    assert!(ev("queued") >= 1, "a late arrival queued: {ctx}");
    assert!(ev("outage") >= 1, "a flaky client lost its network: {ctx}");
    assert!(ev("release") >= 1, "{ctx}");
    assert!(ev("denied") >= 1, "the pool was full for someone: {ctx}");
    assert!(ev("revoked") >= 1, "an admin revoked a seat: {ctx}");
    let borrower = &summary["behaviours"]["borrower"]["events"];
    assert_eq!(borrower["borrow"], 1, "the laptop borrowed: {ctx}");
    assert_eq!(borrower["return"], 1, "and returned early: {ctx}");
    assert_eq!(
        summary["max_borrowed_server"], 1,
        "the server counted the borrowed seat while it was out: {ctx}"
    );
    assert_eq!(ev("error"), 0, "{ctx}");
    assert!(summary["max_held"].as_u64().unwrap() <= 4, "{ctx}");
    assert!(summary["max_live_server"].as_u64().unwrap() <= 4, "{ctx}");
    assert_eq!(summary["within_seats"], true, "{ctx}");
}

/// The server's own log: the crashed client's seat is reaped, and the
/// checkouts, releases, revoke and denials are there.
async fn assert_server_logged_the_run(s: &Server) {
    let reaped = eventually(
        Duration::from_secs(10),
        "a reap of the crashed client",
        || async {
            let kinds = event_kinds(s).await;
            kinds.iter().any(|k| k == "reap").then_some(kinds)
        },
    )
    .await;
    for k in ["checkout", "release", "revoke", "denied"] {
        assert!(reaped.iter().any(|e| e == k), "no {k} event: {reaped:?}");
    }
}

#[tokio::test]
async fn simulate_shows_every_behaviour_and_never_exceeds_the_pool() {
    let s = Arc::new(start_server().await);
    // Watch the live count for the whole run.
    let watch = LiveWatch::start(&s);

    let started = Instant::now();
    #[rustfmt::skip]
    let out = simulate(&s, &[
        "--token", &s.admin_token, "--license", "sim", "--key", "sim-key",
        "--clients", "8", "--duration", "4s", "--seed", "1", "--json",
    ])
    .await;
    let took = started.elapsed();
    eprintln!("a 4 s simulate run took {took:?}");
    let max_live = watch.stop().await;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(0),
        "stdout:\n{stdout}\nstderr:\n{stderr}"
    );
    assert!(
        // About 4.4 s here: at most ten times that.
        took >= Duration::from_secs(4) && took < Duration::from_secs(50),
        "bounded by --duration (plus the releases): {took:?}"
    );

    let summary: Value = serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"));
    let ctx = format!(
        "summary:\n{stdout}\nstderr:\n{stderr}\nserver log:\n{}",
        s.logs()
    );
    assert_summary_shows_every_behaviour(&summary, &ctx);
    assert!(max_live <= 4, "live never exceeded seats: {max_live}");

    assert_server_logged_the_run(&s).await;
    // Everything released or reaped: nothing simulated is left holding.
    eventually(Duration::from_secs(10), "the pool drained", || async {
        (s.live("sim").await == 0).then_some(())
    })
    .await;
}

#[tokio::test]
async fn simulate_without_a_token_still_runs_and_prints_events() {
    let s = start_server().await;
    #[rustfmt::skip]
    let out = simulate(&s, &[
        "--license", "sim", "--key", "sim-key",
        "--clients", "6", "--duration", "2s", "--seed", "7",
    ])
    .await;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(0),
        "stdout:\n{stdout}\nstderr:\n{stderr}"
    );
    assert_eq!(stderr.lines().count(), 1, "one info line: {stderr}");
    assert!(stderr.contains("no admin token"), "{stderr}");
    assert!(
        stdout.starts_with("simulating 6 clients on sim"),
        "{stdout}"
    );
    assert!(stdout.lines().any(|l| l.contains(" checkout ")), "{stdout}");
    assert!(stdout.lines().any(|l| l.contains(" crash ")), "{stdout}");
    assert!(stdout.contains("summary: 6 clients on sim"), "{stdout}");
    assert!(
        stdout.contains("no admin token: revokes skipped"),
        "{stdout}"
    );

    // A wrong key is one clear line and a failure, before anything runs.
    let out = simulate(
        &s,
        &["--license", "sim", "--key", "nope", "--duration", "2s"],
    )
    .await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("refused the key"), "{stderr}");
}

/// A simulated run leaves a history worth looking at: afterwards `leasehold
/// report` shows its denials and that the pool was full.
#[tokio::test]
async fn after_a_run_the_report_shows_its_denials_and_peak() {
    let s = start_server().await;
    #[rustfmt::skip]
    let out = simulate(&s, &[
        "--token", &s.admin_token, "--license", "sim", "--key", "sim-key",
        "--clients", "8", "--duration", "4s", "--seed", "1", "--quiet",
    ])
    .await;
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let report = leasehold_tests::run_leasehold(
        &s,
        Some(&s.admin_token),
        &std::env::temp_dir(),
        &["report", "--license", "sim", "--from", "1h", "--json"],
    )
    .await;
    assert_eq!(report.code, Some(0), "{report:?}");
    let usage: Vec<Value> = serde_json::from_str(&report.stdout).expect("JSON report");
    let summary = &usage[0]["summary"];
    // The seed-1 plan crowds the four seats before anyone releases.
    assert_eq!(summary["peak"], 4, "{summary}");
    assert!(summary["denials"].as_u64().unwrap() >= 1, "{summary}");
    assert!(summary["full_s"].as_f64().unwrap() > 0.0, "{summary}");
    assert_eq!(usage[0]["verdict"], "short_of_seats");
}

/// Outside the repo root, `--data-dir` or `LEASEHOLD_DATA_DIR` finds the
/// admin token as `leaseholdd` does: no `--token` needed.
#[tokio::test]
async fn simulate_reads_the_token_from_the_data_dir() {
    let s = start_server().await;
    let data_dir = s.data_dir();
    let dir = data_dir.to_str().expect("utf-8 path");
    #[rustfmt::skip]
    let args = [
        "--license", "sim", "--key", "sim-key",
        "--clients", "4", "--duration", "2s", "--seed", "7", "--quiet",
    ];
    let by_flag: Vec<&str> = args.iter().copied().chain(["--data-dir", dir]).collect();
    for (how, out) in [
        ("--data-dir", simulate(&s, &by_flag).await),
        (
            "LEASEHOLD_DATA_DIR",
            simulate_with_env(&s, &args, &[("LEASEHOLD_DATA_DIR", dir)]).await,
        ),
    ] {
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{how}: {stdout}\n{stderr}");
        assert!(!stderr.contains("no admin token"), "{how}: {stderr}");
        assert!(!stdout.contains("no admin token"), "{how}: {stdout}");
    }
    // The wrong data dir: the run goes on without admin, and says where
    // it looked.
    let out = simulate(
        &s,
        &args
            .iter()
            .copied()
            .chain(["--data-dir", "/nonexistent/leasehold"])
            .collect::<Vec<_>>(),
    )
    .await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("no admin token") && stderr.contains("/nonexistent/leasehold/admin.token"),
        "{stderr}"
    );
}

/// As `sim`, with room for everyone (no denial can delay a return) and a
/// 3 s idle timeout.
const IDLE_LICENSES: &str = r#"
[[license]]
id = "sim"
key = "sim-key"
seats = 8
ttl = "2s"
skew = "0s"
reap_grace = "300ms"
idle_timeout = "3s"
"#;

/// The event lines of `kind` by clients of `behaviour`.
fn event_lines<'a>(stdout: &'a str, kind: &str, behaviour: &str) -> Vec<&'a str> {
    stdout
        .lines()
        .filter(|l| {
            l.split_whitespace().nth(1) == Some(kind) && l.contains(&format!(" {behaviour:<8}  "))
        })
        .collect()
}

#[tokio::test]
async fn simulate_on_an_idle_timeout_shows_a_reclaim_and_a_return() {
    let s = Server::start_with(
        ServerOptions::new(IDLE_LICENSES)
            .arg("--reap-interval")
            .arg("100ms"),
    )
    .await;
    #[rustfmt::skip]
    let out = simulate(&s, &[
        "--token", &s.admin_token, "--license", "sim", "--key", "sim-key",
        "--clients", "8", "--duration", "10s", "--seed", "1",
    ])
    .await;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let ctx = format!("stdout:\n{stdout}\nstderr:\n{stderr}");
    assert_eq!(out.status.code(), Some(0), "{ctx}");
    assert!(
        stdout
            .lines()
            .next()
            .unwrap_or("")
            .contains("idle timeout 3s")
            && stdout.contains("idle 1")
            && stdout.contains("returner 1"),
        "the header names the timeout and the idle clients: {ctx}"
    );
    for b in ["idle", "returner"] {
        assert_eq!(
            event_lines(&stdout, "away", b).len(),
            1,
            "{b} walked away: {ctx}"
        );
        let reclaimed = event_lines(&stdout, "reclaimed", b);
        assert!(!reclaimed.is_empty(), "{b} reclaimed: {ctx}");
        assert!(
            reclaimed
                .iter()
                .all(|l| l.contains("410 idle") && l.contains("3s")),
            "{ctx}"
        );
    }
    assert!(event_lines(&stdout, "back", "idle").is_empty(), "{ctx}");
    // The returner came back after the reclaim and took a seat again.
    let back = event_lines(&stdout, "back", "returner");
    assert_eq!(back.len(), 1, "{ctx}");
    assert!(back[0].contains("reclaimed: checking out again"), "{ctx}");
    let lines: Vec<&str> = stdout.lines().collect();
    let back_at = lines.iter().position(|l| *l == back[0]).unwrap();
    assert!(
        lines[back_at..]
            .iter()
            .any(|l| event_lines(l, "checkout", "returner").len() == 1),
        "a seat after coming back: {ctx}"
    );
    assert!(lines.iter().all(|l| !l.contains(" error ")), "{ctx}");

    // The server's side: both seats reclaimed for idleness, their sessions
    // ended `idle`.
    let reclaims = s.events_of("reclaim").await;
    assert!(reclaims.len() >= 2, "{reclaims:?}\n{ctx}");
    assert!(
        reclaims
            .iter()
            .all(|e| e["detail"].as_str().unwrap_or("").contains("idle")),
        "{reclaims:?}"
    );
    let sessions = s.admin_get("/v1/admin/sessions?license=sim").await;
    let idle_ends = sessions["sessions"]
        .as_array()
        .expect("sessions")
        .iter()
        .filter(|v| v["end"] == "idle")
        .count();
    assert_eq!(idle_ends, reclaims.len(), "{sessions}");
}
