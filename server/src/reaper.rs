//! Background housekeeping: the reaper (leases, usage history, ended
//! dashboard sessions) and the alive tick.
//!
//! The reaper deletes leases that are reapable by the one predicate
//! (`now > expires_at + reap_grace`), in bounded batches so it never holds
//! the writer for long, and the store writes one `reap` event per seat. It is
//! a small loop that logs failures and carries on.
//!
//! The alive tick wakes the writer at least every second, so a pause of the whole
//! process (SIGSTOP, a frozen VM, a clock jump) shows up as a gap the writer
//! can see and answer with the outage rule before anything is reaped.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::MissedTickBehavior;

use crate::clock::SharedClock;
use crate::metrics::Metrics;
use crate::store::{Store, StoreError};
use crate::ui_sessions::UiSessions;

/// Most leases deleted in one writer transaction: a concurrent checkout
/// waits at most about one such transaction (≈ 12 ms at 1,000,000 leases).
pub const REAP_BATCH: usize = 250;

pub async fn run_reaper(
    store: Store,
    metrics: Arc<Metrics>,
    period: Duration,
    shutdown: watch::Receiver<bool>,
) {
    every(period, shutdown, || async {
        let reaped = reap_backlog(&store, |n| {
            metrics.reaps.fetch_add(n as u64, Ordering::Relaxed);
            if n > 0 {
                tracing::info!("reaped {n} lapsed lease(s)");
            }
        })
        .await;
        if let Err(e) = reaped {
            tracing::warn!("reaper: {e}; will retry");
        }
        if let Err(e) = prune_history_backlog(&store).await {
            tracing::warn!("history pruning: {e}; will retry");
        }
    })
    .await;
}

/// Reap batch by batch until nothing reapable is left; `batch_done(n)` after
/// each batch. Between batches queued client requests go first. Returns how
/// many leases were reaped.
pub async fn reap_backlog(
    store: &Store,
    mut batch_done: impl FnMut(usize),
) -> Result<usize, StoreError> {
    let mut total = 0;
    loop {
        let n = store.reap(REAP_BATCH).await?;
        total += n;
        batch_done(n);
        if n < REAP_BATCH {
            return Ok(total);
        }
        tokio::task::yield_now().await;
    }
}

/// Most history rows (of each record) deleted in one writer transaction.
pub const PRUNE_BATCH: usize = 1000;

/// Prune usage history past its retention, batch by batch, yielding to
/// client requests between batches (like reaping).
pub async fn prune_history_backlog(store: &Store) -> Result<usize, StoreError> {
    let mut total = 0;
    loop {
        let n = store.prune_history(PRUNE_BATCH).await?;
        total += n;
        if n < PRUNE_BATCH {
            return Ok(total);
        }
        tokio::task::yield_now().await;
    }
}

/// Delete dashboard sessions that have ended (idle too long or past their
/// lifetime), every `period`.
pub async fn run_ui_session_reaper(
    store: Store,
    sessions: UiSessions,
    clock: SharedClock,
    period: Duration,
    shutdown: watch::Receiver<bool>,
) {
    every(period, shutdown, || async {
        match sessions.expire(&store, clock.now()).await {
            Ok(0) => {}
            Ok(n) => tracing::debug!("deleted {n} ended dashboard session(s)"),
            Err(e) => tracing::warn!("dashboard sessions: {e}; will retry"),
        }
    })
    .await;
}

/// Wake the writer often enough that an ordinary idle gap never looks like a
/// stall: at least three ticks per stall threshold, and at least one a second.
pub async fn run_alive_tick(
    store: Store,
    stall_threshold: Duration,
    shutdown: watch::Receiver<bool>,
) {
    let period = (stall_threshold / 3).clamp(Duration::from_millis(50), Duration::from_secs(1));
    every(period, shutdown, || async {
        if let Err(e) = store.tick().await {
            tracing::debug!("alive tick: {e}");
        }
    })
    .await;
}

/// Run `job` every `period` until shutdown. A late tick is not made up
/// (after a stall the job runs once, not once per missed period).
async fn every<F, Fut>(period: Duration, mut shutdown: watch::Receiver<bool>, mut job: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let mut interval = tokio::time::interval(period);
    interval.set_missed_tick_behavior(MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = interval.tick() => {}
            _ = shutdown.wait_for(|stop| *stop) => return,
        }
        job().await;
    }
}
