//! The checks of one license: its seats one by one, then all of them at
//! once for the pool's count.

use std::collections::BTreeMap;

use crate::history::{History, Micros, Op, Terms};

use super::lapse::LatestExpiry;
use super::seat::{SeatCheck, SeatLog};
use super::{Broken, TOLERANCE, Violation, count, free, span};

/// One license's operations by seat (`BTreeMap`: reports in a stable order).
fn by_seat<'h>(
    history: &'h History,
    license: &str,
    ops: &[usize],
) -> BTreeMap<&'h str, SeatLog<'h>> {
    let mut seats: BTreeMap<&str, SeatLog> = BTreeMap::new();
    for &i in ops {
        let op = &history.ops[i];
        let Some(seat) = op.seat_id() else { continue };
        let log = seats.entry(seat).or_default();
        if op.kind.grants() {
            log.grants.push(i);
        } else if op.kind.ends() {
            log.enders.push(i);
        } else {
            log.heartbeats.push(i);
        }
    }
    for event in &history.events {
        if event.kind == "reap"
            && event.license.as_deref() == Some(license)
            && let Some(log) = event.seat.as_deref().and_then(|s| seats.get_mut(s))
        {
            log.reaps.push(event);
        }
    }
    for log in seats.values_mut() {
        log.heartbeats.sort_by_key(|&i| history.ops[i].sent.wall);
    }
    seats
}

/// Check one license's operations (`ops`: indexes into `history.ops`).
pub fn check_license(history: &History, terms: &Terms, ops: &[usize]) -> Vec<Violation> {
    let seats = by_seat(history, &terms.license, ops);
    let mut found = Vec::new();
    let mut counting = Vec::new();
    let mut possible = free::phantoms(history, terms, &seats);
    for (seat, log) in &seats {
        let seat_check = SeatCheck {
            history,
            terms,
            seat,
            log,
        };
        found.extend(seat_check.granted_twice());
        found.extend(seat_check.renewed_after_release());
        found.extend(seat_check.lost_before_expiry());
        found.extend(seat_check.reaped_too_soon());
        found.extend(LatestExpiry::new(&seat_check).renewals_after_a_lapse());
        counting.extend(seat_check.surely_counting());
        if let Some((_, issued, _)) = seat_check.first_grant() {
            possible.push((issued, LatestExpiry::new(&seat_check).latest_end()));
        }
    }
    found.extend(count::over_grant(history, terms, counting));
    found.extend(free::refused_while_free(history, terms, ops, possible));
    found
}

