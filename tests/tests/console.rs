//! End-to-end tests of `leasehold`, the admin console, against the real
//! `leaseholdd`: the one-shot commands as a script would run them, and the
//! console itself driven in tmux (send-keys, capture-pane) the way an admin
//! uses it. The tmux tests fail, saying so, without tmux (`.ci/run`
//! installs it).

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use leasehold_tests::tmux::{Tmux, console_command, require_tmux};
use leasehold_tests::{
    LENDING, Run, Server, TEST_LICENSES, eventually, leasehold_bin, run_leasehold,
};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;

/// Run `leasehold ARGS` against `server` (with `--server`, plus `--token`
/// unless `token` is None) in `cwd`, with a clean environment for the token.
async fn leasehold_in(server: &Server, token: Option<&str>, cwd: &Path, args: &[&str]) -> Run {
    run_leasehold(server, token, cwd, args).await
}

async fn leasehold(server: &Server, args: &[&str]) -> Run {
    let cwd = std::env::temp_dir();
    leasehold_in(server, Some(&server.admin_token), &cwd, args).await
}

fn ok(run: &Run, what: &str) -> String {
    assert_eq!(
        run.code,
        Some(0),
        "{what} failed\nstdout:\n{}\nstderr:\n{}",
        run.stdout,
        run.stderr
    );
    run.stdout.clone()
}

/// A failure is one clear line on stderr and a non-zero exit.
fn one_line_failure(run: &Run, what: &str) -> String {
    assert!(
        run.code.is_some_and(|c| c != 0),
        "{what} should fail; stdout:\n{}",
        run.stdout
    );
    let err = run.stderr.trim_end();
    assert_eq!(err.lines().count(), 1, "{what}: one line on stderr:\n{err}");
    assert!(err.starts_with("leasehold: "), "{err}");
    err.to_string()
}

/// `holder` on `fp` takes a seat of `small`.
async fn checkout(server: &Server, holder: &str, fp: &str) -> String {
    server
        .take_seat(
            "small",
            "small-key",
            json!({ "holder": holder, "fingerprint": fp }),
        )
        .await
        .seat_id
}

async fn seat_ids(server: &Server) -> Vec<String> {
    server
        .seats(None)
        .await
        .iter()
        .map(|s| s["seat_id"].as_str().expect("seat_id").to_string())
        .collect()
}

/// `leasehold ARGS` succeeded; its stdout as JSON.
async fn ok_json(server: &Server, args: &[&str], what: &str) -> Value {
    serde_json::from_str(&ok(&leasehold(server, args).await, what)).unwrap()
}

/// `status`: a table (small has room, tiny is full), and JSON with the
/// server's fields.
async fn status_reports_every_pool(server: &Server) {
    let out = ok(&leasehold(server, &["status"]).await, "status");
    let small = out.lines().find(|l| l.starts_with("small ")).expect(&out);
    assert!(small.contains("1/5") && small.contains(" ok"), "{out}");
    let tiny = out.lines().find(|l| l.starts_with("tiny ")).expect(&out);
    assert!(tiny.contains("1/1") && tiny.contains("FULL"), "{out}");
    let v = ok_json(server, &["status", "--json"], "status --json").await;
    let l = v["licenses"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["id"] == "small")
        .unwrap();
    assert_eq!(
        (l["seats"].as_u64(), l["live"].as_u64()),
        (Some(5), Some(1))
    );
    assert!(v["now"].is_string());
}

/// `seats`: the full seat id (scripts pass it to revoke), filter by license.
async fn seats_lists_full_ids_by_license(server: &Server, seat: &str) {
    let out = ok(
        &leasehold(server, &["seats", "--license", "small"]).await,
        "seats",
    );
    assert!(out.starts_with("LICENSE"), "{out}");
    let row = out.lines().find(|l| l.contains(seat)).expect(&out);
    assert!(
        row.contains("alice") && row.contains("fp-alice") && row.contains("live"),
        "{row}"
    );
    assert!(!out.contains("bob"), "filtered to small:\n{out}");
    let v = ok_json(server, &["seats", "--json"], "seats --json").await;
    assert_eq!(v["seats"].as_array().unwrap().len(), 2);
}

