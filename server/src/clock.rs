//! The server's clock, behind a trait so tests can move time by hand instead of
//! sleeping through TTLs.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use leasehold_common::Timestamp;
use leasehold_common::time::duration_millis;

pub trait Clock: Send + Sync + 'static {
    fn now(&self) -> Timestamp;
}

pub type SharedClock = Arc<dyn Clock>;

/// Wall-clock time. Leases are signed on the server's own clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Timestamp {
        let ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(duration_millis)
            .unwrap_or(0);
        Timestamp::from_millis(ms)
    }
}

/// A clock that only moves when told to.
#[derive(Debug)]
pub struct ManualClock(AtomicI64);

impl ManualClock {
    pub fn new(start: Timestamp) -> Arc<Self> {
        Arc::new(ManualClock(AtomicI64::new(start.as_millis())))
    }

    pub fn advance(&self, d: Duration) {
        self.0.fetch_add(duration_millis(d), Ordering::SeqCst);
    }

    pub fn set(&self, t: Timestamp) {
        self.0.store(t.as_millis(), Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Timestamp {
        Timestamp::from_millis(self.0.load(Ordering::SeqCst))
    }
}
