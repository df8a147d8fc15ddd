//! `leasehold report`: "did we buy enough seats?" per license over a range.
//!
//! Parts: `range` (`--from`/`--to`/`--step` parsing and the resolved range),
//! `fetch` (what is asked of the server), `holders` (top holders by hours,
//! clipped to the range), `denials` (which denials mean a shortage),
//! `verdict` (the thresholds and the verdict), `table` (the text report),
//! `csv` (`--csv`, streamed), `what_if` (`--what-if`, the demand replayed
//! against other seat counts), `attest` (`--attest`, the summary signed by
//! the server, written for the vendor). Everything but `fetch`, the
//! streaming half of `csv` and the writing half of `attest` is pure and
//! unit-tested.

pub mod attest;
mod csv;
pub mod denials;
mod fetch;
pub mod holders;
pub mod range;
mod table;
pub mod verdict;
pub mod what_if;

use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use leasehold_common::Timestamp;
use leasehold_common::api::UsageResponse;
use leasehold_common::text::sanitize_for_terminal;

use crate::api::AdminClient;
use crate::format::json_for_terminal;
use denials::parse_tolerance;
use holders::HolderHours;
use range::{FromArg, parse_from, parse_step, parse_to};
use verdict::Judgement;
use what_if::{parse_idle_timeout, parse_seats, parse_target};

pub use table::format_report;

/// Flags of `leasehold report`.
#[derive(Debug, Clone, clap::Args)]
pub struct ReportArgs {
    /// Only this license (default: every license the server lists).
    #[arg(long, value_name = "ID")]
    pub license: Option<String>,
    /// Start of the range: RFC 3339 (2026-11-23T00:00:00Z) or a duration
    /// back from now (7d, 24h, 90m), on the server's clock.
    #[arg(long, value_name = "T|DURATION", default_value = "7d", value_parser = parse_from)]
    pub from: FromArg,
    /// End of the range, RFC 3339 (default: now, on the server's clock).
    #[arg(long, value_name = "T", value_parser = parse_to)]
    pub to: Option<Timestamp>,
    /// Bucket length of the usage points in --json, e.g. 1h (default: the
    /// server's choice, at most 500 points).
    #[arg(long, value_name = "DURATION", value_parser = parse_step)]
    pub step: Option<Duration>,
    /// A JSON array, one object per license: the server's usage response
    /// plus "verdict", "verdict_reason" and "top_holders".
    #[arg(long, conflicts_with = "csv")]
    pub json: bool,
    /// The sessions of the range as CSV, streamed from the server (every
    /// license's, header row once).
    #[arg(long)]
    pub csv: bool,
    /// A denial for want of a free seat is a true denial unless the same
    /// holder got a seat of the license within this long after it (0s to
    /// 1h; default: the server's, 60s).
    #[arg(long, value_name = "DURATION", value_parser = parse_tolerance)]
    pub tolerance: Option<Duration>,
    /// Instead of the report: per license, the range's recorded demand
    /// replayed against each seat count (denials, denial rate, peak, time
    /// full, utilization) and the fewest seats meeting --target. One
    /// holder's true denials in a row (each within --tolerance of the last)
    /// are one request, waiting for a seat until the last of them. With
    /// --json, the server's answers.
    #[arg(long, conflicts_with = "csv")]
    pub what_if: bool,
    /// With --what-if: replay as if seats idle this long had been
    /// reclaimed (at least 1s; default: none).
    #[arg(long, value_name = "DURATION", requires = "what_if", value_parser = parse_idle_timeout)]
    pub idle_timeout: Option<Duration>,
    /// With --what-if: the denial rate to meet, in percent of requests
    /// (0 to 100; default 1).
    #[arg(long, value_name = "PERCENT", requires = "what_if", value_parser = parse_target)]
    pub target: Option<f64>,
    /// With --what-if: the seat counts to replay, e.g. 1..40 (at most 1000;
    /// default: 1 to the larger of the seats now and the demand's peak).
    #[arg(long, value_name = "A..B", requires = "what_if", value_parser = parse_seats)]
    pub seats: Option<(u32, u32)>,
    /// Instead of the report: the usage summary of --license over the
    /// range, signed by the server (a compact JWS), written to --out: what
    /// a customer hands its vendor (`leasehold vendor verify-usage`).
    #[arg(
        long,
        requires = "license",
        requires = "out",
        conflicts_with_all = ["csv", "json", "what_if", "step"]
    )]
    pub attest: bool,
    /// With --attest: the file to write (an existing file is not
    /// overwritten).
    #[arg(long, value_name = "FILE", requires = "attest")]
    pub out: Option<PathBuf>,
}

/// One license's part of the report.
#[derive(Debug, Clone)]
pub struct LicenseReport {
    pub usage: UsageResponse,
    pub judgement: Judgement,
    pub top_holders: Vec<HolderHours>,
}

