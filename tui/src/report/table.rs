//! The report as people read it: one summary table for every license, then
//! per license its verdict with the reason and its top holders.
//!
//! Columns size to their widest cell, so no number is ever cut; numbers are
//! right-aligned so their digits line up. Every server string passes
//! through [`sanitize_for_terminal`].

use leasehold_common::text::sanitize_for_terminal;

use super::LicenseReport;
use super::denials::Denials;
use super::range::Range;
use super::verdict::{covered_from, pct};
use crate::format::fmt_duration_ms;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Align {
    Left,
    Right,
}

/// Columns two spaces apart, each as wide as its widest cell (in chars),
/// every line prefixed with `indent`, trailing blanks trimmed.
pub fn aligned_table(header: &[(&str, Align)], rows: &[Vec<String>], indent: &str) -> String {
    let mut widths: Vec<usize> = header.iter().map(|(h, _)| h.chars().count()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    let mut line = |cells: Vec<&str>| {
        let mut l = String::from(indent);
        for (i, cell) in cells.into_iter().enumerate() {
            if i > 0 {
                l.push_str("  ");
            }
            let pad = " ".repeat(widths[i].saturating_sub(cell.chars().count()));
            match header[i].1 {
                Align::Left => {
                    l.push_str(cell);
                    l.push_str(&pad);
                }
                Align::Right => {
                    l.push_str(&pad);
                    l.push_str(cell);
                }
            }
        }
        out.push_str(l.trim_end());
        out.push('\n');
    };
    line(header.iter().map(|(h, _)| *h).collect());
    for row in rows {
        line(row.iter().map(String::as_str).collect());
    }
    out
}

fn clean(s: &str) -> String {
    sanitize_for_terminal(s).into_owned()
}

/// One row of the summary table.
fn summary_row(r: &LicenseReport) -> Vec<String> {
    let s = &r.usage.summary;
    // A share of the range the server's history covers.
    let covered = covered_from(s, r.usage.from, r.usage.to);
    let range_s = r.usage.to.millis_since(covered) as f64 / 1000.0;
    let full_share = if range_s > 0.0 {
        s.full_s / range_s
    } else {
        0.0
    };
    let denials = Denials::of(s);
    vec![
        clean(&r.usage.license_id),
        s.seats.to_string(),
        s.peak.to_string(),
        s.peak_at.map_or_else(|| "-".to_string(), |t| t.to_string()),
        pct(full_share),
        fmt_duration_ms((s.full_s * 1000.0) as i64),
        s.denials.to_string(),
        // TRUE: the denials that mean too few seats (see `denials`), and
        // the holders they came from (`-`: the server did not say).
        denials.shortage().to_string(),
        denials
            .denied_holders()
            .map_or_else(|| "-".to_string(), |n| n.to_string()),
        pct(s.utilization),
        format!("{:.2}", s.seat_hours),
        format!("{:.2}", s.borrowed_hours),
        format!("{:.2}", s.idle_hours),
        s.holders.to_string(),
    ]
}

/// The whole text report for `range`.
pub fn format_report(range: Range, reports: &[LicenseReport]) -> String {
    use Align::{Left, Right};
    let mut out = format!(
        "usage from {} to {} ({})\n",
        range.from,
        range.to,
        fmt_duration_ms(range.millis())
    );
    if reports.is_empty() {
        out.push_str("no licenses configured\n");
        return out;
    }
    out.push('\n');
    let rows: Vec<Vec<String>> = reports.iter().map(summary_row).collect();
    out.push_str(&aligned_table(
        &[
            ("LICENSE", Left),
            ("SEATS", Right),
            ("PEAK", Right),
            ("PEAK AT", Left),
            ("FULL", Right),
            ("FULL FOR", Right),
            ("DENIALS", Right),
            ("TRUE", Right),
            ("DENIED HOLDERS", Right),
            ("UTILIZATION", Right),
            ("SEAT-HOURS", Right),
            ("BORROWED", Right),
            ("IDLE-HOURS", Right),
            ("HOLDERS", Right),
        ],
        &rows,
        "",
    ));
    for r in reports {
        out.push('\n');
        out.push_str(&format!(
            "{}: {} — {}\n",
            clean(&r.usage.license_id),
            r.judgement.verdict.words(),
            r.judgement.reason
        ));
        if r.top_holders.is_empty() {
            out.push_str("  no sessions in the range\n");
            continue;
        }
        let rows: Vec<Vec<String>> = r
            .top_holders
            .iter()
            .map(|h| vec![clean(&h.holder), format!("{:.2}", h.hours)])
            .collect();
        out.push_str(&aligned_table(
            &[("TOP HOLDERS", Left), ("HOURS", Right)],
            &rows,
            "  ",
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::holders::HolderHours;
    use crate::report::verdict::judge;
    use leasehold_common::Timestamp;
    use leasehold_common::api::{DenialsByReason, UsageResponse, UsageSummary};

    const T0: i64 = 1_796_011_200_000; // 2026-11-30T04:00:00Z
    const DAY_MS: i64 = 86_400_000;

    fn report(id: &str, summary: UsageSummary, holders: &[(&str, f64)]) -> LicenseReport {
        let range_ms = 7 * DAY_MS;
        LicenseReport {
            judgement: judge(
                &summary,
                Timestamp::from_millis(T0 - range_ms),
                Timestamp::from_millis(T0),
                None,
            ),
            usage: UsageResponse {
                license_id: id.into(),
                from: Timestamp::from_millis(T0 - range_ms),
                to: Timestamp::from_millis(T0),
                step_s: 3600.0,
                points: vec![],
                summary,
            },
            top_holders: holders
                .iter()
                .map(|(h, hours)| HolderHours {
                    holder: (*h).into(),
                    hours: *hours,
                })
                .collect(),
        }
    }

    fn fixture() -> Vec<LicenseReport> {
        vec![
            report(
                "demo-cad",
                UsageSummary {
                    seats: 10,
                    peak: 11,
                    peak_at: Some(Timestamp::from_millis(T0 - 2 * DAY_MS + 3_600_000)),
                    full_s: 75_600.0,
                    over_s: 720.0,
                    denials: 3,
                    denials_by_reason: Default::default(),
                    true_denials: 0,
                    denied_holders: 0,
                    seat_hours: 1028.4,
                    borrowed_hours: 96.5,
                    utilization: 0.612,
                    holders: 14,
                    idle_hours: 120.25,
                    covered_from: Some(Timestamp::from_millis(T0 - 7 * DAY_MS)),
                },
                &[("alice", 40.2), ("bob\u{1b}[2J", 38.0), ("carol", 0.25)],
            ),
            report(
                "render-farm-eu-west",
                UsageSummary {
                    seats: 100_000,
                    peak: 2,
                    peak_at: Some(Timestamp::from_millis(T0 - 5 * DAY_MS)),
                    full_s: 0.0,
                    over_s: 0.0,
                    denials: 0,
                    denials_by_reason: Default::default(),
                    true_denials: 0,
                    denied_holders: 0,
                    seat_hours: 123_456_789.5,
                    borrowed_hours: 0.0,
                    utilization: 0.00001,
                    holders: 3,
                    idle_hours: 0.0,
                    covered_from: None,
                },
                &[("dave", 100.8)],
            ),
            report(
                "build",
                UsageSummary {
                    seats: 4,
                    peak: 4,
                    peak_at: Some(Timestamp::from_millis(T0 - DAY_MS)),
                    full_s: 3600.0,
                    over_s: 0.0,
                    denials: 5,
                    denials_by_reason: DenialsByReason {
                        full: 2,
                        holder: 3,
                        ..Default::default()
                    },
                    true_denials: 0,
                    denied_holders: 0,
                    seat_hours: 310.0,
                    borrowed_hours: 0.0,
                    utilization: 0.4613,
                    holders: 2,
                    idle_hours: 0.0,
                    covered_from: None,
                },
                &[("ci-01", 200.0), ("ci-02", 110.0)],
            ),
            report(
                // One holder retrying is one of the holders, however often.
                "sim",
                UsageSummary {
                    seats: 3,
                    peak: 3,
                    peak_at: Some(Timestamp::from_millis(T0 - DAY_MS)),
                    full_s: 1800.0,
                    over_s: 0.0,
                    denials: 15,
                    denials_by_reason: DenialsByReason {
                        full: 15,
                        ..Default::default()
                    },
                    true_denials: 13,
                    denied_holders: 4,
                    seat_hours: 6.0,
                    borrowed_hours: 0.0,
                    utilization: 0.0119,
                    holders: 8,
                    idle_hours: 0.0,
                    covered_from: None,
                },
                &[("client-1", 2.0)],
            ),
            report(
                "spare",
                UsageSummary {
                    seats: 2,
                    peak: 0,
                    peak_at: None,
                    full_s: 0.0,
                    over_s: 0.0,
                    denials: 0,
                    denials_by_reason: Default::default(),
                    true_denials: 0,
                    denied_holders: 0,
                    seat_hours: 0.0,
                    borrowed_hours: 0.0,
                    utilization: 0.0,
                    holders: 0,
                    idle_hours: 0.0,
                    covered_from: Some(Timestamp::from_millis(T0 - 2 * 3_600_000)),
                },
                &[],
            ),
        ]
    }

    #[test]
    fn report_table() {
        let range = Range {
            from: Timestamp::from_millis(T0 - 7 * DAY_MS),
            to: Timestamp::from_millis(T0),
        };
        insta::assert_snapshot!(format_report(range, &fixture()), @r"
        usage from 2026-11-23T04:00:00.000Z to 2026-11-30T04:00:00.000Z (7d00h)

        LICENSE               SEATS  PEAK  PEAK AT                    FULL  FULL FOR  DENIALS  TRUE  DENIED HOLDERS  UTILIZATION    SEAT-HOURS  BORROWED  IDLE-HOURS  HOLDERS
        demo-cad                 10    11  2026-11-28T05:00:00.000Z  12.5%    21h00m        3     3               -        61.2%       1028.40     96.50      120.25       14
        render-farm-eu-west  100000     2  2026-11-25T04:00:00.000Z   0.0%        0s        0     0               0         0.0%  123456789.50      0.00        0.00        3
        build                     4     4  2026-11-29T04:00:00.000Z   0.6%     1h00m        5     0               0        46.1%        310.00      0.00        0.00        2
        sim                       3     3  2026-11-29T04:00:00.000Z   0.3%    30m00s       15    13               4         1.2%          6.00      0.00        0.00        8
        spare                     2     0  -                          0.0%        0s        0     0               0         0.0%          0.00      0.00        0.00        0

        demo-cad: short of seats — more seats in use than sold for 12m00s; 3 denials; every seat in use 12.5% of the range (>= 10%)
          TOP HOLDERS  HOURS
          alice        40.20
          bob�[2J      38.00
          carol         0.25

        render-farm-eu-west: more seats than needed — peak 2 of 100000 seats (0.0%) <= 70%, no denials over 7d00h
          TOP HOLDERS   HOURS
          dave         100.80

        build: about right — no true denials, every seat in use 0.6% of the range (< 10%), peak 4 of 4 seats (100.0%); 2 refused while full but served within 60s, 3 refused by caps — not a shortage
          TOP HOLDERS   HOURS
          ci-01        200.00
          ci-02        110.00

        sim: short of seats — 13 true denials from 4 holders (full, not served within 60s); 2 refused while full but served within 60s — not a shortage
          TOP HOLDERS  HOURS
          client-1      2.00

        spare: about right — peak 0 of 2 seats (0.0%) <= 70% and no denials, but history covers only 2h00m of the 7d00h asked, too short to call a surplus (needs 7 days)
          no sessions in the range
        ");
    }

    #[test]
    fn columns_fit_their_widest_number() {
        let t = aligned_table(
            &[("A", Align::Left), ("N", Align::Right)],
            &[
                vec!["x".into(), "1".into()],
                vec!["yy".into(), "1234567890123".into()],
            ],
            "",
        );
        assert_eq!(
            t,
            "A               N\nx               1\nyy  1234567890123\n"
        );
    }
}
