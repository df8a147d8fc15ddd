//! The model's state: the licenses in force, the leases it says the table
//! holds, blocks, the seats ever issued and gone, how each session ended,
//! the idle periods recorded, and the queries every prediction starts
//! from (liveness by the one predicate, what a generated name resolves to).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::Duration;

use leasehold_common::api::SessionEnd;
use leasehold_common::liveness::{lapses_at, live_until};
use leasehold_common::{Timestamp, is_live, is_reapable};

use super::ops::{Edge, Lic, Target};
use super::policy::{Change, LICENSE_IDS, Pol, SeatPol, licenses_toml};
use super::time::{at, ms};
use crate::store::{CheckoutRequest, LeaseRow, SeatMode, Waiter};

/// A lease in the table, with its Idempotency-Key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Held {
    pub lease: LeaseRow,
    pub idempotency_key: Option<String>,
}

/// Every idle period recorded: (license, seat, from, to).
pub type IdlePeriodRow = (String, String, Timestamp, Timestamp);

/// The writer's throttle window for denied and lost events (restated).
pub const THROTTLE_MS: i64 = 10_000;

pub struct Model {
    pub now: Timestamp,
    /// Timing and seats, by license, in id order.
    pub pols: Vec<(String, Pol)>,
    /// The seat policies in force, by license (same order as `pols`).
    pub seat_pols: Vec<(String, SeatPol)>,
    /// A policy change happened: seats granted before it may be above a
    /// cap it lowered (never evicted), so the caps hold for new grants only.
    pub changed: bool,
    /// Every lease in the table, by seat id.
    pub leases: BTreeMap<String, Held>,
    /// (license, holder, fingerprint or "") → blocked until (exclusive).
    pub blocks: BTreeMap<(String, String, String), Timestamp>,
    /// Every seat ever granted, in issue order: (license, seat).
    pub issued: Vec<(String, String)>,
    /// Seats released, revoked or reaped: never to renew or come back.
    pub gone: BTreeSet<String>,
    /// Throttle key → when an event for it was last logged.
    pub logged: HashMap<String, i64>,
    /// How each gone seat's session ended: seat → (license, end, at).
    pub ended: BTreeMap<String, (String, SessionEnd, Timestamp)>,
    /// Every idle period recorded, in order.
    pub periods: Vec<IdlePeriodRow>,
    /// How often each rule step was taken, to show a generator reaches
    /// them all.
    pub stats: BTreeMap<&'static str, usize>,
}

impl Model {
    /// The licenses, named by [`LICENSE_IDS`], at T0 with an empty table.
    pub fn new(lics: &[(Pol, SeatPol)]) -> Self {
        let ids = || lics.iter().zip(LICENSE_IDS);
        Model {
            now: at(0),
            pols: ids().map(|((p, _), id)| (id.to_string(), *p)).collect(),
            seat_pols: ids()
                .map(|((_, sp), id)| (id.to_string(), sp.clone()))
                .collect(),
            changed: false,
            leases: BTreeMap::new(),
            blocks: BTreeMap::new(),
            issued: Vec::new(),
            gone: BTreeSet::new(),
            logged: HashMap::new(),
            ended: BTreeMap::new(),
            periods: Vec::new(),
            stats: BTreeMap::new(),
        }
    }

    pub fn note(&mut self, what: &'static str) {
        *self.stats.entry(what).or_default() += 1;
    }

    pub fn pol(&self, license: &str) -> Option<Pol> {
        self.pols
            .iter()
            .find(|(id, _)| id == license)
            .map(|(_, p)| *p)
    }

    /// The seat policy of a license in force (it must be one).
    pub fn sp(&self, license: &str) -> &SeatPol {
        &self
            .seat_pols
            .iter()
            .find(|(id, _)| id == license)
            .unwrap()
            .1
    }

