//! The reaper and the outage rule as the model says them: which seats a
//! sweep reclaims (idle past the timeout, first) and reaps (reapable by
//! the predicate, oldest first), within one limit; which leases an outage
//! extends.

use leasehold_common::Timestamp;
use leasehold_common::api::{EventKind, SessionEnd};
use leasehold_common::is_live;
use leasehold_common::liveness::live_until;

use super::events::{Effects, Session, WantEvent};
use super::state::Model;
use crate::store::{LeaseRow, SeatMode};

/// What one sweep takes, in the order taken.
#[derive(Debug, Default)]
pub struct Sweep {
    /// Reclaimed, each with the instant it reached its timeout.
    pub reclaimed: Vec<(LeaseRow, Timestamp)>,
    /// Reaped.
    pub reaped: Vec<LeaseRow>,
}

impl Sweep {
    pub fn count(&self) -> usize {
        self.reclaimed.len() + self.reaped.len()
    }
}

/// The wording of a `reap` event (restated).
fn reap_detail(expired: Timestamp) -> String {
    format!("expired {expired} unrenewed")
}

impl Model {
    /// The seats a sweep with `limit` reclaims, in the order taken, with
    /// the instant each reached its timeout: live, kept by heartbeats,
    /// idle that long; licenses in id order, the longest idle first (then
    /// seat id).
    fn reclaimable(&self, limit: usize) -> Vec<(LeaseRow, Timestamp)> {
        let mut out = Vec::new();
        for (id, pol) in &self.pols {
            let Some(timeout) = pol.idle_timeout() else {
                continue;
            };
            let mut mine: Vec<(LeaseRow, Timestamp)> = self
                .leases
                .values()
                .map(|s| &s.lease)
                .filter(|l| &l.license_id == id && l.mode == SeatMode::Heartbeat && self.live(l))
                .filter_map(|l| {
                    let at = l.idle_since?.saturating_add(timeout);
                    (at <= self.now).then(|| (l.clone(), at))
                })
                .collect();
            mine.sort_by(|(a, _), (b, _)| {
                (a.idle_since, &a.seat_id).cmp(&(b.idle_since, &b.seat_id))
            });
            out.extend(mine.into_iter().take(limit.saturating_sub(out.len())));
        }
        out
    }

    /// The leases a reap with `limit` takes, in the order taken: licenses
    /// in id order, each earliest expiry first (then seat id).
    fn reapable_within(&self, limit: usize) -> Vec<LeaseRow> {
        let mut out = Vec::new();
        for (id, _) in &self.pols {
            let mut mine: Vec<LeaseRow> = self
                .leases
                .values()
                .map(|s| &s.lease)
                .filter(|l| &l.license_id == id && self.reapable(l))
                .cloned()
                .collect();
            mine.sort_by(|a, b| (a.expires_at, &a.seat_id).cmp(&(b.expires_at, &b.seat_id)));
            out.extend(mine.into_iter().take(limit - out.len()));
        }
        out
    }

    /// A reaper sweep with `limit`: idle seats reclaimed first, then
    /// reapable ones reaped (a lingering one's session a release when its
    /// linger ended, any other's a lapse), within the one limit; the
    /// blocks that ended pruned. Applied, with its effects.
    pub fn sweep(&mut self, limit: usize, fx: &mut Effects) -> Sweep {
        let reclaimed = self.reclaimable(limit);
        let reaped = self.reapable_within(limit - reclaimed.len());
        for (row, at) in &reclaimed {
            self.reclaimed(fx, &row.seat_id, row.idle_since, *at);
            self.note("reap: reclaimed");
        }
        for row in &reaped {
            let pol = self.pol(&row.license_id).unwrap();
            self.remove(&row.seat_id);
            let detail = reap_detail(row.expires_at);
            fx.events
                .push(WantEvent::seat(EventKind::Reap, row, Some(detail)));
            let at = live_until(row.expires_at, pol.skew());
            let end = if row.mode == SeatMode::Linger {
                self.note("reap: lingering");
                SessionEnd::Release
            } else {
                SessionEnd::Lapse
            };
            let lease = row.clone();
            self.end_session(fx, Session { lease, end, at });
        }
        // The prune drops blocks that ended.
        let now = self.now;
        self.blocks.retain(|_, until| *until > now);
        Sweep { reclaimed, reaped }
    }

    /// The outage rule after nobody could renew since `last_alive`: every
    /// seat kept by heartbeats that was live then expires at least one TTL
    /// from now. How many leases it extended.
    pub fn outage(&mut self, last_alive: Timestamp) -> usize {
        let now = self.now;
        let mut extended = 0;
        for (id, pol) in self.pols.clone() {
            let until = now.saturating_add(pol.ttl());
            for s in self.leases.values_mut() {
                let l = &mut s.lease;
                if l.license_id == id
                    && l.mode == SeatMode::Heartbeat
                    && is_live(l.expires_at, last_alive, pol.skew())
                    && l.expires_at < until
                {
                    l.expires_at = until;
                    extended += 1;
                }
            }
        }
        extended
    }
}
