//! Model-based test of the store.
//!
//! A proptest drives the real [`Store`] (writer thread and read pool, on
//! SQLite or PostgreSQL as `LEASEHOLD_TEST_STORE` says: `support::TestDb`)
//! with random sequences of checkouts (and the same checkout again, as a
//! retrying client asks it), heartbeats, releases, revokes, reaps and
//! clock moves across two or three licenses with small pools (some of no
//! seats) and short TTLs, most with seat policies (groups with patterns,
//! reserve and max, `max_per_holder`, `overage`, allow/deny, `linger`).
//! The licenses, the operations and the expected answers come from the
//! one reference model of the rules (`leasehold_server::store::model`, the
//! crate's `reference-model` feature), the model the rules' own property
//! test (`store/rules_props/`) holds the rules to on the in-memory store;
//! here without the waiters ahead, borrows, idle reports, outages and
//! policy reloads that test adds. The model restates each rule from the
//! one predicate from `leasehold_common` (`is_live`, `is_reapable`,
//! `lapses_at`) and predicts `NotAllowed`, `LimitReached`, `Full` with
//! `reserved`, the overage flag, linger (a release keeps the seat, a
//! heartbeat on it is lost, only its holder on its machine takes it back)
//! and the 410 reason of a seat gone; every answer of the store is checked
//! against it. After every step the invariants are asserted against the
//! store's own read API (`seats`, `live_counts`):
//!
//! - live ≤ seats + overage for every license (no over-grant), no group
//!   above its `max`, no holder above `max_per_holder`, and the seats
//!   outside a group never reach into its unused reservation
//!   (`outside + reserve <= seats + overage`); `live_counts` (live,
//!   lingering, borrowed, per group) is what the predicate counts
//!   (`Model::check_pools`);
//! - nothing is reaped before `expires_at + reap_grace`, a reap takes the
//!   oldest first, and exactly the leases the model says;
//! - a released, revoked or reaped seat never renews or comes back;
//! - heartbeats never change the live count;
//! - the table holds exactly the leases the model holds, field for field;
//! - the checkout, release, revoke and reap events are exactly the ones
//!   the model says, event ids increase;
//! - one live seat per fingerprint and holder, one lease per key, sane
//!   lease times (`Model::check_seats`).
//!
//! Clock moves only go forward. This model found that a backward step of
//! the server's clock (an NTP step) let a lapsed lease come back to life
//! beside the seat that replaced it; the writer's time now never runs back
//! (`store/group_commit.rs::a_clock_stepping_back_never_revives_a_lapsed_lease`), and
//! modelling a frozen clock here would add little.
//!
//! The stall threshold is set to ten years so that clock jumps are not taken
//! for outages (the outage rule has its own tests in `store/outage.rs`). Denied and
//! lost events are throttled by the writer (and on SQLite a repeated denial
//! may be answered beside it), so only their plausibility is checked, never
//! their number.

#[allow(dead_code)] // each test binary uses a part of it
mod support;

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use leasehold_common::api::EventKind;
use leasehold_common::liveness::lapses_at;
use leasehold_common::{Licenses, Timestamp, is_live, is_reapable};
use leasehold_server::clock::ManualClock;
use leasehold_server::licenses::LicensesHandle;
use leasehold_server::store::model::generate::{store_licenses, store_op};
use leasehold_server::store::model::{
    Effects, Expect, Lic, Model, Op, Pol, Rel, SeatPol, at, ms, resolve_again,
};
use leasehold_server::store::{
    Ahead, CheckoutOutcome, HeartbeatOutcome, LeaseRow, PoolCounts, SeatMode, Store,
};
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use support::{NO_STALL, TestDb};

struct Run {
    store: Store,
    clock: Arc<ManualClock>,
    model: Model,
    last_event: i64,
}

/// `prop_assert!` with the step's context in front of the message.
macro_rules! check {
    ($ctx:expr, $cond:expr, $($fmt:tt)+) => {
        if !$cond {
            return Err(TestCaseError::fail(format!("{}: {}", $ctx, format!($($fmt)+))));
        }
    };
}

