//! One measured window: every connection runs its closed loop through a
//! warm-up and the window while the CPU is sampled; the tallies become one
//! row of the report.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::args::CommonArgs;
use crate::cpu::CpuSnapshot;
use crate::fleet::on_all;
use crate::report::{Latency, ScenarioResult, round3};
use crate::scenario::Scenario;
use crate::server::Target;
use crate::tally::Tally;
use crate::worker::{Ctx, Op, Worker};

/// An unmeasured warm-up, then the measured time.
pub struct Window {
    pub warmup: Duration,
    pub duration: Duration,
}

impl Window {
    pub fn of(args: &CommonArgs) -> Window {
        Window {
            warmup: args.warmup,
            duration: args.duration,
        }
    }
}

/// Every worker runs `scenario` through one window; the row it yields.
pub async fn measure(
    workers: Vec<Worker>,
    ctx: &Arc<Ctx>,
    scenario: Scenario,
    window: &Window,
    target: &Target,
    label: String,
) -> (Vec<Worker>, ScenarioResult) {
    let start = Instant::now();
    let measure_at = start + window.warmup;
    let end = measure_at + window.duration;
    let cpu_task = {
        let (pids, db_pid) = (target.pids.clone(), target.db_pid());
        tokio::spawn(async move {
            tokio::time::sleep_until(measure_at.into()).await;
            let before = CpuSnapshot::take(&pids, db_pid);
            tokio::time::sleep_until(end.into()).await;
            CpuSnapshot::take(&pids, db_pid).since(&before)
        })
    };
    let (workers, tallies) = on_all(workers, |mut w| {
        let ctx = ctx.clone();
        async move {
            let t = w.run(&ctx, scenario, measure_at, end).await;
            (w, t)
        }
    })
    .await;
    let cpu = cpu_task.await.expect("cpu task");
    let mut total = Tally::new();
    for t in tallies {
        total.merge(t);
    }
    let secs = window.duration.as_secs_f64();
    let h = &total.hist;
    let ms = |us: u64| round3(us as f64 / 1000.0);
    let known = target.has_pid();
    let result = ScenarioResult {
        name: label,
        requests: total.requests,
        ok: total.ok,
        denied: total.denied,
        errors_total: total.errors.values().sum(),
        errors: total.errors,
        statuses: total.statuses,
        throughput_rps: round3(total.requests as f64 / secs),
        ratio_to_healthz: None,
        latency_ms: Latency {
            p50: ms(h.value_at_quantile(0.50)),
            p99: ms(h.value_at_quantile(0.99)),
            p999: ms(h.value_at_quantile(0.999)),
            max: ms(h.max()),
            mean: round3(h.mean() / 1000.0),
        },
        server_cpu_cores: known.then_some(cpu.server),
        server_threads_cores: cpu.server_threads,
        bench_cpu_cores: cpu.bench,
        db_cpu_cores: cpu.db,
        machine_busy_cores: cpu.machine_busy,
        other_cores: known.then(|| {
            let db = cpu.db.unwrap_or(0.0);
            round3((cpu.machine_busy - cpu.server - cpu.bench - db).max(0.0))
        }),
        machine_steal_cores: cpu.machine_steal,
        server_rss_kib: target.rss_kib(),
        leases_in_store: None,
        leases_at_end: None,
    };
    (workers, result)
}

/// Like [`measure`], but every request is `op`.
pub async fn measure_op(
    mut workers: Vec<Worker>,
    ctx: &Arc<Ctx>,
    op: Op,
    window: &Window,
    target: &Target,
    label: String,
) -> (Vec<Worker>, ScenarioResult) {
    for w in &mut workers {
        w.fixed = Some(op);
    }
    let (mut workers, r) = measure(workers, ctx, Scenario::Checkout, window, target, label).await;
    for w in &mut workers {
        w.fixed = None;
    }
    (workers, r)
}
