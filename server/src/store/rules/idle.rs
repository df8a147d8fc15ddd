//! Idle reclaim: a heartbeat proves that a process is alive, not that
//! anyone uses it. A client may report in its heartbeat how long its user
//! has been idle (`idle_s`, on its own clock); a seat idle for its
//! license's `idle_timeout` goes back to the pool, at the heartbeat that
//! shows it or by the reaper's next sweep, and its session ends `idle` at
//! the instant the timeout was reached.
//!
//! The seat keeps only `idle_since` (written with the heartbeat that
//! reports it, no write of its own); an idle period of at least
//! [`MIN_RECORDED_IDLE`] is written to the history once, when it ends: the
//! user came back, or the session ended.

use std::time::Duration;

use leasehold_common::api::{EventKind, SessionEnd};
use leasehold_common::policy::format_duration;
use leasehold_common::{LicenseConfig, Timestamp, is_live, live_threshold};

use super::{EndedSession, IdlePeriod, LeaseTx, Result, Rules};
use crate::store::{LeaseRow, SeatMode};

/// Shorter idle periods are not history: a user reading a page is not idle.
pub const MIN_RECORDED_IDLE: Duration = Duration::from_secs(60);

/// A report whose idle start is this much later than the last one's means
/// the user came back (reports are whole seconds on another clock).
const CAME_BACK_AFTER_MS: i64 = 2_000;

/// Only seats kept by heartbeats are ever idle: borrowed seats send none,
/// and a lingering seat was released.
const REPORTED_BY: SeatMode = SeatMode::Heartbeat;

/// What one heartbeat's report makes of a seat's idleness.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IdleReport {
    /// The seat's idle start from now on (`None`: active).
    pub idle_since: Option<Timestamp>,
    /// The idle period that ended at this report: its user came back.
    pub ended: Option<(Timestamp, Timestamp)>,
    /// The seat is reclaimed as of this instant: its user had then been
    /// idle for the timeout.
    pub reclaim_at: Option<Timestamp>,
}

/// The rule, as a pure function of the seat's last idle start, its
/// checkout, the report (`None` or zero: the user is active), the server's
/// `now`, since when idle time counts (the last outage's end; see
/// [`reclaim_instant`]) and the license's timeout.
pub fn after_report(
    prev: Option<Timestamp>,
    checked_out_at: Timestamp,
    idle: Option<Duration>,
    (now, counted_from): (Timestamp, Timestamp),
    timeout: Option<Duration>,
) -> IdleReport {
    let reclaim = |since: Timestamp| {
        timeout
            .map(|t| reclaim_instant(since, counted_from, t))
            .filter(|at| *at <= now)
    };
    // The timeout was reached in the idle period in force, before this
    // report: activity reported now comes too late.
    if let Some(at) = prev.and_then(reclaim) {
        return IdleReport {
            idle_since: prev,
            ended: None,
            reclaim_at: Some(at),
        };
    }
    let reported = idle
        .filter(|d| !d.is_zero())
        .map(|d| now.saturating_sub(d).max(checked_out_at));
    let (idle_since, ended) = match (prev, reported) {
        (Some(p), Some(s)) if s.millis_since(p) <= CAME_BACK_AFTER_MS => (Some(p.min(s)), None),
        // Came back: the period ends where the report says the new one
        // began (at the report itself when the user is active now).
        (Some(p), s) => (s, Some((p, s.unwrap_or(now)))),
        (None, s) => (s, None),
    };
    IdleReport {
        idle_since,
        ended,
        reclaim_at: idle_since.and_then(reclaim),
    }
}

/// When a seat idle since `since` is reclaimed: `timeout` of idle time,
/// counting none before `counted_from` (the end of an outage, during which
/// a user who came back could not say so: outages don't evict).
pub fn reclaim_instant(since: Timestamp, counted_from: Timestamp, timeout: Duration) -> Timestamp {
    since.max(counted_from).saturating_add(timeout)
}

