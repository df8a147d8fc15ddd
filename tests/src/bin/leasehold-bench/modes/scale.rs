//! `leasehold-bench scale`: how cost grows with leases in the store and with
//! pool fullness.

use std::sync::Arc;
use std::time::Instant;

use crate::args::CommonArgs;
use crate::fleet::connect_all;
use crate::measure::{Window, measure, measure_op};
use crate::pools::{FULLISH, FULLISH_SEATS, SMALL};
use crate::prepare::{fill_pool, fill_small, preload_big, release_extra, top_up_all};
use crate::report::{ScenarioResult, finish};
use crate::scenario::Scenario;
use crate::server::Target;
use crate::worker::{Ctx, Op, Worker};

pub async fn run_scale(
    args: CommonArgs,
    preload: usize,
    few: usize,
    fullish: bool,
) -> anyhow::Result<()> {
    let mut target = Target::open(&args).await?;
    let ctx = Arc::new(Ctx::new());
    let window = Window::of(&args);
    let mut notes = Vec::new();
    let mut results = Vec::new();
    let mut workers = connect_all(args.connections, &target.endpoints).await?;

    // Heartbeats go round-robin over `few` seats in both phases, so the only
    // difference between the two is how many leases the store holds.
    let hb_seats = few.max(args.connections);
    workers = top_up_all(workers, &ctx, hb_seats).await?;
    let mut in_store = hb_seats as u64;
    for (phase, leases) in [("few", few), ("many", preload)] {
        if leases > hb_seats && in_store < leases as u64 {
            let t = Instant::now();
            let extra = leases - in_store as usize;
            preload_big(&mut workers, &ctx, extra).await?;
            in_store = target.live_total().await.unwrap_or(leases as u64);
            let secs = t.elapsed().as_secs_f64();
            eprintln!("[scale] preloaded {extra} leases in {secs:.1}s");
            notes.push(format!(
                "preloaded {extra} leases in {secs:.1}s ({:.0}/s, unmeasured checkouts)",
                extra as f64 / secs
            ));
        }
        for scenario in [Scenario::Heartbeat, Scenario::Checkout] {
            eprintln!("[scale] {} with ~{in_store} leases", scenario.name());
            let label = format!("{}@{}", scenario.name(), phase);
            let rotation: Vec<usize> = workers.iter().map(|w| w.held.len()).collect();
            for w in &mut workers {
                w.keep_always = scenario == Scenario::Checkout;
            }
            let (w, mut r) = measure(workers, &ctx, scenario, &window, &target, label).await;
            workers = w;
            r.leases_in_store = Some(in_store);
            if scenario == Scenario::Checkout {
                // Give back (unmeasured) what the window took, so each phase
                // measures the store size it names.
                r.leases_at_end = target.live_total().await;
                workers = release_extra(workers, &ctx, &rotation).await?;
            }
            if let Some(live) = target.live_total().await {
                in_store = live;
            }
            results.push(r);
        }
        if let Some(rss) = target.rss_kib() {
            notes.push(format!(
                "server RSS with ~{in_store} live leases: {:.1} MiB",
                rss as f64 / 1024.0
            ));
        }
    }

    if fullish {
        workers = measure_full_pools(workers, &ctx, &window, &target, &mut results).await?;
        notes.push(format!(
            "{FULLISH}: 99% full at the start; once its last 1% is taken its checkouts are denied (409) like {SMALL}'s"
        ));
    }
    drop(workers);
    finish(&mut target, &args, hb_seats, "scale", results, notes)
}

/// 99% of a 100,000-seat pool, then checkouts into it (each succeeds or,
/// once full, is denied) vs the same into the full 10-seat pool.
async fn measure_full_pools(
    mut workers: Vec<Worker>,
    ctx: &Arc<Ctx>,
    window: &Window,
    target: &Target,
    results: &mut Vec<ScenarioResult>,
) -> anyhow::Result<Vec<Worker>> {
    let fill = FULLISH_SEATS * 99 / 100;
    let t = Instant::now();
    fill_pool(&mut workers, ctx, Op::CheckoutFullish, fill).await?;
    eprintln!(
        "[scale] filled {FULLISH} to {fill} seats in {:.1}s",
        t.elapsed().as_secs_f64()
    );
    fill_small(&mut workers[0], ctx).await?;
    for (op, label) in [
        (Op::CheckoutFullish, format!("checkout@{FULLISH}99%")),
        (Op::CheckoutSmall, format!("checkout@{SMALL}-full")),
    ] {
        eprintln!("[scale] {label}");
        let (w, r) = measure_op(workers, ctx, op, window, target, label).await;
        workers = w;
        results.push(r);
    }
    Ok(workers)
}