macro_rules! check_eq {
    ($ctx:expr, $left:expr, $right:expr, $($fmt:tt)+) => {{
        let (l, r) = (&$left, &$right);
        if l != r {
            return Err(TestCaseError::fail(format!(
                "{}: {}\n  store: {:?}\n  model: {:?}",
                $ctx,
                format!($($fmt)+),
                l,
                r
            )));
        }
    }};
}

/// What an operation did, for the event check.
#[derive(Default)]
struct Seen {
    /// A denied event may appear (a checkout refused).
    may_deny: bool,
    /// A lost event may appear for this seat (a heartbeat on a lapsed seat).
    may_lose: Option<String>,
}

impl Run {
    async fn live_counts(&self) -> BTreeMap<String, PoolCounts> {
        self.store
            .live_counts()
            .await
            .unwrap()
            .into_iter()
            .collect()
    }

    fn set_clock(&mut self, t: Option<Timestamp>) {
        if let Some(t) = t {
            self.model.now = t;
            self.clock.set(t);
        }
    }

    async fn step(&mut self, ctx: &str, op: &Op) -> Result<(), TestCaseError> {
        let mut fx = Effects::default();
        let mut seen = Seen::default();
        match *op {
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
                let ahead = (ahead.as_slice(), counted);
                seen.may_deny = self.checkout(ctx, license, who, ahead, &mut fx).await?;
            }
            Op::Heartbeat(target, report) => {
                let (license, seat) = self.model.resolve(target);
                let idle_s = self.model.idle_secs(&seat, report);
                seen.may_lose = self
                    .heartbeat(ctx, &license, &seat, idle_s, &mut fx)
                    .await?;
            }
            Op::Release(target) => {
                let (license, seat) = self.model.resolve(target);
                let want = self.model.release(&license, &seat, &mut fx);
                let got = self.store.release(&license, &seat).await.unwrap();
                check_eq!(ctx, got, want, "release {license}/{seat}");
            }
            Op::Revoke {
                target,
                force,
                reason,
                block_ms,
            } => {
                let (_, seat) = self.model.resolve(target);
                let reason = reason.then(|| "model test".to_string());
                let block = block_ms.map(ms);
                let want = self
                    .model
                    .revoke(&seat, reason.clone(), block, force, &mut fx);
                let got = self.store.revoke(&seat, reason, block, force).await;
                check_eq!(ctx, got.unwrap(), want, "revoke {seat}");
            }
            Op::Reap { limit } => self.reap(ctx, limit, &mut fx).await?,
            Op::Advance { ms: d } => self.set_clock(Some(self.model.now.saturating_add(ms(d)))),
            Op::ToEdge { lease, edge } => self.set_clock(self.model.edge(lease, edge)),
            Op::ToBlockEnd { block, ended } => self.set_clock(self.model.block_end(block, ended)),
            Op::Again | Op::Outage { .. } | Op::Repolicy { .. } | Op::Clients { .. } => {
                return Err(TestCaseError::fail(format!("{ctx}: not a store step")));
            }
        }
        self.check_events(ctx, fx, seen).await?;
        self.check_invariants(ctx).await
    }

    /// A checkout on the store and the model; whether a denied event may
    /// follow.
    async fn checkout(
        &mut self,
        ctx: &str,
        license: Lic,
        who: (u8, Option<u8>, Option<u8>, Option<u64>),
        (ahead, counted): (&[(u8, Option<u8>)], bool),
        fx: &mut Effects,
    ) -> Result<bool, TestCaseError> {
        let req = self.model.request(license, who);
        let ahead = Model::waiters(ahead);
        let expect = self.model.checkout(&req, &ahead);
        let denial = expect.denial();
        let got = self
            .store
            .checkout_applied(req.clone(), Ahead::Waiters(ahead), counted)
            .await
            .unwrap()
            .committed()
            .await
            .unwrap();
        match (got, expect) {
            (
                CheckoutOutcome::Granted {
                    lease,
                    reused: false,
                    overage,
                },
                Expect::Fresh(mut want, want_overage),
            ) => {
                check_eq!(ctx, overage, want_overage, "overage flag");
                check!(
                    ctx,
                    lease.seat_id.len() == 32
                        && lease.seat_id.chars().all(|c| c.is_ascii_hexdigit()),
                    "seat id {:?} is not 128-bit hex",
                    lease.seat_id
                );
                check!(
                    ctx,
                    !self.model.issued.iter().any(|(_, s)| *s == lease.seat_id),
                    "fresh seat {} was issued before",
                    lease.seat_id
                );
                want.seat_id = lease.seat_id.clone();
                check_eq!(ctx, lease, want, "fresh lease");
                self.model
                    .granted(lease, req.idempotency_key.clone(), overage, fx);
            }
            (
                CheckoutOutcome::Granted {
                    lease,
                    reused: true,
                    overage: false,
                },
                Expect::Reused(want),
            ) => check_eq!(ctx, lease, want, "reused lease"),
            (
                CheckoutOutcome::Granted {
                    lease,
                    reused: true,
                    overage: false,
                },
                Expect::Lent(want),
            ) => {
                check_eq!(ctx, lease, want, "the machine's seat lent");
                self.model.lent(&lease, fx);
            }
            (
                CheckoutOutcome::Full {
                    seats,
                    live,
                    reserved,
                    retry_after,
                },
                Expect::Full {
                    seats: s,
                    live: l,
                    reserved: res,
                    retry_after: r,
                },
            ) => check_eq!(
                ctx,
                (seats, live, reserved, retry_after),
                (s, l, res, r),
                "Full (seats, live, reserved, retry_after)"
            ),
            (
                CheckoutOutcome::LimitReached {
                    limit,
                    max,
                    group,
                    retry_after,
                },
                Expect::LimitReached {
                    limit: l,
                    max: m,
                    group: g,
                    retry_after: r,
                },
            ) => check_eq!(
                ctx,
                (limit, max, &group, retry_after),
                (l, m, &g, r),
                "LimitReached (limit, max, group, retry_after)"
            ),
            (CheckoutOutcome::NotAllowed(got), Expect::NotAllowed(want)) => {
                check_eq!(ctx, got, want, "not allowed because");
            }
            (CheckoutOutcome::BorrowTooLong { max }, Expect::BorrowTooLong { max: m }) => {
                check_eq!(ctx, max, m, "borrow.max");
            }
            (CheckoutOutcome::Blocked { until }, Expect::Blocked { until: u }) => {
                check_eq!(ctx, until, u, "blocked until");
            }
            (CheckoutOutcome::UnknownLicense, Expect::UnknownLicense) => {}
            (got, expect) => {
                return Err(TestCaseError::fail(format!(
                    "{ctx}: checkout {req:?}\n  store: {got:?}\n  model: {expect:?}"
                )));
            }
        }
        if let Some(reason) = denial {
            self.model.denied(&req, counted, reason, fx);
        }
        Ok(denial.is_some())
    }

    /// A heartbeat on the store and the model; the seat a lost event may
    /// name.
    async fn heartbeat(
        &mut self,
        ctx: &str,
        license: &str,
        seat: &str,
        idle_s: Option<u64>,
        fx: &mut Effects,
    ) -> Result<Option<String>, TestCaseError> {
        let live_before = self.live_counts().await;
        // A lingering seat is lost without a `lost` event.
        let was_present = self
            .model
            .leases
            .get(seat)
            .is_some_and(|l| l.lease.license_id == license && l.lease.mode != SeatMode::Linger);
        let beat = self.model.heartbeat(license, seat, idle_s, fx);
        let got = match idle_s {
            None => self.store.heartbeat(license, seat).await,
            Some(s) => {
                let idle = Duration::from_secs(s);
                self.store.heartbeat_idle(license, seat, idle).await
            }
        };
        let got = got.unwrap();
        if let HeartbeatOutcome::Renewed(row) = &got {
            check!(
                ctx,
                !self.model.gone.contains(seat),
                "seat {seat} renewed after it was released, revoked or reaped: {row:?}"
            );
        }
        check_eq!(
            ctx,
            got,
            beat.want,
            "heartbeat {license}/{seat} ({})",
            beat.why
        );
        if !beat.reclaimed {
            let live_after = self.live_counts().await;
            check_eq!(
                ctx,
                live_after,
                live_before,
                "a heartbeat changed the live count"
            );
        }
        let lost = matches!(got, HeartbeatOutcome::Lost(_)) && was_present;
        Ok(lost.then(|| seat.to_string()))
    }

    /// A sweep on the store and the model: the count, and the leases it
    /// took (what the model says; each reapable by the predicate, per
    /// license the oldest first).
    async fn reap(
        &mut self,
        ctx: &str,
        limit: usize,
        fx: &mut Effects,
    ) -> Result<(), TestCaseError> {
        let held_before: Vec<LeaseRow> = self.model.held().into_iter().cloned().collect();
        let got = self.store.reap(limit).await.unwrap();
        let sweep = self.model.sweep(limit, fx);
        check_eq!(ctx, got, sweep.count(), "reap({limit}) count");
        let left: HashSet<String> = self
            .store
            .seats(None)
            .await
            .unwrap()
            .into_iter()
            .map(|l| l.seat_id)
            .collect();
        let taken = sweep
            .reaped
            .iter()
            .chain(sweep.reclaimed.iter().map(|(l, _)| l));
        for (license, _) in &self.model.pols {
            let removed: Vec<&LeaseRow> = held_before
                .iter()
                .filter(|l| l.license_id == *license && !left.contains(&l.seat_id))
                .collect();
            let n = taken.clone().filter(|l| l.license_id == *license).count();
            check_eq!(ctx, removed.len(), n, "leases of {license} reaped");
            let pol = self.model.pol(license).unwrap();
            let reapable = |l: &LeaseRow| is_reapable(l.expires_at, self.model.now, pol.grace());
            for l in &removed {
                check!(
                    ctx,
                    reapable(l),
                    "reaped before expires_at + reap_grace: {l:?} at {}",
                    Rel(self.model.now)
                );
            }
            // Oldest expiry first: nothing kept expired before something
            // taken.
            let newest_taken = removed.iter().map(|l| l.expires_at).max();
            for kept in &held_before {
                if kept.license_id == *license
                    && left.contains(&kept.seat_id)
                    && reapable(kept)
                    && let Some(newest) = newest_taken
                {
                    check!(
                        ctx,
                        kept.expires_at >= newest,
                        "reap kept {kept:?} but took a later-expiring lease"
                    );
                }
            }
        }
        Ok(())
    }

    /// The events this step logged: exactly the checkout, release, revoke,
    /// reap and reclaim events the model expects; denied and lost ones
    /// (throttled) only where they make sense.
    async fn check_events(
        &mut self,
        ctx: &str,
        fx: Effects,
        seen: Seen,
    ) -> Result<(), TestCaseError> {
        let events = self
            .store
            .events_after(self.last_event, 10_000)
            .await
            .unwrap();
        let mut logged = Vec::new();
        for e in &events {
            check!(
                ctx,
                e.id > self.last_event,
                "event ids not increasing: {e:?}"
            );
            self.last_event = e.id;
            check_eq!(ctx, e.at, self.model.now, "event time of {e:?}");
            match e.kind {
                EventKind::Denied => {
                    check!(ctx, seen.may_deny, "unexpected denied event {e:?}");
                }
                EventKind::Lost => {
                    check!(
                        ctx,
                        seen.may_lose.is_some() && e.seat_id == seen.may_lose,
                        "unexpected lost event {e:?}"
                    );
                }
                kind => logged.push((kind, e.seat_id.clone().unwrap_or_default())),
            }
        }
        let mut expected: Vec<(EventKind, String)> = fx
            .events
            .into_iter()
            .filter(|e| !matches!(e.kind, EventKind::Denied | EventKind::Lost))
            .map(|e| (e.kind, e.seat.unwrap_or_default()))
            .collect();
        logged.sort_by(|a, b| (a.0.as_str(), &a.1).cmp(&(b.0.as_str(), &b.1)));
        expected.sort_by(|a, b| (a.0.as_str(), &a.1).cmp(&(b.0.as_str(), &b.1)));
        check_eq!(ctx, logged, expected, "events logged");
        Ok(())
    }

    /// The invariants, against the store's own read API.
    async fn check_invariants(&self, ctx: &str) -> Result<(), TestCaseError> {
        let m = &self.model;
        let stored: BTreeMap<String, LeaseRow> = self
            .store
            .seats(None)
            .await
            .unwrap()
            .into_iter()
            .map(|l| (l.seat_id.clone(), l))
            .collect();

        // Nothing reaped (or otherwise lost) that the model still holds; in
        // particular nothing before expires_at + reap_grace.
        for seat in m.held() {
            check!(
                ctx,
                stored.contains_key(&seat.seat_id),
                "lease vanished from the store (reapable by the predicate: {}): {seat:?} at {}",
                m.reapable(seat),
                Rel(m.now)
            );
        }
        // A released, revoked or reaped seat never comes back.
        for seat in stored.keys() {
            check!(
                ctx,
                !m.gone.contains(seat),
                "seat {seat} is back after it was released, revoked or reaped"
            );
        }
        // Field for field, the table is the model.
        let modelled: BTreeMap<String, LeaseRow> = m
            .leases
            .iter()
            .map(|(s, l)| (s.clone(), l.lease.clone()))
            .collect();
        check_eq!(ctx, stored, modelled, "leases table");

        // live ≤ seats + overage, the caps and the reservations; and the
        // store counts (live, lingering, borrowed, per group) what the
        // predicate counts, for every license.
        let rows: Vec<&LeaseRow> = stored.values().collect();
        let want = m
            .check_pools(&rows)
            .map_err(|e| TestCaseError::fail(format!("{ctx}: {e}")))?;
        let want: BTreeMap<String, PoolCounts> = want.into_iter().collect();
        check_eq!(ctx, self.live_counts().await, want, "live counts");

        // One live (not lingering) seat per fingerprint and holder, one
        // lease per key, sane times.
        m.check_seats(
            m.leases
                .values()
                .map(|l| (&l.lease, l.idempotency_key.as_ref())),
        )
        .map_err(|e| TestCaseError::fail(format!("{ctx}: {e}")))
    }
}