    /// The licenses file of the policies in force.
    pub fn licenses_toml(&self) -> String {
        let lics: Vec<(Pol, SeatPol)> = self
            .pols
            .iter()
            .zip(&self.seat_pols)
            .map(|((_, p), (_, sp))| (*p, sp.clone()))
            .collect();
        licenses_toml(&lics)
    }

    /// The n-th (mod) license's policy changes (as a reload of the file
    /// does); the new licenses file.
    pub fn repolicy(&mut self, license: usize, change: Change) -> String {
        let i = license % self.seat_pols.len();
        let seats = self.pols[i].1.seats;
        let sp = &mut self.seat_pols[i].1;
        change.apply(sp);
        *sp = sp.clone().clamp(seats);
        self.changed = true;
        self.note("policy change");
        self.licenses_toml()
    }

    /// Live by the one predicate, at the model's now.
    pub fn live(&self, row: &LeaseRow) -> bool {
        let pol = self.pol(&row.license_id).unwrap();
        is_live(row.expires_at, self.now, pol.skew())
    }

    pub fn reapable(&self, row: &LeaseRow) -> bool {
        let pol = self.pol(&row.license_id).unwrap();
        is_reapable(row.expires_at, self.now, pol.grace())
    }

    /// Live leases of a license matching `f`.
    pub fn live_where(&self, license: &str, f: impl Fn(&LeaseRow) -> bool) -> Vec<&LeaseRow> {
        self.leases
            .values()
            .map(|s| &s.lease)
            .filter(|l| l.license_id == license && self.live(l) && f(l))
            .collect()
    }

    pub fn live_count(&self, license: &str) -> u32 {
        self.live_where(license, |_| true).len() as u32
    }

    /// Until the earliest of these lapses; one TTL if none.
    pub fn retry_after(&self, pol: Pol, rows: &[&LeaseRow]) -> Duration {
        let ms_left = rows
            .iter()
            .map(|l| lapses_at(l.expires_at, pol.skew()).millis_since(self.now))
            .min()
            .unwrap_or(pol.ttl_ms as i64);
        ms(ms_left.max(0) as u64)
    }

    /// Once per key per throttle window, as the writer logs denied and lost
    /// events (the clock only moves forward here).
    pub fn first_in_window(&mut self, key: String) -> bool {
        let now = self.now.as_millis();
        match self.logged.get(&key) {
            Some(&t) if now - t < THROTTLE_MS => false,
            _ => {
                self.logged.insert(key, now);
                true
            }
        }
    }

    /// Seats in the table, in issue order.
    pub fn held(&self) -> Vec<&LeaseRow> {
        self.issued
            .iter()
            .filter_map(|(_, seat)| self.leases.get(seat).map(|s| &s.lease))
            .collect()
    }

    /// (license, seat id) a target names.
    pub fn resolve(&self, target: Target) -> (String, String) {
        let never = || (self.pols[0].0.clone(), "0".repeat(32));
        match target {
            Target::Live(n) | Target::Held(n) => {
                let mut held = self.held();
                if matches!(target, Target::Live(_)) && held.iter().any(|l| self.live(l)) {
                    held.retain(|l| self.live(l));
                }
                if held.is_empty() {
                    return never();
                }
                let row = held[n % held.len()];
                (row.license_id.clone(), row.seat_id.clone())
            }
            Target::Issued(n) | Target::Foreign(n) => {
                if self.issued.is_empty() {
                    return never();
                }
                let (license, seat) = self.issued[n % self.issued.len()].clone();
                if matches!(target, Target::Foreign(_)) {
                    let i = self.pols.iter().position(|(id, _)| *id == license).unwrap();
                    let other = if self.pols.len() > 1 {
                        self.pols[(i + 1) % self.pols.len()].0.clone()
                    } else {
                        "zz".to_string()
                    };
                    return (other, seat);
                }
                (license, seat)
            }
            Target::Never => never(),
        }
    }

