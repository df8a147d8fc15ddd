//! The entitlement rules, restated small and on their own: what the
//! vendor's signed files grant `cad` at an instant (additive ids, a newer
//! `iat` replacing an older one for good from its `nbf`, not yet, grace,
//! ended), the licenses file narrowing it, and what each command does to
//! the leases of `cad` and of `plain` (a license without a vendor, which
//! decides as it always has).
//!
//! Nothing here asks the server's code what an entitlement grants: only
//! the liveness predicate is shared (`is_live`, `lapses_at`), as every
//! model test of this crate shares it.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::Duration;

use leasehold_common::api::SeatLostReason;
use leasehold_common::entitlement::{VendorSigner, decode};
use leasehold_common::liveness::lapses_at;
use leasehold_common::{Timestamp, is_live};
use leasehold_server::store::{CheckoutOutcome, HeartbeatOutcome, LeaseRow, SeatMode};
use serde_json::{Value, json};

use crate::ops::{Add, Terms};

pub const CAD: &str = "cad";
pub const PLAIN: &str = "plain";
pub const VENDOR: &str = "keyright";
/// Both licenses' skew. `cad`'s leases last 5 minutes (its seats live
/// through several clock moves and terms' ends), `plain`'s one.
pub const SKEW: Duration = Duration::from_secs(5);

pub fn ttl(license: &str) -> Duration {
    Duration::from_secs(if license == CAD { 300 } else { 60 })
}
pub const PLAIN_SEATS: u32 = 2;

pub fn signer() -> VendorSigner {
    VendorSigner::from_seed(&[9; 32])
}

/// The licenses file: `cad` takes its seats from keyright's entitlements,
/// narrowed by `seats` when the file says one.
pub fn licenses_toml(seats: Option<u32>, overage: u32) -> String {
    let seats = seats.map(|s| format!("seats = {s}\n")).unwrap_or_default();
    format!(
        "[[vendor]]\nname = \"{VENDOR}\"\npublic_key = \"{}\"\n\n\
         [[license]]\nid = \"{CAD}\"\nkey = \"cad-key\"\nvendor = \"{VENDOR}\"\n\
         ttl = \"300s\"\nskew = \"5s\"\noverage = {overage}\n{seats}\n\
         [[license]]\nid = \"{PLAIN}\"\nkey = \"plain-key\"\nseats = {PLAIN_SEATS}\n\
         ttl = \"60s\"\nskew = \"5s\"\n",
        signer().public_key()
    )
}

/// One file the vendor signed.
#[derive(Debug, Clone)]
pub struct Signed {
    pub jti: String,
    pub iat: i64,
    pub nbf: Option<i64>,
    pub exp: Option<i64>,
    pub grace: i64,
    /// `(seats, overage)` for `cad`; `None`: a tombstone (no licenses).
    pub grants: Option<(u32, u32)>,
    pub jws: String,
    pub claims_hash: String,
}

impl Signed {
    fn sign(claims: Value) -> Signed {
        let jws = signer().sign(&claims);
        let e = decode(&jws)
            .and_then(|u| u.verify(&[signer().public_key()]))
            .expect("the test signs good claims");
        let c = &e.claims;
        Signed {
            jti: c.jti.clone(),
            iat: c.iat,
            nbf: c.nbf,
            exp: c.exp,
            grace: c.grace,
            grants: c.grant_for(CAD).map(|g| (g.seats, g.overage)),
            jws,
            claims_hash: e.claims_hash,
        }
    }

    /// When it stops granting (ms): `exp + grace`; `None`: perpetual.
    pub fn ends_ms(&self) -> Option<i64> {
        self.exp.map(|exp| (exp + self.grace) * 1000)
    }
}

/// What the model says keyright's files grant `cad` at an instant.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Granted {
    pub seats: u32,
    pub overage: u32,
    /// No lease outlives this (ms); `None` while a perpetual file grants
    /// (or when nothing does).
    pub cap_ms: Option<i64>,
    /// The files that grant (indices into the history).
    pub from: Vec<usize>,
}

