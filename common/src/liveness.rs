//! The one liveness predicate, and the one reapable predicate.
//!
//! A lease is **live** iff `now <= expires_at + skew`. The checkout counter, the
//! heartbeat check, the admin views and the reaper all go through this module;
//! the SQL in the server's store uses [`live_threshold`] and [`reap_cutoff`]
//! as bind parameters, so the rule is written exactly once, here.
//!
//! A lease is **reapable** iff `now > expires_at + reap_grace`. Policy
//! validation demands `reap_grace > skew`, so a reapable lease is never live:
//! the reaper can never delete a seat the counter would still count.

use std::time::Duration;

use crate::time::Timestamp;

/// The earliest `expires_at` that is still live at `now`: a lease is live iff
/// `expires_at >= live_threshold(now, skew)`, i.e. `now <= expires_at + skew`.
pub fn live_threshold(now: Timestamp, skew: Duration) -> Timestamp {
    now.saturating_sub(skew)
}

/// Is a lease expiring at `expires_at` live at `now`, allowing `skew`?
pub fn is_live(expires_at: Timestamp, now: Timestamp, skew: Duration) -> bool {
    expires_at >= live_threshold(now, skew)
}

/// Leases with `expires_at` strictly before this may be reaped at `now`.
pub fn reap_cutoff(now: Timestamp, reap_grace: Duration) -> Timestamp {
    now.saturating_sub(reap_grace)
}

/// May the reaper delete a lease expiring at `expires_at` at `now`?
pub fn is_reapable(expires_at: Timestamp, now: Timestamp, reap_grace: Duration) -> bool {
    expires_at < reap_cutoff(now, reap_grace)
}

/// The last millisecond at which a lease expiring at `expires_at` is live.
/// A seat whose lease lapsed held it until then: its session ends here.
pub fn live_until(expires_at: Timestamp, skew: Duration) -> Timestamp {
    expires_at.saturating_add(skew)
}

/// When does a lease expiring at `expires_at` stop being live? (The first
/// millisecond at which [`is_live`] is false, one after [`live_until`].)
/// Used for `Retry-After`.
pub fn lapses_at(expires_at: Timestamp, skew: Duration) -> Timestamp {
    live_until(expires_at, skew).saturating_add(Duration::from_millis(1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const SKEW: Duration = Duration::from_secs(5);
    const GRACE: Duration = Duration::from_secs(15);

    fn t(ms: i64) -> Timestamp {
        Timestamp::from_millis(ms)
    }

    #[test]
    fn live_up_to_and_including_expiry_plus_skew() {
        let expires = t(100_000);
        assert!(is_live(expires, t(90_000), SKEW), "before expiry");
        assert!(is_live(expires, t(100_000), SKEW), "at expiry");
        assert!(
            is_live(expires, t(105_000), SKEW),
            "boundary now == expires + skew"
        );
        assert!(!is_live(expires, t(105_001), SKEW), "one ms past the skew");
    }

    #[test]
    fn zero_skew_boundary() {
        assert!(is_live(t(10), t(10), Duration::ZERO));
        assert!(!is_live(t(10), t(11), Duration::ZERO));
    }

    #[test]
    fn reapable_only_strictly_after_expiry_plus_grace() {
        let expires = t(100_000);
        assert!(
            !is_reapable(expires, t(115_000), GRACE),
            "boundary is not reapable"
        );
        assert!(is_reapable(expires, t(115_001), GRACE));
    }

    #[test]
    fn lapses_at_is_the_first_non_live_instant() {
        let expires = t(100_000);
        let lapse = lapses_at(expires, SKEW);
        assert!(is_live(expires, t(lapse.as_millis() - 1), SKEW));
        assert!(!is_live(expires, lapse, SKEW));
    }

    #[test]
    fn saturates_instead_of_overflowing() {
        assert!(is_live(t(i64::MIN), t(i64::MIN), Duration::MAX));
        assert!(!is_reapable(t(i64::MAX), t(i64::MAX), Duration::ZERO));
    }

    proptest! {
        /// The invariant the whole design rests on: with reap_grace > skew,
        /// nothing the reaper may delete is still counted as live.
        #[test]
        fn reapable_is_never_live(
            expires in -1_000_000_000i64..1_000_000_000,
            now in -1_000_000_000i64..1_000_000_000,
            skew_ms in 0u64..100_000,
            extra_ms in 1u64..100_000,
        ) {
            let skew = Duration::from_millis(skew_ms);
            let grace = Duration::from_millis(skew_ms + extra_ms);
            prop_assert!(!(is_reapable(t(expires), t(now), grace) && is_live(t(expires), t(now), skew)));
        }

        #[test]
        fn threshold_agrees_with_the_definition(
            expires in -1_000_000_000i64..1_000_000_000,
            now in -1_000_000_000i64..1_000_000_000,
            skew_ms in 0i64..100_000,
        ) {
            let skew = Duration::from_millis(skew_ms as u64);
            prop_assert_eq!(is_live(t(expires), t(now), skew), now <= expires + skew_ms);
        }
    }
}
