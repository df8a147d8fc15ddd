//! Harness for the end-to-end tests: start the real `leaseholdd` binary on a
//! free loopback port with a temp data dir, and talk HTTP to it.
//!
//! The binaries are found next to the test executable (`target/<profile>/`),
//! where `cargo test --workspace` / `cargo nextest run --workspace` build
//! them; `LEASEHOLD_BIN_DIR` overrides that.
//!
//! Module map (everything is re-exported here, so tests use
//! `leasehold_tests::Server` and the like):
//!
//! - `server.rs`: [`Server`] and [`ServerOptions`], the process's lifecycle.
//! - `http.rs`: [`Server`]'s HTTP helpers, and [`read_sse`].
//! - `process.rs`: [`spawn_until_listening`],
//!   [`run_leaseholdd_expecting_exit`], signals; knows no [`Server`].
//! - `store.rs`: [`TestStore`], SQLite or PostgreSQL from the environment.
//! - `tools.rs`: where the built binaries are; [`require_tool`] for the rest.
//! - `cli.rs`: [`run_leasehold`], the `leasehold` command line.
//! - `fixtures.rs`: [`license_toml!`] and [`TEST_LICENSES`].
//! - [`round_robin`]: the proxy in front of two replicas.
//! - [`tmux`]: the console driven in tmux.
//! - [`vendor`]: a software vendor's key, signing entitlement files.

use std::time::{Duration, Instant};

mod cli;
mod fixtures;
mod http;
mod process;
pub mod round_robin;
mod server;
mod store;
pub mod tmux;
mod tools;
pub mod vendor;

pub use cli::{Run, run_leasehold};
pub use fixtures::{LENDING, TEST_LICENSES};
pub use http::read_sse;
pub use process::{run_leaseholdd_expecting_exit, spawn_until_listening};
pub use server::{Server, ServerOptions};
pub use store::TestStore;
pub use tools::{bin_dir, faketime_env, leasehold_bin, leaseholdd_bin, require_tool};

/// Poll `check` until it returns `Some`, or panic after `timeout`.
pub async fn eventually<T, F, Fut>(timeout: Duration, what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = check().await {
            return v;
        }
        if Instant::now() > deadline {
            panic!("timed out after {timeout:?} waiting for {what}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
