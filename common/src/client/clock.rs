//! The keeper's local clock.
//!
//! The keeper only ever measures *elapsed* local time (from sending a request
//! to now) and compares it with the lease's own window, so a constant offset
//! of this clock from the server's has no effect. Tests prove that by running
//! keepers on a clock shifted by hours.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::time::{Timestamp, duration_millis};

/// Local time as the keeper sees it.
pub trait LocalClock: Send + Sync + 'static {
    fn now(&self) -> Timestamp;
}

/// The machine's wall clock read once at construction and advanced by the
/// monotonic clock from then on, plus a fixed offset (zero unless a test asks).
///
/// Advancing by `Instant` means an NTP step or a user changing the date while
/// a lease is held cannot stretch the keeper's idea of how long the lease has
/// left: the lease is measured in elapsed time, which only moves forward.
#[derive(Debug, Clone)]
pub struct SystemClock {
    base_wall: Timestamp,
    base: Instant,
    offset_ms: i64,
}

impl SystemClock {
    pub fn new() -> Self {
        let ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(duration_millis)
            .unwrap_or(0);
        SystemClock {
            base_wall: Timestamp::from_millis(ms),
            base: Instant::now(),
            offset_ms: 0,
        }
    }

    /// A clock running `d` ahead of the machine's.
    pub fn ahead(d: Duration) -> Self {
        let mut c = SystemClock::new();
        c.offset_ms = duration_millis(d);
        c
    }

    /// A clock running `d` behind the machine's.
    pub fn behind(d: Duration) -> Self {
        let mut c = SystemClock::new();
        c.offset_ms = -duration_millis(d);
        c
    }
}

impl Default for SystemClock {
    fn default() -> Self {
        SystemClock::new()
    }
}

impl LocalClock for SystemClock {
    fn now(&self) -> Timestamp {
        let elapsed = duration_millis(self.base.elapsed());
        Timestamp::from_millis(
            self.base_wall
                .as_millis()
                .saturating_add(elapsed)
                .saturating_add(self.offset_ms),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_shift_the_reading_and_time_moves_forward() {
        let real = SystemClock::new();
        let fast = SystemClock::ahead(Duration::from_secs(3600));
        let slow = SystemClock::behind(Duration::from_secs(3600));
        let (r, f, s) = (real.now(), fast.now(), slow.now());
        assert!((f.millis_since(r) - 3_600_000).abs() < 1_000);
        assert!((r.millis_since(s) - 3_600_000).abs() < 1_000);
        let later = real.now();
        assert!(later >= r);
    }
}
