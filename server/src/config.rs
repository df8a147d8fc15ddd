//! Command-line flags and environment variables of `leaseholdd`, and the
//! settings made of them that the lower modules take: [`ServeOptions`]
//! (the accept loop, `serve.rs`) and [`DEFAULT_AUTH_FAILURES`] (the
//! sign-in limiter, `http/ui_auth/limiter.rs`). This module names none of
//! the modules that use its settings.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use leasehold_common::policy::parse_duration;

use crate::proxies::{Cidr, ProxyPolicy, PublicOrigin};

/// Failed sign-ins and wrong bearer tokens allowed per client address per
/// minute when `--auth-failures` says nothing.
pub const DEFAULT_AUTH_FAILURES: usize = 10;

/// How the accept loop (`serve.rs`) treats connections.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    pub header_read_timeout: Duration,
    /// How long a request's body may take to arrive after its headers.
    pub body_timeout: Duration,
    pub max_connections: usize,
    /// How long shutdown waits for in-flight requests.
    pub drain_timeout: Duration,
}

impl Default for ServeOptions {
    fn default() -> Self {
        ServeOptions {
            header_read_timeout: Duration::from_secs(10),
            body_timeout: Duration::from_secs(10),
            max_connections: 4096,
            drain_timeout: Duration::from_secs(5),
        }
    }
}

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

    /// The entitlements directory: every `*.lic` file in it is one
    /// entitlement a vendor signed (default `<data-dir>/entitlements`,
    /// created empty at first start). Watched; never written to.
    #[arg(long, env = "LEASEHOLD_ENTITLEMENTS", value_name = "DIR")]
    pub entitlements: Option<PathBuf>,

    /// Admin bearer token from `LEASEHOLD_ADMIN_TOKEN` (never a flag: flags
    /// show up in `ps`); if unset, read or created in <data-dir>/admin.token.
    #[arg(skip = std::env::var("LEASEHOLD_ADMIN_TOKEN").ok())]
    pub admin_token: Option<String>,

    /// Viewer bearer token (read-only role) from `LEASEHOLD_VIEWER_TOKEN`; if
    /// unset, read or created in <data-dir>/viewer.token.
    #[arg(skip = std::env::var("LEASEHOLD_VIEWER_TOKEN").ok())]
    pub viewer_token: Option<String>,

    /// Start even if the signing key or a token file may be read or changed
    /// by other users (otherwise refused: `chmod 600` them).
    #[arg(long, env = "LEASEHOLD_ALLOW_INSECURE_FILES")]
    pub allow_insecure_files: bool,

    /// PostgreSQL: this replica's admin and viewer tokens replace the
    /// cluster's when they differ (a token rotation), instead of refusing to
    /// start. Sign-ins made with a replaced token end.
    #[arg(long, env = "LEASEHOLD_ROTATE_TOKENS")]
    pub rotate_tokens: bool,

    /// Reverse proxies (CIDR blocks, comma-separated) whose X-Forwarded-For
    /// and X-Forwarded-Proto are believed; anyone else's are ignored.
    #[arg(
        long,
        env = "LEASEHOLD_TRUSTED_PROXIES",
        value_delimiter = ',',
        default_value = crate::proxies::DEFAULT_TRUSTED,
        value_name = "CIDR,..."
    )]
    pub trusted_proxies: Vec<Cidr>,

    /// The URL browsers use to reach the dashboard (e.g.
    /// https://leasehold.example.com): the only origin the sign-in and
    /// CSRF checks accept, and https makes the cookie Secure and __Host-.
    #[arg(long, env = "LEASEHOLD_PUBLIC_URL", value_name = "URL")]
    pub public_url: Option<PublicOrigin>,

    /// Failed sign-ins and wrong bearer tokens allowed per client address
    /// per minute; beyond that, 429 until the oldest ages out.
    #[arg(long, env = "LEASEHOLD_AUTH_FAILURES", default_value_t = DEFAULT_AUTH_FAILURES)]
    pub auth_failures: usize,

    /// A dashboard sign-in not used for this long ends.
    #[arg(long, env = "LEASEHOLD_UI_IDLE_TIMEOUT", default_value = "30m", value_parser = duration)]
    pub ui_idle_timeout: Duration,

    /// A dashboard sign-in ends this long after it began, however busy (the
    /// flag keeps the older word).
    #[arg(long, env = "LEASEHOLD_UI_SESSION_LIFETIME", default_value = "12h", value_parser = duration)]
    pub ui_session_lifetime: Duration,

    /// How often the reaper sweeps.
    #[arg(long, env = "LEASEHOLD_REAP_INTERVAL", default_value = "2s", value_parser = duration)]
    pub reap_interval: Duration,

    /// Cut connections that take longer than this to send request headers.
    #[arg(long, env = "LEASEHOLD_HEADER_TIMEOUT", default_value = "10s", value_parser = duration)]
    pub header_timeout: Duration,

    /// Answer 408 (and close the connection) to a request whose body has
    /// not arrived this long after its headers.
    #[arg(long, env = "LEASEHOLD_BODY_TIMEOUT", default_value = "10s", value_parser = duration)]
    pub body_timeout: Duration,

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
    /// `--entitlements`, or `<data-dir>/entitlements`.
    pub fn entitlements_dir(&self) -> PathBuf {
        self.entitlements
            .clone()
            .unwrap_or_else(|| self.data_dir.join("entitlements"))
    }

    pub fn proxy_policy(&self) -> ProxyPolicy {
        ProxyPolicy {
            trusted: self.trusted_proxies.clone(),
            public: self.public_url.clone(),
        }
    }

    pub fn serve_options(&self) -> ServeOptions {
        ServeOptions {
            header_read_timeout: self.header_timeout,
            body_timeout: self.body_timeout,
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
    /// Print this server's `kid` (the lease-signing key's RFC 7638
    /// thumbprint), creating the key if there is none yet: what a customer
    /// sends a vendor to get an entitlement bound to this server.
    Kid(KidArgs),
}

#[derive(Debug, Clone, Args)]
pub struct KidArgs {
    /// The data dir that holds `signing.key`.
    #[arg(long, env = "LEASEHOLD_DATA_DIR", default_value = "./data")]
    pub data_dir: PathBuf,
    /// Accept a key file that other users may read or write.
    #[arg(long)]
    pub allow_insecure_files: bool,
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
