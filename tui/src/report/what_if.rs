//! `leasehold report --what-if`: the server replays the range's recorded
//! demand against other seat counts (`GET /v1/admin/usage/what-if`); this
//! prints each license's curve compactly and the recommendation in a
//! sentence ("12 seats would have denied 0.8 % of 1,204 requests; you have
//! 20"). Pure: the requests are in `fetch`.

use std::time::Duration;

use leasehold_common::api::{WhatIfPoint, WhatIfResponse};
use leasehold_common::policy::{format_duration, parse_duration};

use super::clean;
use super::range::Range;
use super::table::{Align, aligned_table};
use super::verdict::coverage_words;
use crate::format::{fmt_duration_ms, grouped};

/// The server's target when `--target` is not given, in percent.
pub const DEFAULT_TARGET: f64 = 1.0;

/// The most seat counts one replay may ask for.
pub const MAX_SEAT_COUNTS: u32 = 1000;

/// What an episode is, said under the heading when one was replayed.
const EPISODE_WORDS: &str = "an episode: the true denials of one holder and fingerprint, each within the \
     tolerance of the last, replayed as one request that waits for a seat until the last of them";

/// What the replay was asked for, as the printout says it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Asked {
    pub idle_timeout: Option<Duration>,
    pub target: f64,
}

/// `--idle-timeout`: a duration of at least one second.
pub fn parse_idle_timeout(s: &str) -> Result<Duration, String> {
    let d = parse_duration(s)?;
    if d < Duration::from_secs(1) {
        return Err(format!("{s:?}: the idle timeout is at least 1s"));
    }
    Ok(d)
}

/// `--target`: a denial rate in percent, 0 to 100.
pub fn parse_target(s: &str) -> Result<f64, String> {
    let p: f64 = s
        .trim()
        .trim_end_matches('%')
        .trim_end()
        .parse()
        .map_err(|_| format!("{s:?} is not a percentage (e.g. 1, 0.5)"))?;
    if !(0.0..=100.0).contains(&p) {
        return Err(format!("{s:?}: the target is a percentage from 0 to 100"));
    }
    Ok(p)
}

/// `--seats A..B`: at least one and at most [`MAX_SEAT_COUNTS`] counts.
pub fn parse_seats(s: &str) -> Result<(u32, u32), String> {
    let bad = || format!("{s:?} is not a range of seat counts (e.g. 1..40)");
    let (a, b) = s.split_once("..").ok_or_else(bad)?;
    let a: u32 = a.trim().parse().map_err(|_| bad())?;
    let b: u32 = b.trim().parse().map_err(|_| bad())?;
    if a > b {
        return Err(format!("{s:?}: the range is reversed"));
    }
    if b - a >= MAX_SEAT_COUNTS {
        return Err(format!("{s:?}: at most {MAX_SEAT_COUNTS} seat counts"));
    }
    Ok((a, b))
}

/// A denial rate as the brief says it: `0.8 %`; `0 %` only when none; a
/// small share keeps two decimals, so it never reads as 0.
pub fn rate_words(rate: f64) -> String {
    if rate <= 0.0 {
        "0 %".to_string()
    } else if rate < 0.005 {
        "<0.01 %".to_string()
    } else if rate < 0.1 {
        format!("{rate:.2} %")
    } else if rate >= 100.0 {
        "100 %".to_string()
    } else {
        format!("{rate:.1} %")
    }
}

/// A target as typed back: `1 %`, `0.5 %`.
fn target_words(target: f64) -> String {
    format!("{target} %")
}

/// `1 seat`, `12 seats`, `1,204 requests`.
fn counted(n: u64, what: &str) -> String {
    let plural = if n == 1 { "" } else { "s" };
    format!("{} {what}{plural}", grouped(n))
}

/// The recommendation in one sentence.
pub fn recommendation(w: &WhatIfResponse, target: f64) -> String {
    let have = format!("you have {}", w.seats_now);
    if w.requests == 0 {
        return format!("nothing to replay: no session or true denial in the range; {have}");
    }
    let requests = counted(w.requests, "request");
    match &w.recommended {
        Some(r) => {
            let denied = if r.denial_rate > 0.0 {
                rate_words(r.denial_rate)
            } else {
                "none".to_string()
            };
            format!(
                "{} would have denied {denied} of {requests}; {have}",
                counted(u64::from(r.seats), "seat")
            )
        }
        None => match (w.curve.first(), w.curve.last()) {
            (Some(a), Some(b)) => format!(
                "no seat count from {} to {} would have denied at most {} of {requests}; {have}",
                a.seats,
                b.seats,
                target_words(target)
            ),
            _ => format!("no seat count was replayed; {have}"),
        },
    }
}

