//! The correct lease server the simulation runs against: the rules of
//! `leaseholdd`'s store, reduced to what a history shows.
//!
//! A lease is in the table from its grant until a release, a revoke or
//! the reaper deletes it. It counts at `t` iff it is in the table and
//! `t <= expires_at + skew` (the server's liveness predicate); the reaper
//! may delete it only when `t > expires_at + reap_grace`.

use std::collections::HashMap;

use rand::Rng;
use rand::rngs::StdRng;

use crate::history::{Event, Granted, Micros, Outcome, Terms};

/// How a seat's session ended, as a later heartbeat is told.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ending {
    Released,
    Revoked,
    /// Not renewed in time: reaped, or released or revoked after it had
    /// already stopped counting (the server records those as lapses).
    Lapsed,
}

/// Every seat ever granted.
struct Seat {
    id: String,
    license: usize,
    expires_at: Micros,
    /// `None` while the lease is in the table.
    ended: Option<(Ending, Micros)>,
}

pub struct Server {
    terms: Vec<Terms>,
    seats: Vec<Seat>,
    by_id: HashMap<String, usize>,
    /// Per license, the seats in the table (counting or lapsed, not reaped).
    table: Vec<Vec<usize>>,
    pub events: Vec<Event>,
}

impl Server {
    pub fn new(terms: Vec<Terms>) -> Server {
        let table = vec![Vec::new(); terms.len()];
        Server {
            terms,
            seats: Vec::new(),
            by_id: HashMap::new(),
            table,
            events: Vec::new(),
        }
    }

    pub fn terms(&self) -> &[Terms] {
        &self.terms
    }

    fn counts(&self, seat: usize, t: Micros) -> bool {
        let s = &self.seats[seat];
        s.ended.is_none() && t <= s.expires_at + self.terms[s.license].skew
    }

    fn live(&self, license: usize, t: Micros) -> usize {
        self.table[license]
            .iter()
            .filter(|&&s| self.counts(s, t))
            .count()
    }

    fn log(&mut self, at: Micros, kind: &str, seat: usize, detail: Option<String>) {
        let s = &self.seats[seat];
        self.events.push(Event {
            id: self.events.len() as i64 + 1,
            at,
            kind: kind.to_string(),
            license: Some(self.terms[s.license].license.clone()),
            seat: Some(s.id.clone()),
            detail,
        });
    }

