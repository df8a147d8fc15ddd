//! What a run's history must show: the checker's verdict, and enough of
//! everything (grants, refusals, lapses, revokes, faults) that the verdict
//! means something. One summary line per scenario, and on a violation the
//! history and its timeline on disk.

use std::collections::BTreeMap;
use std::path::PathBuf;

use leasehold_robustness::check::check;
use leasehold_robustness::history::{History, Kind, Micros, Op, Outcome};
use leasehold_robustness::timeline;

/// The least a scenario's history must hold.
#[derive(Debug, Clone, Copy)]
pub struct Expect {
    /// Checkouts and borrows answered `ok`.
    pub granted: usize,
    pub faults: usize,
    /// Requests the fault left without a definite answer (`unknown`) or
    /// refused before reaching a server (status 0): the fault was felt.
    pub uncertain: usize,
    pub clock_steps: usize,
}

impl Default for Expect {
    fn default() -> Self {
        Expect {
            granted: 30,
            faults: 1,
            uncertain: 0,
            clock_steps: 0,
        }
    }
}

/// Check `history`, print its summary, write it out (the last run's, to
/// look at), and fail the test on a violation (its timeline written too)
/// or on a history too thin to mean anything.
pub fn judge(name: &str, history: &History, seconds: f64, expect: Expect) {
    let drift = history.wall_clock_drift();
    assert!(
        drift < 50_000,
        "{name}: the wall clock moved {drift} µs against the monotonic clock while recording: \
         the instants cannot be compared"
    );
    let verdict = check(history);
    let figures = Figures::of(history);
    println!(
        "robustness {name}: {} ops checked (ok {}, fail {}, unknown {}), {} events, \
         {} faults, {seconds:.1} s, {} violations",
        verdict.ops,
        figures.ok,
        figures.fail,
        figures.unknown,
        verdict.events,
        history.faults.len(),
        verdict.violations.len()
    );
    println!(
        "  answers: {}; heartbeats renewed inside the skew ×{}",
        figures.tally(),
        figures.inside_skew
    );
    let dir = output_dir(name);
    let json = dir.join("history.json");
    let saved = std::fs::create_dir_all(&dir).and_then(|()| {
        let text = serde_json::to_string_pretty(history).map_err(std::io::Error::other)?;
        std::fs::write(&json, text)
    });
    if let Some(first) = verdict.first() {
        let files = saved
            .and_then(|()| timeline::write(history, first, &dir, "timeline"))
            .map(|(txt, html)| {
                let (json, txt, html) = (json.display(), txt.display(), html.display());
                format!("history {json}\ntimeline {txt}\n         {html}")
            })
            .unwrap_or_else(|e| format!("(could not write them to {}: {e})", dir.display()));
        let more = verdict.violations.len() - 1;
        panic!("{name}: {first}\n(and {more} more violations)\n{files}");
    }
    if let Err(e) = saved {
        eprintln!("could not write {}: {e}", json.display());
    }
    figures.assert_enough(history, expect);
}

/// `target/robustness/<name>/`, beside the test binary's `target/<profile>/`.
fn output_dir(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary's path");
    // target/<profile>/deps/faults-<hash> → target
    let target = exe
        .ancestors()
        .nth(3)
        .expect("the test binary sits in target/<profile>/deps");
    target.join("robustness").join(name)
}

/// How the operations ended, counted.
#[derive(Debug, Default)]
struct Figures {
    ok: usize,
    fail: usize,
    unknown: usize,
    /// (kind, answer) → how many: `checkout 409 no_seats_available`.
    answers: BTreeMap<(String, String), usize>,
    /// Heartbeats sent after their seat's last known `expires_at` and
    /// renewed: the lease still counted within the skew.
    inside_skew: usize,
}

