//! The default mode: the scenarios in sequence against the same server, so
//! each one's ratio to `healthz` is measured under the same conditions.

use std::sync::Arc;
use std::time::Instant;

use crate::args::CommonArgs;
use crate::fleet::connect_all;
use crate::measure::{Window, measure};
use crate::prepare::{fill_small, top_up_all};
use crate::report::finish;
use crate::scenario::Scenario;
use crate::server::Target;
use crate::worker::Ctx;

pub async fn run_scenarios(args: CommonArgs, scenarios: &str, held: usize) -> anyhow::Result<()> {
    let scenarios = Scenario::parse_list(scenarios)?;
    let mut target = Target::open(&args).await?;
    let ctx = Arc::new(Ctx::new());
    let window = Window::of(&args);
    let mut workers = connect_all(args.connections, &target.endpoints).await?;
    let mut results = Vec::new();
    for scenario in scenarios {
        if matches!(
            scenario,
            Scenario::Heartbeat | Scenario::HeartbeatIdle | Scenario::Mixed
        ) {
            let t = Instant::now();
            workers = top_up_all(workers, &ctx, held).await?;
            eprintln!(
                "[{}] holding {held} seats (pre-checkout took {:.1}s)",
                scenario.name(),
                t.elapsed().as_secs_f64()
            );
        }
        if scenario == Scenario::Mixed {
            fill_small(&mut workers[0], &ctx).await?;
        }
        eprintln!(
            "[{}] {} connections, {:?} warm-up + {:?}",
            scenario.name(),
            args.connections,
            window.warmup,
            window.duration
        );
        let (w, result) = measure(
            workers,
            &ctx,
            scenario,
            &window,
            &target,
            scenario.name().to_string(),
        )
        .await;
        workers = w;
        results.push(result);
    }
    drop(workers);
    finish(&mut target, &args, held, "scenarios", results, Vec::new())
}
