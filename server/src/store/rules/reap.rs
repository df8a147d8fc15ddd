//! Seats that lapsed long enough ago leave the table; after an outage,
//! seats that nobody could renew get time to; live counts by the one
//! predicate.

use std::time::Duration;

use leasehold_common::api::{EventKind, SessionEnd};
use leasehold_common::liveness::live_until;
use leasehold_common::{Timestamp, live_threshold, reap_cutoff};

use super::{EndedSession, LeaseTx, Result, Rules, reap_detail};
use crate::store::{LeaseRow, PoolCounts, Scope, SeatMode};

impl<T: LeaseTx> Rules<'_, T> {
    /// Reap: delete up to `limit` leases that are reapable by the one
    /// predicate, with one `reap` event each, then prune ended blocks and old
    /// events. Leases of a license no longer in the licenses file are left
    /// alone: without its policy there is no grace to judge them by.
    /// Idle seats are reclaimed first (see [`super::idle`]), within the
    /// same `limit`.
    pub fn reap(&mut self, limit: usize, event_retention: i64) -> Result<usize> {
        let mut reaped = self.reclaim_idle(limit)?;
        for lic in self.licenses.iter() {
            if reaped >= limit {
                break;
            }
            let cutoff = reap_cutoff(self.now, lic.policy.reap_grace);
            let gone = self.tx.reap_expired(&lic.id, cutoff, limit - reaped)?;
            self.record_reaped(&gone, lic.policy.skew)?;
            reaped += gone.len();
        }
        self.tx.prune(self.now, event_retention)?;
        Ok(reaped)
    }

    /// Reaped seats lapsed (or ended their linger): each session ended when
    /// its lease stopped being live, and each gets a `reap` event.
    fn record_reaped(&mut self, gone: &[LeaseRow], skew: Duration) -> Result<()> {
        if gone.is_empty() {
            return Ok(());
        }
        let sessions: Vec<EndedSession<'_>> = gone
            .iter()
            .map(|lease| EndedSession {
                lease,
                // A lingering seat was released; it stopped counting now.
                end: match lease.mode {
                    SeatMode::Linger => SessionEnd::Release,
                    SeatMode::Heartbeat | SeatMode::Borrow => SessionEnd::Lapse,
                },
                at: live_until(lease.expires_at, skew),
            })
            .collect();
        self.tx.record_sessions(&sessions)?;
        self.close_idle_periods(&sessions)?;
        let details: Vec<String> = gone.iter().map(|l| reap_detail(l.expires_at)).collect();
        self.seat_events(EventKind::Reap, gone, &details)
    }

    /// The outage rule: after a gap in which nobody could renew, every lease
    /// that was live when the gap began (`last_alive`) gets at least one TTL
    /// from now. Returns how many leases it extended.
    pub fn outage(&mut self, last_alive: Timestamp) -> usize {
        let mut extended = 0;
        for lic in self.licenses.iter() {
            let cap = super::effective(self.licenses, lic, self.now).lease_cap();
            let renewed_until = self.now.saturating_add(lic.policy.ttl);
            let renewed_until = cap.map_or(renewed_until, |cap| renewed_until.min(cap));
            let was_live = live_threshold(last_alive, lic.policy.skew);
            // Lingering and borrowed seats keep their expiry: nobody was
            // kept from renewing them.
            let kept = SeatMode::Heartbeat;
            match self.tx.extend_live(&lic.id, was_live, renewed_until, kept) {
                Ok(n) => extended += n,
                Err(e) => tracing::error!("store: outage extension for {}: {e}", lic.id),
            }
        }
        extended
    }

    /// What counts against each license's pool, by the one predicate.
    pub fn live_counts(&mut self) -> Result<Vec<(String, PoolCounts)>> {
        let licenses = self.licenses;
        licenses
            .iter()
            .map(|l| {
                let threshold = live_threshold(self.now, l.policy.skew);
                let license_id = l.id.as_str();
                let mut count = |scope| self.tx.live_count(scope, threshold);
                let mode = |mode| Scope::Mode { license_id, mode };
                let counts = PoolCounts {
                    live: count(Scope::License(license_id))?,
                    lingering: count(mode(SeatMode::Linger))?,
                    borrowed: count(mode(SeatMode::Borrow))?,
                    groups: l
                        .groups
                        .iter()
                        .map(|g| {
                            let scope = Scope::Group {
                                license_id,
                                group: &g.name,
                            };
                            Ok((g.name.clone(), count(scope)?))
                        })
                        .collect::<Result<_>>()?,
                };
                Ok((l.id.clone(), counts))
            })
            .collect()
    }
}