pub async fn run(
    args: ReportArgs,
    client: &AdminClient,
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    if args.attest {
        // Refused before asking: the statement is signed for one file.
        attest::refuse_existing(args.out.as_deref())?;
    }
    let (ids, now) = fetch::licenses(client, args.license.as_deref()).await?;
    let range = range::resolve(args.from, args.to, now).map_err(anyhow::Error::msg)?;
    if args.attest {
        return attest::run(&args, client, range, out).await;
    }
    if args.csv {
        return csv::write_csv(client, &ids, range, out).await;
    }
    if args.what_if {
        return run_what_if(&args, client, &ids, range, out).await;
    }
    let mut reports = Vec::with_capacity(ids.len());
    for id in &ids {
        let report = fetch::license_report(client, id, range, args.step, args.tolerance)
            .await
            .with_context(|| format!("the usage of {}", clean(id)))?;
        reports.push(report);
    }
    if args.json {
        writeln!(out, "{}", to_json(&reports)?)?;
    } else {
        write!(out, "{}", format_report(range, &reports))?;
    }
    out.flush()?;
    Ok(())
}

/// `--what-if`: each license's replay, printed or (`--json`) as the server
/// answered it.
async fn run_what_if(
    args: &ReportArgs,
    client: &AdminClient,
    ids: &[String],
    range: range::Range,
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    let mut answers = Vec::with_capacity(ids.len());
    for id in ids {
        answers.push(fetch::what_if(client, id, range, args).await?);
    }
    if args.json {
        let json = serde_json::to_string_pretty(&answers).context("encoding JSON")?;
        writeln!(out, "{}", json_for_terminal(&json))?;
    } else {
        let asked = what_if::Asked {
            idle_timeout: args.idle_timeout,
            target: args.target.unwrap_or(what_if::DEFAULT_TARGET),
        };
        write!(out, "{}", what_if::format_what_if(range, &answers, asked))?;
    }
    out.flush()?;
    Ok(())
}

/// `--json`: the server's usage response, flattened, with the verdict and
/// top holders beside it.
#[derive(serde::Serialize)]
struct JsonEntry<'a> {
    #[serde(flatten)]
    usage: &'a UsageResponse,
    verdict: verdict::Verdict,
    verdict_reason: &'a str,
    top_holders: &'a [HolderHours],
}

fn to_json(reports: &[LicenseReport]) -> anyhow::Result<String> {
    let entries: Vec<JsonEntry> = reports
        .iter()
        .map(|r| JsonEntry {
            usage: &r.usage,
            verdict: r.judgement.verdict,
            verdict_reason: &r.judgement.reason,
            top_holders: &r.top_holders,
        })
        .collect();
    let json = serde_json::to_string_pretty(&entries).context("encoding JSON")?;
    Ok(json_for_terminal(&json))
}

pub(crate) fn clean(s: &str) -> String {
    sanitize_for_terminal(s).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use leasehold_common::api::{UsagePoint, UsageSummary};

    #[test]
    fn json_is_the_usage_response_plus_verdict_and_holders() {
        let t = Timestamp::from_millis(1_796_011_200_000);
        let summary = UsageSummary {
            seats: 3,
            peak: 3,
            peak_at: Some(t),
            full_s: 60.0,
            over_s: 0.0,
            denials: 1,
            denials_by_reason: Default::default(),
            true_denials: 0,
            denied_holders: 0,
            seat_hours: 0.5,
            borrowed_hours: 0.0,
            utilization: 0.5,
            holders: 1,
            idle_hours: 0.25,
            covered_from: Some(t),
        };
        let usage = UsageResponse {
            license_id: "demo\u{1b}".into(),
            from: t,
            to: Timestamp::from_millis(t.as_millis() + 3_600_000),
            step_s: 3600.0,
            points: vec![UsagePoint {
                t,
                seats: 3,
                peak: 3,
                over_s: 0.0,
                checkouts: 4,
                denials: 1,
                denials_by_reason: Default::default(),
                true_denials: 0,
            }],
            summary: summary.clone(),
        };
        let report = LicenseReport {
            judgement: verdict::judge(&summary, usage.from, usage.to, None),
            usage: usage.clone(),
            top_holders: vec![HolderHours {
                holder: "alice".into(),
                hours: 0.5,
            }],
        };
        let json = to_json(&[report]).unwrap();
        assert!(!json.contains('\u{1b}'), "{json}");
        let v: serde_json::Value = serde_json::from_str(&json).unwrap();
        let entry = &v[0];
        // Still a valid UsageResponse, the escape intact as data.
        let back: UsageResponse = serde_json::from_value(entry.clone()).unwrap();
        assert_eq!(back, usage);
        assert_eq!(entry["summary"]["idle_hours"], 0.25);
        assert_eq!(entry["summary"]["denied_holders"], 0);
        assert_eq!(entry["verdict"], "short_of_seats");
        assert_eq!(entry["verdict_reason"], "1 denial");
        assert_eq!(
            entry["top_holders"],
            serde_json::json!([{"holder": "alice", "hours": 0.5}])
        );
    }
}
