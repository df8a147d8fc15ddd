//! `leasehold`: the Leasehold admin console and one-shot admin commands.
//!
//! It speaks only the admin HTTP API of the server (`assets/openapi.yaml`);
//! it never opens the database. Module map:
//!
//! - [`cli`]: flags (clap).
//! - [`conn`]: the server URL and where the admin token comes from.
//! - [`format`]: durations, short seat ids and terminal-safe JSON as printed.
//! - [`duration`]: durations as typed (`--block`, `--for`, the revoke
//!   dialog) and a block as the API's `block_s`.
//! - [`api`]: [`api::AdminClient`] (reqwest) for the admin endpoints, the
//!   [`api::ApiError`] lines people read, and the SSE parser.
//! - [`stream`]: the event stream kept alive (reconnect with backoff, resume
//!   with `Last-Event-ID`, no duplicates).
//! - [`app`]: the console's state and every rule that changes it, pure and
//!   unit-tested: snapshots and events applied, the server clock offset
//!   behind the countdowns; key dispatch (`app/keys.rs`), the revoke modal
//!   (`app/revoke.rs`), the holders as a window of server pages
//!   (`app/paging.rs`, `app/sort_key.rs`), connection state (`app/link.rs`).
//! - [`ui`]: draws a frame from the state and a `now` passed in
//!   (snapshot-tested with ratatui's `TestBackend`); the holders table, the
//!   dialogs and the theme in `ui/`.
//! - [`console`]: the event loop that ties terminal, poller, stream and
//!   [`app::App`] together; the only code that touches the terminal.
//! - [`commands`]: `status`, `seats`, `events`, `revoke`.
//! - [`report`]: `report`, usage over a range per license with a verdict
//!   (enough seats?), as a table, JSON, or the sessions as streamed CSV;
//!   `report --attest`, one license's figures signed by the server.
//! - [`borrow`]: `borrow` and `return`, a seat for offline use, on the
//!   client API with the license key.
//! - [`webhooks`]: `webhooks` (and `webhooks deliveries`, `webhooks
//!   test`), the webhooks' delivery counts and the alerts firing.
//! - [`entitlements`]: `entitlements`, the vendor-signed files the server
//!   reads; and how a vendor pool's term reads in `status` and the console
//!   (`⏳ 12d`, `grace 3d`, `expired`).
//! - [`vendor`]: `vendor keygen`, `vendor sign` and `entitlement
//!   inspect`, the vendor's tool for signed entitlement files, and `vendor
//!   verify-usage`, a customer's signed usage checked against one (no
//!   server).
//! - [`simulate`]: `simulate`, simulated clients (LeaseKeeper and the typed
//!   client) so the console has something to show.

pub mod api;
pub mod app;
pub mod borrow;
pub mod cli;
pub mod commands;
pub mod conn;
pub mod console;
pub mod duration;
pub mod entitlements;
pub mod format;
pub mod report;
pub mod simulate;
pub mod stream;
pub mod ui;
pub mod vendor;
pub mod webhooks;

use std::path::PathBuf;

use anyhow::Context;

use crate::cli::Cli;

/// Run the command line: the console without a subcommand, else one
/// one-shot command writing to stdout.
pub async fn run(cli: Cli) -> anyhow::Result<()> {
    // The simulator speaks the client API; the admin token is optional.
    let command = match cli.command {
        Some(cli::TopCommand::Simulate(args)) => return simulate::run(&cli.conn, args).await,
        // Borrowing speaks the client API with the license key.
        Some(cli::TopCommand::Borrow(args)) => {
            return borrow::borrow(&cli.conn.server, args, &mut std::io::stdout().lock()).await;
        }
        Some(cli::TopCommand::Return(args)) => {
            return borrow::give_back(&cli.conn.server, args, &mut std::io::stdout().lock()).await;
        }
        // The vendor's tool works on files alone.
        Some(cli::TopCommand::Vendor(args)) => {
            return vendor::run_vendor(args, &mut std::io::stdout().lock());
        }
        Some(cli::TopCommand::Entitlement(args)) => {
            return vendor::run_entitlement(args, &mut std::io::stdout().lock());
        }
        Some(cli::TopCommand::Admin(cmd)) => Some(cmd),
        None => None,
    };
    let token = cli.conn.admin_token()?;
    let client = api::AdminClient::new(&cli.conn.server, &token)?;
    match command {
        None => {
            init_file_logging(cli.log_file)?;
            console::run(client, cli.read_only).await
        }
        Some(cmd) => {
            let stdout = std::io::stdout();
            let mut out = stdout.lock();
            commands::run(cmd, &client, &mut out).await
        }
    }
}

/// `$XDG_STATE_HOME/leasehold/console.log`, else `~/.local/state/...`, else
/// the temp dir.
fn default_log_file() -> PathBuf {
    let state = std::env::var_os("XDG_STATE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local/state")))
        .unwrap_or_else(std::env::temp_dir);
    state.join("leasehold").join("console.log")
}

/// Logs go to a file, never to the screen the console draws on. The level
/// filter comes from `LEASEHOLD_LOG` (default `info`).
fn init_file_logging(path: Option<PathBuf>) -> anyhow::Result<()> {
    let path = path.unwrap_or_else(default_log_file);
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .with_context(|| format!("opening the log file {}", path.display()))?;
    let filter = tracing_subscriber::EnvFilter::try_from_env("LEASEHOLD_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(false)
        .with_writer(std::sync::Mutex::new(file))
        .try_init()
        .map_err(|e| anyhow::anyhow!("setting up logging: {e}"))?;
    Ok(())
}
