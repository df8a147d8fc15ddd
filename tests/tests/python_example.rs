//! The plain-HTTP Python example (`assets/examples/leasehold_client.py`) run
//! against the real server, so the "other languages" story of
//! `docs/src/clients.md` stays true.
//! Needs python3 with `assets/examples/requirements.txt` installed (`.ci/run`
//! does).

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use leasehold_tests::{Server, ServerOptions, license_toml, require_tool};
use tokio::process::Command;

const LICENSES: &str = license_toml!("py", seats = 2, ttl = "3s", skew = "1s", reap_grace = "2s");

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root")
        .to_path_buf()
}

fn require_python_deps() {
    require_tool(
        std::process::Command::new("python3").args(["-c", "import jwt, requests, cryptography"]),
        "python3 with the example's packages",
        "install Python 3, then `python3 -m pip install -r assets/examples/requirements.txt`",
    );
}

#[tokio::test]
async fn python_example_checks_out_verifies_heartbeats_and_releases() {
    require_python_deps();
    let s = Server::start(LICENSES).await;
    let script = repo_root().join("assets/examples/leasehold_client.py");
    let out = tokio::time::timeout(
        Duration::from_secs(60),
        Command::new("python3")
            .arg(&script)
            .args(["--server", &s.base, "--license", "py", "--key", "py-key"])
            .args(["--holder", "py-alice", "--fingerprint", "py-machine-1"])
            .args(["--seconds", "2"])
            .stdin(Stdio::null())
            .output(),
    )
    .await
    .expect("the example finished within 60 s")
    .expect("run python3");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "exit {:?}\nstdout:\n{stdout}\nstderr:\n{stderr}",
        out.status
    );

    let lines: Vec<&str> = stdout.lines().collect();
    let line = |prefix: &str| {
        lines
            .iter()
            .position(|l| l.starts_with(prefix))
            .unwrap_or_else(|| panic!("no line starting {prefix:?} in:\n{stdout}"))
    };
    let (jwks, checkout, verified, heartbeat, release, done) = (
        line("jwks: 1 key"),
        line("checkout: seat "),
        line("verified: token signed by "),
        line("heartbeat: seat "),
        line("release: seat "),
        line("done"),
    );
    assert!(
        jwks < checkout && checkout < verified && verified < heartbeat && heartbeat < release,
        "steps in order:\n{stdout}"
    );
    assert_eq!(done, lines.len() - 1, "done last:\n{stdout}");
    assert!(lines[checkout].contains("(window 3 s)"), "{stdout}");
    // A user active all along: every heartbeat reports idle_s 0.
    assert!(lines[heartbeat].ends_with("(idle_s 0)"), "{stdout}");
    assert!(lines[release].ends_with("(204)"), "{stdout}");

    // The seat it held is the one it released, and it is gone now.
    let seat = lines[checkout]
        .strip_prefix("checkout: seat ")
        .and_then(|r| r.split_whitespace().next())
        .expect("seat id");
    assert!(lines[release].contains(seat), "{stdout}");
    assert_eq!(s.live("py").await, 0, "the seat was released");
    let events = s.events().await;
    let kinds: Vec<(&str, &str)> = events
        .iter()
        .filter(|e| e["seat_id"] == seat)
        .map(|e| {
            (
                e["kind"].as_str().unwrap(),
                e["holder"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert_eq!(
        kinds,
        [("checkout", "py-alice"), ("release", "py-alice")],
        "{events:?}"
    );
}

#[tokio::test]
async fn python_example_reports_a_wrong_key_and_exits_non_zero() {
    require_python_deps();
    let s = Server::start(LICENSES).await;
    let script = repo_root().join("assets/examples/leasehold_client.py");
    let out = Command::new("python3")
        .arg(&script)
        .args(["--server", &s.base, "--license", "py", "--key", "wrong"])
        .args(["--holder", "py-bob", "--seconds", "2"])
        .stdin(Stdio::null())
        .output()
        .await
        .expect("run python3");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("error: 401 unauthorized"), "{stdout}");
    assert_eq!(s.live("py").await, 0);
}

const POLICED: &str = r#"
[[license]]
id = "py"
key = "py-key"
seats = 5
ttl = "3s"
skew = "1s"
reap_grace = "2s"
max_per_holder = 1
deny = ["py-mallory"]
"#;

async fn run_example(s: &Server, holder: &str, fingerprint: &str) -> (Option<i32>, String) {
    let script = repo_root().join("assets/examples/leasehold_client.py");
    let out = tokio::time::timeout(
        Duration::from_secs(60),
        Command::new("python3")
            .arg(&script)
            .args(["--server", &s.base, "--license", "py", "--key", "py-key"])
            .args(["--holder", holder, "--fingerprint", fingerprint])
            .args(["--seconds", "2"])
            .stdin(Stdio::null())
            .output(),
    )
    .await
    .expect("the example finished within 60 s")
    .expect("run python3");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

#[tokio::test]
async fn python_example_gives_up_on_not_allowed_and_waits_out_limit_reached() {
    require_python_deps();
    let s = Server::start(POLICED).await;

    // 403 not_allowed: permanent, reported at once, exit 1.
    let (code, stdout) = run_example(&s, "py-mallory", "m1").await;
    assert_eq!(code, Some(1), "{stdout}");
    assert!(stdout.contains("error: 403 not_allowed"), "{stdout}");
    assert!(!stdout.contains("retry in"), "not retried:\n{stdout}");

    // 409 limit_reached (the holder's one seat is taken from another
    // machine): understood, waited for until --seconds runs out.
    s.take_seat(
        "py",
        "py-key",
        serde_json::json!({"holder": "py-carol", "fingerprint": "c1"}),
    )
    .await;
    let (code, stdout) = run_example(&s, "py-carol", "c2").await;
    assert_eq!(code, Some(1), "{stdout}");
    assert!(
        stdout.contains("checkout: limit reached (holder max 1), retry in "),
        "{stdout}"
    );
    assert!(
        stdout.contains("error: no seat became free in time"),
        "{stdout}"
    );
    assert_eq!(s.live("py").await, 1, "only the first seat");
}

const LENDING: &str = r#"
[[license]]
id = "py"
key = "py-key"
seats = 3
ttl = "3s"
skew = "1s"
reap_grace = "2s"

[license.borrow]
max = "1m"
seats = 1
"#;

async fn run_script(s: &Server, args: &[&str]) -> (Option<i32>, String) {
    let script = repo_root().join("assets/examples/leasehold_client.py");
    let out = tokio::time::timeout(
        Duration::from_secs(60),
        Command::new("python3")
            .arg(&script)
            .args(["--server", &s.base, "--license", "py", "--key", "py-key"])
            .args(args)
            .stdin(Stdio::null())
            .output(),
    )
    .await
    .expect("the example finished within 60 s")
    .expect("run python3");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    (out.status.code(), format!("{stdout}{stderr}"))
}

/// The seat id in the line starting with `prefix`.
fn seat_in(stdout: &str, prefix: &str) -> String {
    let line = stdout
        .lines()
        .find(|l| l.starts_with(prefix))
        .unwrap_or_else(|| panic!("no line starting {prefix:?} in:\n{stdout}"));
    line[prefix.len()..]
        .split_whitespace()
        .next()
        .expect("seat id")
        .to_string()
}

async fn seat_state(s: &Server, seat: &str) -> Option<String> {
    s.seats(Some("py"))
        .await
        .into_iter()
        .find(|row| row["seat_id"] == seat)
        .map(|row| row["state"].as_str().unwrap().to_string())
}

#[tokio::test]
async fn python_example_borrows_verifies_offline_and_returns_early() {
    require_python_deps();
    let s = Server::start(LENDING).await;
    #[rustfmt::skip]
    let borrow = ["--holder", "py-alice", "--fingerprint", "laptop-1", "--borrow", "1m"];
    let (code, stdout) = run_script(&s, &borrow).await;
    assert_eq!(code, Some(0), "{stdout}");
    let seat = seat_in(&stdout, "borrowed: seat ");
    assert!(stdout.contains("(borrow_s 60)"), "{stdout}");
    assert!(stdout.contains("verified: token signed by "), "{stdout}");
    // The exp it printed (checked by PyJWT on the local clock) is the
    // borrow's end on the server.
    let row = s
        .seats(Some("py"))
        .await
        .into_iter()
        .find(|r| r["seat_id"] == seat.as_str())
        .expect("the seat is out");
    assert_eq!(row["state"], "borrowed");
    let expires: leasehold_common::Timestamp =
        serde_json::from_value(row["expires_at"].clone()).unwrap();
    assert!(
        stdout.contains(&format!(
            "offline: token valid until exp {} ",
            expires.as_secs_floor()
        )),
        "{stdout}"
    );
    assert!(stdout.contains(&format!("left out: return it early with --return {seat}")));

    // The one seat lent is out: a second machine's borrow is refused.
    #[rustfmt::skip]
    let second = ["--holder", "py-bob", "--fingerprint", "laptop-2", "--borrow", "1m"];
    let (code, out2) = run_script(&s, &second).await;
    assert_eq!(code, Some(1), "{out2}");
    assert!(
        out2.contains("error: 409 limit_reached")
            && out2.contains("(limit reached (borrow max 1))"),
        "{out2}"
    );
    // Longer than borrow.max: 400, naming it.
    #[rustfmt::skip]
    let long = ["--holder", "py-bob", "--fingerprint", "laptop-2", "--borrow", "2h"];
    let (code, out3) = run_script(&s, &long).await;
    assert_eq!(code, Some(1), "{out3}");
    assert!(
        out3.contains("error: 400 invalid_request: borrow_s must be 1 to 60"),
        "{out3}"
    );

    // --return gives it back early: gone at once.
    let (code, out4) = run_script(&s, &["--holder", "py-alice", "--return", &seat]).await;
    assert_eq!(code, Some(0), "{out4}");
    assert!(
        out4.contains(&format!("return: seat {seat} (204)")),
        "{out4}"
    );
    assert_eq!(seat_state(&s, &seat).await, None);
}

#[tokio::test]
async fn python_example_holds_a_borrow_without_heartbeats_then_returns_it() {
    require_python_deps();
    let s = Server::start(LENDING).await;
    // Held 4 s, longer than the 3 s TTL: a heartbeat-kept seat would need
    // several heartbeats; a borrowed one gets none and stays out.
    #[rustfmt::skip]
    let args = ["--holder", "py-carol", "--fingerprint", "laptop-3", "--borrow", "30s", "--seconds", "4"];
    let (code, stdout) = run_script(&s, &args).await;
    assert_eq!(code, Some(0), "{stdout}");
    let seat = seat_in(&stdout, "borrowed: seat ");
    assert!(!stdout.contains("heartbeat"), "{stdout}");
    assert!(
        stdout.contains(&format!("return: seat {seat} (204)")),
        "{stdout}"
    );
    let kinds: Vec<String> = s
        .events()
        .await
        .iter()
        .filter(|e| e["seat_id"] == seat.as_str())
        .map(|e| e["kind"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        kinds,
        ["checkout", "release"],
        "borrowed, then returned early"
    );
    assert_eq!(seat_state(&s, &seat).await, None);
}

/// A 2 s TTL (a heartbeat every ~0.7 s) and a 3 s idle timeout, reaped
/// every 100 ms.
const IDLE: &str = r#"
[[license]]
id = "py"
key = "py-key"
seats = 2
ttl = "2s"
skew = "500ms"
reap_grace = "1s"
idle_timeout = "3s"
"#;

/// The `idle_s` each renewing heartbeat line reports, in order, up to the
/// first line starting with `until`.
fn reported_idle(stdout: &str, until: &str) -> Vec<u64> {
    stdout
        .lines()
        .take_while(|l| !l.starts_with(until))
        .filter(|l| l.starts_with("heartbeat: seat ") && l.contains(" expires "))
        .map(|l| {
            let n = l.rsplit("(idle_s ").next().unwrap().trim_end_matches(')');
            n.parse().unwrap_or_else(|e| panic!("{e}: {l}"))
        })
        .collect()
}

#[tokio::test]
async fn python_example_reports_idleness_and_after_a_reclaim_waits_for_the_user() {
    require_python_deps();
    let s = Server::start_with(ServerOptions::new(IDLE).arg("--reap-interval").arg("100ms")).await;
    // Active for 1 s, away for 5 s (reclaimed at about 4 s), back at 6 s.
    #[rustfmt::skip]
    let args = [
        "--holder", "py-idle", "--fingerprint", "py-idle-1",
        "--idle-after", "1", "--back-after", "5", "--seconds", "9",
    ];
    let (code, stdout) = run_script(&s, &args).await;
    assert_eq!(code, Some(0), "{stdout}");
    let first = seat_in(&stdout, "checkout: seat ");
    let reclaimed = format!("heartbeat: seat {first} reclaimed, idle (");
    // Growing idleness, each renewal below the timeout (a report of 3 s
    // or more is answered 410, never renewed).
    let idle = reported_idle(&stdout, &reclaimed);
    assert_eq!(idle.first(), Some(&0), "{stdout}");
    assert!(idle.iter().any(|s| *s >= 1), "{idle:?}\n{stdout}");
    assert!(idle.windows(2).all(|w| w[0] <= w[1]), "{idle:?}");
    assert!(idle.iter().all(|s| *s < 3), "{idle:?}\n{stdout}");

    let lines: Vec<&str> = stdout.lines().collect();
    let at = |prefix: &str| {
        lines
            .iter()
            .position(|l| l.starts_with(prefix))
            .unwrap_or_else(|| panic!("no line starting {prefix:?} in:\n{stdout}"))
    };
    let (lost, back) = (at(&reclaimed), at("activity: the user is back"));
    assert!(
        lines[lost].contains("3s") && lines[lost].ends_with("waiting for activity"),
        "the server's message names the timeout:\n{stdout}"
    );
    // Nothing was tried while the user was away.
    assert_eq!(back, lost + 1, "{stdout}");
    let second = seat_in(&lines[back..].join("\n"), "checkout: seat ");
    assert_ne!(second, first);
    let after = reported_idle(&lines[back..].join("\n"), "release: ");
    assert!(
        !after.is_empty() && after.iter().all(|s| *s == 0),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!("release: seat {second} (204)")),
        "{stdout}"
    );
    assert_eq!(lines.last(), Some(&"done"), "{stdout}");

    // The server's word: the first seat reclaimed for idleness.
    let events = s.events().await;
    let of_first: Vec<(&str, &str)> = events
        .iter()
        .filter(|e| e["seat_id"] == first.as_str())
        .map(|e| {
            (
                e["kind"].as_str().unwrap(),
                e["detail"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert_eq!(of_first.len(), 2, "{events:?}");
    assert_eq!(of_first[0].0, "checkout");
    assert_eq!(of_first[1].0, "reclaim");
    assert!(of_first[1].1.contains("idle"), "{of_first:?}");
    assert_eq!(s.live("py").await, 0, "the second seat was released");
}