    /// A checkout decided at `t`: a new seat iff fewer than `capacity`
    /// count now.
    pub fn checkout(&mut self, license: usize, t: Micros, rng: &mut StdRng) -> Outcome {
        let terms = &self.terms[license];
        if self.live(license, t) >= terms.capacity as usize {
            return fail(409, "no_seats_available", None);
        }
        let id = format!("{:032x}", rng.r#gen::<u128>());
        let expires_at = t + terms.ttl;
        let seat = self.seats.len();
        self.seats.push(Seat {
            id: id.clone(),
            license,
            expires_at,
            ended: None,
        });
        self.by_id.insert(id.clone(), seat);
        self.table[license].push(seat);
        debug_assert!(self.live(license, t) <= self.terms[license].capacity as usize);
        self.log(t, "checkout", seat, None);
        let lease = Granted {
            seat: id,
            issued_at: t,
            expires_at,
        };
        Outcome::Ok { lease: Some(lease) }
    }

    /// A heartbeat decided at `t`: renewed iff the lease counts, else
    /// `410 seat_lost` with why.
    pub fn heartbeat(&mut self, seat_id: &str, t: Micros) -> Outcome {
        let Some(&seat) = self.by_id.get(seat_id) else {
            return lost("lapsed");
        };
        if self.counts(seat, t) {
            let ttl = self.terms[self.seats[seat].license].ttl;
            self.seats[seat].expires_at = t + ttl;
            let lease = Granted {
                seat: seat_id.to_string(),
                issued_at: t,
                expires_at: t + ttl,
            };
            return Outcome::Ok { lease: Some(lease) };
        }
        let s = &self.seats[seat];
        let terms = &self.terms[s.license];
        // The server remembers a release or revoke for a ttl + skew; after
        // that the seat would have lapsed anyway.
        match s.ended {
            Some((Ending::Released, at)) if at >= t - terms.ttl - terms.skew => lost("released"),
            Some((Ending::Revoked, at)) if at >= t - terms.ttl - terms.skew => lost("revoked"),
            _ => lost("lapsed"),
        }
    }

    /// A release decided at `t`: always `ok`; a `release` event iff the
    /// lease was still in the table (counting or lapsed, not yet reaped).
    pub fn release(&mut self, seat_id: &str, t: Micros) -> Outcome {
        if let Some(seat) = self.take(seat_id, t, Ending::Released) {
            self.log(t, "release", seat, None);
        }
        Outcome::Ok { lease: None }
    }

    /// A revoke decided at `t`: `ok` with a `revoke` event iff the lease
    /// was in the table, else `404 unknown_seat`.
    pub fn revoke(&mut self, seat_id: &str, t: Micros) -> Outcome {
        match self.take(seat_id, t, Ending::Revoked) {
            Some(seat) => {
                self.log(t, "revoke", seat, Some("synthetic admin".to_string()));
                Outcome::Ok { lease: None }
            }
            None => fail(404, "unknown_seat", None),
        }
    }

    /// Delete a lease from the table; its session ends as `how` if it
    /// still counted, as a lapse if not.
    fn take(&mut self, seat_id: &str, t: Micros, how: Ending) -> Option<usize> {
        let &seat = self.by_id.get(seat_id)?;
        if self.seats[seat].ended.is_some() {
            return None;
        }
        let how = if self.counts(seat, t) {
            how
        } else {
            Ending::Lapsed
        };
        let license = self.seats[seat].license;
        self.table[license].retain(|&s| s != seat);
        self.seats[seat].ended = Some((how, t));
        Some(seat)
    }

    /// The reaper's sweep at `t`: every lease with `t > expires_at +
    /// reap_grace` leaves the table with a `reap` event.
    pub fn reap(&mut self, t: Micros) {
        for license in 0..self.terms.len() {
            let grace = self.terms[license].reap_grace;
            let mut due: Vec<usize> = self.table[license]
                .iter()
                .copied()
                .filter(|&s| t > self.seats[s].expires_at + grace)
                .collect();
            due.sort_by_key(|&s| self.seats[s].expires_at);
            for seat in due {
                debug_assert!(!self.counts(seat, t), "the reaper deleted a counting lease");
                self.table[license].retain(|&s| s != seat);
                self.seats[seat].ended = Some((Ending::Lapsed, t));
                let detail = format!("expired {} unrenewed", rfc3339(self.seats[seat].expires_at));
                self.log(t, "reap", seat, Some(detail));
            }
        }
    }

    /// A seat id in the table now or recently, for the revoker: the last
    /// `recent` seats granted, any license.
    pub fn recent_seat(&self, recent: usize, rng: &mut StdRng) -> Option<(usize, String)> {
        if self.seats.is_empty() {
            return None;
        }
        let from = self.seats.len().saturating_sub(recent);
        let s = &self.seats[rng.gen_range(from..self.seats.len())];
        Some((s.license, s.id.clone()))
    }
}

fn fail(status: u16, error: &str, reason: Option<&str>) -> Outcome {
    Outcome::Fail {
        status,
        error: error.to_string(),
        reason: reason.map(str::to_string),
    }
}

fn lost(reason: &str) -> Outcome {
    fail(410, "seat_lost", Some(reason))
}

fn rfc3339(at: Micros) -> String {
    chrono::DateTime::from_timestamp_micros(at)
        .map(|t| t.format("%Y-%m-%dT%H:%M:%S%.3fZ").to_string())
        .unwrap_or_else(|| at.to_string())
}
