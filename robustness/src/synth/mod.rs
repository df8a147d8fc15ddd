//! Histories of a correct lease server, made up in memory: to test the
//! checker on legal histories and to time it on large ones.
//!
//! [`legal`] runs a discrete-event simulation, seeded, of the server's
//! rules ([`server`]) and of many clients ([`clients`]), each sending one
//! operation at a time. The client's wall clock is the server's clock;
//! there are no faults and no clock steps.
//!
//! Each operation is sent at `s`, decided by the server at `d` (a whole
//! millisecond in `[s, s + 20 ms]`, as the server's instants have
//! millisecond precision) and answered at `a` in `[d, d + 20 ms]`. Three
//! in a hundred end `unknown`: half of them were decided and applied and
//! only the answer was lost, half never reached the server.
//!
//! What the server answers, decided at `d`:
//! - checkout: a new seat (`issued_at = d`, `expires_at = d + ttl`) iff
//!   fewer than `capacity` leases count at `d`, else `409
//!   no_seats_available`. A lease counts iff it is in the table and
//!   `d <= expires_at + skew`.
//! - heartbeat: if the lease counts, renewed (`issued_at = d`,
//!   `expires_at = d + ttl`); else `410 seat_lost` with reason `released`
//!   or `revoked` when a release or revoke ended it while it counted, no
//!   more than `ttl + skew` ago, and `lapsed` otherwise.
//! - release: always `ok`; it deletes the lease if it is still in the
//!   table (counting or lapsed, not reaped) and only then logs `release`.
//! - revoke: if the lease is in the table, deletes it, logs `revoke` and
//!   answers `ok`; else `404 unknown_seat`.
//! - the reaper sweeps every second (at `.250` s): each lease in the table
//!   with `t > expires_at + reap_grace` is deleted with a `reap` event.
//!
//! The event log has only `checkout`, `release`, `revoke` and `reap`, ids
//! from 1 in decision order, `at` the decision instant (a checkout's
//! `issued_at`).

mod clients;
mod server;

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::history::{History, Kind, Micros, Op, Outcome, Stamp, Terms};

use clients::{Client, Role};
use server::Server;

/// 2026-12-06T00:00:00Z: where every synthetic history begins.
pub const EPOCH: Micros = 1_796_515_200_000_000;

const MS: Micros = 1_000;
const SECOND: Micros = 1_000_000;
const CLIENTS: u32 = 32;
/// The revoker picks among the last this many seats granted.
const REVOKE_AMONG: usize = 48;

/// A history of `ops` operations (a few more: those in flight at the end)
/// of a correct server, the same for the same seed.
pub fn legal(seed: u64, ops: usize) -> History {
    let mut rng = StdRng::seed_from_u64(seed);
    let terms = licenses(&mut rng);
    let mut sim = Sim::new(terms, rng, ops);
    sim.run();
    History {
        scenario: format!("synthetic legal history, seed {seed}, {ops} operations"),
        terms: sim.server.terms().to_vec(),
        ops: sim.ops,
        faults: Vec::new(),
        clock_steps: Vec::new(),
        events: sim.server.events,
    }
}

/// 2 to 4 licenses of 3 to 10 seats, ttl 3 s, skew 1 s, reap_grace 2 s.
fn licenses(rng: &mut StdRng) -> Vec<Terms> {
    (0..rng.gen_range(2..=4u8))
        .map(|i| Terms {
            license: format!("lic-{}", (b'a' + i) as char),
            capacity: rng.gen_range(3..=10),
            ttl: 3 * SECOND,
            skew: SECOND,
            reap_grace: 2 * SECOND,
        })
        .collect()
}

/// What happens next, at an instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Step {
    /// A client sends its next operation.
    Send(u32),
    /// The server decides operation `i`.
    Decide(usize),
    /// Operation `i`'s answer reaches its client.
    Answer(usize),
    /// The reaper sweeps.
    Reap,
}

/// An operation between its sending and its answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fate {
    Answered,
    /// Applied, the answer lost.
    AnswerLost,
    /// Never reached the server.
    NeverApplied,
}

struct Sim {
    rng: StdRng,
    server: Server,
    clients: Vec<Client>,
    ops: Vec<Op>,
    fates: Vec<Fate>,
    /// Steps by instant, then by the order they were scheduled in.
    queue: BinaryHeap<Reverse<(Micros, u64, Step)>>,
    scheduled: u64,
    wanted: usize,
    in_flight: usize,
}

