//! The simulated clients: what each sends next, and when.

use rand::Rng;
use rand::rngs::StdRng;

use crate::history::{Kind, Micros, Op, Outcome, Terms};

const MS: Micros = 1_000;
const SECOND: Micros = 1_000_000;

/// How a client uses its seat.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Heartbeats every ttl/3, releases after a session of seconds.
    Holder,
    /// Heartbeats only at `expires_at + skew/2`: late, but still counted.
    Late,
    /// Heartbeats on time for a while, then after `expires_at + skew`:
    /// told `410 lapsed`, checks out again.
    Lapser,
    /// Checks out, releases within a second or two, never heartbeats.
    Churner,
    /// An admin revoking seats of any license.
    Revoker,
}

impl Role {
    /// Client `i`'s role: a mix with holders most common.
    pub fn of(i: u32) -> Role {
        match i % 8 {
            0..=2 => Role::Holder,
            3 | 4 => Role::Late,
            5 => Role::Lapser,
            _ => Role::Churner,
        }
    }
}

/// The seat a client holds, as it knows it.
struct Held {
    id: String,
    expires_at: Micros,
    /// When it means to release it.
    release_at: Micros,
}

pub struct Client {
    pub license: usize,
    pub role: Role,
    seat: Option<Held>,
    /// A seat it released and will heartbeat once more, as a client that
    /// missed its own release would (told `410 released`).
    stale: Option<String>,
}

impl Client {
    pub fn new(license: usize, role: Role) -> Client {
        Client {
            license,
            role,
            seat: None,
            stale: None,
        }
    }

    /// What to send at `t` (not for the revoker).
    pub fn next_op(&mut self, t: Micros) -> (Kind, Option<String>) {
        if let Some(stale) = self.stale.take() {
            return (Kind::Heartbeat, Some(stale));
        }
        match &self.seat {
            None => (Kind::Checkout, None),
            Some(h) if t >= h.release_at => (Kind::Release, Some(h.id.clone())),
            Some(h) => (Kind::Heartbeat, Some(h.id.clone())),
        }
    }

    /// Take in an answer; when to send next.
    pub fn on_answer(&mut self, op: &Op, terms: &Terms, rng: &mut StdRng) -> Micros {
        let answered = op.answered.wall;
        match (op.kind, &op.outcome) {
            (_, _) if self.role == Role::Revoker => answered + rng.gen_range(SECOND..3 * SECOND),
            (Kind::Checkout, Outcome::Ok { lease: Some(lease) }) => {
                let hold = self.hold(rng);
                self.seat = Some(Held {
                    id: lease.seat.clone(),
                    expires_at: lease.expires_at,
                    release_at: answered.saturating_add(hold),
                });
                self.next_beat(answered, terms, rng)
            }
            // Refused or not known: no seat that it knows of; ask again.
            (Kind::Checkout, _) => answered + rng.gen_range(500 * MS..4 * SECOND),
            (Kind::Heartbeat, Outcome::Ok { lease: Some(lease) }) => {
                if let Some(h) = &mut self.seat {
                    h.expires_at = lease.expires_at;
                }
                self.next_beat(answered, terms, rng)
            }
            (Kind::Heartbeat, Outcome::Fail { .. }) => {
                self.seat = None;
                answered + rng.gen_range(0..SECOND)
            }
            // An unknown heartbeat: keep beating as if it had not renewed.
            (Kind::Heartbeat, _) => self.next_beat(answered, terms, rng),
            // A release, whatever its answer, ends the client's session.
            _ => {
                let released = self.seat.take().map(|h| h.id);
                if self.role == Role::Churner && op.is_ok() && rng.gen_bool(0.2) {
                    self.stale = released;
                }
                let pause = match self.role {
                    Role::Churner => 100 * MS..SECOND,
                    _ => 500 * MS..5 * SECOND,
                };
                answered + rng.gen_range(pause)
            }
        }
    }

    /// How long a session lasts, from its grant.
    fn hold(&self, rng: &mut StdRng) -> Micros {
        match self.role {
            Role::Churner => rng.gen_range(100 * MS..2 * SECOND),
            // Loses its seat by lapsing, never releases it.
            Role::Lapser => Micros::MAX,
            _ => rng.gen_range(3 * SECOND..30 * SECOND),
        }
    }

    /// When the next heartbeat (or the release, if due first) goes out.
    fn next_beat(&self, answered: Micros, terms: &Terms, rng: &mut StdRng) -> Micros {
        let Some(h) = &self.seat else { return answered };
        let beat = match self.role {
            Role::Holder => answered + terms.ttl / 3 + rng.gen_range(-100 * MS..100 * MS),
            Role::Late => h.expires_at + terms.skew / 2,
            Role::Lapser if rng.gen_bool(0.6) => answered + terms.ttl / 3,
            // Strictly after the lease stopped counting: sent after it, so
            // decided after it.
            Role::Lapser => h.expires_at + terms.skew + rng.gen_range(50 * MS..4 * SECOND),
            Role::Churner | Role::Revoker => Micros::MAX,
        };
        beat.min(h.release_at).max(answered)
    }
}
