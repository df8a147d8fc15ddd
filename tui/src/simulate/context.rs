//! What every task of a run shares ([`Ctx`]) and the timing helpers they
//! all use: sleeps that end early when the run stops, a lease's window.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use leasehold_common::api::Lease;
use tokio::sync::watch;

use super::report::Reporter;
use super::target::Target;

/// What every task shares.
pub(super) struct Ctx {
    pub server: String,
    pub target: Target,
    pub start: Instant,
    pub deadline: Instant,
    pub duration: Duration,
    /// Turns true when the run ends (deadline or Ctrl-C).
    pub stop: watch::Receiver<bool>,
    pub reporter: Reporter,
    /// Seat id → index of the client that held it, to name the holder of a
    /// reap reported by the event log.
    pub seat_owners: Mutex<HashMap<String, usize>>,
}

impl Ctx {
    pub fn remaining(&self) -> Duration {
        self.deadline.saturating_duration_since(Instant::now())
    }
}

/// A lease's window, `expires_at − issued_at`.
pub(super) fn window(lease: &Lease) -> Duration {
    Duration::from_millis(lease.expires_at.millis_since(lease.issued_at).max(0) as u64)
}

/// Sleep until `until`; false if the run stopped first.
pub(super) async fn sleep_until(stop: &watch::Receiver<bool>, until: Instant) -> bool {
    let mut stop = stop.clone();
    if *stop.borrow() {
        return false;
    }
    tokio::select! {
        _ = tokio::time::sleep_until(until.into()) => true,
        _ = stop.wait_for(|s| *s) => false,
    }
}

pub(super) async fn sleep_for(stop: &watch::Receiver<bool>, d: Duration) -> bool {
    sleep_until(stop, Instant::now() + d).await
}

/// A duration as event lines print it: `2.5s`.
pub(super) fn secs(d: Duration) -> String {
    format!("{:.1}s", d.as_secs_f64())
}