/// What a checkout should answer (the seat id is the store's to draw).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Want {
    Granted {
        expires_at: Timestamp,
        overage: bool,
    },
    Full {
        seats: u32,
        live: u32,
        retry_after: Duration,
    },
    NotEntitled,
}

#[derive(Default)]
pub struct Model {
    /// Every file signed so far, in order.
    pub history: Vec<Signed>,
    /// The files in force (indices into `history`).
    pub set: BTreeSet<usize>,
    /// The newest `iat` ever in force per id, and its `nbf`: the store's
    /// `entitlement_ids` as it should be.
    pub memory: BTreeMap<String, (i64, Option<i64>)>,
    /// The licenses file's `seats` for `cad` (`None`: not narrowed) and
    /// its `overage`.
    pub file_seats: Option<u32>,
    pub file_overage: u32,
    /// The leases table, by seat id.
    pub rows: BTreeMap<String, LeaseRow>,
    /// Seats that left the table: when they were released while live
    /// (`None`: they lapsed, or left over the entitlement).
    pub gone: HashMap<String, Option<Timestamp>>,
    /// Every seat granted, in order, with its license.
    pub issued: Vec<(String, String)>,
}

impl Model {
    /// Sign what `add` asks for at `now_s` (the vendor's clock, seconds);
    /// the file's index in the history (`None`: nothing to put back yet).
    pub fn sign(&mut self, add: &Add, now_s: i64) -> Option<usize> {
        let claims = match *add {
            Add::New {
                id,
                iat_back_s,
                terms,
            } => {
                let jti = format!("e{}", id % 4);
                let mut iat = now_s - i64::from(iat_back_s);
                while self.history.iter().any(|s| s.jti == jti && s.iat == iat) {
                    iat -= 1;
                }
                claims_of(&jti, iat, now_s, terms)
            }
            Add::Renew { of, iat_s, terms } => {
                let (jti, iat) = self.after_newest(of, now_s + i64::from(iat_s))?;
                claims_of(&jti, iat, now_s, terms)
            }
            Add::Tombstone { of, iat_s, nbf_s } => {
                let (jti, iat) = self.after_newest(of, now_s + i64::from(iat_s))?;
                let mut c = json!({"iss": VENDOR, "jti": jti, "iat": iat, "licenses": []});
                if let Some(nbf) = nbf_s {
                    c["nbf"] = json!(now_s + i64::from(nbf));
                }
                c
            }
            Add::Again { of } => return pick(self.history.len(), of),
        };
        self.history.push(Signed::sign(claims));
        Some(self.history.len() - 1)
    }

    /// The id of a file signed before, and an `iat` of `iat` or, if that
    /// is not past every file of the id, one second past the newest.
    fn after_newest(&self, of: u8, iat: i64) -> Option<(String, i64)> {
        let jti = self.history[pick(self.history.len(), of)?].jti.clone();
        let newest = self.history.iter().filter(|s| s.jti == jti).map(|s| s.iat);
        let newest = newest.max().expect("one at least");
        Some((jti, iat.max(newest + 1)))
    }

    /// These files in force from now on; the memory keeps the newest `iat`
    /// of each id, whatever the set says later.
    pub fn install(&mut self, set: BTreeSet<usize>) {
        for &i in &set {
            let s = &self.history[i];
            let mine = (s.iat, s.nbf);
            let seen = self.memory.entry(s.jti.clone()).or_insert(mine);
            if s.iat > seen.0 {
                *seen = mine;
            }
        }
        self.set = set;
    }

    /// The decision clock is never before the newest `iat` in force.
    pub fn floor(&self) -> Timestamp {
        let iat = self.set.iter().map(|&i| self.history[i].iat).max();
        Timestamp::from_millis(iat.unwrap_or(0) * 1000)
    }

