//! `leasehold simulate`: simulated clients against a server, so the console
//! has something to show (and so a change to the server can be watched
//! under a realistic load).
//!
//! Each client is one task running its behaviour (`behaviours`): steady,
//! releaser and flaky clients hold their seat with the real `LeaseKeeper`
//! (a flaky one through a [`proxy::FlakyProxy`] that goes down now and
//! then); crashers and late arrivals use the typed `Client`. On a license
//! with an `idle_timeout`, an idle client and a returner report their
//! user's activity through the keeper and walk away, to be reclaimed.
//!
//! With an admin token (`admin`), the simulator also revokes a stuck seat
//! now and then, reports reaps from the event log, and samples the server's
//! live count. Everything stops at `--duration` (or Ctrl-C): keepers
//! release, crashed clients stay crashed.
//!
//! [`args`] are the flags, [`target`] picks and checks the license, [`plan`]
//! (pure, seeded) decides who does what when, `slots` is each client's
//! shared live state, [`report`] prints.

mod admin;
pub mod args;
mod behaviours;
mod context;
pub mod plan;
pub mod proxy;
pub mod report;
mod slots;
pub mod target;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use leasehold_common::policy::format_duration;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::conn::ConnArgs;
pub use args::SimulateArgs;
use context::Ctx;
use plan::{Behaviour, Plan};
use report::{Reporter, Summary};
use slots::{Slot, sample_held};
use target::{Target, choose_target, preflight, read_licenses};

/// How long the keepers get to release at the end before they are cut off
/// (their own request timeout bounds each release).
const RELEASE_GRACE: Duration = Duration::from_secs(15);

/// Run the simulation and print the summary.
pub async fn run(conn: &ConnArgs, args: SimulateArgs) -> anyhow::Result<()> {
    let server = conn.server.trim_end_matches('/').to_string();
    let file = read_licenses(&args.licenses);
    let mut target = choose_target(
        args.license.as_deref(),
        args.key.as_deref(),
        file.as_ref(),
        &args.licenses,
    )?;
    // The admin API is optional: revokes, reaps, the live count, the pool.
    let admin = admin::connect(conn, &server, &mut target).await?;
    preflight(&server, &target).await?;

    let n = args
        .clients
        .map(|c| c as usize)
        .unwrap_or_else(|| target.seats.map_or(15, |s| s as usize + 5));
    let seed = args.seed.unwrap_or_else(random_seed);
    let plan = plan::with_idle_clients(
        plan::plan(n, args.duration, seed),
        args.duration,
        target.idle_timeout,
    );
    let quiet = args.quiet || args.json;
    if !quiet {
        println!("{}", header(&server, &target, &plan, args.duration, seed));
    }

    let (stop_tx, stop_rx) = watch::channel(false);
    let start = Instant::now();
    let ctx = Arc::new(Ctx {
        server: server.clone(),
        target: target.clone(),
        start,
        deadline: start + args.duration,
        duration: args.duration,
        stop: stop_rx,
        reporter: Reporter::new(start, quiet),
        seat_owners: Mutex::new(HashMap::new()),
    });
    let slots: Vec<Arc<Slot>> = plan
        .clients
        .iter()
        .map(|p| Arc::new(Slot::new(p.clone())))
        .collect();
    let upstream = behaviours::upstream_addr(&server).await;
    let clients: Vec<JoinHandle<()>> = slots
        .iter()
        .map(|slot| tokio::spawn(behaviours::run_client(ctx.clone(), slot.clone(), upstream)))
        .collect();

    let max_held = Arc::new(Mutex::new(0u32));
    let max_live = Arc::new(Mutex::new(None::<admin::LiveMax>));
    let mut background = vec![tokio::spawn(sample_held(slots.clone(), max_held.clone()))];
    if let Some(admin) = &admin {
        background.extend(admin::spawn_tasks(
            &ctx, admin, &slots, &plan, seed, &max_live,
        ));
    }

    let interrupted = tokio::select! {
        _ = tokio::time::sleep_until(ctx.deadline.into()) => false,
        r = tokio::signal::ctrl_c() => r.is_ok(),
    };
    stop_tx.send_replace(true);
    wind_down(clients, background).await;

    let (behaviours, events) = Summary::tables(&plan.clients, &ctx.reporter.counts());
    let max_held = *max_held.lock().expect("lock");
    let server_max = *max_live.lock().expect("lock");
    let max_live_server = server_max.map(|m| m.live);
    let summary = Summary {
        server,
        license: target.license.clone(),
        seats: target.seats,
        clients: n,
        seed,
        duration_s: args.duration.as_secs_f64(),
        elapsed_s: start.elapsed().as_secs_f64(),
        interrupted,
        admin: admin.is_some(),
        behaviours,
        events,
        max_held,
        max_live_server,
        max_borrowed_server: server_max.map(|m| m.borrowed),
        within_seats: target
            .seats
            .map(|s| max_held <= s && max_live_server.is_none_or(|l| l <= s)),
    };
    if args.json {
        println!(
            "{}",
            crate::format::json_for_terminal(&serde_json::to_string_pretty(&summary)?)
        );
    } else {
        print!("{}", report::format_summary(&summary));
    }
    Ok(())
}

/// Let the clients finish (keepers release) within [`RELEASE_GRACE`], then
/// cut off whatever is left and the background tasks.
async fn wind_down(mut clients: Vec<JoinHandle<()>>, background: Vec<JoinHandle<()>>) {
    let all = futures_util::future::join_all(clients.iter_mut());
    if tokio::time::timeout(RELEASE_GRACE, all).await.is_err() {
        for c in &clients {
            c.abort();
        }
    }
    for b in &background {
        b.abort();
    }
}

/// A seed for a run without `--seed`: short, so it is easy to pass back.
fn random_seed() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
        % 1_000_000
}

fn header(server: &str, target: &Target, plan: &Plan, duration: Duration, seed: u64) -> String {
    let idle = target
        .idle_timeout
        .map(|t| format!(", idle timeout {}", format_duration(t)))
        .unwrap_or_default();
    let pool = match (target.seats, target.ttl) {
        (Some(s), Some(t)) => format!(" ({s} seats, ttl {}{idle})", format_duration(t)),
        (Some(s), None) => format!(" ({s} seats{idle})"),
        _ => String::new(),
    };
    let mix: Vec<String> = Behaviour::ALL
        .iter()
        .map(|b| (b, plan.count(*b)))
        .filter(|(_, n)| *n > 0)
        .map(|(b, n)| format!("{b} {n}"))
        .collect();
    format!(
        "simulating {} clients on {}{pool} at {} for {}, seed {seed}: {}",
        plan.clients.len(),
        leasehold_common::text::sanitize_for_terminal(&target.license),
        leasehold_common::text::sanitize_for_terminal(server),
        format_duration(duration),
        mix.join(", ")
    )
}
