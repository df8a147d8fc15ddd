//! Command-line flags.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, Subcommand};

fn duration(s: &str) -> Result<Duration, String> {
    leasehold_common::policy::parse_duration(s)
}

#[derive(Debug, Parser)]
#[command(
    name = "leasehold-bench",
    about = "HTTP/1.1 keep-alive load generator for leaseholdd"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Sub>,
    #[command(flatten)]
    pub common: CommonArgs,
    /// Scenarios: healthz, checkout, heartbeat, mixed, or all (comma-separated).
    #[arg(long, default_value = "all")]
    pub scenario: String,
    /// Seats checked out before `heartbeat` / `mixed`, heartbeated round-robin.
    #[arg(long, default_value_t = 5000)]
    pub held: usize,
}

#[derive(Debug, Subcommand)]
pub enum Sub {
    /// How cost grows: latency with few vs many leases, a 99%-full big pool
    /// vs a small one, RSS with many live leases.
    Scale {
        #[command(flatten)]
        common: CommonArgs,
        /// Leases in the store for the "many" measurements.
        #[arg(long, default_value_t = 1_000_000)]
        preload: usize,
        /// Leases in the store for the "few" measurements.
        #[arg(long, default_value_t = 1_000)]
        few: usize,
        /// Skip the 99%-full 100,000-seat pool measurement.
        #[arg(long)]
        no_fullish: bool,
    },
}

#[derive(Debug, Clone, clap::Args)]
pub struct CommonArgs {
    /// Target a running server (loopback only) instead of starting one; several
    /// comma-separated URLs (replicas) get the connections round-robin, and
    /// admin look-ups go to the first.
    #[arg(long)]
    pub server: Option<String>,
    /// Admin token of `--server` (checks that the bench pools exist).
    #[arg(long, env = "LEASEHOLD_ADMIN_TOKEN", hide_env_values = true)]
    pub admin_token: Option<String>,
    /// Pid of `--server`, to report its CPU per thread and RSS (several
    /// comma-separated pids, e.g. of replicas: their CPU and RSS added up).
    #[arg(long, value_delimiter = ',')]
    pub server_pid: Vec<u32>,
    /// Pid of the database server's postmaster (PostgreSQL): the CPU of it and
    /// its children is reported apart instead of counting as "others".
    #[arg(long)]
    pub db_pid: Option<u32>,
    /// The `leaseholdd` to start (default: next to this binary).
    #[arg(long)]
    pub leaseholdd: Option<PathBuf>,
    /// Extra flag for the started server (repeatable), e.g. `--server-arg=--max-connections=8192`.
    #[arg(long = "server-arg", allow_hyphen_values = true)]
    pub server_args: Vec<String>,
    /// Concurrent keep-alive connections.
    #[arg(long, default_value_t = 64)]
    pub connections: usize,
    /// Measured time per scenario.
    #[arg(long, default_value = "10s", value_parser = duration)]
    pub duration: Duration,
    /// Unmeasured time before each scenario's window.
    #[arg(long, default_value = "2s", value_parser = duration)]
    pub warmup: Duration,
    /// Threads of the load generator's runtime (1 = current-thread runtime).
    #[arg(long, default_value_t = 1)]
    pub threads: usize,
    /// Write the results as JSON here.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Print the licenses file a `--server` needs, and exit.
    #[arg(long)]
    pub print_licenses: bool,
    /// Also configure the seat-policy pool (the `checkout-policy` scenario
    /// turns it on; a server that predates seat policies refuses it).
    #[arg(long)]
    pub policy_pool: bool,
}
