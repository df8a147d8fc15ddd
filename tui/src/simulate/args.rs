//! The flags of `leasehold simulate`.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use leasehold_common::policy::parse_duration;

/// Where the quickstart server reads its pools, relative to the working
/// directory (the repository root in the README's quickstart).
pub const DEFAULT_LICENSES_FILE: &str = "assets/licenses.toml";

/// Flags of `leasehold simulate`.
#[derive(Debug, Clone, Args)]
#[command(after_help = "\
Default license: the pool with the shortest TTL in the licenses file, which \
for the demo pools is demo-ide (3 seats, 30 s TTL): a crashed client's seat \
is reaped about 40 s after the crash (TTL + reap grace), inside the default \
60 s run. demo-cad (60 s TTL + 15 s grace) reaps at ~75 s, after the run; \
pass `--license demo-cad --duration 2m` to watch that.

Behaviours: steady (holds all run), releaser (works a while, releases, comes \
back; denied while the pool is full), crasher (stops heartbeating without \
releasing: reaped, or revoked), flaky (network outages it rides out; in a \
run of 3 x TTL or more, one outage outlasts the lease so it lapses), late (arrives mid-run and waits in line with \
?wait=). On a license with an idle_timeout (from the licenses file or the admin API): idle (reports its \
user's activity, then walks away: its heartbeats report a growing idle_s until the seat is reclaimed) and \
returner (walks away too, and comes back: after the reclaim, checking out again, when the run is long \
enough, else before the timeout). With an admin token (--token, LEASEHOLD_ADMIN_TOKEN or admin.token in \
--data-dir/LEASEHOLD_DATA_DIR, default ./data) it also revokes a stuck seat now and then and reports reaps.

Same --seed, same plan (who does what, when, under which name); the \
network's and the server's timing still vary.")]
pub struct SimulateArgs {
    /// License to simulate on (default: the shortest-TTL pool of the
    /// licenses file, else demo-ide).
    #[arg(long, value_name = "ID")]
    pub license: Option<String>,

    /// Its license key (default: from the licenses file).
    #[arg(long, value_name = "KEY")]
    pub key: Option<String>,

    /// Simulated clients (default: seats + 5 when the pool size is known,
    /// else 15).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub clients: Option<u32>,

    /// How long to run; everything is released (or left crashed) at the end.
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = parse_run_duration)]
    pub duration: Duration,

    /// Seed for the plan (default: random, printed in the summary).
    #[arg(long, value_name = "S")]
    pub seed: Option<u64>,

    /// Licenses file to take the default license and key from.
    #[arg(long, value_name = "FILE", default_value = DEFAULT_LICENSES_FILE)]
    pub licenses: PathBuf,

    /// Print only the summary, not one line per event.
    #[arg(long)]
    pub quiet: bool,

    /// Print only the summary, as JSON.
    #[arg(long)]
    pub json: bool,
}

fn parse_run_duration(s: &str) -> Result<Duration, String> {
    let d = parse_duration(s)?;
    if d < Duration::from_millis(500) || d > Duration::from_secs(24 * 3600) {
        return Err("must be between 500ms and 24h".into());
    }
    Ok(d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_duration_is_bounded() {
        assert_eq!(parse_run_duration("4s"), Ok(Duration::from_secs(4)));
        assert!(parse_run_duration("100ms").is_err());
        assert!(parse_run_duration("2d").is_err());
        assert!(parse_run_duration("soon").is_err());
    }
}