/// `revoke` with a reason and a block: the seat is gone, its holder learns it
/// and may not come back for a minute.
async fn revoke_with_a_block_takes_the_seat(server: &Server, seat: &str) {
    #[rustfmt::skip]
    let out = ok(
        &leasehold(server, &[
            "revoke", seat, "--reason", "stuck build agent", "--block", "1m",
        ])
        .await,
        "revoke",
    );
    assert!(out.contains(&format!("revoked seat {seat}")), "{out}");
    assert!(
        !seat_ids(server).await.iter().any(|s| s == seat),
        "seat gone on the server"
    );
    let hb = server.heartbeat("small", "small-key", seat).await;
    assert_eq!(hb.status(), 410, "the next heartbeat learns it");
    let again = server
        .checkout(
            "small",
            "small-key",
            json!({ "holder": "alice", "fingerprint": "fp-alice" }),
        )
        .await;
    assert_eq!(again.status(), 403, "blocked for a minute");
}

/// `events`: the checkouts and the revoke, as text and JSON; `--after`
/// skips what came before.
async fn events_show_checkouts_and_the_revoke(server: &Server, seat: &str) {
    let out = ok(&leasehold(server, &["events"]).await, "events");
    assert!(
        out.lines()
            .any(|l| l.contains("checkout") && l.contains("alice")),
        "{out}"
    );
    let revoke_line = out.lines().find(|l| l.contains("revoke")).expect(&out);
    assert!(revoke_line.contains(seat), "{out}");
    let v = ok_json(server, &["events", "--json"], "events --json").await;
    let events = v["events"].as_array().unwrap();
    assert!(
        events
            .iter()
            .any(|e| e["kind"] == "revoke" && e["seat_id"] == seat)
    );
    let first = events[0]["id"].as_i64().unwrap();
    let v = ok_json(
        server,
        &["events", "--json", "--after", &first.to_string()],
        "events --after",
    )
    .await;
    assert!(
        v["events"]
            .as_array()
            .unwrap()
            .iter()
            .all(|e| e["id"].as_i64().unwrap() > first)
    );
}

/// `revoke --json`; then the same seat again: unknown_seat, one line,
/// non-zero.
async fn revoke_json_then_again_is_unknown(server: &Server) {
    let other = seat_ids(server).await.pop().expect("bob's seat");
    let v = ok_json(server, &["revoke", &other, "--json"], "revoke --json").await;
    assert_eq!(v, json!({ "seat_id": other, "revoked": true }));
    let err = one_line_failure(
        &leasehold(server, &["revoke", &other]).await,
        "revoke twice",
    );
    assert!(
        err.contains("unknown_seat") && err.contains(&other),
        "{err}"
    );
}

#[tokio::test]
async fn one_shot_commands_report_and_revoke() {
    let server = Server::start(TEST_LICENSES).await;
    let seat = checkout(&server, "alice", "fp-alice").await;
    server
        .take_seat(
            "tiny",
            "tiny-key",
            json!({ "holder": "bob", "fingerprint": "fp-bob" }),
        )
        .await;

    status_reports_every_pool(&server).await;
    seats_lists_full_ids_by_license(&server, &seat).await;
    revoke_with_a_block_takes_the_seat(&server, &seat).await;
    events_show_checkouts_and_the_revoke(&server, &seat).await;
    revoke_json_then_again_is_unknown(&server).await;
}