impl Sim {
    fn new(terms: Vec<Terms>, mut rng: StdRng, wanted: usize) -> Sim {
        let licenses = terms.len();
        let clients = (0..CLIENTS)
            .map(|i| {
                let role = if i == 0 { Role::Revoker } else { Role::of(i) };
                Client::new(i as usize % licenses, role)
            })
            .collect();
        let starts: Vec<Micros> = (0..CLIENTS)
            .map(|_| EPOCH + rng.gen_range(0..2 * SECOND))
            .collect();
        let mut sim = Sim {
            rng,
            server: Server::new(terms),
            clients,
            ops: Vec::with_capacity(wanted + CLIENTS as usize),
            fates: Vec::with_capacity(wanted + CLIENTS as usize),
            queue: BinaryHeap::new(),
            scheduled: 0,
            wanted,
            in_flight: 0,
        };
        for (i, start) in (0..CLIENTS).zip(starts) {
            sim.schedule(start, Step::Send(i));
        }
        sim.schedule(EPOCH + 250 * MS, Step::Reap);
        sim
    }

    fn schedule(&mut self, at: Micros, step: Step) {
        self.scheduled += 1;
        self.queue.push(Reverse((at, self.scheduled, step)));
    }

    fn run(&mut self) {
        while let Some(Reverse((at, _, step))) = self.queue.pop() {
            match step {
                Step::Send(client) => self.send(client, at),
                Step::Decide(i) => self.decide(i, at),
                Step::Answer(i) => self.answer(i),
                Step::Reap => {
                    self.server.reap(at);
                    if self.ops.len() < self.wanted || self.in_flight > 0 {
                        self.schedule(at + SECOND, Step::Reap);
                    }
                }
            }
        }
    }

    fn send(&mut self, client: u32, sent: Micros) {
        if self.ops.len() >= self.wanted {
            return;
        }
        let c = &mut self.clients[client as usize];
        let (license, kind, seat) = if c.role == Role::Revoker {
            match self.server.recent_seat(REVOKE_AMONG, &mut self.rng) {
                Some((license, seat)) => (license, Kind::Revoke, Some(seat)),
                None => return self.schedule(sent + SECOND, Step::Send(client)),
            }
        } else {
            let (kind, seat) = c.next_op(sent);
            (c.license, kind, seat)
        };
        let decided = whole_ms(sent + self.rng.gen_range(0..=20 * MS));
        let answered = decided + self.rng.gen_range(0..=20 * MS);
        let fate = match self.rng.gen_range(0..200) {
            0..=2 => Fate::AnswerLost,
            3..=5 => Fate::NeverApplied,
            _ => Fate::Answered,
        };
        let why = match fate {
            Fate::NeverApplied => "connection refused",
            _ => "connection reset before the answer",
        };
        let i = self.ops.len();
        self.ops.push(Op {
            client,
            license: self.server.terms()[license].license.clone(),
            kind,
            seat,
            sent: Stamp {
                wall: sent,
                mono: sent - EPOCH,
            },
            answered: Stamp {
                wall: answered,
                mono: answered - EPOCH,
            },
            // Replaced at the decision unless the answer is lost.
            outcome: Outcome::Unknown {
                why: why.to_string(),
            },
        });
        self.fates.push(fate);
        self.in_flight += 1;
        if fate != Fate::NeverApplied {
            self.schedule(decided, Step::Decide(i));
        }
        self.schedule(answered, Step::Answer(i));
    }

    fn decide(&mut self, i: usize, at: Micros) {
        let op = &self.ops[i];
        let seat = op.seat.as_deref().unwrap_or("");
        let license = self.clients[op.client as usize].license;
        let outcome = match op.kind {
            Kind::Checkout | Kind::Borrow => self.server.checkout(license, at, &mut self.rng),
            Kind::Heartbeat => self.server.heartbeat(seat, at),
            Kind::Release => self.server.release(seat, at),
            Kind::Revoke => self.server.revoke(seat, at),
        };
        if self.fates[i] == Fate::Answered {
            self.ops[i].outcome = outcome;
        }
    }

    fn answer(&mut self, i: usize) {
        self.in_flight -= 1;
        let op = &self.ops[i];
        let client = &mut self.clients[op.client as usize];
        let terms = &self.server.terms()[client.license];
        let next = client.on_answer(op, terms, &mut self.rng);
        self.schedule(next, Step::Send(op.client));
    }
}

/// The first whole millisecond at or after `t` (`t` is positive).
fn whole_ms(t: Micros) -> Micros {
    (t + MS - 1) / MS * MS
}
