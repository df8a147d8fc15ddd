//! One case against a real store: each operation on the store and on the
//! model, each answer checked, then the table and the live counts.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use leasehold_common::api::SeatLostReason;
use leasehold_common::{Licenses, Timestamp};
use leasehold_server::clock::ManualClock;
use leasehold_server::licenses::LicensesHandle;
use leasehold_server::store::entitlement_ids::EntitlementId;
use leasehold_server::store::entitlement_set::{JudgedFile, JudgedSet};
use leasehold_server::store::{
    CheckoutOutcome, CheckoutRequest, HeartbeatOutcome, PoolCounts, Store,
};
use proptest::test_runner::TestCaseError;

use crate::model::{CAD, Model, PLAIN, VENDOR, licenses_toml, pick};
use crate::ops::{Add, Edge, Op};
use crate::support::{NO_STALL, T0, TestDb};

/// A failed check, with the step it failed at.
macro_rules! check {
    ($ctx:expr, $cond:expr, $($fmt:tt)+) => {
        if !$cond {
            return Err(TestCaseError::fail(format!("{}: {}", $ctx, format!($($fmt)+))));
        }
    };
}

macro_rules! check_eq {
    ($ctx:expr, $got:expr, $want:expr, $($fmt:tt)+) => {{
        let (got, want) = (&$got, &$want);
        if got != want {
            return Err(TestCaseError::fail(format!(
                "{}: {}\n  store: {:?}\n  model: {:?}",
                $ctx,
                format!($($fmt)+),
                got,
                want
            )));
        }
    }};
}

/// How often the cases met what the property is about (printed after the
/// run, so a generator that stops reaching a rule shows).
#[derive(Default)]
pub struct Cover {
    pub granted: AtomicU64,
    pub overage: AtomicU64,
    pub full: AtomicU64,
    pub not_entitled: AtomicU64,
    pub at_cap: AtomicU64,
    pub renewed: AtomicU64,
    pub expired: AtomicU64,
    pub swept_over: AtomicU64,
    pub narrowed: AtomicU64,
    pub replaced: AtomicU64,
    pub replaced_by_memory: AtomicU64,
    pub clock_behind: AtomicU64,
    pub ended_behind: AtomicU64,
    pub repeated: AtomicU64,
    pub plain_granted: AtomicU64,
}

pub static COVER: Cover = Cover {
    granted: AtomicU64::new(0),
    overage: AtomicU64::new(0),
    full: AtomicU64::new(0),
    not_entitled: AtomicU64::new(0),
    at_cap: AtomicU64::new(0),
    renewed: AtomicU64::new(0),
    expired: AtomicU64::new(0),
    swept_over: AtomicU64::new(0),
    narrowed: AtomicU64::new(0),
    replaced: AtomicU64::new(0),
    replaced_by_memory: AtomicU64::new(0),
    clock_behind: AtomicU64::new(0),
    ended_behind: AtomicU64::new(0),
    repeated: AtomicU64::new(0),
    plain_granted: AtomicU64::new(0),
};

fn bump(counter: &AtomicU64) {
    counter.fetch_add(1, Ordering::Relaxed);
}

impl Cover {
    pub fn summary(&self) -> String {
        let n = |c: &AtomicU64| c.load(Ordering::Relaxed);
        format!(
            "cad granted {} (overage {}, capped at the term's end {}), full {}, not_entitled {}; \
             heartbeats renewed {}, expired {}; sweeps that found seats over the grant {}; \
             decisions narrowed by the file {}, with a replaced file in the set {} \
             (its newer one gone from the set: {}), with the wall clock behind {} \
             (behind an ended term's end: {}); plain granted {}, denials repeated {}",
            n(&self.granted),
            n(&self.overage),
            n(&self.at_cap),
            n(&self.full),
            n(&self.not_entitled),
            n(&self.renewed),
            n(&self.expired),
            n(&self.swept_over),
            n(&self.narrowed),
            n(&self.replaced),
            n(&self.replaced_by_memory),
            n(&self.clock_behind),
            n(&self.ended_behind),
            n(&self.plain_granted),
            n(&self.repeated),
        )
    }
}

/// Milliseconds after T0, for messages.
pub fn rel(t: Timestamp) -> String {
    format!("T0{:+}ms", t.as_millis() - T0)
}