    /// Whether file `i` grants at `t` (ms) by its term and replacement.
    pub fn grants(&self, i: usize, t: i64) -> bool {
        let s = &self.history[i];
        let (newest_iat, newest_nbf) = self.memory[&s.jti];
        let replaced = newest_iat > s.iat && newest_nbf.is_none_or(|nbf| nbf * 1000 <= t);
        let begun = s.nbf.is_none_or(|nbf| nbf * 1000 <= t);
        let ended = s.ends_ms().is_some_and(|end| t >= end);
        s.grants.is_some() && !replaced && begun && !ended
    }

    /// What the files in force grant `cad` at `t`.
    pub fn grant(&self, t: Timestamp) -> Granted {
        let mut g = Granted::default();
        let mut perpetual = false;
        for &i in self.set.iter().filter(|&&i| self.grants(i, t.as_millis())) {
            let s = &self.history[i];
            let (seats, overage) = s.grants.expect("grants() keeps grants");
            g.seats += seats;
            g.overage += overage;
            match s.ends_ms() {
                None => perpetual = true,
                Some(end) => g.cap_ms = g.cap_ms.max(Some(end)),
            }
            g.from.push(i);
        }
        if perpetual {
            g.cap_ms = None;
        }
        g
    }

    /// `cad`'s seats and overage at `t`: the grant narrowed by the file.
    pub fn effective(&self, g: &Granted) -> (u32, u32) {
        let seats = self.file_seats.map_or(g.seats, |f| f.min(g.seats));
        (seats, self.file_overage.min(g.overage).min(seats))
    }

    /// What a heartbeat of `cad` lets stay: the grant and the overage
    /// both allow (the file's `seats` never cut here).
    pub fn room(&self, g: &Granted) -> u32 {
        g.seats + self.file_overage.min(g.overage)
    }

