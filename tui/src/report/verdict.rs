//! "Did we buy enough seats?": one verdict per license from the usage
//! summary of a range, with the reason in words.
//!
//! The thresholds are named here and nowhere else; `leasehold report --help`
//! prints them from [`thresholds_help`], and the right-sizing chapter
//! (`docs/src/right-sizing.md`) quotes it, checked by a test.
//!
//! Any time with more seats in use than sold (`over_s`: overage granted, or
//! a pool shrunk below the seats still held) is short of seats whatever its
//! length: the pool was not enough for the demand it served.
//!
//! "The range" is the part of the asked range the server's history covers
//! (`covered_from` to `to`): a server started an hour ago has seen an hour,
//! not the week asked about, and never calls a surplus on it.

use std::time::Duration;

use leasehold_common::Timestamp;
use leasehold_common::api::UsageSummary;

use super::denials::{DEFAULT_TOLERANCE, Denials, tolerance_words};
use crate::format::fmt_duration_ms;

/// Every seat in use for at least this share of the range (in percent)
/// means people were (or were about to be) turned away.
pub const SHORT_FULL_PCT: u32 = 10;
/// A peak of at most this share of the seats (in percent)...
pub const SURPLUS_PEAK_PCT: u32 = 70;
/// ...over a range at least this long, with no denial, means seats sat idle.
/// A shorter range may simply have missed the busy day of the week.
pub const SURPLUS_MIN_RANGE: Duration = Duration::from_secs(7 * 86_400);

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    ShortOfSeats,
    MoreThanNeeded,
    AboutRight,
}

impl Verdict {
    pub fn words(self) -> &'static str {
        match self {
            Verdict::ShortOfSeats => "short of seats",
            Verdict::MoreThanNeeded => "more seats than needed",
            Verdict::AboutRight => "about right",
        }
    }
}

/// A verdict and the numbers that led to it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Judgement {
    pub verdict: Verdict,
    pub reason: String,
}

/// The `--help` text that states the rules, built from the constants.
pub fn thresholds_help() -> String {
    format!(
        "Verdict per license:\n  \
         short of seats          any time with more seats in use than sold, any true denial, or every seat in use for >= {SHORT_FULL_PCT}% of the range\n  \
         more seats than needed  peak <= {SURPLUS_PEAK_PCT}% of the seats and no true denial, over a range of at least {}\n  \
         about right             otherwise\n\
         A true denial is a checkout refused for want of a free seat (reserved ones included) not followed by a seat for the same holder within --tolerance (default {}). \
         Denials by caps, lists or blocks, and denials served within the tolerance, are listed beside the verdict: never a shortage.\n\
         The range is the part of the one asked that the server's history covers (from its first start, or from when the license was added).",
        min_range_words(),
        tolerance_words(DEFAULT_TOLERANCE),
    )
}

/// [`SURPLUS_MIN_RANGE`] as people say it: `7 days`.
fn min_range_words() -> String {
    let ms = SURPLUS_MIN_RANGE.as_millis() as i64;
    if ms % 86_400_000 == 0 {
        format!("{} days", ms / 86_400_000)
    } else {
        fmt_duration_ms(ms)
    }
}

/// How long the pool was over: `12m00s`; a blip shorter than a second is
/// `under 1s`, never `0s`.
fn over_words(over_s: f64) -> String {
    span_words((over_s * 1000.0).round() as i64)
}

/// `12m00s`; less than a second (but some) is `under 1s`, never `0s`.
fn span_words(ms: i64) -> String {
    if ms < 1000 {
        "under 1s".to_string()
    } else {
        fmt_duration_ms(ms)
    }
}

/// `12.5%`: one decimal, so a small share does not read as 0.
pub fn pct(fraction: f64) -> String {
    format!("{:.1}%", fraction * 100.0)
}

/// Where the server's history covers `[from, to)` from: the summary's
/// `covered_from` kept inside the range; `from` from an older server that
/// does not say.
pub fn covered_from(s: &UsageSummary, from: Timestamp, to: Timestamp) -> Timestamp {
    s.covered_from.unwrap_or(from).max(from).min(to)
}

/// Judge one license asked about `[from, to)`, over the part of it the
/// server's history covers; `tolerance` is the one the server counted true
/// denials with (`None`: its default).
pub fn judge(
    s: &UsageSummary,
    from: Timestamp,
    to: Timestamp,
    tolerance: Option<Duration>,
) -> Judgement {
    let denials = Denials::of(s);
    let tolerance = tolerance.unwrap_or(DEFAULT_TOLERANCE);
    let mut judgement = judge_shortage(s, from, to, &denials, tolerance);
    if let Some(beside) = denials.beside_words(tolerance) {
        judgement.reason = format!("{}; {beside}", judgement.reason);
    }
    judgement
}

