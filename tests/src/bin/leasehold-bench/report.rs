//! The results of a run: the JSON report (`--json`), its ratios to
//! `healthz`, and the end of a run (table printed, server stopped).

mod table;

use std::collections::BTreeMap;

use anyhow::Context;
use serde::Serialize;

use crate::args::CommonArgs;
use crate::server::{ServerInfo, Target};
use table::print_table;

/// Figures in the report carry three decimals.
pub fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

#[derive(Debug, Serialize)]
pub struct Latency {
    pub p50: f64,
    pub p99: f64,
    pub p999: f64,
    pub max: f64,
    pub mean: f64,
}

#[derive(Debug, Serialize)]
pub struct ScenarioResult {
    pub name: String,
    pub requests: u64,
    pub ok: u64,
    pub denied: u64,
    pub errors_total: u64,
    pub errors: BTreeMap<String, u64>,
    pub statuses: BTreeMap<u16, u64>,
    pub throughput_rps: f64,
    pub ratio_to_healthz: Option<f64>,
    pub latency_ms: Latency,
    pub server_cpu_cores: Option<f64>,
    pub server_threads_cores: BTreeMap<String, f64>,
    pub bench_cpu_cores: f64,
    /// The database server (`--db-pid`: a postmaster and its backends).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub db_cpu_cores: Option<f64>,
    /// All CPUs of the machine, busy (not idle/iowait), in cores: shows
    /// whether something else was running during the window.
    pub machine_busy_cores: f64,
    pub machine_steal_cores: f64,
    /// Busy cores not used by the server or the generator (other processes
    /// on a shared machine, kernel threads): figures with a high value here
    /// were measured on a contended machine.
    pub other_cores: Option<f64>,
    pub server_rss_kib: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub leases_in_store: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub leases_at_end: Option<u64>,
}

#[derive(Debug, Serialize)]
pub struct RunConfig {
    pub connections: usize,
    pub duration_s: f64,
    pub warmup_s: f64,
    pub held: usize,
    pub bench_threads: usize,
    pub cpus: usize,
}

#[derive(Debug, Serialize)]
pub struct Report {
    pub tool: &'static str,
    pub mode: &'static str,
    pub config: RunConfig,
    pub server: ServerInfo,
    pub scenarios: Vec<ScenarioResult>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

pub fn finish(
    target: &mut Target,
    args: &CommonArgs,
    held: usize,
    mode: &'static str,
    mut results: Vec<ScenarioResult>,
    notes: Vec<String>,
) -> anyhow::Result<()> {
    if let Some(base) = results
        .iter()
        .find(|r| r.name == "healthz")
        .map(|r| r.throughput_rps)
        .filter(|&b| b > 0.0)
    {
        for r in &mut results {
            r.ratio_to_healthz = Some(round3(r.throughput_rps / base));
        }
    }
    let report = Report {
        tool: "leasehold-bench",
        mode,
        config: RunConfig {
            connections: args.connections,
            duration_s: args.duration.as_secs_f64(),
            warmup_s: args.warmup.as_secs_f64(),
            held,
            bench_threads: args.threads.max(1),
            cpus: std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1),
        },
        server: target.server_info(),
        scenarios: results,
        notes,
    };
    print_table(&report);
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_string_pretty(&report)? + "\n")
            .with_context(|| format!("writing {}", path.display()))?;
    }
    let errors: u64 = report.scenarios.iter().map(|r| r.errors_total).sum();
    if errors > 0 && target.started_by_bench() {
        eprintln!("--- last server log lines ---\n{}", target.log_tail());
    }
    target.stop();
    Ok(())
}
