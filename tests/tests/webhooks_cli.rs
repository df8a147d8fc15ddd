//! `leasehold webhooks` against the real `leaseholdd`: a webhook whose
//! receiver is not there (an unused loopback port) and a `usage` alert
//! that fires once one seat is taken. The table shows the webhook with its
//! pending delivery and last error, and the alert firing; `--json` is the
//! server's lists; `deliveries` lists the alert's delivery; `test` queues
//! one and prints its id; an unknown webhook and a viewer's test are
//! refused with one line on stderr. `status` and the console (in tmux)
//! show the alert on its pool, and the console's feed the `alert` event.

#[path = "../src/webhook_kit.rs"]
mod webhook_kit;

use std::time::Duration;

use leasehold_tests::tmux::{Tmux, console_command, require_tmux};
use leasehold_tests::{Run, Server, eventually, run_leasehold};
use serde_json::{Value, json};
use webhook_kit::{alert_toml, license_toml, webhook_toml};

const SECRET: &str = "ops-secret-0123456789abcdef";
const SOON: Duration = Duration::from_secs(15);

/// A loopback URL nothing listens on: every attempt fails at once.
fn dead_url() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    drop(listener);
    format!("http://127.0.0.1:{port}/hook")
}

/// `cad` (4 seats) with `cad-busy` (usage ≥ 1 % for 1 s), a webhook `ops`
/// that cannot be reached; one seat taken, so the alert fires.
async fn firing_alert_and_dead_webhook() -> Server {
    let licenses = format!(
        "{}{}{}",
        webhook_toml("ops", &dead_url(), SECRET, "json", &[]),
        license_toml("cad", 4),
        alert_toml("cad-busy", "usage", &["percent = 1", "for = \"1s\""]),
    );
    let s = Server::start(&licenses).await;
    s.take_seat("cad", "cad-key", json!({ "holder": "alice" }))
        .await;
    s
}

async fn leasehold(s: &Server, token: &str, args: &[&str]) -> Run {
    run_leasehold(s, Some(token), &std::env::temp_dir(), args).await
}

fn ok(run: Run, args: &[&str]) -> String {
    assert_eq!(
        run.code,
        Some(0),
        "leasehold {args:?}\nstdout:\n{}\nstderr:\n{}",
        run.stdout,
        run.stderr
    );
    run.stdout
}

/// The row of `table` whose first cell is `first`, split on whitespace.
fn row<'a>(table: &'a str, first: &str) -> Option<Vec<&'a str>> {
    table
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .find(|cells| cells.first() == Some(&first))
}

#[tokio::test]
async fn webhooks_lists_pending_deliveries_errors_and_firing_alerts() {
    let s = firing_alert_and_dead_webhook().await;
    let token = s.admin_token.clone();
    // The alert fires after 1 s; its delivery fails (nothing listens).
    let table = eventually(SOON, "the webhook's failed attempt", || async {
        let out = ok(leasehold(&s, &token, &["webhooks"]).await, &["webhooks"]);
        let ops = row(&out, "ops")?;
        let pending: u64 = ops.get(3)?.parse().ok()?;
        (pending >= 1 && out.contains("cad-busy") && !ops.ends_with(&["-"])).then_some(out)
    })
    .await;
    let ops = row(&table, "ops").unwrap();
    assert_eq!(&ops[..2], ["ops", "json"], "{table}");
    assert!(ops[2].starts_with("http://127.0.0.1:"), "{table}");
    assert!(!table.contains(SECRET), "{table}");
    assert!(table.contains("alerts firing (1 of 1):"), "{table}");
    let alert = row(&table, "cad").unwrap_or_else(|| panic!("{table}"));
    assert_eq!(&alert[..3], ["cad", "cad-busy", "usage"], "{table}");

    // --json: the server's webhooks, and the alerts.
    let v: Value = serde_json::from_str(&ok(
        leasehold(&s, &token, &["webhooks", "--json"]).await,
        &["webhooks", "--json"],
    ))
    .unwrap();
    assert_eq!(v["webhooks"][0]["name"], "ops", "{v}");
    assert!(v["webhooks"][0]["pending"].as_u64() >= Some(1), "{v}");
    assert!(v["webhooks"][0]["last_error"].is_string(), "{v}");
    assert_eq!(v["alerts"][0]["alert"]["name"], "cad-busy", "{v}");
    assert_eq!(v["alerts"][0]["firing"], true, "{v}");

    let args = [
        "webhooks",
        "deliveries",
        "--webhook",
        "ops",
        "--status",
        "pending",
    ];
    let out = ok(leasehold(&s, &token, &args).await, &args);
    let d = out
        .lines()
        .find(|l| l.contains("alert.firing"))
        .unwrap_or_else(|| panic!("{out}"));
    assert!(d.contains(" ops ") && d.contains(" pending "), "{out}");
}