/// `history covers only 2h00m of the 7d00h asked`: said whenever the
/// history covers less than was asked.
pub(super) fn coverage_words(covered_ms: i64, asked_ms: i64) -> Option<String> {
    (covered_ms < asked_ms).then(|| {
        let covered = if covered_ms == 0 {
            "none".to_string()
        } else {
            format!("only {}", span_words(covered_ms))
        };
        format!(
            "history covers {covered} of the {} asked",
            fmt_duration_ms(asked_ms)
        )
    })
}

/// [`judge`] without the denials said beside the verdict.
fn judge_shortage(
    s: &UsageSummary,
    from: Timestamp,
    to: Timestamp,
    denials: &Denials,
    tolerance: Duration,
) -> Judgement {
    let asked_ms = to.millis_since(from).max(0);
    let range_ms = to.millis_since(covered_from(s, from, to)).max(0);
    let coverage = coverage_words(range_ms, asked_ms);
    let with_coverage = |reason: String| match &coverage {
        Some(c) => format!("{reason}; {c}"),
        None => reason,
    };
    let range_s = range_ms as f64 / 1000.0;
    let full_share = if range_s > 0.0 {
        s.full_s / range_s
    } else {
        0.0
    };
    let full_words = format!("every seat in use {} of the range", pct(full_share));
    let full_is_short = s.full_s * 100.0 >= f64::from(SHORT_FULL_PCT) * range_s && s.full_s > 0.0;
    let over_is_short = s.over_s > 0.0;
    let denied = denials.shortage() > 0;
    if over_is_short || denied || full_is_short {
        let mut why = Vec::new();
        if over_is_short {
            why.push(format!(
                "more seats in use than sold for {}",
                over_words(s.over_s)
            ));
        }
        why.extend(denials.shortage_words(tolerance));
        if full_is_short {
            why.push(format!("{full_words} (>= {SHORT_FULL_PCT}%)"));
        }
        return Judgement {
            verdict: Verdict::ShortOfSeats,
            reason: with_coverage(why.join("; ")),
        };
    }
    if range_ms == 0 {
        return Judgement {
            verdict: Verdict::AboutRight,
            reason: format!(
                "nothing to judge: the server's history of this license does not cover the {} asked",
                fmt_duration_ms(asked_ms)
            ),
        };
    }
    // Integer arithmetic: "peak <= 70% of seats" is exact at the boundary.
    let peak_low =
        s.seats > 0 && u64::from(s.peak) * 100 <= u64::from(s.seats) * u64::from(SURPLUS_PEAK_PCT);
    let peak_share = if s.seats > 0 {
        f64::from(s.peak) / f64::from(s.seats)
    } else {
        0.0
    };
    let peak_words = format!("peak {} of {} seats ({})", s.peak, s.seats, pct(peak_share));
    let long_enough = range_ms >= SURPLUS_MIN_RANGE.as_millis() as i64;
    let range_words = fmt_duration_ms(range_ms);
    let none = denials.none_words();
    if peak_low && long_enough {
        return Judgement {
            verdict: Verdict::MoreThanNeeded,
            reason: with_coverage(format!(
                "{peak_words} <= {SURPLUS_PEAK_PCT}%, {none} over {range_words}"
            )),
        };
    }
    let reason = if peak_low {
        let short = match &coverage {
            Some(c) => format!("{c}, too short"),
            None => format!("{range_words} is too short"),
        };
        format!(
            "{peak_words} <= {SURPLUS_PEAK_PCT}% and {none}, but {short} \
             to call a surplus (needs {})",
            min_range_words()
        )
    } else {
        with_coverage(format!(
            "{none}, {full_words} (< {SHORT_FULL_PCT}%), {peak_words}"
        ))
    };
    Judgement {
        verdict: Verdict::AboutRight,
        reason,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use leasehold_common::api::DenialsByReason;

    const DAY_MS: i64 = 86_400_000;
    const T0: i64 = 1_796_011_200_000; // 2026-11-30T04:00:00Z

    fn ts(ms: i64) -> Timestamp {
        Timestamp::from_millis(ms)
    }

    /// Asked about the `range_ms` up to T0.
    fn judge_over(s: &UsageSummary, range_ms: i64) -> Judgement {
        judge(s, ts(T0 - range_ms), ts(T0), None)
    }

    fn summary(seats: u32, peak: u32, full_s: f64, denials: u64) -> UsageSummary {
        UsageSummary {
            seats,
            peak,
            peak_at: None,
            full_s,
            over_s: 0.0,
            denials,
            denials_by_reason: Default::default(),
            true_denials: 0,
            denied_holders: 0,
            seat_hours: 0.0,
            borrowed_hours: 0.0,
            utilization: 0.0,
            holders: 0,
            idle_hours: 0.0,
            covered_from: None,
        }
    }

    #[test]
    fn any_denial_is_short() {
        let j = judge_over(&summary(10, 4, 0.0, 1), 7 * DAY_MS);
        assert_eq!(j.verdict, Verdict::ShortOfSeats);
        assert_eq!(j.reason, "1 denial");
    }

    fn with_reasons(s: UsageSummary, by: DenialsByReason, true_denials: u64) -> UsageSummary {
        UsageSummary {
            denials: by.total(),
            denials_by_reason: by,
            true_denials,
            // One holder per true denial unless a test says otherwise.
            denied_holders: true_denials,
            ..s
        }
    }

    #[test]
    fn only_true_denials_are_short() {
        // Refused while full and never served: short.
        let by = DenialsByReason {
            full: 2,
            ..Default::default()
        };
        let j = judge_over(&with_reasons(summary(10, 10, 0.0, 0), by, 2), 7 * DAY_MS);
        assert_eq!(j.verdict, Verdict::ShortOfSeats);
        assert_eq!(
            j.reason,
            "2 true denials from 2 holders (full, not served within 60s)"
        );
        // Served within the tolerance, or refused by caps and lists: not
        // short, and said beside the verdict.
        let by = DenialsByReason {
            full: 3,
            holder: 2,
            group: 1,
            not_allowed: 1,
            ..Default::default()
        };
        let j = judge(
            &with_reasons(summary(10, 10, 0.0, 0), by, 0),
            ts(T0 - 7 * DAY_MS),
            ts(T0),
            Some(Duration::from_secs(30)),
        );
        assert_eq!(j.verdict, Verdict::AboutRight);
        assert_eq!(
            j.reason,
            "no true denials, every seat in use 0.0% of the range (< 10%), peak 10 of 10 seats (100.0%); \
             3 refused while full but served within 30s, 4 refused by caps or lists — not a shortage"
        );
        // Caps alone never stop a surplus.
        let by = DenialsByReason {
            borrow: 4,
            ..Default::default()
        };
        let j = judge_over(&with_reasons(summary(10, 2, 0.0, 0), by, 0), 7 * DAY_MS);
        assert_eq!(j.verdict, Verdict::MoreThanNeeded);
        assert_eq!(
            j.reason,
            "peak 2 of 10 seats (20.0%) <= 70%, no true denials over 7d00h; \
             4 refused by caps — not a shortage"
        );
        // Short for another reason: the denials are still said beside it.
        let by = DenialsByReason {
            full: 1,
            blocked: 1,
            ..Default::default()
        };
        let j = judge_over(&with_reasons(summary(1, 1, 86_400.0, 0), by, 1), DAY_MS);
        assert_eq!(
            j.reason,
            "1 true denial from 1 holder (full, not served within 60s); every seat in use 100.0% of the range (>= 10%); \
             1 refused by blocks — not a shortage"
        );
    }

    #[test]
    fn a_holder_retrying_is_said_as_one_holder() {
        // The simulate run of issue 39: 13 true denials from 4 of 8 clients.
        let by = DenialsByReason {
            full: 15,
            ..Default::default()
        };
        let s = UsageSummary {
            denied_holders: 4,
            ..with_reasons(summary(3, 3, 0.0, 0), by, 13)
        };
        let j = judge_over(&s, 7 * DAY_MS);
        assert_eq!(j.verdict, Verdict::ShortOfSeats);
        assert_eq!(
            j.reason,
            "13 true denials from 4 holders (full, not served within 60s); \
             2 refused while full but served within 60s — not a shortage"
        );
        // A server older than the count sends none: the count alone, and
        // the same verdict.
        let json = r#"{"seats":3,"peak":3,"peak_at":null,"full_s":0,"over_s":0,"denials":15,
            "denials_by_reason":{"full":15,"holder":0,"group":0,"borrow":0,"not_allowed":0,"blocked":0},
            "true_denials":13,"seat_hours":1,"utilization":0.1,"holders":8}"#;
        let old: UsageSummary = serde_json::from_str(json).unwrap();
        assert_eq!(old.denied_holders, 0);
        let j = judge_over(&old, 7 * DAY_MS);
        assert_eq!(j.verdict, Verdict::ShortOfSeats);
        assert!(
            j.reason
                .starts_with("13 true denials (full, not served within 60s);"),
            "{}",
            j.reason
        );
    }

    #[test]
    fn denials_without_reasons_decide_as_before() {
        // An older server: no reasons, no true denials, yet 2 denials.
        let s = summary(10, 3, 0.0, 2);
        assert_eq!(s.denials_by_reason.total(), 0);
        let j = judge_over(&s, 7 * DAY_MS);
        assert_eq!(j.verdict, Verdict::ShortOfSeats);
        assert_eq!(j.reason, "2 denials");
        // The same answer as the server's JSON (fields absent) reads.
        let json = r#"{"seats":10,"peak":3,"peak_at":null,"full_s":0,"over_s":0,"denials":2,
            "seat_hours":1,"utilization":0.1,"holders":1}"#;
        let old: UsageSummary = serde_json::from_str(json).unwrap();
        assert_eq!(judge_over(&old, 7 * DAY_MS), j);
    }

    #[test]
    fn full_for_ten_percent_of_the_range_is_short() {
        // 7 days = 604,800 s; 10% = 60,480 s exactly.
        let j = judge_over(&summary(10, 10, 60_480.0, 0), 7 * DAY_MS);
        assert_eq!(j.verdict, Verdict::ShortOfSeats);
        assert_eq!(j.reason, "every seat in use 10.0% of the range (>= 10%)");
        let j = judge_over(&summary(10, 10, 60_479.0, 0), 7 * DAY_MS);
        assert_eq!(j.verdict, Verdict::AboutRight);
        assert_eq!(
            j.reason,
            "no denials, every seat in use 10.0% of the range (< 10%), peak 10 of 10 seats (100.0%)"
        );
        let j = judge_over(&summary(3, 3, 86_400.0, 2), DAY_MS);
        assert_eq!(
            j.reason,
            "2 denials; every seat in use 100.0% of the range (>= 10%)"
        );
    }

    #[test]
    fn any_time_over_the_pool_is_short() {
        // Twelve minutes over 10 seats in a week: full only 0.1% of it, no
        // denial, yet more seats were in use than sold.
        let s = UsageSummary {
            over_s: 720.0,
            ..summary(10, 12, 720.0, 0)
        };
        let j = judge_over(&s, 7 * DAY_MS);
        assert_eq!(j.verdict, Verdict::ShortOfSeats);
        assert_eq!(j.reason, "more seats in use than sold for 12m00s");
        // A blip still counts, and reads as one.
        let s = UsageSummary {
            over_s: 0.25,
            ..summary(10, 11, 0.25, 0)
        };
        let j = judge_over(&s, 7 * DAY_MS);
        assert_eq!(j.verdict, Verdict::ShortOfSeats);
        assert_eq!(j.reason, "more seats in use than sold for under 1s");
        // Every reason, over first.
        let s = UsageSummary {
            over_s: 3_600.0,
            ..summary(3, 4, 43_200.0, 2)
        };
        assert_eq!(
            judge_over(&s, DAY_MS).reason,
            "more seats in use than sold for 1h00m; 2 denials; \
             every seat in use 50.0% of the range (>= 10%)"
        );
        // A suspended pool (0 seats) with a seat still held is over.
        let s = UsageSummary {
            over_s: 60.0,
            ..summary(0, 1, 0.0, 0)
        };
        assert_eq!(judge_over(&s, 30 * DAY_MS).verdict, Verdict::ShortOfSeats);
        // No time over: the verdict is as before.
        assert_eq!(
            judge_over(&summary(10, 7, 0.0, 0), 7 * DAY_MS).verdict,
            Verdict::MoreThanNeeded
        );
    }

    #[test]
    fn low_peak_over_a_week_is_a_surplus() {
        // 7 of 10 is exactly 70%: still a surplus.
        let j = judge_over(&summary(10, 7, 0.0, 0), 7 * DAY_MS);
        assert_eq!(j.verdict, Verdict::MoreThanNeeded);
        assert_eq!(
            j.reason,
            "peak 7 of 10 seats (70.0%) <= 70%, no denials over 7d00h"
        );
        assert_eq!(
            judge_over(&summary(10, 8, 0.0, 0), 30 * DAY_MS).verdict,
            Verdict::AboutRight
        );
    }

    #[test]
    fn a_short_range_never_calls_a_surplus() {
        let j = judge_over(&summary(10, 1, 0.0, 0), 7 * DAY_MS - 1);
        assert_eq!(j.verdict, Verdict::AboutRight);
        assert!(
            j.reason
                .contains("too short to call a surplus (needs 7 days)"),
            "{}",
            j.reason
        );
    }

    #[test]
    fn an_empty_pool_is_not_a_surplus() {
        assert_eq!(
            judge_over(&summary(0, 0, 0.0, 0), 30 * DAY_MS).verdict,
            Verdict::AboutRight
        );
        // A zero-length range divides by nothing.
        assert_eq!(
            judge_over(&summary(5, 0, 0.0, 0), 0).verdict,
            Verdict::AboutRight
        );
    }

    #[test]
    fn a_fresh_server_never_calls_a_surplus() {
        // A week asked; the server started 2m13s ago with 10 seats.
        let s = UsageSummary {
            covered_from: Some(ts(T0 - 133_000)),
            ..summary(10, 0, 0.0, 0)
        };
        let j = judge_over(&s, 7 * DAY_MS);
        assert_eq!(j.verdict, Verdict::AboutRight);
        assert_eq!(
            j.reason,
            "peak 0 of 10 seats (0.0%) <= 70% and no denials, but history covers only 2m13s \
             of the 7d00h asked, too short to call a surplus (needs 7 days)"
        );
        // Every seat in use for a minute of those 2m13s is short of seats,
        // though a minute is far below 10% of the week.
        let s = UsageSummary {
            covered_from: Some(ts(T0 - 133_000)),
            ..summary(1, 1, 60.0, 0)
        };
        let j = judge_over(&s, 7 * DAY_MS);
        assert_eq!(j.verdict, Verdict::ShortOfSeats);
        assert_eq!(
            j.reason,
            "every seat in use 45.1% of the range (>= 10%); \
             history covers only 2m13s of the 7d00h asked"
        );
        // Started a moment ago.
        let s = UsageSummary {
            covered_from: Some(ts(T0 - 300)),
            ..summary(10, 0, 0.0, 0)
        };
        assert!(
            judge_over(&s, 7 * DAY_MS)
                .reason
                .contains("history covers only under 1s of the 7d00h asked"),
        );
        // A covered_from outside the range is kept inside it.
        let s = UsageSummary {
            covered_from: Some(ts(T0 - 30 * DAY_MS)),
            ..summary(10, 1, 0.0, 0)
        };
        assert_eq!(
            judge_over(&s, 7 * DAY_MS).reason,
            "peak 1 of 10 seats (10.0%) <= 70%, no denials over 7d00h"
        );
    }

    #[test]
    fn a_long_covered_span_can_still_be_a_surplus() {
        // Thirty days asked, the last eight covered.
        let s = UsageSummary {
            covered_from: Some(ts(T0 - 8 * DAY_MS)),
            ..summary(10, 2, 0.0, 0)
        };
        let j = judge_over(&s, 30 * DAY_MS);
        assert_eq!(j.verdict, Verdict::MoreThanNeeded);
        assert_eq!(
            j.reason,
            "peak 2 of 10 seats (20.0%) <= 70%, no denials over 8d00h; \
             history covers only 8d00h of the 30d00h asked"
        );
        // Six days covered of thirty is not enough.
        let s = UsageSummary {
            covered_from: Some(ts(T0 - 6 * DAY_MS)),
            ..summary(10, 2, 0.0, 0)
        };
        assert_eq!(judge_over(&s, 30 * DAY_MS).verdict, Verdict::AboutRight);
    }

    #[test]
    fn nothing_covered_is_not_judged() {
        let s = UsageSummary {
            covered_from: Some(ts(T0)),
            ..summary(0, 0, 0.0, 0)
        };
        let j = judge_over(&s, 7 * DAY_MS);
        assert_eq!(j.verdict, Verdict::AboutRight);
        assert!(j.reason.starts_with("nothing to judge"), "{}", j.reason);
        // A denial is still a denial.
        let s = UsageSummary {
            covered_from: Some(ts(T0)),
            ..summary(0, 0, 0.0, 1)
        };
        assert_eq!(
            judge_over(&s, 7 * DAY_MS).reason,
            "1 denial; history covers none of the 7d00h asked"
        );
    }

    #[test]
    fn the_docs_state_the_same_rules() {
        let chapter = include_str!("../../../docs/src/right-sizing.md");
        for line in thresholds_help().lines() {
            assert!(
                chapter.contains(line),
                "docs/src/right-sizing.md lacks {line:?}"
            );
        }
    }

    #[test]
    fn help_states_the_constants() {
        let help = thresholds_help();
        assert!(help.contains(">= 10% of the range"), "{help}");
        assert!(help.contains("more seats in use than sold"), "{help}");
        assert!(help.contains("<= 70% of the seats"), "{help}");
        assert!(help.contains("at least 7 days"), "{help}");
    }
}