impl Figures {
    fn of(history: &History) -> Figures {
        let mut f = Figures::default();
        // Each seat's last known expiry, on our clock as it read when the
        // lease came (a clock step since must not make every beat late).
        let mut expiry: BTreeMap<&str, Micros> = BTreeMap::new();
        for op in &history.ops {
            if let Some(lease) = op.granted() {
                let offset = history.server_time(op.sent.wall) - op.sent.wall;
                let known = expiry.insert(&lease.seat, lease.expires_at - offset);
                let skew = history.terms_of(&op.license).map_or(0, |t| t.skew);
                let sent = op.sent.wall;
                let late = known.is_some_and(|e| sent > e && sent <= e + skew);
                if op.kind == Kind::Heartbeat && late {
                    f.inside_skew += 1;
                }
            }
            match &op.outcome {
                Outcome::Ok { .. } => f.ok += 1,
                Outcome::Fail { .. } => f.fail += 1,
                Outcome::Unknown { .. } => f.unknown += 1,
            }
            *f.answers.entry((kind(op), answer(op))).or_default() += 1;
        }
        f
    }

    fn count(&self, kind: &str, answer: &str) -> usize {
        self.answers
            .iter()
            .filter(|((k, a), _)| k == kind && a.starts_with(answer))
            .map(|(_, n)| n)
            .sum()
    }

    fn count_any(&self, answer: &str) -> usize {
        ["checkout", "borrow", "heartbeat", "release", "revoke"]
            .iter()
            .map(|k| self.count(k, answer))
            .sum()
    }

    fn tally(&self) -> String {
        let parts: Vec<String> = self
            .answers
            .iter()
            .map(|((k, a), n)| format!("{k} {a} ×{n}"))
            .collect();
        parts.join(", ")
    }

    fn assert_enough(&self, history: &History, expect: Expect) {
        let granted = self.count("checkout", "ok") + self.count("borrow", "ok");
        let uncertain = self.unknown + self.count_any("0 ");
        let needs = [
            ("checkouts and borrows granted", granted, expect.granted),
            ("faults injected", history.faults.len(), expect.faults),
            (
                "requests left uncertain or refused by the fault",
                uncertain,
                expect.uncertain,
            ),
            ("clock steps", history.clock_steps.len(), expect.clock_steps),
            ("heartbeats renewed", self.count("heartbeat", "ok"), 10),
            (
                "checkouts refused for a full pool",
                self.count("checkout", "409"),
                1,
            ),
            ("heartbeats renewed inside the skew", self.inside_skew, 1),
            (
                "heartbeats answered 410 lapsed",
                self.count("heartbeat", "410 seat_lost lapsed"),
                1,
            ),
            ("borrows granted", self.count("borrow", "ok"), 1),
            ("releases", self.count("release", "ok"), 10),
            ("revokes", self.count("revoke", "ok"), 1),
        ];
        let short: Vec<String> = needs
            .iter()
            .filter(|(_, have, need)| have < need)
            .map(|(what, have, need)| format!("{what}: {have} (at least {need})"))
            .collect();
        assert!(
            short.is_empty(),
            "the history is too thin to mean anything:\n{}\nanswers: {}",
            short.join("\n"),
            self.tally()
        );
    }
}

fn kind(op: &Op) -> String {
    match op.kind {
        Kind::Checkout => "checkout",
        Kind::Borrow => "borrow",
        Kind::Heartbeat => "heartbeat",
        Kind::Release => "release",
        Kind::Revoke => "revoke",
    }
    .to_string()
}

/// `ok`, `409 no_seats_available`, `410 seat_lost lapsed`, `0 connect`,
/// `unknown timeout`.
fn answer(op: &Op) -> String {
    match &op.outcome {
        Outcome::Ok { .. } => "ok".to_string(),
        Outcome::Fail {
            status,
            error,
            reason,
        } => match reason {
            Some(r) => format!("{status} {error} {r}"),
            None => format!("{status} {error}"),
        },
        Outcome::Unknown { why } => format!("unknown {}", short_why(why)),
    }
}

/// An unknown's innermost cause ("Connection reset by peer (os error
/// 104)"), so alike ones count together.
fn short_why(why: &str) -> &str {
    why.rsplit(": ").next().unwrap_or(why)
}
