//! The checker on legal histories of a correct server (`synth::legal`): it
//! must find nothing, and its time on large ones is printed (not asserted:
//! this machine is shared). Run with `--nocapture` to see the timings.

use std::collections::BTreeSet;
use std::time::Instant;

use leasehold_robustness::check::{Verdict, check};
use leasehold_robustness::history::{History, Outcome};
use leasehold_robustness::synth::legal;

/// Generate and check a legal history of `n` operations; print the times.
fn timed(seed: u64, n: usize) {
    let started = Instant::now();
    let history = legal(seed, n);
    let generated = started.elapsed();
    let started = Instant::now();
    let verdict = check(&history);
    let checked = started.elapsed();
    println!(
        "checked {} ops, {} events in {:.2} s (generated in {:.2} s)",
        verdict.ops,
        verdict.events,
        checked.as_secs_f64(),
        generated.as_secs_f64()
    );
    assert_holds(&history, &verdict, seed);
}

/// On failure, the first violation drawn as text.
fn assert_holds(history: &History, verdict: &Verdict, seed: u64) {
    if let Some(first) = verdict.first() {
        let more = verdict.violations.len() - 1;
        let text = leasehold_robustness::timeline::text(history, first);
        panic!(
            "seed {seed}: the checker rejected a legal history ({more} more violations):\n{text}"
        );
    }
}

#[test]
fn a_thousand_operations() {
    timed(1, 1_000);
}

#[test]
fn ten_thousand_operations() {
    timed(2, 10_000);
}

#[test]
fn a_hundred_thousand_operations() {
    timed(3, 100_000);
}

#[test]
fn dozens_of_small_legal_histories_hold() {
    for seed in 100..140 {
        let history = legal(seed, 2_000);
        assert!(
            history.ops.len() >= 2_000,
            "seed {seed}: only {} ops",
            history.ops.len()
        );
        assert_holds(&history, &check(&history), seed);
    }
}

/// The legal histories hold every kind of answer the checker must
/// explain, and an event log as the server writes one.
#[test]
fn the_synthetic_histories_have_every_kind_of_answer() {
    let history = legal(5, 20_000);
    let mut seen: BTreeSet<String> = BTreeSet::new();
    for op in &history.ops {
        let answer = match &op.outcome {
            Outcome::Ok { .. } => "ok".to_string(),
            Outcome::Fail {
                status,
                error,
                reason,
            } => {
                format!("{status} {}", reason.as_deref().unwrap_or(error))
            }
            Outcome::Unknown { .. } => "unknown".to_string(),
        };
        seen.insert(format!("{:?} {answer}", op.kind));
    }
    let kinds = ["Checkout", "Heartbeat", "Release", "Revoke"];
    let mut wanted: Vec<String> = kinds
        .iter()
        .flat_map(|k| [format!("{k} ok"), format!("{k} unknown")])
        .collect();
    wanted.extend(["Checkout 409 no_seats_available", "Revoke 404 unknown_seat"].map(String::from));
    wanted.extend(["lapsed", "released", "revoked"].map(|r| format!("Heartbeat 410 {r}")));
    for answer in &wanted {
        assert!(seen.contains(answer), "no {answer} among {seen:?}");
    }
    let ids: Vec<i64> = history.events.iter().map(|e| e.id).collect();
    assert_eq!(ids, (1..=ids.len() as i64).collect::<Vec<_>>());
    assert!(history.events.windows(2).all(|w| w[0].at <= w[1].at));
    let kinds: BTreeSet<&str> = history.events.iter().map(|e| e.kind.as_str()).collect();
    assert_eq!(
        kinds,
        BTreeSet::from(["checkout", "reap", "release", "revoke"])
    );
}
