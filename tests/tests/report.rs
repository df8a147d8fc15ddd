//! `leasehold report` against the real `leaseholdd`: the table, `--json`
//! and `--csv` answer "did we buy enough seats?" from the server's own
//! usage history.

use leasehold_tests::{Run, Server, TEST_LICENSES, run_leasehold};
use serde_json::{Value, json};

async fn report(s: &Server, args: &[&str]) -> Run {
    let mut all = vec!["report"];
    all.extend_from_slice(args);
    let run = run_leasehold(s, Some(&s.admin_token), &std::env::temp_dir(), &all).await;
    assert_eq!(
        run.code,
        Some(0),
        "leasehold {all:?}\nstdout:\n{}\nstderr:\n{}",
        run.stdout,
        run.stderr
    );
    run
}

/// `tiny` (1 seat): alice holds it, bob is refused twice (409), then alice
/// releases and `=SUM(A1)` takes it. `small` (5 seats): one holder.
async fn a_short_history() -> Server {
    let s = Server::start(TEST_LICENSES).await;
    let alice = s
        .take_seat("tiny", "tiny-key", json!({"holder": "alice"}))
        .await;
    for _ in 0..2 {
        let refused = s
            .checkout("tiny", "tiny-key", json!({"holder": "bob"}))
            .await;
        assert_eq!(refused.status(), 409);
    }
    assert_eq!(
        s.release("tiny", "tiny-key", &alice.seat_id).await.status(),
        204
    );
    s.take_seat("tiny", "tiny-key", json!({"holder": "=SUM(A1)"}))
        .await;
    s.take_seat("small", "small-key", json!({"holder": "carol"}))
        .await;
    s
}

#[tokio::test]
async fn the_table_names_each_license_its_figures_and_a_verdict() {
    let s = a_short_history().await;
    let out = report(&s, &["--from", "1h"]).await.stdout;
    let tiny = out
        .lines()
        .find(|l| l.trim_start().starts_with("tiny "))
        .unwrap_or_else(|| panic!("no row for tiny:\n{out}"));
    let cells: Vec<&str> = tiny.split_whitespace().collect();
    // LICENSE SEATS PEAK PEAK-AT FULL FULL-FOR DENIALS ...
    assert_eq!(&cells[..3], ["tiny", "1", "1"], "{out}");
    assert_eq!(cells[6], "2", "two denials: {out}");
    assert!(
        out.contains("tiny: short of seats"),
        "two refusals make tiny short of seats:\n{out}"
    );
    assert!(out.contains("small: about right"), "{out}");
    assert!(out.contains("alice") && out.contains("carol"), "{out}");
}

#[tokio::test]
async fn json_is_one_usage_object_per_license_with_its_verdict() {
    let s = a_short_history().await;
    let out = report(&s, &["--from", "1h", "--json"]).await.stdout;
    let all: Vec<Value> = serde_json::from_str(&out).expect("a JSON array");
    let tiny = all
        .iter()
        .find(|u| u["license_id"] == "tiny")
        .expect("tiny in the report");
    assert_eq!(tiny["summary"]["seats"], 1);
    assert_eq!(tiny["summary"]["peak"], 1);
    assert_eq!(tiny["summary"]["denials"], 2);
    assert_eq!(tiny["summary"]["holders"], 2, "alice and =SUM(A1)");
    assert_eq!(tiny["verdict"], "short_of_seats");
    let only_tiny = report(&s, &["--license", "tiny", "--from", "1h", "--json"])
        .await
        .stdout;
    let only: Vec<Value> = serde_json::from_str(&only_tiny).unwrap();
    assert_eq!(only.len(), 1);
    assert_eq!(only[0]["license_id"], "tiny");
}

#[tokio::test]
async fn csv_lists_the_sessions_and_never_a_formula() {
    let s = a_short_history().await;
    let out = report(&s, &["--license", "tiny", "--from", "1h", "--csv"])
        .await
        .stdout;
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines[0],
        "seat_id,license_id,holder,fingerprint,started_at,ended_at,end,duration_s"
    );
    assert_eq!(lines.len(), 3, "alice's and =SUM(A1)'s sessions:\n{out}");
    assert!(
        lines
            .iter()
            .any(|l| l.contains(",tiny,alice,") && l.contains(",release,")),
        "{out}"
    );
    assert!(
        lines.iter().any(|l| l.contains(",tiny,'=SUM(A1),")),
        "a holder that looks like a formula is prefixed with ':\n{out}"
    );
}
