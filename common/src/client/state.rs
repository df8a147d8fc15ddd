//! `KeeperState`: what a [`super::LeaseKeeper`] is doing, as published on its
//! watch channel. Plain data, so the pure [`super::machine`] can produce it
//! without depending on the I/O driver.

use crate::api::Lease;
use std::time::Duration;

/// What the keeper is doing, as published on its watch channel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeeperState {
    /// No seat yet, or the seat was lost (410: revoked, reaped), or the
    /// user came back after an idle reclaim: checking out.
    Acquiring,
    /// Holding this verified lease. It stays `Held` through transient
    /// failures (server down, timeouts, 5xx) for as long as the lease is
    /// valid; the lease is replaced by each successful heartbeat. A borrowed
    /// lease (`borrowed: true`) is held without heartbeats until it ends.
    Held(Lease),
    /// The pool is full, or the holder or its group at its cap (409):
    /// checking out again after `retry_after`.
    Waiting { retry_after: Duration },
    /// The held lease has expired by the local clock and renewing or
    /// re-acquiring it failed. Still trying; this is when to degrade.
    Lapsed,
    /// The server reclaimed the seat because the user was idle for the
    /// license's `idle_timeout` (410 `seat_lost`, reason `idle`; `message`
    /// is the server's, naming the timeout). No seat is taken again until
    /// the next [`super::LeaseKeeper::activity`]: then `Acquiring` (and
    /// `Waiting` if the pool filled meanwhile). Not terminal.
    Reclaimed { message: String },
    /// An admin revoked the seat and blocked re-checkout (403). Stopped.
    Blocked {
        retry_after: Option<Duration>,
        message: String,
    },
    /// A permanent error: wrong key, unknown license, rejected request, a
    /// lease that is not entitled (vendor keys pinned: the seat was
    /// released). Stopped; [`super::LeaseKeeper::error`] has the error.
    Failed(String),
    /// Shut down; the seat was released (a borrowed seat stays out until
    /// it is given back or expires).
    Stopped,
}

impl KeeperState {
    pub fn is_held(&self) -> bool {
        matches!(self, KeeperState::Held(_))
    }

    pub fn lease(&self) -> Option<&Lease> {
        match self {
            KeeperState::Held(l) => Some(l),
            _ => None,
        }
    }

    /// The keeper has stopped trying.
    pub fn is_terminal(&self) -> bool {
        matches!(
            self,
            KeeperState::Blocked { .. } | KeeperState::Failed(_) | KeeperState::Stopped
        )
    }
}
