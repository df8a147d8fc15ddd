//! [`KeeperStats`]: what a [`super::LeaseKeeper`] has done since it started,
//! counted by its task and read by the application.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

/// Counters since start, for metrics and tests.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct KeeperStats {
    /// Checkouts granted (first acquisition and every re-acquisition).
    pub checkouts: u64,
    /// Heartbeats that renewed the lease.
    pub heartbeats: u64,
    /// Requests that failed transiently or returned an invalid lease.
    pub failures: u64,
    /// 410s: the server no longer held the seat (idle reclaims included).
    pub seats_lost: u64,
    /// Of those, reclaims for idleness (410 reason `idle`).
    pub reclaims: u64,
    /// Transitions into `Lapsed`.
    pub lapses: u64,
    /// Borrows granted by [`super::LeaseKeeper::borrow`].
    pub borrows: u64,
    /// Chain checks begun (with vendor keys pinned): one after each
    /// checkout and borrow, and each re-check.
    pub entitlement_checks: u64,
    /// The instant (ms, the keeper's clock) it sleeps until before it next
    /// sends anything, while it sleeps; `None` while it works or waits for
    /// activity. A plan, so a test can see that no request is due before
    /// then without waiting to see none sent.
    pub quiet_until_ms: Option<i64>,
}

#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub checkouts: AtomicU64,
    pub heartbeats: AtomicU64,
    pub failures: AtomicU64,
    pub seats_lost: AtomicU64,
    pub reclaims: AtomicU64,
    pub lapses: AtomicU64,
    pub borrows: AtomicU64,
    pub entitlement_checks: AtomicU64,
    /// `KeeperStats::quiet_until_ms`; 0: none.
    pub quiet_until_ms: AtomicI64,
}

impl Counters {
    pub fn snapshot(&self) -> KeeperStats {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        KeeperStats {
            checkouts: get(&self.checkouts),
            heartbeats: get(&self.heartbeats),
            failures: get(&self.failures),
            seats_lost: get(&self.seats_lost),
            reclaims: get(&self.reclaims),
            lapses: get(&self.lapses),
            borrows: get(&self.borrows),
            entitlement_checks: get(&self.entitlement_checks),
            quiet_until_ms: Some(self.quiet_until_ms.load(Ordering::Relaxed)).filter(|&ms| ms != 0),
        }
    }
}

pub(crate) fn bump(c: &AtomicU64) {
    c.fetch_add(1, Ordering::Relaxed);
}
