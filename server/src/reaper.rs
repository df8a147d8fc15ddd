//! Background housekeeping: the reaper (leases, usage history, ended
//! dashboard sign-ins) and the alive tick.
//!
//! The reaper deletes leases that are reapable by the one predicate
//! (`now > expires_at + reap_grace`), in batches sized to hold the writer
//! for a few milliseconds at most, and the store writes one `reap` event per
//! seat. It is a small loop that logs failures and carries on.
//!
//! The alive tick wakes the writer at least every second, so a pause of the whole
//! process (SIGSTOP, a frozen VM, a clock jump) shows up as a gap the writer
//! can see and answer with the outage rule before anything is reaped.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use tokio::sync::watch;
use tokio::time::MissedTickBehavior;

use leasehold_common::policy::AlertCondition;

use crate::clock::SharedClock;
use crate::licenses::LicensesHandle;
use crate::line::Lines;
use crate::metrics::Metrics;
use crate::sign_ins::SignIns;
use crate::store::{Ahead, Waiter};
use crate::store::{Store, StoreError};

/// The first reap batch of a run.
pub const REAP_BATCH: usize = 250;

/// The smallest reap batch. In a bulk reap of a million lapsed leases a
/// lease costs the writer ≈ 100 µs (a random page in each of five B-trees),
/// so [`REAP_BATCH`] of them would hold it for 25 ms, four times
/// [`REAP_STALL`]; below a few dozen, a commit's sync is paid for too few.
pub const REAP_BATCH_MIN: usize = 32;

/// The largest reap batch.
pub const REAP_BATCH_MAX: usize = 4_000;

/// About how long one reap transaction may hold the writer: a checkout that
/// arrives meanwhile waits for it.
pub const REAP_STALL: Duration = Duration::from_millis(6);

/// The size of the next reap batch, from how long the last one took per
/// lease: each commit's fixed cost (the sync, the page cache's truncation)
/// is spread over as many leases as fit in [`REAP_STALL`]. Grows or shrinks
/// at most twofold per batch, so one slow or fast batch does not swing it.
/// The time is the reaper's wait, queued checkouts included: a busy writer
/// gets smaller reap batches.
#[derive(Debug, Clone, Copy)]
pub struct ReapBatch {
    pub limit: usize,
}

impl Default for ReapBatch {
    fn default() -> Self {
        ReapBatch { limit: REAP_BATCH }
    }
}

impl ReapBatch {
    /// After a batch that reaped `reaped` leases in `took`.
    pub fn after(&mut self, reaped: usize, took: Duration) {
        if reaped == 0 {
            return;
        }
        let per_lease = took.as_nanos() / reaped as u128;
        let fits = REAP_STALL.as_nanos() / per_lease.max(1);
        let fits = usize::try_from(fits).unwrap_or(usize::MAX);
        self.limit = fits
            .clamp(self.limit / 2, self.limit.saturating_mul(2))
            .clamp(REAP_BATCH_MIN, REAP_BATCH_MAX);
    }
}

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
    let mut batch = ReapBatch::default();
    loop {
        let limit = batch.limit;
        let started = Instant::now();
        let n = store.reap(limit).await?;
        batch.after(n, started.elapsed());
        total += n;
        batch_done(n);
        if n < limit {
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

/// Delete dashboard sign-ins that have ended (idle too long or past their
/// lifetime), every `period`.
pub async fn run_sign_in_reaper(
    store: Store,
    sign_ins: SignIns,
    clock: SharedClock,
    period: Duration,
    shutdown: watch::Receiver<bool>,
) {
    every(period, shutdown, || async {
        match sign_ins.expire(&store, clock.now()).await {
            Ok(0) => {}
            Ok(n) => tracing::debug!("deleted {n} ended dashboard sign-in(s)"),
            Err(e) => tracing::warn!("dashboard sign-ins: {e}; will retry"),
        }
    })
    .await;
}

/// Wake the writer often enough that an ordinary idle gap never looks like a
/// stall: at least three ticks per stall threshold, and at least one a second.
/// The tick also evaluates the alerts; a `full` alert counts the waiters
/// in line as spoken for, and on SQLite the line lives here, not in the
/// store.
pub async fn run_alive_tick(
    store: Store,
    lines: AlertLines,
    stall_threshold: Duration,
    shutdown: watch::Receiver<bool>,
) {
    let period = (stall_threshold / 3).clamp(Duration::from_millis(50), Duration::from_secs(1));
    every(period, shutdown, || async {
        if let Err(e) = store.tick_with_waiters(lines.waiting()).await {
            tracing::debug!("alive tick: {e}");
        }
    })
    .await;
}

/// Where the tick finds the waiting lines of licenses with a `full` alert.
pub struct AlertLines {
    pub lines: Arc<Lines>,
    pub licenses: LicensesHandle,
}

impl AlertLines {
    /// The server's own non-empty lines of licenses with a `full` alert (a
    /// shared line, on PostgreSQL, the writer reads from the store).
    fn waiting(&self) -> HashMap<String, Vec<Waiter>> {
        let licenses = self.licenses.current();
        licenses
            .alerts()
            .filter(|(_, a)| matches!(a.condition, AlertCondition::Full { .. }))
            .filter_map(|(l, _)| match self.lines.ahead_of_newcomer(&l.id) {
                Ahead::Waiters(w) if !w.is_empty() => Some((l.id.clone(), w)),
                _ => None,
            })
            .collect()
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fast_batch_grows_the_next_at_most_twofold_up_to_the_cap() {
        let mut batch = ReapBatch::default();
        // 1 µs a lease: 6,000 would fit, the step allows 500.
        batch.after(REAP_BATCH, Duration::from_micros(250));
        assert_eq!(batch.limit, 2 * REAP_BATCH);
        for _ in 0..10 {
            batch.after(batch.limit, Duration::from_micros(batch.limit as u64));
        }
        assert_eq!(batch.limit, REAP_BATCH_MAX);
    }

    #[test]
    fn a_slow_batch_shrinks_the_next_to_what_fits_but_never_below_the_floor() {
        let mut batch = ReapBatch { limit: 2_000 };
        // 4 µs a lease: 1,500 fit in the 6 ms.
        batch.after(2_000, Duration::from_millis(8));
        assert_eq!(batch.limit, 1_500);
        batch.after(1_500, Duration::from_secs(1));
        assert_eq!(batch.limit, 750, "at most halved");
        for _ in 0..10 {
            batch.after(batch.limit, Duration::from_secs(1));
        }
        assert_eq!(batch.limit, REAP_BATCH_MIN);
    }

    #[test]
    fn an_empty_batch_leaves_the_size_alone() {
        let mut batch = ReapBatch { limit: 1_000 };
        batch.after(0, Duration::from_millis(50));
        assert_eq!(batch.limit, 1_000);
    }
}
