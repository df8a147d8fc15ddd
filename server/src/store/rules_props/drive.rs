//! The rules driven against the reference model on the in-memory store:
//! each operation run by the rules and by the model, then every check of
//! what it left behind (answer, events, sessions, denials) and the
//! invariants on the store's own state.

use std::collections::{BTreeMap, BTreeSet};

use leasehold_common::api::{Event, EventKind, SessionEnd};
use leasehold_common::{Licenses, Timestamp, is_live};

use super::super::model::{
    Denial, Effects, Held, Lic, MIN_IDLE_MS, Model, Op, Pol, Rel, SeatPol, Session, ensure,
    ensure_eq, ms,
};
use super::super::{LeaseRow, SeatMode};
use super::world::World;

pub struct Run {
    pub w: World,
    pub m: Model,
}

/// The result of one command: the events the rules returned.
pub type Step = std::result::Result<Vec<Event>, String>;

impl Run {
    pub fn new(lics: &[(Pol, SeatPol)]) -> Self {
        let m = Model::new(lics);
        Run {
            w: World::new(&m.licenses_toml()),
            m,
        }
    }

    pub fn set_now(&mut self, t: Timestamp) {
        assert!(t >= self.m.now, "the clock only moves forward here");
        self.m.now = t;
        self.w.now = t;
    }

    /// Live leases of a license in the store, by the one predicate.
    pub fn stored_live(&self, license: &str) -> Vec<&LeaseRow> {
        let skew = self.m.pol(license).unwrap().skew();
        self.w
            .store
            .leases
            .values()
            .map(|s| &s.lease)
            .filter(|l| l.license_id == license && is_live(l.expires_at, self.w.now, skew))
            .collect()
    }

    /// One operation, then every check of what it left behind and the
    /// invariants.
    pub fn step(&mut self, op: &Op) -> std::result::Result<(), String> {
        if let Op::Clients {
            license,
            checkouts,
            rounds,
            half,
            idle,
            sweep,
            lend,
        } = *op
        {
            for holder in 0..checkouts {
                let who = (holder, Some(holder), None, None);
                self.checked(|run, fx| run.checkout(Lic::Known(license), who, &[], true, fx))?;
            }
            return self.clients(license, (rounds, half), idle, (sweep, lend));
        }
        self.checked(|run, fx| run.act(op, fx))
    }

    /// One command (`f`, which says in `fx` what it must leave behind),
    /// then the checks of its effects and the invariants.
    pub fn checked(
        &mut self,
        f: impl FnOnce(&mut Self, &mut Effects) -> Step,
    ) -> std::result::Result<(), String> {
        let events_before = self.w.store.events.len();
        let sessions_before = self.w.store.sessions.len();
        let denials_before = self.w.store.denials.len();
        let leases_before = self.w.store.leases.clone();
        let periods_before = self.m.periods.len();
        let mut fx = Effects::default();
        let returned = f(self, &mut fx)?;
        for _ in periods_before..self.m.periods.len() {
            self.m.note("idle period recorded");
        }

        // The events: what the store appended is what the rules returned,
        // and what the model expects.
        let appended = &self.w.store.events[events_before..];
        ensure_eq!(appended, returned.as_slice(), "events appended vs returned");
        ensure!(
            appended.len() == fx.events.len()
                && appended
                    .iter()
                    .zip(&fx.events)
                    .all(|(e, want)| want.matches(e, self.m.now)),
            "events at {}\n  rules: {appended:#?}\n  model: {:#?}",
            Rel(self.m.now),
            fx.events
        );
        let sessions: Vec<Session> = self.w.store.sessions[sessions_before..]
            .iter()
            .map(|s| Session {
                lease: s.lease.clone(),
                end: s.end,
                at: s.at,
            })
            .collect();
        ensure_eq!(sessions, fx.sessions, "sessions recorded");
        let denials: Vec<Denial> = self.w.store.denials[denials_before..]
            .iter()
            .map(|d| Denial {
                license_id: d.license_id.clone(),
                holder: d.holder.clone(),
                fingerprint: d.fingerprint.clone(),
                reason: d.reason,
                at: d.at,
            })
            .collect();
        ensure_eq!(
            denials,
            fx.denials,
            "denials counted (reason, holder, fingerprint, time)"
        );
        self.note_effects(&fx);
        self.idle_properties(&leases_before, sessions_before, events_before)?;
        self.invariants()
    }

    fn note_effects(&mut self, fx: &Effects) {
        for e in &fx.events {
            self.m.note(match e.kind {
                EventKind::Checkout => "event: checkout",
                EventKind::Release => "event: release",
                EventKind::Revoke => "event: revoke",
                EventKind::Reap => "event: reap",
                EventKind::Denied => "event: denied",
                EventKind::Lost => "event: lost",
                EventKind::Config => "event: config",
                EventKind::Reclaim => "event: reclaim",
                EventKind::Alert => "event: alert",
                EventKind::Entitlement => "event: entitlement",
            });
        }
        for s in &fx.sessions {
            self.m.note(match s.end {
                SessionEnd::Release => "session: release",
                SessionEnd::Revoke => "session: revoke",
                SessionEnd::Lapse => "session: lapse",
                SessionEnd::Idle => "session: idle",
            });
        }
    }

