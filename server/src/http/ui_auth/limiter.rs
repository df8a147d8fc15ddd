//! The failed-login limiter: after `max_failures` (`--auth-failures`, by
//! default [`DEFAULT_AUTH_FAILURES`]) within [`FAILURE_WINDOW`] from one
//! client address, every login from it is `429` with `Retry-After` until
//! the oldest failure ages out. The count is per server process (each
//! replica counts its own), in memory.

use std::collections::{HashMap, VecDeque};
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::config::DEFAULT_AUTH_FAILURES;

/// The window the failures of one address are counted in.
pub const FAILURE_WINDOW: Duration = Duration::from_secs(60);
/// Client addresses the limiter remembers at most (beyond that, the ones
/// with the oldest failures are forgotten first), so a flood of addresses
/// cannot grow it without bound.
const MAX_TRACKED: usize = 65_536;

/// Failed sign-ins per client address, in a sliding window.
pub struct LoginLimiter {
    failures: Mutex<HashMap<IpAddr, VecDeque<Instant>>>,
    max_failures: usize,
}

impl Default for LoginLimiter {
    fn default() -> Self {
        LoginLimiter::new(DEFAULT_AUTH_FAILURES)
    }
}

impl LoginLimiter {
    /// At most `max_failures` (at least 1) per address per window.
    pub fn new(max_failures: usize) -> Self {
        LoginLimiter {
            failures: Mutex::default(),
            max_failures: max_failures.max(1),
        }
    }

    /// How long `client` must wait, if it has failed too often.
    pub fn blocked(&self, client: IpAddr, now: Instant) -> Option<Duration> {
        let mut map = self.failures.lock().unwrap_or_else(|p| p.into_inner());
        let times = map.get_mut(&client)?;
        forget_old(times, now);
        if times.is_empty() {
            map.remove(&client);
            return None;
        }
        if times.len() < self.max_failures {
            return None;
        }
        let oldest = *times.front()?;
        let wait = FAILURE_WINDOW.saturating_sub(now.duration_since(oldest));
        // Whole seconds, rounded up.
        Some(Duration::from_secs(
            wait.as_millis().div_ceil(1000).max(1) as u64
        ))
    }

    pub fn failed(&self, client: IpAddr, now: Instant) {
        let mut map = self.failures.lock().unwrap_or_else(|p| p.into_inner());
        if map.len() >= MAX_TRACKED && !map.contains_key(&client) {
            map.retain(|_, times| {
                forget_old(times, now);
                !times.is_empty()
            });
            if map.len() >= MAX_TRACKED
                && let Some(stalest) = map
                    .iter()
                    .min_by_key(|(_, t)| t.back().copied())
                    .map(|(ip, _)| *ip)
            {
                map.remove(&stalest);
            }
        }
        let times = map.entry(client).or_default();
        forget_old(times, now);
        times.push_back(now);
        while times.len() > self.max_failures {
            times.pop_front();
        }
    }
}

fn forget_old(times: &mut VecDeque<Instant>, now: Instant) {
    while times
        .front()
        .is_some_and(|t| now.duration_since(*t) >= FAILURE_WINDOW)
    {
        times.pop_front();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_limiter_blocks_after_ten_failures_for_the_rest_of_the_minute() {
        let l = LoginLimiter::default();
        let ip: IpAddr = "192.0.2.1".parse().unwrap();
        let other: IpAddr = "192.0.2.2".parse().unwrap();
        let t0 = Instant::now();
        for i in 0..DEFAULT_AUTH_FAILURES {
            assert_eq!(l.blocked(ip, t0), None, "after {i}");
            l.failed(ip, t0 + Duration::from_secs(i as u64));
        }
        let now = t0 + Duration::from_secs(20);
        assert_eq!(l.blocked(ip, now), Some(Duration::from_secs(40)));
        assert_eq!(l.blocked(other, now), None, "per address");
        assert_eq!(l.blocked(ip, t0 + Duration::from_secs(60)), None);
    }
}
