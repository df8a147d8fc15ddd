//! Command-line flags and environment variables of `leaseholdd`.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use leasehold_common::policy::parse_duration;

use crate::serve::ServeOptions;

fn duration(s: &str) -> Result<Duration, String> {
    parse_duration(s)
}

/// Leasehold seat server.
#[derive(Debug, Clone, Parser)]
#[command(
    name = "leaseholdd",
    version,
    about,
    args_conflicts_with_subcommands = true
)]
pub struct Config {
    /// Without a command, serve.
    #[command(subcommand)]
    pub command: Option<Command>,

    /// Address to listen on (port 0 picks a free port).
    #[arg(long, env = "LEASEHOLD_LISTEN", default_value = "127.0.0.1:7400")]
    pub listen: String,

    /// Directory for the database, signing key and admin token.
    #[arg(long, env = "LEASEHOLD_DATA_DIR", default_value = "./data")]
    pub data_dir: PathBuf,

    /// PostgreSQL URL (postgres://user@host/db): run as one of several
    /// interchangeable replicas on that database. Without it, the store is
    /// SQLite in --data-dir.
    #[arg(long, env = "LEASEHOLD_DATABASE", value_name = "URL")]
    pub database: Option<String>,

    /// The licenses file (TOML), watched and reloaded live.
    #[arg(
        long,
        env = "LEASEHOLD_LICENSES",
        default_value = "assets/licenses.toml"
    )]
    pub licenses: PathBuf,

    /// Admin bearer token from `LEASEHOLD_ADMIN_TOKEN` (never a flag: flags
    /// show up in `ps`); if unset, read or created in <data-dir>/admin.token.
    #[arg(skip = std::env::var("LEASEHOLD_ADMIN_TOKEN").ok())]
    pub admin_token: Option<String>,

    /// Viewer bearer token (read-only role) from `LEASEHOLD_VIEWER_TOKEN`; if
    /// unset, read or created in <data-dir>/viewer.token.
    #[arg(skip = std::env::var("LEASEHOLD_VIEWER_TOKEN").ok())]
    pub viewer_token: Option<String>,

    /// A dashboard session not used for this long ends.
    #[arg(long, env = "LEASEHOLD_UI_IDLE_TIMEOUT", default_value = "30m", value_parser = duration)]
    pub ui_idle_timeout: Duration,

    /// A dashboard session ends this long after sign-in, however busy.
    #[arg(long, env = "LEASEHOLD_UI_SESSION_LIFETIME", default_value = "12h", value_parser = duration)]
    pub ui_session_lifetime: Duration,

    /// How often the reaper sweeps.
    #[arg(long, env = "LEASEHOLD_REAP_INTERVAL", default_value = "2s", value_parser = duration)]
    pub reap_interval: Duration,

    /// Cut connections that take longer than this to send request headers.
    #[arg(long, env = "LEASEHOLD_HEADER_TIMEOUT", default_value = "10s", value_parser = duration)]
    pub header_timeout: Duration,

    /// Most connections open at once.
    #[arg(long, env = "LEASEHOLD_MAX_CONNECTIONS", default_value_t = 4096)]
    pub max_connections: usize,

    /// How long usage history (sessions, denials, pool sizes) is kept.
    #[arg(long, env = "LEASEHOLD_HISTORY_RETENTION", default_value = "400d", value_parser = duration)]
    pub history_retention: Duration,

    /// A pause of the server longer than this counts as an outage (leases
    /// live when it began get one TTL to renew).
    #[arg(long, env = "LEASEHOLD_STALL_THRESHOLD", default_value = "3s", value_parser = duration)]
    pub stall_threshold: Duration,
}

impl Config {
    pub fn serve_options(&self) -> ServeOptions {
        ServeOptions {
            header_read_timeout: self.header_timeout,
            max_connections: self.max_connections.max(1),
            ..ServeOptions::default()
        }
    }
}

/// What `leaseholdd` does instead of serving.
#[derive(Debug, Clone, Subcommand)]
pub enum Command {
    /// Copy the SQLite database to FILE as one consistent snapshot, while a
    /// server keeps serving on the data dir (reads only).
    Backup(BackupArgs),
    /// Put a backup in place as the database of a stopped server's data dir.
    Restore(RestoreArgs),
}

#[derive(Debug, Clone, Args)]
pub struct BackupArgs {
    /// The data dir whose database to copy.
    #[arg(long, env = "LEASEHOLD_DATA_DIR", default_value = "./data")]
    pub data_dir: PathBuf,
    /// Where to write the copy.
    #[arg(long, value_name = "FILE")]
    pub out: PathBuf,
    /// Replace FILE if it exists.
    #[arg(long)]
    pub force: bool,
}

#[derive(Debug, Clone, Args)]
pub struct RestoreArgs {
    /// The data dir of a stopped server (created if missing).
    #[arg(long, env = "LEASEHOLD_DATA_DIR", default_value = "./data")]
    pub data_dir: PathBuf,
    /// The backup to restore.
    #[arg(long, value_name = "FILE")]
    pub from: PathBuf,
    /// Replace the data dir's database if it has one.
    #[arg(long)]
    pub force: bool,
}