/// The rows worth reading: where the denials change, the ends, the seats
/// of now and the recommendation; `None` stands for the rows left out.
fn shown_rows(w: &WhatIfResponse) -> Vec<Option<&WhatIfPoint>> {
    let marked = |p: &WhatIfPoint| {
        p.seats == w.seats_now || w.recommended.as_ref().is_some_and(|r| r.seats == p.seats)
    };
    let last = w.curve.len().saturating_sub(1);
    let mut rows = Vec::new();
    let mut skipped = false;
    for (i, p) in w.curve.iter().enumerate() {
        let changed = i == 0 || w.curve[i - 1].denials != p.denials;
        if changed || i == last || marked(p) {
            if skipped {
                rows.push(None);
                skipped = false;
            }
            rows.push(Some(p));
        } else {
            skipped = true;
        }
    }
    rows
}

fn row(w: &WhatIfResponse, p: &WhatIfPoint) -> Vec<String> {
    let mut note = Vec::new();
    if w.recommended.as_ref().is_some_and(|r| r.seats == p.seats) {
        note.push("recommended");
    }
    if p.seats == w.seats_now {
        note.push("now");
    }
    vec![
        p.seats.to_string(),
        grouped(p.denials),
        rate_words(p.denial_rate),
        p.peak.to_string(),
        fmt_duration_ms((p.full_s * 1000.0).round() as i64),
        format!("{:.1} %", p.utilization * 100.0),
        note.join(", "),
    ]
}

/// What the requests were, in one clause: `1,204 requests replayed: 1,180
/// sessions and 24 episodes (31 true denials)`; the returns an idle cut
/// added are said when there are any. A server older than episodes (it
/// sends none, yet true denials) replayed each true denial as a request,
/// and is said so: `1,180 sessions and 24 true denials`.
fn replayed_words(w: &WhatIfResponse) -> String {
    let each_denial = w.episodes == 0 && w.true_denials > 0;
    let denied = if each_denial {
        w.true_denials
    } else {
        w.episodes
    };
    let returns = w.requests.saturating_sub(w.sessions + denied);
    let mut parts = vec![counted(w.sessions, "session")];
    if returns > 0 {
        parts.push(format!("{} after an idle cut", counted(returns, "return")));
    }
    let note = if each_denial {
        parts.push(counted(w.true_denials, "true denial"));
        String::new()
    } else if w.episodes > 0 {
        parts.push(counted(w.episodes, "episode"));
        format!(" ({})", counted(w.true_denials, "true denial"))
    } else {
        " (no true denials)".to_string()
    };
    let listed = match parts.split_last() {
        Some((last, init)) if !init.is_empty() => format!("{} and {last}", init.join(", ")),
        _ => parts.concat(),
    };
    format!(
        "{} replayed: {listed}{note}",
        counted(w.requests, "request")
    )
}

/// One license: what was replayed, the curve, the recommendation.
fn format_one(w: &WhatIfResponse, asked: Asked) -> String {
    let mut head = format!("{}: {}", clean(&w.license_id), replayed_words(w));
    if let Some(t) = asked.idle_timeout {
        head.push_str(&format!(
            "; an idle timeout of {} cut {}",
            format_duration(t),
            counted(w.idle_cut, "session")
        ));
    }
    let asked_ms = w.to.millis_since(w.from).max(0);
    let covered_ms = w.to.millis_since(w.covered_from.max(w.from)).max(0);
    if let Some(c) = coverage_words(covered_ms, asked_ms) {
        head.push_str(&format!("; {c}"));
    }
    let mut out = head + "\n";
    let rows: Vec<Vec<String>> = shown_rows(w)
        .into_iter()
        .map(|p| match p {
            Some(p) => row(w, p),
            None => vec!["...".to_string()],
        })
        .collect();
    if !rows.is_empty() {
        use Align::{Left, Right};
        out.push_str(&aligned_table(
            &[
                ("SEATS", Right),
                ("DENIALS", Right),
                ("DENIAL RATE", Right),
                ("PEAK", Right),
                ("FULL FOR", Right),
                ("UTILIZATION", Right),
                ("", Left),
            ],
            &rows,
            "  ",
        ));
    }
    out.push_str(&format!("  {}\n", recommendation(w, asked.target)));
    out
}