    /// The checkout a generated one names: license, holder `h<n>` and
    /// machine `f<n>` (or those of a block or a seat), its key `k<n>`, its
    /// borrow (a machine's fingerprint is then always sent, as HTTP
    /// requires).
    pub fn request(
        &self,
        license: Lic,
        (holder, fingerprint, key, borrow_s): (u8, Option<u8>, Option<u8>, Option<u64>),
    ) -> CheckoutRequest {
        let like = |l: &LeaseRow| {
            let (id, h, f) = (&l.license_id, &l.holder, &l.fingerprint);
            (id.clone(), h.clone(), f.clone())
        };
        let held = self.held();
        let lingering: Vec<&LeaseRow> = held
            .iter()
            .copied()
            .filter(|l| l.mode == SeatMode::Linger)
            .collect();
        let blocks: Vec<_> = self.blocks.keys().collect();
        let (license_id, holder, fingerprint) = match license {
            Lic::Blocked(n) if !blocks.is_empty() => {
                let (license, holder, fp) = blocks[n % blocks.len()].clone();
                (license, holder, Some(fp).filter(|f| !f.is_empty()))
            }
            Lic::Lingering(n) if !lingering.is_empty() => like(lingering[n % lingering.len()]),
            Lic::Seat(n) | Lic::Lingering(n) if !held.is_empty() => like(held[n % held.len()]),
            Lic::Known(n) | Lic::Blocked(n) | Lic::Seat(n) | Lic::Lingering(n) => (
                self.pols[n % self.pols.len()].0.clone(),
                format!("h{holder}"),
                fingerprint.map(|f| format!("f{f}")),
            ),
            Lic::Unknown => (
                "zz".to_string(),
                format!("h{holder}"),
                fingerprint.map(|f| format!("f{f}")),
            ),
        };
        let borrow_s = borrow_s.filter(|_| !matches!(license, Lic::Lingering(n) if n % 2 == 0));
        let fingerprint = match borrow_s {
            Some(_) => fingerprint.or(Some("f0".to_string())),
            None => fingerprint,
        };
        CheckoutRequest {
            license_id,
            holder,
            fingerprint,
            idempotency_key: key.map(|k| format!("k{k}")),
            borrow: borrow_s.map(Duration::from_secs),
            version: None,
        }
    }

    /// The waiters ahead in line, by holder and machine number.
    pub fn waiters(ahead: &[(u8, Option<u8>)]) -> Vec<Waiter> {
        ahead
            .iter()
            .map(|&(h, f)| Waiter {
                holder: format!("h{h}"),
                fingerprint: f.map(|f| format!("f{f}")),
            })
            .collect()
    }

    /// Where `ToEdge` moves the clock: the boundary of the n-th (mod) held
    /// lease whose boundary is not yet past, if any.
    pub fn edge(&self, lease: usize, edge: Edge) -> Option<Timestamp> {
        let targets: Vec<Timestamp> = self
            .held()
            .into_iter()
            .map(|l| {
                let pol = self.pol(&l.license_id).unwrap();
                match edge {
                    Edge::LastLive => live_until(l.expires_at, pol.skew()),
                    Edge::FirstLapsed => lapses_at(l.expires_at, pol.skew()),
                    Edge::LastKept => l.expires_at.saturating_add(pol.grace()),
                    Edge::FirstReapable => l
                        .expires_at
                        .saturating_add(pol.grace())
                        .saturating_add(ms(1)),
                }
            })
            .filter(|&t| t >= self.now)
            .collect();
        (!targets.is_empty()).then(|| targets[lease % targets.len()])
    }

    /// Where `ToBlockEnd` moves the clock: the last blocked millisecond of
    /// the n-th (mod) block in force, or (`ended`) the first free one.
    pub fn block_end(&self, block: usize, ended: bool) -> Option<Timestamp> {
        let ends: Vec<Timestamp> = self
            .blocks
            .values()
            .copied()
            .filter(|&until| until > self.now)
            .collect();
        let until = *ends.get(block % ends.len().max(1))?;
        Some(if ended {
            until
        } else {
            until.saturating_sub(ms(1))
        })
    }
}