#[tokio::test]
async fn webhooks_test_queues_a_delivery_and_refuses_what_it_must() {
    let s = firing_alert_and_dead_webhook().await;
    let token = s.admin_token.clone();
    let args = ["webhooks", "test", "ops", "--json"];
    let v: Value = serde_json::from_str(&ok(leasehold(&s, &token, &args).await, &args)).unwrap();
    let id = v["id"]
        .as_str()
        .unwrap_or_else(|| panic!("{v}"))
        .to_string();
    assert_eq!(id.len(), 32, "{v}");
    let args = ["webhooks", "test", "ops"];
    let out = ok(leasehold(&s, &token, &args).await, &args);
    assert!(
        out.starts_with("queued test delivery ") && out.trim_end().ends_with(" to webhook ops"),
        "{out}"
    );
    // The first test is listed, with its id, as a test delivery.
    let args = ["webhooks", "deliveries", "--limit", "10", "--json"];
    let v: Value = serde_json::from_str(&ok(leasehold(&s, &token, &args).await, &args)).unwrap();
    let listed = v["deliveries"].as_array().unwrap();
    assert!(
        listed
            .iter()
            .any(|d| d["id"] == id.as_str() && d["type"] == "test"),
        "{v}"
    );
    let args = ["webhooks", "deliveries", "--limit", "1"];
    let out = ok(leasehold(&s, &token, &args).await, &args);
    assert_eq!(
        out.lines().filter(|l| l.contains(" ops ")).count(),
        1,
        "{out}"
    );
    assert!(out.contains("older: --after "), "{out}");

    // Unknown webhook: 404, one line, non-zero exit.
    let run = leasehold(&s, &token, &["webhooks", "test", "nope"]).await;
    assert_ne!(run.code, Some(0), "{run:?}");
    assert!(run.stderr.contains("404"), "{run:?}");
    assert_eq!(run.stderr.trim_end().lines().count(), 1, "{run:?}");
    // A viewer sees the list but may not send a test.
    let viewer = s.viewer_token();
    ok(leasehold(&s, &viewer, &["webhooks"]).await, &["webhooks"]);
    let run = leasehold(&s, &viewer, &["webhooks", "test", "ops"]).await;
    assert_ne!(run.code, Some(0), "{run:?}");
    assert!(run.stderr.contains("403"), "{run:?}");
}

#[tokio::test]
async fn status_and_the_console_show_the_alert_on_its_pool() {
    require_tmux();
    let s = firing_alert_and_dead_webhook().await;
    let token = s.admin_token.clone();
    let status = eventually(SOON, "the alert in status", || async {
        let out = ok(leasehold(&s, &token, &["status"]).await, &["status"]);
        out.contains("ALERT cad-busy").then_some(out)
    })
    .await;
    let cad = row(&status, "cad").unwrap_or_else(|| panic!("{status}"));
    assert_eq!(cad.last(), Some(&"cad-busy"), "{status}");

    let logs = tempfile::tempdir().unwrap();
    let tmux = Tmux::start(
        "alerts",
        &console_command(&s, &logs.path().join("console.log"), ""),
    );
    let screen = tmux
        .wait_for("the alert on its pool and in the feed", SOON, |t| {
            t.contains("ALERT cad-busy") && t.contains("firing cad-busy")
        })
        .await;
    let pool = screen
        .lines()
        .find(|l| l.contains("ALERT cad-busy"))
        .unwrap();
    assert!(pool.contains("cad"), "{screen}");
    let feed = screen
        .lines()
        .find(|l| l.contains("firing cad-busy"))
        .unwrap();
    assert!(feed.contains("▲ alert"), "{screen}");
    tmux.keys(&["q"]);
}