/// A borrowed seat: `status` counts it, `seats` shows its state and when it
/// is back (and `--json` its state and expiry), a plain `revoke` is refused
/// in one line that names `--force`, and `revoke --force` frees it.
#[tokio::test]
async fn a_borrowed_seat_in_status_and_seats_and_revoked_only_with_force() {
    let server = Server::start(LENDING).await;
    let lease = server
        .take_seat(
            "lab",
            "lab-key",
            json!({ "holder": "erin", "fingerprint": "erin-laptop", "borrow_s": 86_400 }),
        )
        .await;
    assert!(lease.borrowed);
    let seat = lease.seat_id.clone();
    let back = lease.expires_at.to_string();

    let out = ok(&leasehold(&server, &["status"]).await, "status");
    let header: Vec<&str> = out.lines().nth(1).expect(&out).split_whitespace().collect();
    let lab: Vec<&str> = out
        .lines()
        .find(|l| l.starts_with("lab "))
        .expect(&out)
        .split_whitespace()
        .collect();
    let borrowed = header.iter().position(|h| *h == "BORROWED").expect(&out);
    assert_eq!((lab[1], lab[borrowed]), ("1/3", "1"), "{out}");

    let out = ok(&leasehold(&server, &["seats"]).await, "seats");
    assert!(out.lines().next().unwrap().ends_with("BACK AT"), "{out}");
    let row = out.lines().find(|l| l.contains(&seat)).expect(&out);
    assert!(
        row.contains("borrowed") && row.ends_with(&back),
        "state and when it is back: {row}"
    );
    let v = ok_json(&server, &["seats", "--json"], "seats --json").await;
    let s = &v["seats"][0];
    assert_eq!(
        (&s["state"], &s["expires_at"]),
        (&json!("borrowed"), &json!(back))
    );

    let err = one_line_failure(
        &leasehold(&server, &["revoke", &seat]).await,
        "plain revoke",
    );
    assert!(
        err.contains("409 borrowed") && err.contains("valid offline") && err.contains("--force"),
        "{err}"
    );
    assert_eq!(
        seat_ids(&server).await,
        std::slice::from_ref(&seat),
        "still held"
    );

    let v = ok_json(
        &server,
        &[
            "revoke",
            &seat,
            "--force",
            "--reason",
            "laptop lost",
            "--json",
        ],
        "revoke --force",
    )
    .await;
    assert_eq!(v, json!({ "seat_id": seat, "revoked": true }));
    assert!(seat_ids(&server).await.is_empty());
    let revokes = server.events_of("revoke").await;
    assert_eq!(revokes.len(), 1, "{revokes:?}");
    assert!(
        revokes[0]["detail"]
            .as_str()
            .unwrap_or_default()
            .contains("laptop lost"),
        "{:?}",
        revokes[0]
    );
}

