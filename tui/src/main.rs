//! `leasehold`: parse flags, run, print one line on failure.

use std::process::ExitCode;

use clap::Parser;
use leasehold_common::text::sanitize_for_terminal;
use leasehold_tui::cli::Cli;

fn main() -> ExitCode {
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("leasehold: starting the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(leasehold_tui::run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        // `leasehold events | head` closing the pipe is not an error.
        Err(e)
            if e.downcast_ref::<std::io::Error>()
                .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe) =>
        {
            ExitCode::SUCCESS
        }
        Err(e) => {
            // One line, and nothing a server said can reach the terminal raw.
            let line = format!("{e:#}").replace('\n', " ");
            eprintln!("leasehold: {}", sanitize_for_terminal(&line));
            ExitCode::FAILURE
        }
    }
}
