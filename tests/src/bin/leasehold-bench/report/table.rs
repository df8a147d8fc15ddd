//! The human-readable table printed after a run.

use super::Report;

pub fn print_table(report: &Report) {
    println!(
        "{:<22} {:>9} {:>11} {:>7} {:>8} {:>8} {:>8} {:>7} {:>7} {:>9} {:>9} {:>9}",
        "scenario",
        "requests",
        "req/s",
        "ratio",
        "p50 ms",
        "p99 ms",
        "p99.9 ms",
        "denied",
        "errors",
        "srv cores",
        "gen cores",
        "others"
    );
    for r in &report.scenarios {
        println!(
            "{:<22} {:>9} {:>11.0} {:>7} {:>8.3} {:>8.3} {:>8.3} {:>7} {:>7} {:>9} {:>9.2} {:>9.2}",
            r.name,
            r.requests,
            r.throughput_rps,
            r.ratio_to_healthz
                .map(|x| format!("{x:.3}"))
                .unwrap_or_else(|| "-".into()),
            r.latency_ms.p50,
            r.latency_ms.p99,
            r.latency_ms.p999,
            r.denied,
            r.errors_total,
            r.server_cpu_cores
                .map(|x| format!("{x:.2}"))
                .unwrap_or_else(|| "-".into()),
            r.bench_cpu_cores,
            r.other_cores
                .unwrap_or(r.machine_busy_cores - r.bench_cpu_cores),
        );
        if r.errors_total > 0 {
            println!("    errors: {:?}  statuses: {:?}", r.errors, r.statuses);
        }
        if !r.server_threads_cores.is_empty() {
            let mut threads: Vec<_> = r.server_threads_cores.iter().collect();
            threads.sort_by(|a, b| b.1.total_cmp(a.1));
            let list: Vec<String> = threads
                .iter()
                .take(5)
                .map(|(n, c)| format!("{n}={c:.2}"))
                .collect();
            println!("    server threads (cores): {}", list.join(" "));
        }
        if let Some(db) = r.db_cpu_cores {
            println!("    database (cores): {db:.2}");
        }
    }
    let s = &report.server;
    if let Some(rss) = s.rss_kib_end {
        println!(
            "server rss at end: {:.1} MiB (peak {:.1} MiB)",
            rss as f64 / 1024.0,
            s.rss_hwm_kib.unwrap_or(0) as f64 / 1024.0
        );
    }
    for n in &report.notes {
        println!("note: {n}");
    }
}
