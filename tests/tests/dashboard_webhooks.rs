//! The dashboard's alerts and webhooks, in a real browser against the real
//! `leaseholdd`: a `usage` alert (1 %, for 1 s) fires once a seat is taken
//! and shows on its pool (`[data-alert]` in `tr[data-license]`), in the
//! alerts list and as an `alert` event; the webhooks panel
//! (`tr[data-webhook]`) shows the webhook whose receiver is not there with
//! its pending delivery and the last error, refreshed by itself; an admin
//! sends a test from the page, a viewer's page has no such button.

#[path = "../src/browser.rs"]
mod browser;
#[path = "../src/webhook_kit.rs"]
mod webhook_kit;

use std::time::Duration;

use browser::Browser;
use leasehold_tests::Server;
use serde_json::json;
use webhook_kit::{alert_toml, license_toml, webhook_toml};

/// The alert needs 1 s to fire, the panel refreshes every 5 s.
const SOON: Duration = Duration::from_secs(15);

/// A loopback URL nothing listens on: every attempt fails at once.
fn dead_url() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    drop(listener);
    format!("http://127.0.0.1:{port}/hook")
}

async fn firing_alert_and_dead_webhook() -> Server {
    let licenses = format!(
        "{}{}{}{}",
        webhook_toml(
            "ops",
            &dead_url(),
            "ops-secret-0123456789abcdef",
            "json",
            &[]
        ),
        license_toml("cad", 4),
        alert_toml("cad-busy", "usage", &["percent = 1", "for = \"1s\""]),
        license_toml("render", 2),
    );
    let s = Server::start(&licenses).await;
    s.take_seat("cad", "cad-key", json!({ "holder": "alice" }))
        .await;
    s
}

#[tokio::test]
async fn firing_alerts_show_on_their_pool_and_webhooks_in_their_panel() {
    let s = firing_alert_and_dead_webhook().await;
    let b = Browser::start().await;
    b.sign_in(&s.base, &s.admin_token).await;

    // The alert, on its pool only.
    b.wait_text(
        "tr[data-license=cad] [data-alert=cad-busy]",
        SOON,
        "the alert on its pool",
        |t| t.contains("ALERT cad-busy"),
    )
    .await;
    assert_eq!(b.count("tr[data-license=render] [data-alert]").await, 0);
    b.wait_for("[data-alerts] li.firing[data-alert=cad-busy]", SOON)
        .await;
    b.wait_until(SOON, "the alert event", || async {
        let feed = b.text("[data-events]").await;
        feed.contains("firing cad-busy").then_some(())
    })
    .await;

    // The webhook: the alert's delivery pending, its failed attempt's error.
    let ops = "#webhooks tr[data-webhook=ops]";
    b.wait_text(
        &format!("{ops} [data-field=last-error]"),
        SOON,
        "the webhook's last error",
        |t| t.starts_with('⚠') && t.len() > 4,
    )
    .await;
    let pending: u64 = b
        .text(&format!("{ops} [data-field=pending]"))
        .await
        .parse()
        .expect("pending count");
    assert!(pending >= 1, "pending {pending}");
    let row = b.text(ops).await;
    assert!(
        row.contains("json") && row.contains("http://127.0.0.1:"),
        "{row}"
    );
    assert!(!row.contains("ops-secret"), "{row}");

    // A test from the page: queued, and counted at the next refresh.
    b.click(&format!("{ops} button[data-action=test-webhook]"))
        .await;
    b.wait_text("#webhooks-note", SOON, "the queued test", |t| {
        t.contains("queued to ops")
    })
    .await;
    b.wait_until(SOON, "the test counted as pending", || async {
        let n: u64 = b
            .text(&format!("{ops} [data-field=pending]"))
            .await
            .parse()
            .ok()?;
        (n > pending).then_some(())
    })
    .await;
    b.assert_clean().await;
    b.close().await;

    // A viewer sees the same lists and no test button.
    let b = Browser::start().await;
    b.sign_in(&s.base, &s.viewer_token()).await;
    b.wait_for(ops, SOON).await;
    b.wait_for("tr[data-license=cad] [data-alert=cad-busy]", SOON)
        .await;
    assert_eq!(b.count("button[data-action=test-webhook]").await, 0);
    b.assert_clean().await;
    b.close().await;
}