/// Whether `LEASEHOLD_TEST_STORE` names PostgreSQL (`support::TestDb`).
fn on_postgres() -> bool {
    std::env::var("LEASEHOLD_TEST_STORE").is_ok_and(|s| s.starts_with("postgres"))
}

fn run(lics: Vec<(Pol, SeatPol)>, ops: Vec<Op>) -> Result<(), TestCaseError> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async move {
        let db = TestDb::new();
        let model = Model::new(&lics);
        let toml = model.licenses_toml();
        let licenses = LicensesHandle::new(Licenses::parse(&toml).unwrap());
        let clock = ManualClock::new(model.now);
        let store = db.open(&toml, &licenses, &clock, NO_STALL).unwrap();
        let mut run = Run {
            store: store.clone(),
            clock,
            model,
            last_event: 0,
        };
        let mut result = Ok(());
        for (i, op) in resolve_again(&ops) {
            let ctx = format!("step {i} {op:?} at {}", Rel(run.model.now));
            result = run.step(&ctx, &op).await;
            if result.is_err() {
                break;
            }
        }
        store.close().await;
        result
    })
}

proptest! {
    #![proptest_config(ProptestConfig {
        // PROPTEST_CASES=5000 for a longer soak. The same rules run on
        // both stores, so the many cases run where they are cheap: on
        // SQLite 1,536 take about a minute; on PostgreSQL each case is a
        // fresh database and each step several fsync'd commits (384 took
        // 323 s in CI), so 96 there check that the store agrees.
        cases: std::env::var("PROPTEST_CASES")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(if on_postgres() { 96 } else { 1536 }),
        max_shrink_iters: 4096,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    /// Random operation sequences on 2–3 small pools: every answer matches
    /// the model and the invariants hold after every step.
    #[test]
    fn store_matches_the_model(
        lics in store_licenses(),
        ops in proptest::collection::vec(store_op(), 1..=60),
    ) {
        run(lics, ops)?;
    }
}

/// The model test's own sanity: the boundaries it moves the clock onto are
/// the ones the predicate draws.
#[test]
fn edges_are_the_predicate_boundaries() {
    let p = Pol {
        seats: 1,
        ttl_ms: 1000,
        skew_ms: 200,
        grace_ms: 201,
        idle_ms: None,
    };
    let e = at(0);
    let at = |d: u64| e.saturating_add(ms(d));
    assert!(is_live(e, at(200), p.skew()));
    assert!(!is_live(e, lapses_at(e, p.skew()), p.skew()));
    assert!(!is_reapable(e, at(201), p.grace()));
    assert!(is_reapable(e, at(202), p.grace()));
}