pub fn req(license: &str, holder: &str) -> CheckoutRequest {
    CheckoutRequest {
        license_id: license.into(),
        holder: holder.into(),
        fingerprint: None,
        idempotency_key: None,
        borrow: None,
        version: None,
    }
}

pub struct Run {
    pub store: Store,
    clock: Arc<ManualClock>,
    licenses: LicensesHandle,
    pub model: Model,
    /// What the manual clock reads.
    wall: Timestamp,
    /// The writer's last decision time.
    last: Timestamp,
    sqlite: bool,
    started: Instant,
}

impl Run {
    /// A store on `db` under the licenses file with this narrowing, no
    /// entitlement in force yet, the clock at T0.
    pub fn open(db: &TestDb, overage: u32, seats: Option<u32>) -> Run {
        // Before the writer's decision clock starts (in `open`).
        let started = Instant::now();
        let seats = seats.map(|s| s.max(overage));
        let toml = licenses_toml(seats, overage);
        let licenses = LicensesHandle::new(Licenses::parse(&toml).unwrap());
        let clock = ManualClock::new(Timestamp::from_millis(T0));
        let store = db.open(&toml, &licenses, &clock, NO_STALL).unwrap();
        let sqlite = matches!(db, TestDb::Sqlite(_));
        Run {
            store,
            clock,
            licenses,
            model: Model {
                file_seats: seats,
                file_overage: overage,
                ..Model::default()
            },
            wall: Timestamp::from_millis(T0),
            // SQLite's writer goes on from the clock at open (its last
            // alive time); PostgreSQL's high-water mark has seen no batch.
            last: Timestamp::from_millis(if sqlite { T0 } else { 0 }),
            sqlite,
            started,
        }
    }

    pub async fn step(&mut self, ctx: &str, op: &Op) -> Result<(), TestCaseError> {
        match *op {
            Op::Install { keep, ref add } => {
                let kept = (self.model.set.iter().enumerate())
                    .filter(|(pos, _)| keep & (1 << (pos % 8)) != 0)
                    .map(|(_, &i)| i)
                    .collect();
                self.install(ctx, kept, add).await?;
            }
            Op::Narrow(seats) => {
                let overage = self.model.file_overage;
                let seats = seats.map(|s| u32::from(s).max(overage));
                self.model.file_seats = seats;
                let file = Licenses::parse(&licenses_toml(seats, overage)).unwrap();
                // A new file; the entitlements in force stay.
                self.licenses.replace(file);
            }
            Op::Advance { ms } => {
                self.set_wall(self.wall.saturating_add(Duration::from_millis(ms.into())))
            }
            Op::StepBack { ms } => {
                self.set_wall(self.wall.saturating_sub(Duration::from_millis(ms.into())))
            }
            Op::ToEdge { of, edge, delta_ms } => {
                let Some(i) = pick(self.model.history.len(), of) else {
                    return Ok(());
                };
                let s = &self.model.history[i];
                let at_ms = match edge {
                    Edge::Nbf => s.nbf.map(|n| n * 1000),
                    Edge::Exp => s.exp.map(|e| e * 1000),
                    Edge::End => s.ends_ms(),
                };
                if let Some(at_ms) = at_ms {
                    self.set_wall(Timestamp::from_millis(at_ms + i64::from(delta_ms)));
                }
            }
            Op::Checkout { plain, holder } => {
                let license = if plain { PLAIN } else { CAD };
                self.checkout(ctx, license, &format!("h{holder}")).await?;
            }
            Op::Heartbeat { of, gone } => {
                let seats: Vec<(String, String)> = if gone {
                    self.model.issued.clone()
                } else {
                    let rows = self.model.rows.values();
                    rows.map(|r| (r.license_id.clone(), r.seat_id.clone()))
                        .collect()
                };
                if let Some(i) = pick(seats.len(), of) {
                    let (license, seat) = &seats[i];
                    self.heartbeat(ctx, license, seat).await?;
                }
            }
            Op::HeartbeatAll(from) => self.heartbeat_all(ctx, from).await?,
            Op::Release(of) => {
                if let Some(i) = pick(self.model.issued.len(), of) {
                    let (license, seat) = self.model.issued[i].clone();
                    let got = self.store.release(&license, &seat).await.unwrap();
                    let t = self.decided(ctx)?;
                    let want = self.model.release(&seat, t);
                    check_eq!(ctx, got, want, "release of {license}/{seat} at {}", rel(t));
                }
            }
        }
        self.check_state(ctx).await
    }