    /// What one operation (other than `Clients`) does to the rules and the
    /// model.
    fn act(&mut self, op: &Op, fx: &mut Effects) -> Step {
        Ok(match *op {
            Op::Checkout {
                license,
                holder,
                fingerprint,
                key,
                ref ahead,
                counted,
                borrow_s,
            } => {
                let who = (holder, fingerprint, key, borrow_s);
                self.checkout(license, who, ahead, counted, fx)?
            }
            Op::Heartbeat(target, report) => {
                let (license, seat) = self.m.resolve(target);
                let idle_s = self.m.idle_secs(&seat, report);
                self.heartbeat_seat(&license, &seat, idle_s, fx)?.1
            }
            Op::Release(target) => {
                let (license, seat) = self.m.resolve(target);
                let (got, events) = self.w.run(|r| r.release(&license, &seat));
                let got = got.map_err(|e| e.to_string())?;
                let want = self.m.release(&license, &seat, fx);
                ensure_eq!(got, want, "release {license}/{seat}");
                events
            }
            Op::Revoke {
                target,
                force,
                reason,
                block_ms,
            } => {
                let (_, seat) = self.m.resolve(target);
                let reason = reason.then(|| "by the test".to_string());
                let block = block_ms.map(ms);
                let (got, events) = self
                    .w
                    .run(|r| r.revoke(&seat, reason.clone(), block, force));
                let got = got.map_err(|e| e.to_string())?;
                let want = self.m.revoke(&seat, reason, block, force, fx);
                ensure_eq!(got, want, "revoke {seat} (force {force})");
                events
            }
            Op::Reap { limit } => self.reap(limit, fx)?,
            Op::Advance { ms: d } => {
                self.set_now(self.m.now.saturating_add(ms(d)));
                Vec::new()
            }
            Op::ToEdge { lease, edge } => {
                if let Some(t) = self.m.edge(lease, edge) {
                    self.set_now(t);
                }
                Vec::new()
            }
            Op::ToBlockEnd { block, ended } => {
                if let Some(t) = self.m.block_end(block, ended) {
                    self.set_now(t);
                }
                Vec::new()
            }
            Op::Outage { gap_ms } => self.outage(gap_ms)?,
            Op::Repolicy { license, change } => {
                let toml = self.m.repolicy(license, change);
                self.w.licenses =
                    Licenses::parse(&toml).map_err(|e| format!("changed policy: {e}"))?;
                Vec::new()
            }
            Op::Clients { .. } => unreachable!("run by step"),
            Op::Again => unreachable!("resolved before the run"),
        })
    }

    /// The invariants, on the store's own state.
    fn invariants(&mut self) -> std::result::Result<(), String> {
        let now = self.m.now;
        // Field for field, the store is the model.
        let leases: BTreeMap<String, Held> = self
            .w
            .store
            .leases
            .iter()
            .map(|(seat, s)| {
                let held = Held {
                    lease: s.lease.clone(),
                    idempotency_key: s.idempotency_key.clone(),
                };
                (seat.clone(), held)
            })
            .collect();
        ensure_eq!(leases, self.m.leases, "leases table");
        ensure_eq!(self.w.store.idle_periods, self.m.periods, "idle periods");
        // Idle starts: only on seats kept by heartbeats, between checkout
        // and now; recorded periods a minute or longer.
        for l in self.w.store.leases.values().map(|s| &s.lease) {
            ensure!(
                l.idle_since
                    .is_none_or(|since| l.mode == SeatMode::Heartbeat
                        && l.checked_out_at <= since
                        && since <= now),
                "idle start of {l:?} at {}",
                Rel(now)
            );
        }
        for (_, _, from, to) in &self.w.store.idle_periods {
            ensure!(
                to.millis_since(*from) >= MIN_IDLE_MS && *to <= now,
                "idle period {} .. {}",
                Rel(*from),
                Rel(*to)
            );
        }
        let blocks: BTreeMap<_, _> = self
            .w
            .store
            .blocks
            .iter()
            .map(|(k, v)| (k.clone(), *v))
            .collect();
        ensure_eq!(
            blocks,
            self.m.blocks,
            "blocks (a reap prunes the ended ones)"
        );

        // live ≤ seats + overage, the caps and the reservations hold, and
        // the rules count what the predicate counts.
        let (counts, events) = self.w.run(|r| r.live_counts());
        let counts = counts.map_err(|e| e.to_string())?;
        ensure!(events.is_empty(), "live_counts logged {events:?}");
        let stored: Vec<&LeaseRow> = self.w.store.leases.values().map(|s| &s.lease).collect();
        let by_predicate = self.m.check_pools(&stored)?;
        ensure_eq!(counts, by_predicate, "live_counts");

        // Every seat that left has exactly one session; none in the table.
        let mut ended = BTreeSet::new();
        for s in &self.w.store.sessions {
            ensure!(
                ended.insert(s.lease.seat_id.clone()),
                "two sessions for {}",
                s.lease.seat_id
            );
        }
        ensure_eq!(ended, self.m.gone, "seats with a session vs seats gone");

        // Event ids strictly increase.
        for pair in self.w.store.events.windows(2) {
            ensure!(pair[0].id < pair[1].id, "event ids {pair:?}");
        }

        // One live seat per machine and holder, one lease per key, sane
        // times.
        let seats = self.w.store.leases.values();
        self.m
            .check_seats(seats.map(|s| (&s.lease, s.idempotency_key.as_ref())))
    }
}
