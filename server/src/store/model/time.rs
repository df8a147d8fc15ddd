//! The model's clock: a start far from zero, offsets from it, and times
//! written as offsets for readable failures.

use std::fmt;
use std::time::Duration;

use leasehold_common::Timestamp;

/// An arbitrary start, far from zero so nothing saturates.
pub const T0: i64 = 1_700_000_000_000;

/// `ms_since_t0` after T0.
pub fn at(ms_since_t0: i64) -> Timestamp {
    Timestamp::from_millis(T0 + ms_since_t0)
}

pub fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// A time as an offset from T0, for readable failures.
pub struct Rel(pub Timestamp);

impl fmt::Display for Rel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let d = self.0.as_millis() - T0;
        write!(f, "T0{:+}ms", d)
    }
}