    fn set_wall(&mut self, t: Timestamp) {
        self.wall = t;
        self.clock.set(t);
    }

    /// `kept` and the files `add` signs in force, as a scan would put
    /// them: their ids remembered by the store, the set judged against
    /// the store's memory, then handed to the writer.
    pub async fn install(
        &mut self,
        ctx: &str,
        mut set: BTreeSet<usize>,
        add: &[Add],
    ) -> Result<(), TestCaseError> {
        let now_s = self.wall.max(self.last).as_secs_floor();
        set.extend(add.iter().filter_map(|a| self.model.sign(a, now_s)));
        self.model.install(set.clone());
        let history = &self.model.history;
        let ids = (set.iter().map(|&i| &history[i]))
            .map(|s| EntitlementId {
                vendor: VENDOR.into(),
                id: s.jti.clone(),
                iat: s.iat,
                nbf: s.nbf,
                claims_hash: s.claims_hash.clone(),
            })
            .collect();
        self.store.remember_entitlement_ids(ids).await.unwrap();
        let remembered = self.store.entitlement_ids().await.unwrap();
        let memory: BTreeMap<String, (i64, Option<i64>)> = (remembered.iter())
            .filter(|e| e.vendor == VENDOR)
            .map(|e| (e.id.clone(), (e.iat, e.nbf)))
            .collect();
        check_eq!(
            ctx,
            memory,
            self.model.memory,
            "the store's memory of keyright's ids"
        );
        let files = (set.iter())
            .map(|&i| JudgedFile {
                file: format!("{i}.lic"),
                jws: Some(history[i].jws.clone()),
                error: None,
            })
            .collect();
        let entitled = JudgedSet { files }.entitled(self.licenses.current().vendors(), &remembered);
        check!(
            ctx,
            entitled.rejected().is_empty(),
            "files rejected: {:?}",
            entitled.rejected()
        );
        self.licenses.set_entitled(entitled);
        // SQLite commits held denial counts before it remembers: a batch.
        if self.sqlite {
            self.last = self.last.max(self.sqlite_decided_at());
        }
        Ok(())
    }

    fn sqlite_decided_at(&self) -> Timestamp {
        let stats = self.store.writer_stats();
        Timestamp::from_millis(stats.decided_at_ms.load(Ordering::Relaxed))
    }

    /// The decision time of the writer's batch that just answered: never
    /// before the last one, the wall clock or the newest `iat` in force;
    /// the wall clock's (or that `iat`) when the wall clock is not behind.
    /// Behind, SQLite goes on from the last decision by the time that
    /// passed (checked against the time the case has run); PostgreSQL by
    /// its high-water mark.
    fn decided(&mut self, ctx: &str) -> Result<Timestamp, TestCaseError> {
        let lo = self.wall.max(self.last).max(self.model.floor());
        let t = if self.sqlite {
            let t = self.sqlite_decided_at();
            check!(
                ctx,
                t >= lo,
                "decided at {} before max(wall clock, last decision, newest iat) = {}",
                rel(t),
                rel(lo)
            );
            if self.wall >= self.last {
                check_eq!(
                    ctx,
                    t,
                    lo,
                    "the decision time with the wall clock not behind"
                );
            } else {
                let ran = self.started.elapsed().as_millis() as i64 + 1;
                check!(
                    ctx,
                    t.millis_since(lo) <= ran,
                    "the decision clock ran {} ms on, more than the {ran} ms the case ran",
                    t.millis_since(lo)
                );
            }
            t
        } else {
            lo
        };
        self.note(t);
        self.last = t;
        Ok(t)
    }