    fn live_rows<'a>(
        &'a self,
        license: &'a str,
        t: Timestamp,
    ) -> impl Iterator<Item = &'a LeaseRow> {
        self.rows
            .values()
            .filter(move |r| r.license_id == license && is_live(r.expires_at, t, SKEW))
    }

    pub fn live(&self, license: &str, t: Timestamp) -> u32 {
        self.live_rows(license, t).count() as u32
    }

    /// The expiry a lease granted or renewed at `t` gets.
    fn expiry(license: &str, t: Timestamp, g: &Granted) -> Timestamp {
        let by_ttl = t.saturating_add(ttl(license));
        match g.cap_ms {
            Some(cap) if license == CAD => by_ttl.min(Timestamp::from_millis(cap)),
            _ => by_ttl,
        }
    }

    /// A checkout of `license` at `t`.
    pub fn checkout(&self, license: &str, t: Timestamp) -> Want {
        let g = self.grant(t);
        let (seats, overage) = if license == CAD {
            if g.seats == 0 {
                return Want::NotEntitled;
            }
            self.effective(&g)
        } else {
            (PLAIN_SEATS, 0)
        };
        let live = self.live(license, t);
        if i64::from(seats) + i64::from(overage) - i64::from(live) >= 1 {
            return Want::Granted {
                expires_at: Self::expiry(license, t, &g),
                overage: live >= seats,
            };
        }
        let earliest = self.live_rows(license, t).map(|r| r.expires_at).min();
        let retry_after = match earliest {
            Some(e) if seats + overage > 0 => {
                Duration::from_millis(lapses_at(e, SKEW).millis_since(t).max(0) as u64)
            }
            _ => ttl(license),
        };
        Want::Full {
            seats,
            live,
            retry_after,
        }
    }

    /// The store granted `lease`: it is in the table from now on.
    pub fn granted(&mut self, lease: LeaseRow) {
        self.issued
            .push((lease.license_id.clone(), lease.seat_id.clone()));
        self.rows.insert(lease.seat_id.clone(), lease);
    }

    /// A heartbeat of `seat` at `t`: its answer, the model moved on.
    pub fn heartbeat(&mut self, license: &str, seat: &str, t: Timestamp) -> HeartbeatOutcome {
        let Some(row) = self.rows.get(seat).cloned() else {
            let ended_since = t.saturating_sub(ttl(license)).saturating_sub(SKEW);
            let released = self.gone.get(seat).copied().flatten();
            return HeartbeatOutcome::Lost(match released {
                Some(at) if at >= ended_since => SeatLostReason::Released,
                _ => SeatLostReason::Lapsed,
            });
        };
        if !is_live(row.expires_at, t, SKEW) {
            return HeartbeatOutcome::Lost(SeatLostReason::Lapsed);
        }
        let g = self.grant(t);
        if license == CAD {
            let (live, room) = (self.live(CAD, t), self.room(&g));
            let key = |r: &LeaseRow| (r.checked_out_at, r.seat_id.clone());
            let newer = self
                .live_rows(CAD, t)
                .filter(|r| key(r) > key(&row))
                .count() as u32;
            if live > room && newer < live - room {
                self.rows.remove(seat);
                self.gone.insert(seat.to_string(), None);
                return HeartbeatOutcome::Lost(SeatLostReason::Expired);
            }
        }
        let renewed = LeaseRow {
            issued_at: t,
            expires_at: Self::expiry(license, t, &g),
            mode: SeatMode::Heartbeat,
            idle_since: None,
            ..row
        };
        self.rows.insert(seat.to_string(), renewed.clone());
        HeartbeatOutcome::Renewed(renewed)
    }

    /// A release of `seat` at `t`: whether it was in the table.
    pub fn release(&mut self, seat: &str, t: Timestamp) -> bool {
        let Some(row) = self.rows.remove(seat) else {
            return false;
        };
        let live = is_live(row.expires_at, t, SKEW);
        self.gone.insert(seat.to_string(), live.then_some(t));
        true
    }

    /// The lease a fresh grant should be, given the store's seat id.
    pub fn fresh_lease(
        seat_id: &str,
        license: &str,
        holder: &str,
        t: Timestamp,
        expires_at: Timestamp,
    ) -> LeaseRow {
        LeaseRow {
            seat_id: seat_id.to_string(),
            license_id: license.to_string(),
            holder: holder.to_string(),
            fingerprint: None,
            checked_out_at: t,
            issued_at: t,
            expires_at,
            group: None,
            mode: SeatMode::Heartbeat,
            idle_since: None,
        }
    }

    /// What the store should answer, with the store's seat id.
    pub fn outcome(
        want: &Want,
        got: &CheckoutOutcome,
        license: &str,
        holder: &str,
        t: Timestamp,
    ) -> CheckoutOutcome {
        match *want {
            Want::Granted {
                expires_at,
                overage,
            } => {
                let seat = match got {
                    CheckoutOutcome::Granted { lease, .. } => lease.seat_id.as_str(),
                    _ => "<a fresh seat>",
                };
                CheckoutOutcome::Granted {
                    lease: Self::fresh_lease(seat, license, holder, t, expires_at),
                    reused: false,
                    overage,
                }
            }
            Want::Full {
                seats,
                live,
                retry_after,
            } => CheckoutOutcome::Full {
                seats,
                live,
                reserved: 0,
                retry_after,
            },
            Want::NotEntitled => CheckoutOutcome::NotEntitled,
        }
    }
}

/// The claims of a file for `cad` with these terms, times from `now_s`.
fn claims_of(jti: &str, iat: i64, now_s: i64, t: Terms) -> Value {
    let mut c = json!({
        "iss": VENDOR, "jti": jti, "iat": iat,
        "licenses": [{"id": CAD, "seats": t.seats, "overage": t.overage}],
    });
    let nbf = t.nbf_s.map(|o| now_s + i64::from(o));
    if let Some(nbf) = nbf {
        c["nbf"] = json!(nbf);
    }
    if let Some(d) = t.exp_s {
        c["exp"] = json!(nbf.unwrap_or(now_s) + i64::from(d));
        if let Some(grace) = t.grace_s {
            c["grace"] = json!(grace);
        }
    }
    c
}

/// `of` picks one of `len` things (`None`: there are none).
pub fn pick(len: usize, of: u8) -> Option<usize> {
    (len > 0).then(|| usize::from(of) % len)
}
