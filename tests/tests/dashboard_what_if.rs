//! The what-if curve on a pool's history page, in a real browser against
//! the real `leaseholdd`: for a known history the curve has exactly the
//! replay's points, marks the seats of now and the recommendation, reads
//! in both themes, and the denials beside it are split by reason.

#[path = "../src/browser.rs"]
mod browser;

use std::time::Duration;

use browser::Browser;
use leasehold_tests::{Server, license_toml};
use serde_json::{Value, json};

const SOON: Duration = Duration::from_secs(10);

const TRIO: &str = license_toml!(
    "trio",
    seats = 3,
    ttl = "60s",
    skew = "5s",
    reap_grace = "15s"
);

/// Three holders keep the three seats; a fourth is refused and never
/// served. Replayed on k seats, k of the four requests are granted.
async fn three_held_and_one_refused() -> Server {
    let s = Server::start(TRIO).await;
    for holder in ["a", "b", "c"] {
        s.take_seat("trio", "trio-key", json!({ "holder": holder }))
            .await;
    }
    let refused = s.checkout("trio", "trio-key", json!({"holder": "d"})).await;
    assert_eq!(refused.status(), 409);
    s
}

#[tokio::test]
async fn the_what_if_curve_has_the_replays_points_and_marks() {
    let server = three_held_and_one_refused().await;
    let b = Browser::start().await;
    b.sign_in(&server.base, &server.admin_token).await;
    b.wait_for("tr[data-license=trio]", SOON).await;
    b.click("tr[data-license=trio] th button").await;
    b.wait_for("#what-if-chart svg.what-if circle.point", SOON)
        .await;

    let drawn = b
        .eval(
            r#"const svg = document.querySelector('#what-if-chart svg.what-if');
            return {
              points: [...svg.querySelectorAll('circle.point')].map((c) => [
                Number(c.dataset.seats), Number(c.dataset.denials), Number(c.dataset.denialRate),
                Number(c.getAttribute('cy')),
              ]),
              now: svg.dataset.seatsNow,
              recommended: svg.dataset.recommended,
              marked: [...svg.querySelectorAll('circle.recommended')].map((c) => c.dataset.seats),
              labels: [...svg.querySelectorAll('text.mark')].map((t) => t.textContent),
              text: document.getElementById('what-if-text').textContent,
              hidden: document.getElementById('what-if').hidden,
            };"#,
        )
        .await;
    let points: Vec<(u64, u64, f64)> = drawn["points"]
        .as_array()
        .expect("points")
        .iter()
        .map(|p| {
            (
                p[0].as_u64().unwrap(),
                p[1].as_u64().unwrap(),
                p[2].as_f64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        points,
        [(1, 3, 75.0), (2, 2, 50.0), (3, 1, 25.0), (4, 0, 0.0)],
        "{drawn}"
    );
    // Drawn where their rates say: fewer denials, lower on the chart.
    let ys: Vec<f64> = drawn["points"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p[3].as_f64().unwrap())
        .collect();
    assert!(ys.windows(2).all(|w| w[0] < w[1]), "{drawn}");
    assert_eq!(drawn["now"], "3", "{drawn}");
    assert_eq!(drawn["recommended"], "4", "{drawn}");
    assert_eq!(drawn["marked"], json!(["4"]), "{drawn}");
    assert_eq!(
        drawn["labels"],
        json!(["now: 3", "recommended: 4"]),
        "{drawn}"
    );
    assert_eq!(
        drawn["text"], "4 seats would have denied none of 4 requests; you have 3.",
        "{drawn}"
    );
    assert_eq!(drawn["hidden"], false);

    // The denials beside it: d's one refusal, true.
    let figure = |name: &'static str| {
        let b = &b;
        async move {
            b.text(&format!("#history-summary [data-figure={name}]"))
                .await
        }
    };
    b.wait_text(
        "#history-summary [data-figure=denials]",
        SOON,
        "the denials",
        |t| t == "1",
    )
    .await;
    assert_eq!(figure("true-denials").await, "1 from 1 holder");
    assert_eq!(figure("not-shortage").await, "0");

    // Light and dark: the curve takes each theme's colour.
    let stroke = |theme: &'static str| {
        let b = &b;
        async move {
            b.eval(&format!(
                "document.documentElement.dataset.theme = '{theme}';
                 return getComputedStyle(document.querySelector('svg.what-if .curve')).stroke;"
            ))
            .await
        }
    };
    let (light, dark): (Value, Value) = (stroke("light").await, stroke("dark").await);
    assert_ne!(light, dark, "the curve follows the theme");
    b.assert_clean().await;
    b.close().await;
}