    /// What this decision exercises.
    fn note(&self, t: Timestamp) {
        let m = &self.model;
        if self.wall < self.last {
            bump(&COVER.clock_behind);
            let ended = |i: &usize| {
                m.history[*i]
                    .ends_ms()
                    .is_some_and(|e| e <= t.as_millis() && e > self.wall.as_millis())
            };
            if m.set.iter().any(ended) {
                bump(&COVER.ended_behind);
            }
        }
        let g = m.grant(t);
        if m.file_seats.is_some_and(|f| f < g.seats) {
            bump(&COVER.narrowed);
        }
        for &i in &m.set {
            let s = &m.history[i];
            let (newest, nbf) = m.memory[&s.jti];
            let in_term = s.grants.is_some()
                && s.nbf.is_none_or(|n| n * 1000 <= t.as_millis())
                && s.ends_ms().is_none_or(|e| t.as_millis() < e);
            if in_term && newest > s.iat && nbf.is_none_or(|n| n * 1000 <= t.as_millis()) {
                bump(&COVER.replaced);
                let newest_in_set = m
                    .set
                    .iter()
                    .any(|&j| m.history[j].jti == s.jti && m.history[j].iat == newest);
                if !newest_in_set {
                    bump(&COVER.replaced_by_memory);
                }
            }
        }
    }

    /// What the licenses in force say keyright grants `cad` at `t` (the
    /// ledger over the store's memory) is what the model says.
    fn check_grant(&self, ctx: &str, t: Timestamp) -> Result<(), TestCaseError> {
        let licenses = self.licenses.current();
        let g = licenses
            .grant(licenses.get(CAD).unwrap(), t.as_millis())
            .unwrap();
        let m = self.model.grant(t);
        let mut from: Vec<String> = m
            .from
            .iter()
            .map(|&i| self.model.history[i].jti.clone())
            .collect();
        let mut got_from = g.from.clone();
        from.sort();
        got_from.sort();
        check_eq!(
            ctx,
            (g.seats, g.overage, g.lease_cap_ms, got_from),
            (m.seats, m.overage, m.cap_ms, from),
            "what keyright's files grant cad at {} (seats, overage, lease cap, ids)",
            rel(t)
        );
        Ok(())
    }

    async fn checkout(
        &mut self,
        ctx: &str,
        license: &str,
        holder: &str,
    ) -> Result<(), TestCaseError> {
        let repeats = || {
            self.store
                .writer_stats()
                .denials_repeated
                .load(Ordering::Relaxed)
        };
        let before = repeats();
        let got = self.store.checkout(req(license, holder)).await.unwrap();
        let t = if repeats() > before {
            // Answered beside the writer (SQLite), as decided before: only
            // a plain license's denial, and only while nothing changed.
            check!(
                ctx,
                license == PLAIN && matches!(got, CheckoutOutcome::Full { .. }),
                "repeated beside the writer: {got:?}"
            );
            bump(&COVER.repeated);
            self.wall
        } else {
            self.decided(ctx)?
        };
        if license == CAD {
            self.check_grant(ctx, t)?;
        }
        let want = self.model.checkout(license, t);
        let expect = Model::outcome(&want, &got, license, holder, t);
        check_eq!(
            ctx,
            got,
            expect,
            "checkout of {license} by {holder} at {}",
            rel(t)
        );
        match got {
            CheckoutOutcome::Granted { lease, overage, .. } => {
                check!(
                    ctx,
                    lease.seat_id.len() == 32
                        && !self.model.issued.iter().any(|(_, s)| *s == lease.seat_id),
                    "seat id {} is not a fresh one",
                    lease.seat_id
                );
                if license == CAD {
                    self.capped(ctx, &lease.expires_at, t)?;
                    bump(&COVER.granted);
                    if overage {
                        bump(&COVER.overage);
                    }
                } else {
                    bump(&COVER.plain_granted);
                }
                self.model.granted(lease);
            }
            CheckoutOutcome::Full { .. } if license == CAD => bump(&COVER.full),
            CheckoutOutcome::NotEntitled => bump(&COVER.not_entitled),
            _ => {}
        }
        Ok(())
    }

    /// A lease of `cad` granted or renewed at `t` ends no later than the
    /// latest `exp + grace` of the files that grant (no cap while a
    /// perpetual one does).
    fn capped(&self, ctx: &str, expires_at: &Timestamp, t: Timestamp) -> Result<(), TestCaseError> {
        let g = self.model.grant(t);
        if let Some(cap) = g.cap_ms {
            check!(
                ctx,
                expires_at.as_millis() <= cap,
                "lease expires at {} after the term's end {}",
                rel(*expires_at),
                rel(Timestamp::from_millis(cap))
            );
            if expires_at.as_millis() == cap {
                bump(&COVER.at_cap);
            }
        }
        Ok(())
    }

