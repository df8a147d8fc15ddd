//! Each pool's recent use, for the pools pane: the peak per minute over the
//! last hour (drawn as a sparkline) and the denials since 00:00 UTC.
//!
//! The event loop fetches it every 30 s, apart from the 1 s poll (a usage
//! query costs the server more than a seat list). An update
//! ([`UsageUpdate`]) carries what arrived; a part that failed is `None` and
//! leaves the last data in place, like a failed poll does.

use leasehold_common::text::sanitize_for_terminal;

use super::App;
use super::event::UsageUpdate;

/// How many one-minute buckets the sparkline covers.
pub const SPARK_MINUTES: usize = 60;

/// One minute of a pool's last hour.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Minute {
    /// Most sessions open at once in the minute.
    pub peak: u32,
    /// The pool size then, so each minute is scaled to its own pool (a
    /// pool grown mid-hour does not make the earlier minutes look empty).
    pub seats: u32,
}

/// What the pools pane knows of one pool's use.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PoolUsage {
    /// Oldest first, at most [`SPARK_MINUTES`]; `None` until it arrives.
    pub last_hour: Option<Vec<Minute>>,
    pub denials_today: Option<u64>,
}

impl App {
    /// The usage known for a pool (keyed by its sanitized id, as shown).
    pub fn pool_usage(&self, license_id: &str) -> Option<&PoolUsage> {
        self.usage.get(license_id)
    }

    /// Is there usage for any pool? (The pools pane adds its columns then.)
    pub fn has_usage(&self) -> bool {
        !self.usage.is_empty()
    }

    pub(super) fn apply_usage(&mut self, u: UsageUpdate) {
        // The same id the pool rows carry, sanitized on arrival.
        let id = sanitize_for_terminal(&u.license_id).into_owned();
        let entry = self.usage.entry(id).or_default();
        if let Some(points) = u.last_hour {
            let skip = points.len().saturating_sub(SPARK_MINUTES);
            entry.last_hour = Some(
                points[skip..]
                    .iter()
                    .map(|p| Minute {
                        peak: p.peak,
                        seats: p.seats,
                    })
                    .collect(),
            );
        }
        if let Some(d) = u.denials_today {
            entry.denials_today = Some(d);
        }
    }
}

#[cfg(test)]
mod tests {
    use leasehold_common::api::UsagePoint;

    use super::super::AppEvent;
    use super::super::test_support::*;
    use super::*;

    fn point(i: i64, peak: u32) -> UsagePoint {
        UsagePoint {
            t: ts(i * 60),
            seats: 3,
            peak,
            over_s: 0.0,
            checkouts: 0,
            denials: 0,
            denials_by_reason: Default::default(),
            true_denials: 0,
        }
    }

    fn update(id: &str, peaks: Option<&[u32]>, denials: Option<u64>) -> AppEvent {
        AppEvent::Usage(Box::new(UsageUpdate {
            license_id: id.into(),
            last_hour: peaks.map(|p| {
                p.iter()
                    .enumerate()
                    .map(|(i, &v)| point(i as i64, v))
                    .collect()
            }),
            denials_today: denials,
        }))
    }

    #[test]
    fn a_failed_part_keeps_the_last_data() {
        let mut app = loaded_app();
        assert!(!app.has_usage());
        app.update(update("demo-cad", Some(&[0, 1, 3]), Some(2)), ts(0));
        app.update(update("demo-cad", None, Some(5)), ts(30));
        let u = app.pool_usage("demo-cad").unwrap();
        assert_eq!(u.denials_today, Some(5));
        let peaks: Vec<u32> = u
            .last_hour
            .as_ref()
            .unwrap()
            .iter()
            .map(|m| m.peak)
            .collect();
        assert_eq!(peaks, [0, 1, 3]);
        app.update(update("demo-cad", Some(&[2]), None), ts(60));
        let u = app.pool_usage("demo-cad").unwrap();
        assert_eq!(u.denials_today, Some(5));
        assert_eq!(u.last_hour.as_ref().unwrap().len(), 1);
    }

    #[test]
    fn only_the_last_hour_is_kept_and_ids_are_sanitized() {
        let mut app = loaded_app();
        let many: Vec<u32> = (0..70).collect();
        app.update(update("x\u{1b}", Some(&many), None), ts(0));
        let u = app.pool_usage("x\u{fffd}").unwrap();
        let hour = u.last_hour.as_ref().unwrap();
        assert_eq!(hour.len(), SPARK_MINUTES);
        assert_eq!(hour[0].peak, 10, "the oldest ten dropped");
        assert_eq!(u.denials_today, None);
    }

    #[test]
    fn frozen_holds_usage_back() {
        let mut app = loaded_app();
        app.update(ch('f'), ts(0));
        app.update(update("demo-cad", Some(&[1]), Some(1)), ts(0));
        assert!(app.pool_usage("demo-cad").is_none());
        app.update(ch('f'), ts(1));
        assert_eq!(app.pool_usage("demo-cad").unwrap().denials_today, Some(1));
    }
}
