//! `leasehold-bench`: an HTTP/1.1 keep-alive load generator for `leaseholdd`.
//!
//! N connections, each a task with its own persistent connection (hyper's
//! client connection API directly, no pool, no reqwest), closed loop: a
//! connection sends its next request when the previous answer arrives. Every
//! run is bounded in time (warm-up + measured window) and refuses any server
//! that is not on the loopback interface.
//!
//! By default it starts its own server (temp data dir, generated licenses file
//! with the pools the scenarios need) from the `leaseholdd` binary next to its
//! own; `--server URL` targets a running one instead, which must have the
//! bench pools (`--print-licenses` prints them). `--server URL1,URL2,…` targets
//! several replicas of one cluster, as a load balancer without sticky
//! sessions would: connection `i` goes to replica `i % n`, admin look-ups to
//! the first; `--server-pid` takes their pids (comma-separated, CPU and RSS
//! added up) and `--db-pid` a PostgreSQL postmaster, whose CPU (with its
//! backends') is then reported apart from "others".
//!
//! Scenarios run in sequence against the same server, so each one's ratio to
//! `healthz` (the server's HTTP ceiling) is measured under the same conditions:
//!
//! - `healthz`: `GET /healthz`.
//! - `checkout`: checkouts into the huge pool, unique holders.
//! - `heartbeat`: `--held` seats checked out first, then heartbeated round-robin.
//! - `heartbeat-idle`: the same heartbeats, each reporting `{"idle_s": N}` (the
//!   seconds since the run began) on a pool without `idle_timeout`.
//! - `mixed`: ~90% heartbeats, 5% checkouts, 4% releases, 1% checkouts into the
//!   small pool that is kept full (409, counted as "denied", not errors).
//!
//! `leasehold-bench scale` measures how cost grows: checkout/heartbeat latency
//! with few vs many leases in the store, a 99%-full big pool vs a small pool,
//! and the server's RSS with many live leases.
//!
//! Its parts: `args` (flags), `pools` (the licenses the bench needs),
//! `server` (starting or locating `leaseholdd`), `client` (one raw hyper
//! connection), `worker` (one connection's closed loop), `fleet` (all of them
//! at once), `prepare` (unmeasured set-up: held seats, full pools), `measure`
//! (one measured window), `cpu` / `procfs` (CPU and memory from /proc),
//! `tally` (a connection's histogram and counts), `report` / `table` (JSON
//! and the printed table), and the two modes in `modes/`.

mod args;
mod client;
mod cpu;
mod fleet;
mod measure;
mod pools;
mod prepare;
mod procfs;
mod report;
mod scenario;
mod server;
mod tally;
mod worker;
mod modes {
    pub mod scale;
    pub mod scenarios;
}

use anyhow::bail;
use clap::Parser;

use crate::args::{Cli, Sub};
use crate::pools::licenses_toml;

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let common = match &cli.command {
        Some(Sub::Scale { common, .. }) => common.clone(),
        None => cli.common.clone(),
    };
    if common.print_licenses {
        print!("{}", licenses_toml(common.policy_pool));
        return Ok(());
    }
    if common.connections == 0 {
        bail!("--connections must be at least 1");
    }
    let runtime = if common.threads <= 1 {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?
    } else {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(common.threads)
            .enable_all()
            .build()?
    };
    runtime.block_on(async move {
        match cli.command {
            Some(Sub::Scale {
                common,
                preload,
                few,
                no_fullish,
            }) => modes::scale::run_scale(common, preload, few, !no_fullish).await,
            None => {
                let mut common = cli.common;
                common.policy_pool |= cli.scenario.contains("checkout-policy");
                modes::scenarios::run_scenarios(common, &cli.scenario, cli.held).await
            }
        }
    })
}