impl<'a, 'h> SeatCheck<'a, 'h> {
    /// The pieces of time the seat surely counted: from each grant or
    /// renewal to its expiry plus skew, cut at the earliest end.
    fn surely_counting(&self) -> Vec<count::Counted<'h>> {
        let end = self.earliest_end();
        let renewals = self.log.heartbeats.iter().filter_map(|&i| {
            let renewed = self.op(i).granted()?;
            Some((
                self.renewal_instant(i, renewed.expires_at),
                renewed.expires_at,
            ))
        });
        let first = self
            .first_grant()
            .map(|(_, issued, expires)| (issued, expires));
        let mut pieces: Vec<(Micros, Micros)> = first
            .into_iter()
            .chain(renewals)
            .map(|(from, expires)| (from, (expires + self.terms.skew).min(end)))
            .filter(|(from, to)| from < to)
            .collect();
        pieces.sort();
        let grant = self.log.grants.first().copied();
        merge(pieces)
            .into_iter()
            .map(|(from, to)| count::Counted {
                from,
                to,
                seat: self.seat,
                grant,
            })
            .collect()
    }

    fn granted_twice(&self) -> Option<Violation> {
        let (&first, &second) = (self.log.grants.first()?, self.log.grants.get(1)?);
        let at = self.op(second).granted()?.issued_at;
        let message = format!(
            "seat {} was granted to client {} and again to client {}",
            self.seat,
            self.op(first).client,
            self.op(second).client
        );
        Some(self.violation(Broken::GrantedTwice, at, vec![first, second], message))
    }

    /// A heartbeat sent after a release or revoke of its seat was
    /// acknowledged, answered `ok`.
    fn renewed_after_release(&self) -> Option<Violation> {
        let acked = self.log.enders.iter().filter(|&&i| self.op(i).is_ok());
        let (ender, ended) = acked
            .map(|&i| (i, self.window(i).1))
            .min_by_key(|&(_, at)| at)?;
        let &renewal = self
            .log
            .heartbeats
            .iter()
            .find(|&&i| self.op(i).is_ok() && self.window(i).0 > ended + TOLERANCE)?;
        let message = format!(
            "seat {} was renewed (client {}) after its {} was acknowledged",
            self.seat,
            self.op(renewal).client,
            kind_word(self.op(ender)),
        );
        let at = self.window(renewal).0;
        Some(self.violation(
            Broken::RenewedAfterRelease,
            at,
            vec![ender, renewal],
            message,
        ))
    }

    /// A `410` while the seat surely counted: before its proven expiry plus
    /// skew, with nothing sent that could have ended it.
    fn lost_before_expiry(&self) -> Option<Violation> {
        let (grant, _, mut expires) = self.first_grant()?;
        let mut last_renewal = grant;
        for &i in &self.log.heartbeats {
            let (sent, answered) = self.window(i);
            if let Some(renewed) = self.op(i).granted() {
                expires = expires.max(renewed.expires_at);
                last_renewal = i;
                continue;
            }
            let Some(reason) = self.op(i).lost_reason() else {
                continue;
            };
            let counted_until = expires + self.terms.skew;
            let ended_before = self.ended_by(answered);
            if answered + TOLERANCE < counted_until && ended_before.is_none() {
                let message = format!(
                    "heartbeat of seat {} answered 410 ({reason}) {} before it could lapse, \
                     and no release or revoke of it had been sent",
                    self.seat,
                    span(counted_until - answered),
                );
                return Some(self.violation(
                    Broken::LostBeforeExpiry,
                    sent,
                    vec![last_renewal, i],
                    message,
                ));
            }
        }
        None
    }

    /// A release or revoke (not refused) sent at or before `instant`.
    fn ended_by(&self, instant: Micros) -> Option<usize> {
        self.log
            .enders
            .iter()
            .copied()
            .find(|&i| !self.refused(i) && self.window(i).0 <= instant)
    }

    /// A reap before the seat's proven expiry plus `reap_grace`.
    fn reaped_too_soon(&self) -> Option<Violation> {
        let (grant, _, first_expiry) = self.first_grant()?;
        let renewed = self
            .log
            .heartbeats
            .iter()
            .filter_map(|&i| self.op(i).granted());
        let expires = renewed
            .map(|g| g.expires_at)
            .fold(first_expiry, Micros::max);
        let due = expires + self.terms.reap_grace;
        let reap = self.log.reaps.iter().find(|e| e.at + TOLERANCE < due)?;
        let message = format!(
            "seat {} was reaped (event {}) {} before its expiry plus reap_grace",
            self.seat,
            reap.id,
            span(due - reap.at)
        );
        Some(self.violation(Broken::ReapedTooSoon, reap.at, vec![grant], message))
    }
}

/// Overlapping pieces of one seat's time, as disjoint ones.
fn merge(pieces: Vec<(Micros, Micros)>) -> Vec<(Micros, Micros)> {
    let mut merged: Vec<(Micros, Micros)> = Vec::with_capacity(pieces.len());
    for (from, to) in pieces {
        match merged.last_mut() {
            Some(last) if from <= last.1 => last.1 = last.1.max(to),
            _ => merged.push((from, to)),
        }
    }
    merged
}

fn kind_word(op: &Op) -> &'static str {
    if op.kind == crate::history::Kind::Revoke {
        "revoke"
    } else {
        "release"
    }
}
