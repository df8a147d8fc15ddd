//! Renewed after a lapse: a heartbeat answered `ok` when no placement of
//! the history lets its seat still count.

use crate::history::Micros;

use super::seat::SeatCheck;
use super::{Broken, TOLERANCE, Violation, after_outages, span};

/// The latest expiry a seat may have, walked forward in time.
pub struct LatestExpiry<'c, 'a, 'h> {
    seat: &'c SeatCheck<'a, 'h>,
    /// Heartbeats answered `unknown`, not yet spent: each may have renewed
    /// the seat once, at any instant after it was sent while it counted.
    unknown_sent: Vec<Micros>,
    /// Faults that stopped every writer: (began, ended).
    outages: Vec<(Micros, Micros)>,
}

impl<'c, 'a, 'h> LatestExpiry<'c, 'a, 'h> {
    pub fn new(seat: &'c SeatCheck<'a, 'h>) -> Self {
        let history = seat.history;
        let unknown_sent = seat
            .log
            .heartbeats
            .iter()
            .filter(|&&i| seat.op(i).is_unknown())
            .map(|&i| seat.window(i).0)
            .collect();
        let outages = history.outages();
        LatestExpiry {
            seat,
            unknown_sent,
            outages,
        }
    }

    /// The first heartbeat answered `ok` at an instant the seat could no
    /// longer count: past the latest expiry plus skew, or after a `410`.
    pub fn renewals_after_a_lapse(mut self) -> Option<Violation> {
        let (grant, _, mut latest) = self.seat.first_grant()?;
        let mut lost: Option<(usize, Micros)> = None;
        for &i in &self.seat.log.heartbeats {
            let op = self.seat.op(i);
            if op.lost_reason().is_some() && lost.is_none() {
                lost = Some((i, self.seat.window(i).1));
            }
            let Some(renewed) = op.granted() else {
                continue;
            };
            let decided = self.seat.renewal_instant(i, renewed.expires_at);
            if let Some((lost_op, answered)) = lost.filter(|&(_, a)| decided > a + TOLERANCE) {
                let message = format!(
                    "seat {} was renewed {} after a heartbeat of it was answered 410",
                    self.seat.seat,
                    span(decided - answered)
                );
                return Some(self.violation(decided, vec![grant, lost_op, i], message));
            }
            latest = self.extend(latest, decided);
            let lapsed = latest + self.seat.terms.skew;
            if decided > lapsed + TOLERANCE {
                let message = format!(
                    "seat {} was renewed {} after it lapsed at the latest expiry any \
                     placement allows (plus skew)",
                    self.seat.seat,
                    span(decided - lapsed)
                );
                return Some(self.violation(decided, vec![grant, i], message));
            }
            latest = latest.max(renewed.expires_at);
        }
        None
    }

    /// The last instant the seat may have counted: its latest expiry any
    /// placement allows plus skew, or the answer that proved it ended.
    pub fn latest_end(mut self) -> Micros {
        let Some((_, _, first)) = self.seat.first_grant() else {
            return Micros::MAX;
        };
        let renewed = self
            .seat
            .log
            .heartbeats
            .iter()
            .filter_map(|&i| self.seat.op(i).granted());
        let latest = renewed.map(|g| g.expires_at).fold(first, Micros::max);
        let possible = self
            .extend(latest, Micros::MAX)
            .saturating_add(self.seat.terms.skew);
        possible.min(self.seat.proven_end())
    }

    /// The latest expiry the seat may have at `until`, from `latest`: an
    /// outage that began while it may have counted gives it one TTL from
    /// when the server came back (by `until` at the latest), and an unknown heartbeat sent while it may have
    /// counted renews it at the last instant it still counted.
    fn extend(&mut self, mut latest: Micros, until: Micros) -> Micros {
        let (ttl, skew) = (self.seat.terms.ttl, self.seat.terms.skew);
        loop {
            let before = latest;
            latest = after_outages(&self.outages, latest, until, self.seat.terms);
            if latest + skew < until {
                let spendable = self
                    .unknown_sent
                    .iter()
                    .position(|&sent| sent <= latest + skew);
                if let Some(k) = spendable {
                    self.unknown_sent.swap_remove(k);
                    latest = latest + skew + ttl;
                }
            }
            if latest == before {
                return latest;
            }
        }
    }

    fn violation(&self, at: Micros, ops: Vec<usize>, message: String) -> Violation {
        Violation {
            broken: Broken::RenewedAfterLapse,
            license: Some(self.seat.terms.license.clone()),
            at,
            ops,
            seats: vec![self.seat.seat.to_string()],
            message,
        }
    }
}
