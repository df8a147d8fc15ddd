//! A young server's history on the dashboard, in a real browser against
//! the real `leaseholdd`: the history starts at the server's first start
//! (`covered_from`), seconds ago, so the 24-hour page draws its chart's time
//! axis from there (its bars fill the width, not a sliver at the right
//! edge), says where the history starts, and says the what-if replays only
//! that span.

#[path = "../src/browser.rs"]
mod browser;

use std::time::Duration;

use browser::Browser;
use leasehold_tests::{Server, license_toml};
use serde_json::{Value, json};

const SOON: Duration = Duration::from_secs(10);

const DUO: &str = license_toml!(
    "duo",
    seats = 2,
    ttl = "60s",
    skew = "5s",
    reap_grace = "15s"
);

/// The instant of an RFC 3339 timestamp in ms, as the page reads it.
async fn ms(b: &Browser, rfc3339: &Value) -> f64 {
    let t = rfc3339.as_str().expect("a timestamp");
    b.eval(&format!("return Date.parse({});", json!(t)))
        .await
        .as_f64()
        .unwrap_or_else(|| panic!("not a timestamp: {t}"))
}

#[tokio::test]
async fn a_young_servers_history_starts_where_its_history_does() {
    let server = Server::start(DUO).await;
    server
        .take_seat("duo", "duo-key", json!({ "holder": "ann" }))
        .await;
    let b = Browser::start().await;
    b.sign_in(&server.base, &server.admin_token).await;
    b.wait_for("tr[data-license=duo]", SOON).await;
    b.click("tr[data-license=duo] th button").await;
    assert_eq!(
        b.eval("return document.getElementById('history-range').value;")
            .await,
        "24h"
    );
    b.wait_for("#history-chart svg.usage rect.bar", SOON).await;
    b.wait_for("#history-covered:not([hidden])", SOON).await;

    // The server's own word: its history of the last 24 hours starts at
    // its first start (the default range is the page's 24 hours).
    let usage = server.admin_get("/v1/admin/usage?license=duo").await;
    let covered = ms(&b, &usage["summary"]["covered_from"]).await;
    assert!(
        covered > ms(&b, &usage["from"]).await,
        "a young server's history starts inside the range: {usage}"
    );

    let drawn = b
        .eval(
            r#"const svg = document.querySelector('#history-chart svg.usage');
            const grid = svg.querySelector('line.grid-line');
            const bars = [...svg.querySelectorAll('rect.bar')].map((r) => [
              Number(r.getAttribute('x')), Number(r.getAttribute('width')),
            ]);
            const caption = document.getElementById('history-covered');
            return {
              axisFrom: Number(svg.dataset.axisFrom),
              axisTo: Number(svg.dataset.axisTo),
              left: Number(grid.getAttribute('x1')),
              right: Number(grid.getAttribute('x2')),
              bars,
              captionAt: Number(caption.dataset.coveredFrom),
              caption: caption.textContent,
              captionShown: caption.checkVisibility(),
            };"#,
        )
        .await;
    let num = |k: &str| drawn[k].as_f64().unwrap_or_else(|| panic!("{k}: {drawn}"));
    assert_eq!(
        num("axisFrom"),
        covered,
        "the axis starts at covered_from: {drawn}"
    );
    assert!(
        num("axisTo") - num("axisFrom") < 600e3,
        "the axis spans the server's minutes, not 24 hours: {drawn}"
    );

    // The bars fill the plot from its left edge to its right (1 px apart).
    let bars: Vec<(f64, f64)> = drawn["bars"]
        .as_array()
        .expect("bars")
        .iter()
        .map(|r| (r[0].as_f64().unwrap(), r[1].as_f64().unwrap()))
        .collect();
    assert!(
        !bars.is_empty() && bars.len() <= 2,
        "one or two 15-minute buckets since the start: {drawn}"
    );
    let first = bars.iter().map(|b| b.0).fold(f64::INFINITY, f64::min);
    let end = bars.iter().map(|b| b.0 + b.1).fold(0.0, f64::max);
    assert!((first - num("left")).abs() < 0.01, "{drawn}");
    assert!(end >= num("right") - 1.01, "{drawn}");

    // The caption says where the history starts.
    assert_eq!(num("captionAt"), covered, "{drawn}");
    assert_eq!(drawn["captionShown"], true, "{drawn}");
    let caption = drawn["caption"].as_str().unwrap_or_default();
    assert!(caption.starts_with("History starts at "), "{caption}");

    // The what-if replays the same covered span, and says so.
    b.wait_for("#what-if-chart svg.what-if", SOON).await;
    b.wait_for("#what-if-covered:not([hidden])", SOON).await;
    let what_if = server
        .admin_get("/v1/admin/usage/what-if?license=duo")
        .await;
    assert_eq!(ms(&b, &what_if["covered_from"]).await, covered, "{what_if}");
    let replay = b
        .eval(
            r#"return {
              from: Number(document.querySelector('#what-if-chart svg.what-if').dataset.replayFrom),
              text: document.getElementById('what-if-covered').textContent,
            };"#,
        )
        .await;
    assert_eq!(replay["from"].as_f64(), Some(covered), "{replay}");
    let text = replay["text"].as_str().unwrap_or_default();
    assert!(
        text.starts_with("Replayed from ") && text.contains("where the history starts"),
        "{text}"
    );

    b.assert_clean().await;
    b.close().await;
}