/// The whole `--what-if` printout for `range`.
pub fn format_what_if(range: Range, answers: &[WhatIfResponse], asked: Asked) -> String {
    let mut out = format!(
        "what if: the demand recorded from {} to {} ({}) replayed against each seat count; \
         recommended: the fewest seats denying at most {} of requests\n",
        range.from,
        range.to,
        fmt_duration_ms(range.millis()),
        target_words(asked.target)
    );
    if answers.iter().any(|w| w.episodes > 0) {
        out.push_str(EPISODE_WORDS);
        out.push('\n');
    }
    if answers.is_empty() {
        out.push_str("no licenses configured\n");
    }
    for w in answers {
        out.push('\n');
        out.push_str(&format_one(w, asked));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use leasehold_common::Timestamp;
    use leasehold_common::api::WhatIfRecommendation;

    const T0: i64 = 1_796_011_200_000; // 2026-11-30T04:00:00Z
    const DAY_MS: i64 = 86_400_000;

    fn point(seats: u32, denials: u64, requests: u64, peak: u32, full_s: f64) -> WhatIfPoint {
        WhatIfPoint {
            seats,
            denials,
            denial_rate: denials as f64 * 100.0 / requests as f64,
            peak,
            full_s,
            utilization: 0.9 / f64::from(seats),
        }
    }

    /// 1,204 requests replayed on 1..=20 seats; 14 take them all.
    fn fixture() -> WhatIfResponse {
        let denials = [900, 610, 400, 260, 150, 90, 51, 30, 21, 14, 12, 10, 4, 0];
        let mut curve: Vec<WhatIfPoint> = (1..=20u32)
            .map(|k| {
                let d = denials.get(k as usize - 1).copied().unwrap_or(0);
                point(
                    k,
                    d,
                    1204,
                    k.min(14),
                    if k <= 14 { 3600.0 / f64::from(k) } else { 0.0 },
                )
            })
            .collect();
        curve[11].denial_rate = 0.8;
        WhatIfResponse {
            license_id: "demo-cad".into(),
            from: Timestamp::from_millis(T0 - 7 * DAY_MS),
            covered_from: Timestamp::from_millis(T0 - 7 * DAY_MS),
            to: Timestamp::from_millis(T0),
            seats_now: 20,
            requests: 1204,
            sessions: 1180,
            true_denials: 31,
            episodes: 24,
            idle_cut: 37,
            curve,
            recommended: Some(WhatIfRecommendation {
                seats: 12,
                denial_rate: 0.8,
            }),
        }
    }

    #[test]
    fn the_curve_and_the_recommendation() {
        let w = fixture();
        let range = Range {
            from: w.from,
            to: w.to,
        };
        let asked = Asked {
            idle_timeout: Some(Duration::from_secs(1800)),
            target: 1.0,
        };
        insta::assert_snapshot!(format_what_if(range, &[w], asked), @r"
        what if: the demand recorded from 2026-11-23T04:00:00.000Z to 2026-11-30T04:00:00.000Z (7d00h) replayed against each seat count; recommended: the fewest seats denying at most 1 % of requests
        an episode: the true denials of one holder and fingerprint, each within the tolerance of the last, replayed as one request that waits for a seat until the last of them

        demo-cad: 1,204 requests replayed: 1,180 sessions and 24 episodes (31 true denials); an idle timeout of 30m cut 37 sessions
          SEATS  DENIALS  DENIAL RATE  PEAK  FULL FOR  UTILIZATION
              1      900       74.8 %     1     1h00m       90.0 %
              2      610       50.7 %     2    30m00s       45.0 %
              3      400       33.2 %     3    20m00s       30.0 %
              4      260       21.6 %     4    15m00s       22.5 %
              5      150       12.5 %     5    12m00s       18.0 %
              6       90        7.5 %     6    10m00s       15.0 %
              7       51        4.2 %     7     8m34s       12.9 %
              8       30        2.5 %     8     7m30s       11.2 %
              9       21        1.7 %     9     6m40s       10.0 %
             10       14        1.2 %    10     6m00s        9.0 %
             11       12        1.0 %    11     5m27s        8.2 %
             12       10        0.8 %    12     5m00s        7.5 %  recommended
             13        4        0.3 %    13     4m36s        6.9 %
             14        0          0 %    14     4m17s        6.4 %
            ...
             20        0          0 %    14        0s        4.5 %  now
          12 seats would have denied 0.8 % of 1,204 requests; you have 20
        ");
    }

    #[test]
    fn no_seat_count_meeting_the_target_is_said() {
        let mut w = fixture();
        w.recommended = None;
        w.curve.truncate(5);
        w.seats_now = 3;
        assert_eq!(
            recommendation(&w, 0.5),
            "no seat count from 1 to 5 would have denied at most 0.5 % of 1,204 requests; you have 3"
        );
        w.requests = 0;
        assert!(recommendation(&w, 1.0).starts_with("nothing to replay"));
        let one = WhatIfResponse {
            requests: 4,
            recommended: Some(WhatIfRecommendation {
                seats: 1,
                denial_rate: 0.0,
            }),
            ..fixture()
        };
        assert_eq!(
            recommendation(&one, 1.0),
            "1 seat would have denied none of 4 requests; you have 20"
        );
    }

    #[test]
    fn a_short_history_is_said_and_names_are_cleaned() {
        let w = WhatIfResponse {
            license_id: "x\u{1b}[2J".into(),
            covered_from: Timestamp::from_millis(T0 - 7_200_000),
            ..fixture()
        };
        let text = format_one(
            &w,
            Asked {
                idle_timeout: None,
                target: 1.0,
            },
        );
        let head = text.lines().next().unwrap();
        assert_eq!(
            head,
            "x\u{fffd}[2J: 1,204 requests replayed: 1,180 sessions and 24 episodes (31 true denials); \
             history covers only 2h00m of the 7d00h asked"
        );
    }

    #[test]
    fn episodes_are_counted_once_and_the_true_denials_beside_them() {
        // Issue 39's pool: 8 clients, 4 of them refused 13 times in 4
        // episodes; one returned after an idle cut.
        let w = WhatIfResponse {
            requests: 13,
            sessions: 8,
            true_denials: 13,
            episodes: 4,
            idle_cut: 1,
            ..fixture()
        };
        assert_eq!(
            replayed_words(&w),
            "13 requests replayed: 8 sessions, 1 return after an idle cut and 4 episodes (13 true denials)"
        );
        let one = WhatIfResponse {
            requests: 2,
            sessions: 1,
            true_denials: 1,
            episodes: 1,
            ..fixture()
        };
        assert_eq!(
            replayed_words(&one),
            "2 requests replayed: 1 session and 1 episode (1 true denial)"
        );
        let none = WhatIfResponse {
            requests: 1180,
            true_denials: 0,
            episodes: 0,
            ..fixture()
        };
        assert_eq!(
            replayed_words(&none),
            "1,180 requests replayed: 1,180 sessions (no true denials)"
        );
        // No episode replayed: the heading does not define the word.
        let range = Range {
            from: none.from,
            to: none.to,
        };
        let asked = Asked {
            idle_timeout: None,
            target: 1.0,
        };
        assert!(!format_what_if(range, &[none], asked).contains("an episode"));
    }

    #[test]
    fn an_older_server_replayed_each_true_denial() {
        // No `episodes` in its answer: every true denial was a request.
        let mut json = serde_json::to_value(fixture()).unwrap();
        json.as_object_mut().unwrap().remove("episodes");
        json["true_denials"] = 24.into();
        let old: WhatIfResponse = serde_json::from_value(json).unwrap();
        assert_eq!(old.episodes, 0);
        assert_eq!(
            replayed_words(&old),
            "1,204 requests replayed: 1,180 sessions and 24 true denials"
        );
        assert_eq!(
            recommendation(&old, 1.0),
            "12 seats would have denied 0.8 % of 1,204 requests; you have 20"
        );
    }

    #[test]
    fn rates_never_read_as_zero_when_some_were_denied() {
        assert_eq!(rate_words(0.0), "0 %");
        assert_eq!(rate_words(0.004), "<0.01 %");
        assert_eq!(rate_words(0.0831), "0.08 %");
        assert_eq!(rate_words(0.8), "0.8 %");
        assert_eq!(rate_words(100.0), "100 %");
    }

    #[test]
    fn bad_flags_are_refused() {
        assert_eq!(parse_idle_timeout("30m"), Ok(Duration::from_secs(1800)));
        assert!(parse_idle_timeout("500ms").is_err());
        assert!(parse_idle_timeout("0s").is_err());
        assert!(parse_idle_timeout("soon").is_err());
        assert_eq!(parse_target("1"), Ok(1.0));
        assert_eq!(parse_target("0.5%"), Ok(0.5));
        assert_eq!(parse_target("0"), Ok(0.0));
        for bad in ["101", "-1", "NaN", "inf", "x"] {
            assert!(parse_target(bad).is_err(), "{bad}");
        }
        assert_eq!(parse_seats("1..40"), Ok((1, 40)));
        assert_eq!(parse_seats("5..5"), Ok((5, 5)));
        assert!(parse_seats("5..4").is_err());
        assert!(parse_seats("1..1000").is_ok());
        assert!(parse_seats("1..1001").is_err());
        assert!(parse_seats("1-4").is_err());
    }
}