    async fn heartbeat(
        &mut self,
        ctx: &str,
        license: &str,
        seat: &str,
    ) -> Result<(), TestCaseError> {
        let got = self.store.heartbeat(license, seat).await.unwrap();
        let t = self.decided(ctx)?;
        if license == CAD {
            self.check_grant(ctx, t)?;
        }
        let want = self.model.heartbeat(license, seat, t);
        check_eq!(
            ctx,
            got,
            want,
            "heartbeat of {license}/{seat} at {}",
            rel(t)
        );
        match got {
            HeartbeatOutcome::Renewed(row) if license == CAD => {
                self.capped(ctx, &row.expires_at, t)?;
                bump(&COVER.renewed);
            }
            HeartbeatOutcome::Lost(SeatLostReason::Expired) => bump(&COVER.expired),
            _ => {}
        }
        Ok(())
    }

    /// Every seat of `cad` in the table heartbeats once; then no more of
    /// them are live than the grant and overage let stay (when the grant
    /// stood still meanwhile: the writer's clock may cross an instant
    /// while the wall clock is behind).
    async fn heartbeat_all(&mut self, ctx: &str, from: u8) -> Result<(), TestCaseError> {
        let mut seats: Vec<String> = (self.model.rows.values())
            .filter(|r| r.license_id == CAD)
            .map(|r| r.seat_id.clone())
            .collect();
        let Some(start) = pick(seats.len(), from) else {
            return Ok(());
        };
        seats.rotate_left(start);
        let mut rooms = BTreeSet::new();
        let mut over = false;
        for seat in &seats {
            let room = self.model.room(&self.model.grant(self.last.max(self.wall)));
            over |= self.model.live(CAD, self.last.max(self.wall)) > room;
            self.heartbeat(ctx, CAD, seat).await?;
            rooms.insert(self.model.room(&self.model.grant(self.last)));
        }
        if over {
            bump(&COVER.swept_over);
        }
        let (counts, _) = self.live_counts(ctx).await?;
        if let (1, Some(&room)) = (rooms.len(), rooms.first()) {
            let live = counts.get(CAD).map_or(0, |c| c.live);
            check!(
                ctx,
                live <= room,
                "after every seat heartbeat, {live} seats of cad live, over the {room} its entitlements let stay"
            );
        }
        Ok(())
    }

    async fn live_counts(
        &mut self,
        ctx: &str,
    ) -> Result<(BTreeMap<String, PoolCounts>, Timestamp), TestCaseError> {
        let counts = self
            .store
            .live_counts()
            .await
            .unwrap()
            .into_iter()
            .collect();
        Ok((counts, self.decided(ctx)?))
    }

    /// The table is the model's, field for field; the live counts are what
    /// the predicate counts in it.
    async fn check_state(&mut self, ctx: &str) -> Result<(), TestCaseError> {
        let stored: BTreeMap<String, _> = (self.store.seats(None).await.unwrap().into_iter())
            .map(|l| (l.seat_id.clone(), l))
            .collect();
        check_eq!(ctx, stored, self.model.rows, "the leases table");
        let (counts, t) = self.live_counts(ctx).await?;
        let want: BTreeMap<String, PoolCounts> = [CAD, PLAIN]
            .map(|lic| {
                let live = self.model.live(lic, t);
                (
                    lic.to_string(),
                    PoolCounts {
                        live,
                        ..PoolCounts::default()
                    },
                )
            })
            .into_iter()
            .collect();
        check_eq!(ctx, counts, want, "live counts at {}", rel(t));
        Ok(())
    }
}

/// One case: a first set of files in force, then `ops`, on the store
/// `LEASEHOLD_TEST_STORE` names.
pub fn case(
    overage: u32,
    seats: Option<u8>,
    first: Vec<Add>,
    ops: Vec<Op>,
) -> Result<(), TestCaseError> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async move {
        let db = TestDb::new();
        let mut run = Run::open(&db, overage, seats.map(u32::from));
        let mut result = run.install("the first set", BTreeSet::new(), &first).await;
        for (i, op) in ops.iter().enumerate() {
            if result.is_err() {
                break;
            }
            let ctx = format!("step {i} {op:?} (wall clock {})", rel(run.wall));
            result = run.step(&ctx, op).await;
        }
        run.store.close().await;
        result
    })
}