impl<T: LeaseTx> Rules<'_, T> {
    /// Reclaim `row` (live, idle since `row.idle_since`) as of `at`: it
    /// leaves the table at once, its session ends `idle` at `at`, and no
    /// linger follows.
    pub(super) fn reclaim(
        &mut self,
        lic: &LicenseConfig,
        row: &LeaseRow,
        at: Timestamp,
    ) -> Result<()> {
        if self
            .tx
            .delete_lease(&row.seat_id, Some(&row.license_id))?
            .is_none()
        {
            return Ok(());
        }
        self.record_reclaims(lic, std::slice::from_ref(row), &[at])
    }

    /// The reaper's half: every seat of a license with an `idle_timeout`
    /// whose user has been idle that long, live until then, is reclaimed
    /// (at most `limit` in all). Returns how many.
    pub(super) fn reclaim_idle(&mut self, limit: usize) -> Result<usize> {
        let mut reclaimed = 0;
        for lic in self.licenses.iter() {
            let Some(timeout) = lic.policy.idle_timeout else {
                continue;
            };
            if reclaimed >= limit {
                break;
            }
            let idle_before = self.now.saturating_sub(timeout);
            let threshold = live_threshold(self.now, lic.policy.skew);
            let seats = self.tx.idle_seats(
                &lic.id,
                REPORTED_BY,
                idle_before,
                threshold,
                limit - reclaimed,
            )?;
            let mut gone = Vec::with_capacity(seats.len());
            let mut at = Vec::with_capacity(seats.len());
            for seat in seats {
                let Some(since) = seat.idle_since else {
                    continue;
                };
                let instant = reclaim_instant(since, self.idle_counted_from, timeout);
                // Live at the instant the timeout was reached (it is live
                // now), so that instant, not a lapse, ended it.
                if instant <= self.now
                    && is_live(seat.expires_at, instant, lic.policy.skew)
                    && self
                        .tx
                        .delete_lease(&seat.seat_id, Some(&lic.id))?
                        .is_some()
                {
                    gone.push(seat);
                    at.push(instant);
                }
            }
            self.record_reclaims(lic, &gone, &at)?;
            reclaimed += gone.len();
        }
        Ok(reclaimed)
    }

    /// Sessions ended `idle`, their last idle periods, one `reclaim` event
    /// each.
    fn record_reclaims(
        &mut self,
        lic: &LicenseConfig,
        gone: &[LeaseRow],
        at: &[Timestamp],
    ) -> Result<()> {
        if gone.is_empty() {
            return Ok(());
        }
        let sessions: Vec<EndedSession<'_>> = gone
            .iter()
            .zip(at)
            .map(|(lease, &at)| EndedSession {
                lease,
                end: SessionEnd::Idle,
                at,
            })
            .collect();
        self.tx.record_sessions(&sessions)?;
        self.close_idle_periods(&sessions)?;
        let timeout = lic
            .policy
            .idle_timeout
            .map(format_duration)
            .unwrap_or_default();
        let details: Vec<String> = gone
            .iter()
            .map(|l| match l.idle_since {
                Some(since) => format!("idle since {since}: idle_timeout {timeout}"),
                None => format!("idle: idle_timeout {timeout}"),
            })
            .collect();
        self.seat_events(EventKind::Reclaim, gone, &details)
    }

    /// A session that ends closes its open idle period, if long enough.
    pub(super) fn close_idle_periods(&mut self, sessions: &[EndedSession<'_>]) -> Result<()> {
        let periods: Vec<IdlePeriod<'_>> = sessions
            .iter()
            .filter_map(|s| Some((s, s.lease.idle_since?)))
            .filter_map(|(s, from)| idle_period(s.lease, from, s.at))
            .collect();
        self.record_idle(&periods)
    }

    pub(super) fn record_idle(&mut self, periods: &[IdlePeriod<'_>]) -> Result<()> {
        if periods.is_empty() {
            return Ok(());
        }
        self.tx.record_idle_periods(periods)
    }
}

/// The period `from..to` of `lease`, if long enough to keep.
pub fn idle_period(lease: &LeaseRow, from: Timestamp, to: Timestamp) -> Option<IdlePeriod<'_>> {
    let long = u64::try_from(to.millis_since(from)).ok()? >= MIN_RECORDED_IDLE.as_millis() as u64;
    long.then_some(IdlePeriod {
        license_id: &lease.license_id,
        seat_id: &lease.seat_id,
        from,
        to,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: i64 = 1_000_000_000;
    fn at(s: i64) -> Timestamp {
        Timestamp::from_millis(T0 + s * 1000)
    }
    fn secs(s: u64) -> Option<Duration> {
        Some(Duration::from_secs(s))
    }
    const TIMEOUT: Option<Duration> = Some(Duration::from_secs(1800));

    #[test]
    fn an_active_report_keeps_the_seat_active() {
        let r = after_report(None, at(0), None, (at(100), at(0)), TIMEOUT);
        assert_eq!(
            r,
            IdleReport {
                idle_since: None,
                ended: None,
                reclaim_at: None
            }
        );
        let r = after_report(None, at(0), secs(0), (at(100), at(0)), TIMEOUT);
        assert_eq!(r.idle_since, None);
    }

    #[test]
    fn a_first_report_counts_its_whole_idle_time_but_not_before_checkout() {
        let r = after_report(None, at(0), secs(600), (at(1000), at(0)), TIMEOUT);
        assert_eq!(r.idle_since, Some(at(400)));
        let r = after_report(None, at(900), secs(600), (at(1000), at(0)), TIMEOUT);
        assert_eq!(r.idle_since, Some(at(900)));
    }

    #[test]
    fn reports_within_two_seconds_continue_the_period() {
        let r = after_report(Some(at(400)), at(0), secs(601), (at(1002), at(0)), TIMEOUT);
        assert_eq!(r.idle_since, Some(at(400)));
        assert_eq!(r.ended, None);
        let later = after_report(Some(at(400)), at(0), secs(597), (at(999), at(0)), TIMEOUT);
        assert_eq!(later.idle_since, Some(at(400)), "1 s of jitter");
    }

    #[test]
    fn coming_back_ends_the_period_at_the_report() {
        let r = after_report(Some(at(400)), at(0), None, (at(1000), at(0)), TIMEOUT);
        assert_eq!(r.idle_since, None);
        assert_eq!(r.ended, Some((at(400), at(1000))));
        // Came back and idle again for 5 s: the old period ends where the
        // new one starts.
        let r = after_report(Some(at(400)), at(0), secs(5), (at(1000), at(0)), TIMEOUT);
        assert_eq!(r.idle_since, Some(at(995)));
        assert_eq!(r.ended, Some((at(400), at(995))));
    }

    #[test]
    fn the_timeout_reclaims_at_the_instant_it_was_reached() {
        let r = after_report(None, at(0), secs(1800), (at(2000), at(0)), TIMEOUT);
        assert_eq!(r.reclaim_at, Some(at(2000)));
        let r = after_report(None, at(0), secs(1799), (at(2000), at(0)), TIMEOUT);
        assert_eq!(r.reclaim_at, None);
        // Reached before this report: activity comes too late.
        let r = after_report(Some(at(100)), at(0), None, (at(2000), at(0)), TIMEOUT);
        assert_eq!(r.reclaim_at, Some(at(1900)));
        // Idle time before an outage's end does not count.
        let r = after_report(
            Some(at(100)),
            at(0),
            secs(1900),
            (at(2000), at(1000)),
            TIMEOUT,
        );
        assert_eq!(r.reclaim_at, None);
        let r = after_report(
            Some(at(100)),
            at(0),
            secs(2700),
            (at(2800), at(1000)),
            TIMEOUT,
        );
        assert_eq!(r.reclaim_at, Some(at(2800)));
        // No timeout: never.
        let r = after_report(
            Some(at(100)),
            at(0),
            secs(99_999),
            (at(200_000), at(0)),
            None,
        );
        assert_eq!(r.reclaim_at, None);
    }

    #[test]
    fn only_periods_of_a_minute_are_kept() {
        let lease = LeaseRow {
            seat_id: "s".into(),
            license_id: "l".into(),
            holder: "h".into(),
            fingerprint: None,
            checked_out_at: at(0),
            issued_at: at(0),
            expires_at: at(60),
            group: None,
            mode: SeatMode::Heartbeat,
            idle_since: None,
        };
        assert!(idle_period(&lease, at(0), at(59)).is_none());
        assert_eq!(
            idle_period(&lease, at(0), at(60)).map(|p| (p.from, p.to)),
            Some((at(0), at(60)))
        );
    }
}
