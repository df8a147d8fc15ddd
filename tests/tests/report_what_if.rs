//! `leasehold report --what-if` against the real `leaseholdd`: the server
//! replays the recorded demand against each seat count and the command
//! prints the curve and the recommendation, or (`--json`) the answers.

use leasehold_tests::{Run, Server, license_toml, run_leasehold};
use serde_json::{Value, json};

const TRIO: &str = license_toml!(
    "trio",
    seats = 3,
    ttl = "60s",
    skew = "5s",
    reap_grace = "15s"
);

async fn leasehold(s: &Server, args: &[&str]) -> Run {
    let mut all = vec!["report", "--license", "trio", "--from", "1h"];
    all.extend_from_slice(args);
    run_leasehold(s, Some(&s.admin_token), &std::env::temp_dir(), &all).await
}

async fn report(s: &Server, args: &[&str]) -> String {
    let run = leasehold(s, args).await;
    assert_eq!(
        run.code,
        Some(0),
        "leasehold report {args:?}\nstdout:\n{}\nstderr:\n{}",
        run.stdout,
        run.stderr
    );
    run.stdout
}

/// Three holders take the three seats and keep them; a fourth is refused
/// and never served (a true denial). Replayed: four requests, and k seats
/// deny 4 − k of them.
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
async fn the_curve_and_the_recommendation_per_license() {
    let s = three_held_and_one_refused().await;
    let out = report(&s, &["--what-if"]).await;
    assert!(
        out.contains("trio: 4 requests replayed: 3 sessions and 1 episode (1 true denial)"),
        "{out}"
    );
    for (seats, denials, rate) in [(1, 3, "75.0 %"), (2, 2, "50.0 %"), (3, 1, "25.0 %")] {
        assert!(
            out.lines().any(|l| {
                let cells: Vec<&str> = l.split_whitespace().collect();
                cells.len() >= 4
                    && cells[0] == seats.to_string()
                    && cells[1] == denials.to_string()
                    && format!("{} {}", cells[2], cells[3]) == rate
            }),
            "{seats} seats deny {denials} ({rate}):\n{out}"
        );
    }
    assert!(
        out.contains("  4 seats would have denied none of 4 requests; you have 3\n"),
        "{out}"
    );
    let lenient = report(&s, &["--what-if", "--target", "30"]).await;
    assert!(
        lenient.contains("  3 seats would have denied 25.0 % of 4 requests; you have 3\n"),
        "{lenient}"
    );
}

#[tokio::test]
async fn json_is_the_servers_answer_per_license() {
    let s = three_held_and_one_refused().await;
    let out = report(&s, &["--what-if", "--json", "--seats", "1..5"]).await;
    let all: Vec<Value> = serde_json::from_str(&out).expect("a JSON array");
    assert_eq!(all.len(), 1, "{out}");
    let w = &all[0];
    assert_eq!(w["license_id"], "trio");
    assert_eq!(
        (w["seats_now"].as_u64(), w["requests"].as_u64()),
        (Some(3), Some(4))
    );
    assert_eq!(w["true_denials"], 1, "{w}");
    let curve: Vec<(u64, u64, f64)> = w["curve"]
        .as_array()
        .expect(&out)
        .iter()
        .map(|p| {
            (
                p["seats"].as_u64().unwrap(),
                p["denials"].as_u64().unwrap(),
                p["denial_rate"].as_f64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        curve,
        [
            (1, 3, 75.0),
            (2, 2, 50.0),
            (3, 1, 25.0),
            (4, 0, 0.0),
            (5, 0, 0.0)
        ]
    );
    assert_eq!(w["recommended"], json!({"seats": 4, "denial_rate": 0.0}));
}

/// Bad flags never reach the server: the parser refuses them (exit 2)
/// and names the flag.
#[tokio::test]
async fn bad_flags_are_refused_before_any_request() {
    let s = Server::start(TRIO).await;
    for (args, flag) in [
        (&["--what-if", "--target", "101"][..], "--target"),
        (&["--what-if", "--idle-timeout", "0s"], "--idle-timeout"),
        (&["--idle-timeout", "30m"], "--what-if"),
    ] {
        let run = leasehold(&s, args).await;
        assert_eq!(run.code, Some(2), "{args:?}: {}", run.stderr);
        assert!(run.stderr.contains(flag), "{args:?}: {}", run.stderr);
        assert!(run.stdout.is_empty(), "{args:?}: {}", run.stdout);
    }
}