#[tokio::test]
async fn one_shot_errors_are_one_line_and_token_sources_work() {
    let server = Server::start(TEST_LICENSES).await;
    let tmp = std::env::temp_dir();

    let err = one_line_failure(
        &leasehold_in(&server, Some("not-the-token"), &tmp, &["status"]).await,
        "wrong token",
    );
    assert!(err.contains("401"), "{err}");

    // A port nobody listens on.
    let dead = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let mut cmd = Command::new(leasehold_bin());
    let out = cmd
        .args([
            "seats",
            "--server",
            &format!("http://127.0.0.1:{dead}"),
            "--token",
            "x",
        ])
        .output()
        .await
        .unwrap();
    let err = one_line_failure(&Run::from(out), "unreachable server");
    assert!(err.contains("cannot reach the server"), "{err}");

    // No token anywhere.
    let empty = tempfile::tempdir().unwrap();
    let err = one_line_failure(
        &leasehold_in(&server, None, empty.path(), &["status"]).await,
        "no token",
    );
    assert!(err.contains("no admin token"), "{err}");

    // ./data/admin.token, as written by the server into its data dir.
    let parent = server.data_dir().parent().unwrap().to_path_buf();
    ok(
        &leasehold_in(&server, None, &parent, &["status"]).await,
        "token from ./data/admin.token",
    );

    // LEASEHOLD_ADMIN_TOKEN.
    let out = Command::new(leasehold_bin())
        .args(["status", "--server", &server.base])
        .current_dir(&tmp)
        .env("LEASEHOLD_ADMIN_TOKEN", &server.admin_token)
        .output()
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[tokio::test]
async fn events_follow_prints_new_events_as_they_happen() {
    let server = Server::start(TEST_LICENSES).await;
    checkout(&server, "early", "fp-early").await;
    let mut child = Command::new(leasehold_bin())
        .args([
            "events",
            "--follow",
            "--json",
            "--server",
            &server.base,
            "--token",
            &server.admin_token,
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut next = async || -> Value {
        let line = tokio::time::timeout(Duration::from_secs(20), lines.next_line())
            .await
            .expect("an event within 20 s")
            .unwrap()
            .expect("a line");
        serde_json::from_str(&line).unwrap()
    };
    let first = next().await;
    assert_eq!(
        (first["kind"].as_str(), first["holder"].as_str()),
        (Some("checkout"), Some("early"))
    );
    let seat = checkout(&server, "late", "fp-late").await;
    let ev = next().await;
    assert_eq!(ev["seat_id"], seat.as_str());
    assert!(ev["id"].as_i64() > first["id"].as_i64());
    child.kill().await.unwrap();
}

#[tokio::test]
async fn console_shows_a_held_seat_and_revokes_it() {
    require_tmux();
    let server = Server::start(TEST_LICENSES).await;
    let seat = checkout(&server, "carol-e2e", "fp-carol").await;
    checkout(&server, "dave-e2e", "fp-dave").await;
    let logs = tempfile::tempdir().unwrap();
    let tmux = Tmux::start(
        "revoke",
        &console_command(&server, &logs.path().join("console.log"), ""),
    );

    // The holders pane itself (its short seat id and state word), not the
    // event feed, which names the same holders and may draw first.
    let screen = tmux
        .wait_for("the held seats", Duration::from_secs(20), |s| {
            s.contains("carol-e2e")
                && s.contains("dave-e2e")
                && s.contains("connected")
                && s.contains(&seat[..8])
                && s.contains("● live")
        })
        .await;
    assert!(screen.contains("● live"), "state word and glyph:\n{screen}");
    assert!(screen.contains("small"), "pool listed:\n{screen}");

    // Filter down to carol, open the revoke modal, give a reason, confirm.
    tmux.keys(&["/"]);
    tmux.type_text("carol-e2e");
    tmux.keys(&["Enter"]);
    tmux.wait_for("the filter", Duration::from_secs(10), |s| {
        s.contains("Holders 1 of 2")
    })
    .await;
    tmux.keys(&["r"]);
    let modal = tmux
        .wait_for("the revoke modal", Duration::from_secs(10), |s| {
            s.contains("Revoke seat")
        })
        .await;
    assert!(
        modal.contains(&seat),
        "modal names the full seat id:\n{modal}"
    );
    assert!(
        modal.contains("carol-e2e") && modal.contains("small"),
        "{modal}"
    );
    tmux.keys(&["Tab"]);
    tmux.type_text("e2e test");
    tmux.keys(&["Enter"]);
    tmux.wait_for("the outcome", Duration::from_secs(10), |s| {
        s.contains("revoked carol-e2e")
    })
    .await;

    // Gone on the server; the feed shows the revoke; dave is untouched.
    let ids = seat_ids(&server).await;
    assert!(!ids.contains(&seat), "revoked seat still on the server");
    assert_eq!(ids.len(), 1);
    let revokes = server.events_of("revoke").await;
    assert!(
        revokes.iter().any(|e| e["seat_id"] == seat.as_str()),
        "{revokes:?}"
    );
    tmux.keys(&["Escape"]); // clear the filter
    tmux.wait_for(
        "the revoke event in the feed",
        Duration::from_secs(10),
        |s| {
            s.lines()
                .any(|l| l.contains("revoke") && l.contains("carol-e2e"))
                && s.contains("dave-e2e")
        },
    )
    .await;

    // q quits and gives the terminal back.
    tmux.keys(&["q"]);
    eventually(Duration::from_secs(10), "the console to exit", || async {
        (!tmux.alive()).then_some(())
    })
    .await;
}

#[tokio::test]
async fn console_survives_the_server_going_away() {
    require_tmux();
    let mut server = Server::start(TEST_LICENSES).await;
    checkout(&server, "erin-e2e", "fp-erin").await;
    let logs = tempfile::tempdir().unwrap();
    let tmux = Tmux::start(
        "outage",
        &console_command(&server, &logs.path().join("console.log"), "--read-only"),
    );
    tmux.wait_for("the held seat", Duration::from_secs(20), |s| {
        s.contains("erin-e2e")
    })
    .await;

    // Read-only: r does not open the modal.
    tmux.keys(&["r"]);
    tmux.wait_for("the read-only notice", Duration::from_secs(10), |s| {
        s.contains("read-only") && !s.contains("Revoke seat")
    })
    .await;

    server.kill9();
    let screen = tmux
        .wait_for("the disconnected banner", Duration::from_secs(20), |s| {
            s.contains("DISCONNECTED")
        })
        .await;
    assert!(screen.contains("erin-e2e"), "last data kept:\n{screen}");

    server.restart().await;
    tmux.wait_for("reconnection", Duration::from_secs(30), |s| {
        !s.contains("DISCONNECTED") && s.contains("● connected") && s.contains("erin-e2e")
    })
    .await;
    assert!(tmux.alive(), "the console is still running");
    tmux.keys(&["C-c"]);
    eventually(Duration::from_secs(10), "the console to exit", || async {
        (!tmux.alive()).then_some(())
    })
    .await;
}

/// Revoke with a block chosen in the modal: the seat goes, its holder (same
/// fingerprint) is refused a new seat with 403 for the 10 minutes chosen,
/// and anyone else still gets one.
#[tokio::test]
async fn console_revokes_with_a_block() {
    require_tmux();
    let server = Server::start(TEST_LICENSES).await;
    let seat = checkout(&server, "frank-e2e", "fp-frank").await;
    checkout(&server, "gina-e2e", "fp-gina").await;
    let logs = tempfile::tempdir().unwrap();
    let tmux = Tmux::start(
        "block",
        &console_command(&server, &logs.path().join("console.log"), ""),
    );
    tmux.wait_for("the held seats", Duration::from_secs(20), |s| {
        s.contains("frank-e2e") && s.contains("gina-e2e") && s.contains("connected")
    })
    .await;

    // Select frank's seat: the detail bar under the table names it whole.
    tmux.keys(&["/"]);
    tmux.type_text("frank-e2e");
    tmux.keys(&["Enter"]);
    tmux.wait_for("frank's seat selected", Duration::from_secs(10), |s| {
        s.contains("Holders 1 of 2") && s.contains(&format!("seat {seat}"))
    })
    .await;

    // Open revoke, choose 10m with b, confirm.
    tmux.keys(&["r"]);
    let modal = tmux
        .wait_for("the revoke modal", Duration::from_secs(10), |s| {
            s.contains("Revoke seat") && s.contains("[none]")
        })
        .await;
    assert!(modal.contains(&seat), "{modal}");
    tmux.keys(&["b"]);
    tmux.wait_for("the 10m block chosen", Duration::from_secs(10), |s| {
        s.contains("[10m]") && s.contains("refused a seat for 10m")
    })
    .await;
    tmux.keys(&["Enter"]);
    tmux.wait_for("the outcome", Duration::from_secs(10), |s| {
        s.contains("revoked frank-e2e")
    })
    .await;

    // Over HTTP: the seat is gone, the event says for how long the block
    // runs on the server's clock, frank is refused, gina's peers are not.
    assert!(!seat_ids(&server).await.contains(&seat), "seat still held");
    let revoke = server
        .events_of("revoke")
        .await
        .into_iter()
        .find(|e| e["seat_id"] == seat.as_str())
        .expect("the revoke event");
    let detail = revoke["detail"].as_str().expect("detail");
    let until = detail
        .split("re-checkout blocked until ")
        .nth(1)
        .unwrap_or_else(|| panic!("no block in {detail:?}"));
    let at: leasehold_common::Timestamp =
        serde_json::from_value(revoke["at"].clone()).expect("event time");
    let until: leasehold_common::Timestamp =
        serde_json::from_value(Value::String(until.trim().to_string())).expect("block end");
    assert_eq!(until.millis_since(at), 600_000, "{revoke}");
    let again = server
        .checkout(
            "small",
            "small-key",
            json!({ "holder": "frank-e2e", "fingerprint": "fp-frank" }),
        )
        .await;
    assert_eq!(again.status(), 403, "frank is blocked");
    let other = server
        .checkout(
            "small",
            "small-key",
            json!({ "holder": "henry-e2e", "fingerprint": "fp-henry" }),
        )
        .await;
    assert!(
        other.status().is_success(),
        "henry gets a seat: {}",
        other.status()
    );

    tmux.keys(&["q"]);
    eventually(Duration::from_secs(10), "the console to exit", || async {
        (!tmux.alive()).then_some(())
    })
    .await;
}

/// `desk` reclaims a seat idle for 30 minutes.
const IDLE_DESK: &str = concat!(
    "\n[[license]]\nid = \"desk\"\nkey = \"desk-key\"\nseats = 3\n",
    "ttl = \"60s\"\nskew = \"5s\"\nreap_grace = \"15s\"\nidle_timeout = \"30m\"\n",
);

/// A heartbeat of `seat` (of `desk`) whose client reports its user idle.
async fn report_idle(server: &Server, seat: &str, idle_s: u64) {
    let resp = server
        .client()
        .post(server.url(&format!("/v1/licenses/desk/seats/{seat}/heartbeat")))
        .bearer_auth("desk-key")
        .json(&json!({ "idle_s": idle_s }))
        .send()
        .await
        .expect("heartbeat");
    assert_eq!(resp.status(), 200, "heartbeat idle_s {idle_s}");
}

/// A seat whose client reports its user idle: `seats` gains an IDLE column
/// (`-` for the active seat) and `--json` the seat's `idle_s`; the console
/// shows IDLE too, and the idle time with the timeout under the table.
/// When the user is back, both drop the column.
#[tokio::test]
async fn an_idle_seat_in_seats_and_the_console() {
    require_tmux();
    let server = Server::start(IDLE_DESK).await;
    let take = |holder: &'static str| {
        let server = &server;
        async move {
            let body = json!({ "holder": holder, "fingerprint": format!("fp-{holder}") });
            server.take_seat("desk", "desk-key", body).await.seat_id
        }
    };
    let (grace, henry) = (take("grace-e2e").await, take("henry-e2e").await);
    let out = ok(&leasehold(&server, &["seats"]).await, "seats");
    assert!(!out.contains("IDLE"), "no seat reports idleness:\n{out}");

    report_idle(&server, &grace, 120).await;
    let out = ok(&leasehold(&server, &["seats"]).await, "seats");
    assert!(out.lines().next().unwrap().ends_with("IDLE"), "{out}");
    let last_cell = |seat: &str| {
        let row = out.lines().find(|l| l.contains(seat)).expect(&out);
        row.split_whitespace().last().unwrap().to_string()
    };
    assert!(
        last_cell(&grace).ends_with('s'),
        "grace's idle time:\n{out}"
    );
    assert_eq!(last_cell(&henry), "-", "{out}");
    let v = ok_json(&server, &["seats", "--json"], "seats --json").await;
    let idle_of = |seat: &str| {
        v["seats"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["seat_id"] == seat)
            .map(|s| s["idle_s"].clone())
            .unwrap()
    };
    assert!(idle_of(&grace).is_u64(), "{v}");
    assert_eq!(idle_of(&henry), Value::Null, "{v}");

    let logs = tempfile::tempdir().unwrap();
    let tmux = Tmux::start(
        "idle",
        &console_command(&server, &logs.path().join("console.log"), ""),
    );
    tmux.wait_for("the IDLE column", Duration::from_secs(20), |s| {
        s.lines()
            .any(|l| l.contains("HOLDER") && l.contains("IDLE"))
            && s.contains("henry-e2e")
    })
    .await;
    tmux.keys(&["/"]);
    tmux.type_text("grace-e2e");
    tmux.keys(&["Enter"]);
    tmux.wait_for("grace's idle time", Duration::from_secs(10), |s| {
        s.contains("Holders 1 of 2") && s.contains("reclaimed at 30m00s")
    })
    .await;

    // grace is back: the next refresh has no idle seat.
    report_idle(&server, &grace, 0).await;
    tmux.wait_for("no IDLE column", Duration::from_secs(20), |s| {
        s.contains("grace-e2e") && !s.contains("IDLE") && !s.contains("reclaimed at")
    })
    .await;
    tmux.keys(&["q"]);
    eventually(Duration::from_secs(10), "the console to exit", || async {
        (!tmux.alive()).then_some(())
    })
    .await;
}
