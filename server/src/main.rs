//! `leaseholdd`: parse flags, set up logging, run the server until SIGINT or
//! SIGTERM. Everything else lives in the library.

use std::io::IsTerminal;
use std::process::ExitCode;

use clap::Parser;
use leasehold_server::config::{Command, Config, KidArgs};
use leasehold_server::{backup, keys};

// Measured: glibc malloc trimmed the writer thread's arena with madvise under
// load, and every trim stopped the other core for a TLB shootdown.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let config = Config::parse();
    if let Some(command) = &config.command {
        return run_command(command);
    }
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("LEASEHOLD_LOG")
                .unwrap_or_else(|_| "info".into()),
        )
        .init();
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("leaseholdd: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(leasehold_server::run(config, shutdown_signal())) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // One line, the whole cause chain: "cannot listen on ...: Address in use".
            eprintln!("leaseholdd: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// `backup`, `restore` and `kid`: no runtime, no logging; one line on
/// success (stdout) or failure (stderr).
fn run_command(command: &Command) -> ExitCode {
    let result = match command {
        Command::Backup(a) => backup::backup(&a.data_dir, &a.out, a.force).map(|r| {
            println!(
                "backed up {} to {} ({} bytes, schema v{}, events up to id {}, integrity ok) in {:.1}s",
                leasehold_server::store::database_path(&a.data_dir).display(),
                r.out.display(),
                r.bytes,
                r.schema_version,
                r.last_event_id,
                r.took.as_secs_f64()
            )
        }),
        Command::Restore(a) => backup::restore(&a.data_dir, &a.from, a.force).map(|r| {
            println!(
                "restored {} into {} (schema v{}, events up to id {}, integrity ok); start leaseholdd on {}",
                a.from.display(),
                r.database.display(),
                r.schema_version,
                r.last_event_id,
                a.data_dir.display()
            )
        }),
        Command::Kid(a) => {
            return match kid(a) {
                Ok(kid) => {
                    println!("{kid}");
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("leaseholdd: error: {e}");
                    ExitCode::FAILURE
                }
            };
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("leaseholdd: error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The `kid` of `<data-dir>/signing.key`, created (mode 0600) if missing.
fn kid(a: &KidArgs) -> Result<String, String> {
    std::fs::create_dir_all(&a.data_dir)
        .map_err(|e| format!("cannot create data dir {}: {e}", a.data_dir.display()))?;
    let files = keys::SecretFiles {
        data_dir: &a.data_dir,
        allow_insecure: a.allow_insecure_files,
    };
    let signer = keys::load_or_create_signer(files).map_err(|e| e.to_string())?;
    Ok(signer.kid().to_string())
}

async fn shutdown_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = match signal(SignalKind::terminate()) {
        Ok(s) => s,
        Err(_) => return std::future::pending().await,
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}
