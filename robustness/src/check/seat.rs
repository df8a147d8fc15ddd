//! One seat: everything the history says about it, and the instants the
//! checks read off it.

use crate::history::{Event, History, Micros, Op, Terms};

use super::{Broken, Violation};

/// Everything the history says about one seat.
#[derive(Default)]
pub struct SeatLog<'h> {
    /// Checkouts and borrows answered `ok` with this seat.
    pub grants: Vec<usize>,
    /// Heartbeats naming it, in the order they were sent.
    pub heartbeats: Vec<usize>,
    /// Releases and revokes naming it.
    pub enders: Vec<usize>,
    /// Its `reap` events.
    pub reaps: Vec<&'h Event>,
}

/// One seat's log, with what the checks need around it.
pub struct SeatCheck<'a, 'h> {
    pub history: &'h History,
    pub terms: &'a Terms,
    pub seat: &'h str,
    pub log: &'a SeatLog<'h>,
}

impl<'a, 'h> SeatCheck<'a, 'h> {
    pub fn op(&self, i: usize) -> &'h Op {
        &self.history.ops[i]
    }

    /// When operation `i` could have taken effect, on the server's clock.
    pub fn window(&self, i: usize) -> (Micros, Micros) {
        self.history.window(self.op(i))
    }

    pub fn violation(
        &self,
        broken: Broken,
        at: Micros,
        ops: Vec<usize>,
        message: String,
    ) -> Violation {
        Violation {
            broken,
            license: Some(self.terms.license.clone()),
            at,
            ops,
            seats: vec![self.seat.to_string()],
            message,
        }
    }

    /// The seat's first grant, and the expiry it signed.
    pub fn first_grant(&self) -> Option<(usize, Micros, Micros)> {
        let &i = self.log.grants.first()?;
        let g = self.op(i).granted()?;
        Some((i, g.issued_at, g.expires_at))
    }

    /// The earliest instant anything could have ended the seat: a release
    /// or revoke sent (unless refused), a `410` asked for, a reap.
    pub fn earliest_end(&self) -> Micros {
        let enders = self.log.enders.iter().filter(|&&i| !self.refused(i));
        let lost = self
            .log
            .heartbeats
            .iter()
            .filter(|&&i| self.op(i).lost_reason().is_some());
        let sent = enders.chain(lost).map(|&i| self.window(i).0);
        let reaped = self.log.reaps.iter().map(|e| e.at);
        sent.chain(reaped).min().unwrap_or(Micros::MAX)
    }

    /// The earliest answer proving the seat had ended: an acknowledged
    /// release or revoke, a `410`, a reap.
    pub fn proven_end(&self) -> Micros {
        let acked = self.log.enders.iter().filter(|&&i| self.op(i).is_ok());
        let lost = self
            .log
            .heartbeats
            .iter()
            .filter(|&&i| self.op(i).lost_reason().is_some());
        let answered = acked.chain(lost).map(|&i| self.window(i).1);
        let reaped = self.log.reaps.iter().map(|e| e.at);
        answered.chain(reaped).min().unwrap_or(Micros::MAX)
    }

    /// A definite refusal took no effect (a revoke's `404`, a connection
    /// never made).
    pub fn refused(&self, i: usize) -> bool {
        !self.op(i).is_ok() && !self.op(i).is_unknown()
    }

    /// When a renewal answered with `expires` was decided: one TTL before
    /// it, within the heartbeat's window.
    pub fn renewal_instant(&self, i: usize, expires: Micros) -> Micros {
        let (sent, answered) = self.window(i);
        (expires - self.terms.ttl).clamp(sent, answered)
    }
}
