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

/// The writer's decision clock: it never runs back, never stands still,
/// and is never before a floor (the newest `iat` of an entitlement that
/// loaded). When the wall clock reads behind the last decision, time goes
/// on from that decision by the monotonic clock: a clock set back a day
/// before a term ends must not stop the term's end for a day.
#[derive(Debug, Clone, Copy)]
pub struct DecisionClock {
    last: Timestamp,
    last_at: std::time::Instant,
}

impl DecisionClock {
    /// Goes on from `last` (the store's last known decision).
    pub fn new(last: Timestamp) -> Self {
        DecisionClock {
            last,
            last_at: std::time::Instant::now(),
        }
    }

    /// The decision time when the wall clock reads `wall`.
    pub fn now(&mut self, wall: Timestamp, floor: Timestamp) -> Timestamp {
        self.at(wall, floor, std::time::Instant::now())
    }

    fn at(&mut self, wall: Timestamp, floor: Timestamp, instant: std::time::Instant) -> Timestamp {
        let t = if wall >= self.last {
            wall
        } else {
            self.last
                .saturating_add(instant.saturating_duration_since(self.last_at))
        };
        let t = t.max(floor).max(self.last);
        self.last = t;
        self.last_at = instant;
        t
    }

    /// How far the wall clock reads behind the last decision (0 if not).
    pub fn wall_behind(&self, wall: Timestamp) -> Duration {
        Duration::from_millis(self.last.millis_since(wall).max(0) as u64)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use super::*;

    #[test]
    fn the_decision_clock_goes_on_when_the_wall_clock_steps_back() {
        let start = Instant::now();
        let t = |ms: i64| Timestamp::from_millis(ms);
        let floor = t(0);
        let mut clock = DecisionClock {
            last: t(1_000_000),
            last_at: start,
        };
        // The wall clock ahead: it decides.
        assert_eq!(clock.at(t(1_000_500), floor, start), t(1_000_500));
        // Set back a day: time goes on by the monotonic clock, never stands.
        let later = start + Duration::from_millis(200);
        assert_eq!(clock.at(t(913_600), floor, later), t(1_000_700));
        let later = later + Duration::from_millis(300);
        assert_eq!(clock.at(t(913_900), floor, later), t(1_001_000));
        assert_eq!(clock.wall_behind(t(913_900)), Duration::from_millis(87_100));
        // The wall clock catches up: it decides again.
        assert_eq!(clock.at(t(1_002_000), floor, later), t(1_002_000));
        // Never before the floor.
        assert_eq!(clock.at(t(1_002_001), t(5_000_000), later), t(5_000_000));
    }
}
