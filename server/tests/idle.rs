//! Idle reclaim on a real store with a clock moved by hand (SQLite, or
//! PostgreSQL with `LEASEHOLD_TEST_STORE=postgres`): heartbeats that report
//! idleness, the reclaim at the heartbeat and by the reaper, the idle
//! periods in the sessions and the usage, the reason a lost seat's
//! heartbeat is given, a restart, and pruning. Tests named `sqlite_*` are
//! about SQLite's schema and run on SQLite either way.

#[allow(dead_code)] // each test binary uses a part of it
mod support;

use std::sync::Arc;
use std::time::Duration;

use leasehold_common::api::{Event, EventKind, SeatLostReason, SessionEnd, SessionView};
use leasehold_common::{Licenses, Timestamp};
use leasehold_server::clock::{Clock, ManualClock};
use leasehold_server::licenses::LicensesHandle;
use leasehold_server::store::history::{SessionsQuery, UsageQuery};
use leasehold_server::store::{
    CheckoutOutcome, CheckoutRequest, HeartbeatOutcome, LeaseRow, SCHEMA_VERSION, SeatMode,
    SeatQuery, Store, sqlite_migrate_to,
};
use leasehold_server::usage::UsageRange;
use support::{NO_STALL, TestDb, at};

/// `cad`: idle seats are reclaimed after 10 minutes (ttl 60 s, skew 5 s).
/// `plain`: the same without `idle_timeout`.
/// `lend`: with `idle_timeout` and borrowing.
/// `long`: no `idle_timeout`, a 30-day ttl (a session that outlives the
/// history's retention, for pruning).
const LICENSES: &str = r#"
[[license]]
id = "cad"
key = "cad-key"
seats = 3
ttl = "60s"
skew = "5s"
reap_grace = "15s"
idle_timeout = "10m"

[[license]]
id = "plain"
key = "plain-key"
seats = 3
ttl = "60s"
skew = "5s"
reap_grace = "15s"

[[license]]
id = "lend"
key = "lend-key"
seats = 3
ttl = "60s"
skew = "5s"
reap_grace = "15s"
idle_timeout = "10m"

[license.borrow]
max = "2h"
seats = 2

[[license]]
id = "long"
key = "long-key"
seats = 2
ttl = "30d"
skew = "5s"
reap_grace = "15s"
"#;

const SKEW: Duration = Duration::from_secs(5);

/// `n` seconds after T0.
fn s(n: i64) -> Timestamp {
    at(n * 1000)
}

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

struct Harness {
    db: TestDb,
    clock: Arc<ManualClock>,
    licenses: LicensesHandle,
    store: Store,
}

impl Harness {
    fn new() -> Harness {
        Harness::on(TestDb::new())
    }

    fn on(db: TestDb) -> Harness {
        let clock = ManualClock::new(at(0));
        let licenses = LicensesHandle::new(Licenses::parse(LICENSES).unwrap());
        let store = db.open(LICENSES, &licenses, &clock, NO_STALL).unwrap();
        Harness {
            db,
            clock,
            licenses,
            store,
        }
    }

    /// Close the store and open the same database again.
    async fn reopen(self) -> Harness {
        self.store.close().await;
        let store = self
            .db
            .open(LICENSES, &self.licenses, &self.clock, NO_STALL)
            .unwrap();
        Harness { store, ..self }
    }

    async fn finish(self) {
        self.store.close().await;
    }

    fn set(&self, t: Timestamp) {
        self.clock.set(t);
    }

    async fn fresh(&self, req: CheckoutRequest) -> LeaseRow {
        match self.store.checkout(req.clone()).await.unwrap() {
            CheckoutOutcome::Granted {
                lease,
                reused: false,
                overage: false,
            } => lease,
            other => panic!("{req:?} at {}: {other:?}", self.clock.now()),
        }
    }

    /// A heartbeat reporting its user idle for `idle_s` seconds.
    async fn idle(&self, license: &str, seat: &LeaseRow, idle_s: u64) -> HeartbeatOutcome {
        self.store
            .heartbeat_idle(license, &seat.seat_id, secs(idle_s))
            .await
            .unwrap()
    }

    /// A heartbeat without a report: its user is active.
    async fn active(&self, license: &str, seat: &LeaseRow) -> HeartbeatOutcome {
        self.store.heartbeat(license, &seat.seat_id).await.unwrap()
    }

    async fn live(&self, license: &str) -> u32 {
        self.store
            .live_counts()
            .await
            .unwrap()
            .into_iter()
            .find(|(id, _)| id == license)
            .map(|(_, n)| n.live)
            .unwrap()
    }

    async fn seat(&self, seat: &LeaseRow) -> Option<LeaseRow> {
        self.store.find_seat(&seat.seat_id).await.unwrap()
    }

    /// The seat's session, as `/v1/admin/sessions` lists it.
    async fn session(&self, license: &str, seat: &LeaseRow) -> SessionView {
        let now = self.clock.now();
        let page = self
            .store
            .sessions_page(SessionsQuery {
                license_id: license.into(),
                holder: None,
                from: s(-3600),
                to: now.saturating_add(secs(3600)),
                now,
                skew: SKEW,
                after: None,
                limit: 1000,
            })
            .await
            .unwrap();
        page.into_iter()
            .find(|v| v.seat_id == seat.seat_id)
            .unwrap_or_else(|| panic!("no session of {}", seat.holder))
    }

    /// Idle seat-hours of the license in `[from, to)`, as of now.
    async fn idle_hours(&self, license: &str, from: Timestamp, to: Timestamp) -> f64 {
        let range = UsageRange::new(from, to, None, self.clock.now()).unwrap();
        self.store
            .usage(UsageQuery {
                license_id: license.into(),
                range,
                skew: SKEW,
                tolerance: Duration::from_secs(60),
            })
            .await
            .unwrap()
            .summary
            .idle_hours
    }

    async fn events_of(&self, kind: EventKind) -> Vec<Event> {
        let all = self.store.events_after(0, 10_000).await.unwrap();
        all.into_iter().filter(|e| e.kind == kind).collect()
    }
}

fn req(license: &str, holder: &str) -> CheckoutRequest {
    CheckoutRequest {
        license_id: license.into(),
        holder: holder.into(),
        fingerprint: None,
        idempotency_key: None,
        borrow: None,
        version: None,
    }
}

fn renewed(outcome: HeartbeatOutcome) -> LeaseRow {
    match outcome {
        HeartbeatOutcome::Renewed(row) => row,
        other => panic!("heartbeat was answered {other:?}"),
    }
}

/// `secs` seconds as idle seat-hours.
fn hours(secs: f64) -> f64 {
    secs / 3600.0
}

fn assert_hours(got: f64, want_secs: f64) {
    assert!(
        (got - hours(want_secs)).abs() < 1e-9,
        "{got} idle hours, expected {want_secs} s"
    );
}

const LOST_IDLE: HeartbeatOutcome = HeartbeatOutcome::Lost(SeatLostReason::Idle);
const LOST_LAPSED: HeartbeatOutcome = HeartbeatOutcome::Lost(SeatLostReason::Lapsed);

// ---------------------------------------------------------------------------
// Reports and the recorded periods
// ---------------------------------------------------------------------------

/// Alice goes idle at 10 s, comes back at 120 s (a period of 110 s), is
/// idle 50 s (not kept), idle from 180 s and back at 295 s while idle again
/// (115 s), then releases while idle (295–400 s: 105 s).
#[tokio::test]
async fn idle_reports_keep_the_seat_and_each_return_records_the_period() {
    let h = Harness::new();
    let a = h.fresh(req("cad", "alice")).await;

    h.set(s(30));
    let r = renewed(h.idle("cad", &a, 20).await);
    assert_eq!(r.idle_since, Some(s(10)), "now − idle_s");
    assert_eq!(r.expires_at, s(90), "an idle report renews the seat");
    assert_eq!(h.seat(&a).await.unwrap().idle_since, Some(s(10)));
    let page = h
        .store
        .seats_page(SeatQuery {
            license: Some("cad".into()),
            ..SeatQuery::default()
        })
        .await
        .unwrap();
    assert_eq!(page.rows.len(), 1);
    assert_eq!(
        page.rows[0].idle_since,
        Some(s(10)),
        "the seats list shows it"
    );
    assert_eq!(h.live("cad").await, 1);

    h.set(s(80));
    assert_eq!(renewed(h.idle("cad", &a, 70).await).idle_since, Some(s(10)));
    // One second later by the report: jitter, the same period.
    h.set(s(81));
    assert_eq!(renewed(h.idle("cad", &a, 70).await).idle_since, Some(s(10)));
    // SQLite leaves an unmoved idle start out of the UPDATE: still stored.
    assert_eq!(h.seat(&a).await.unwrap().idle_since, Some(s(10)));

    h.set(s(120));
    let back = renewed(h.active("cad", &a).await);
    assert_eq!(back.idle_since, None);
    assert_eq!(h.seat(&a).await.unwrap().idle_since, None);
    let v = h.session("cad", &a).await;
    assert_eq!((v.end, v.idle_s), (None, 110.0), "open, with its period");
    assert_hours(h.idle_hours("cad", s(0), s(200)).await, 110.0);
    // Clipped to the range: a period that begins in it, one that began
    // before it, and ranges before and after it.
    assert_hours(h.idle_hours("cad", s(0), s(60)).await, 50.0);
    assert_hours(h.idle_hours("cad", s(60), s(100)).await, 40.0);
    assert_hours(h.idle_hours("cad", s(0), s(10)).await, 0.0);
    assert_hours(h.idle_hours("cad", s(120), s(200)).await, 0.0);

    // 50 s idle: under a minute, not history.
    h.set(s(150));
    assert_eq!(
        renewed(h.idle("cad", &a, 30).await).idle_since,
        Some(s(120))
    );
    h.set(s(170));
    assert_eq!(renewed(h.active("cad", &a).await).idle_since, None);
    assert_eq!(h.session("cad", &a).await.idle_s, 110.0);

    // Idle from 180 s; back and idle again for 5 s at 300 s: the period
    // ends where the new one begins.
    h.set(s(220));
    renewed(h.idle("cad", &a, 40).await);
    h.set(s(260));
    assert_eq!(
        renewed(h.idle("cad", &a, 80).await).idle_since,
        Some(s(180))
    );
    h.set(s(300));
    assert_eq!(renewed(h.idle("cad", &a, 5).await).idle_since, Some(s(295)));
    assert_eq!(h.session("cad", &a).await.idle_s, 225.0);
    h.set(s(350));
    renewed(h.idle("cad", &a, 55).await);

    // Released while idle: the session's end closes the period.
    h.set(s(400));
    assert!(h.store.release("cad", &a.seat_id).await.unwrap());
    let v = h.session("cad", &a).await;
    assert_eq!(v.end, Some(SessionEnd::Release));
    assert_eq!(v.idle_s, 330.0);
    assert_hours(h.idle_hours("cad", s(0), s(400)).await, 330.0);
    assert!(h.events_of(EventKind::Reclaim).await.is_empty());
    h.finish().await;
}

/// A first report of more idle time than the seat has existed counts from
/// its checkout.
#[tokio::test]
async fn idle_time_is_never_earlier_than_the_checkout() {
    let h = Harness::new();
    h.set(s(100));
    let a = h.fresh(req("cad", "alice")).await;
    h.set(s(130));
    let r = renewed(h.idle("cad", &a, 31_536_000).await);
    assert_eq!(r.idle_since, Some(s(100)));
    h.set(s(190));
    renewed(h.active("cad", &a).await);
    assert_eq!(h.session("cad", &a).await.idle_s, 90.0);
    h.finish().await;
}

// ---------------------------------------------------------------------------
// Reclaim
// ---------------------------------------------------------------------------

/// Alice is idle from her checkout; her heartbeats keep reporting it until
/// one comes after the timeout (600 s): too late, even reporting activity.
/// Bob reports activity throughout and keeps his seat.
#[tokio::test]
async fn a_heartbeat_after_the_timeout_reclaims_the_seat_at_once() {
    let h = Harness::new();
    let a = h.fresh(req("cad", "alice")).await;
    let b = h.fresh(req("cad", "bob")).await;
    for t in (50..=550).step_by(50) {
        h.set(s(t));
        let r = renewed(h.idle("cad", &a, t as u64).await);
        assert_eq!(r.idle_since, Some(s(0)));
        assert_eq!(renewed(h.active("cad", &b).await).idle_since, None);
    }
    h.set(s(610));
    assert_eq!(h.active("cad", &a).await, LOST_IDLE);
    assert!(h.seat(&a).await.is_none(), "freed at once");
    assert_eq!(h.live("cad").await, 1);
    renewed(h.active("cad", &b).await);

    let v = h.session("cad", &a).await;
    assert_eq!(v.end, Some(SessionEnd::Idle));
    assert_eq!(v.ended_at, Some(s(600)), "when the timeout was reached");
    assert_eq!((v.duration_s, v.idle_s), (600.0, 600.0));
    assert_hours(h.idle_hours("cad", s(0), s(700)).await, 600.0);
    let reclaims = h.events_of(EventKind::Reclaim).await;
    assert_eq!(reclaims.len(), 1, "{reclaims:?}");
    let e = &reclaims[0];
    assert_eq!(e.seat_id.as_deref(), Some(a.seat_id.as_str()));
    assert_eq!(e.holder.as_deref(), Some("alice"));
    assert_eq!(e.at, s(610));
    let detail = e.detail.as_deref().unwrap_or_default();
    assert!(
        detail.contains("idle") && detail.contains("10m"),
        "{detail}"
    );

    // Its next heartbeats are told why, while a lapse could not have ended
    // it anyway (a ttl + skew); later it is simply lapsed.
    h.set(s(640));
    assert_eq!(h.idle("cad", &a, 640).await, LOST_IDLE);
    renewed(h.active("cad", &b).await);
    h.set(s(665));
    assert_eq!(h.active("cad", &a).await, LOST_IDLE);
    h.set(s(666));
    assert_eq!(h.active("cad", &a).await, LOST_LAPSED);
    assert_eq!(h.events_of(EventKind::Reclaim).await.len(), 1);
    h.finish().await;
}

/// A report of exactly the timeout reclaims at that report.
#[tokio::test]
async fn a_report_of_the_whole_timeout_reclaims_at_the_report() {
    let h = Harness::new();
    let a = h.fresh(req("cad", "alice")).await;
    for t in (50..=550).step_by(50) {
        h.set(s(t));
        renewed(h.idle("cad", &a, t as u64).await);
    }
    h.set(s(600));
    assert_eq!(h.idle("cad", &a, 600).await, LOST_IDLE);
    assert_eq!(h.live("cad").await, 0);
    assert_eq!(h.session("cad", &a).await.ended_at, Some(s(600)));
    h.finish().await;
}

/// Alice idle from 0 s, Carol too but her client stops at 500 s (her seat
/// lapses at 565 s), Bob active throughout: the reaper reclaims Alice's
/// seat in the sweep at 600 s, not a millisecond before; Carol's lapsed.
#[tokio::test]
async fn the_reaper_reclaims_an_idle_seat_within_one_sweep() {
    let h = Harness::new();
    let a = h.fresh(req("cad", "alice")).await;
    let b = h.fresh(req("cad", "bob")).await;
    let c = h.fresh(req("cad", "carol")).await;
    for t in (50..=550).step_by(50) {
        h.set(s(t));
        renewed(h.idle("cad", &a, t as u64).await);
        renewed(h.active("cad", &b).await);
        if t <= 500 {
            renewed(h.idle("cad", &c, t as u64).await);
        }
        assert_eq!(h.store.reap(100).await.unwrap(), 0);
    }
    h.set(at(599_999));
    assert_eq!(h.store.reap(100).await.unwrap(), 1, "carol's lapse only");
    assert!(h.seat(&c).await.is_none());
    assert!(h.seat(&a).await.is_some(), "not idle for 10m yet");
    let v = h.session("cad", &c).await;
    assert_eq!((v.end, v.ended_at), (Some(SessionEnd::Lapse), Some(s(565))));
    assert_eq!(v.idle_s, 565.0, "the lapse closed her period");

    h.set(s(600));
    assert_eq!(h.store.reap(100).await.unwrap(), 1);
    assert!(h.seat(&a).await.is_none());
    assert_eq!(h.live("cad").await, 1);
    let v = h.session("cad", &a).await;
    assert_eq!((v.end, v.ended_at), (Some(SessionEnd::Idle), Some(s(600))));
    assert_eq!(v.idle_s, 600.0);
    let reclaims = h.events_of(EventKind::Reclaim).await;
    assert_eq!(reclaims.len(), 1);
    assert_eq!(reclaims[0].seat_id.as_deref(), Some(a.seat_id.as_str()));

    h.set(s(601));
    assert_eq!(h.active("cad", &a).await, LOST_IDLE);
    assert_eq!(h.active("cad", &c).await, LOST_LAPSED);
    // Bob, active all along, keeps his seat through every sweep.
    for t in (601..=2000).step_by(50) {
        h.set(s(t));
        renewed(h.active("cad", &b).await);
        assert_eq!(h.store.reap(100).await.unwrap(), 0);
    }
    assert_eq!(h.live("cad").await, 1);
    h.finish().await;
}

/// Two seats past the timeout and a sweep of one: the longest idle goes
/// first; each ends when its own timeout was reached.
#[tokio::test]
async fn the_reaper_takes_the_longest_idle_first() {
    let h = Harness::new();
    let a = h.fresh(req("cad", "alice")).await;
    let b = h.fresh(req("cad", "bob")).await;
    for t in (50..=550).step_by(50) {
        h.set(s(t));
        renewed(h.idle("cad", &b, t as u64 - 20).await);
        renewed(h.idle("cad", &a, t as u64).await);
    }
    h.set(s(580));
    renewed(h.idle("cad", &b, 560).await);
    renewed(h.idle("cad", &a, 580).await);
    h.set(s(625));
    assert_eq!(h.store.reap(1).await.unwrap(), 1);
    assert!(h.seat(&a).await.is_none());
    assert!(h.seat(&b).await.is_some());
    assert_eq!(h.store.reap(1).await.unwrap(), 1);
    assert!(h.seat(&b).await.is_none());
    assert_eq!(h.session("cad", &a).await.ended_at, Some(s(600)));
    assert_eq!(h.session("cad", &b).await.ended_at, Some(s(620)));
    assert_eq!(h.store.reap(1).await.unwrap(), 0);
    h.finish().await;
}

/// A borrowed seat sends no heartbeats that count and is never reclaimed;
/// an ordinary seat of the same license is.
#[tokio::test]
async fn borrowed_seats_are_never_reclaimed() {
    let h = Harness::new();
    let lent = h
        .fresh(CheckoutRequest {
            fingerprint: Some("laptop".into()),
            borrow: Some(secs(3600)),
            ..req("lend", "ann")
        })
        .await;
    assert_eq!(lent.mode, SeatMode::Borrow);
    let a = h.fresh(req("lend", "alice")).await;
    for t in (50..=550).step_by(50) {
        h.set(s(t));
        renewed(h.idle("lend", &a, t as u64).await);
        assert!(matches!(
            h.idle("lend", &lent, t as u64).await,
            HeartbeatOutcome::Borrowed { .. }
        ));
    }
    h.set(s(600));
    assert_eq!(h.store.reap(100).await.unwrap(), 1);
    assert!(h.seat(&a).await.is_none());
    h.set(s(1800));
    assert_eq!(h.store.reap(100).await.unwrap(), 0);
    let kept = h.seat(&lent).await.expect("the borrow is still out");
    assert_eq!(kept.idle_since, None);
    assert_eq!(h.live("lend").await, 1);
    h.finish().await;
}

/// A license without `idle_timeout` never reclaims, but its idle periods
/// are history like any other's.
#[tokio::test]
async fn without_idle_timeout_nothing_is_reclaimed_but_idleness_is_recorded() {
    let h = Harness::new();
    let a = h.fresh(req("plain", "alice")).await;
    for t in (30..=2000).step_by(50) {
        h.set(s(t));
        let r = renewed(h.idle("plain", &a, t as u64).await);
        assert_eq!(r.idle_since, Some(s(0)));
        assert_eq!(h.store.reap(100).await.unwrap(), 0);
    }
    assert_eq!(h.seat(&a).await.unwrap().idle_since, Some(s(0)));
    h.set(s(2000));
    renewed(h.active("plain", &a).await);
    assert_eq!(h.session("plain", &a).await.idle_s, 2000.0);
    assert_hours(h.idle_hours("plain", s(0), s(3000)).await, 2000.0);
    assert!(h.events_of(EventKind::Reclaim).await.is_empty());
    h.finish().await;
}

// ---------------------------------------------------------------------------
// Restarts, the 410 reasons, pruning, the migration
// ---------------------------------------------------------------------------

/// `idle_since` is stored with the lease: a restart keeps the idle time
/// counted before it, for the reclaim and for the recorded period.
#[tokio::test]
async fn a_restart_keeps_idle_since() {
    let h = Harness::new();
    let a = h.fresh(req("cad", "alice")).await;
    let b = h.fresh(req("cad", "bob")).await;
    h.set(s(50));
    renewed(h.idle("cad", &a, 50).await);
    renewed(h.idle("cad", &b, 30).await);
    let h = h.reopen().await;
    assert_eq!(h.seat(&a).await.unwrap().idle_since, Some(s(0)));
    assert_eq!(h.seat(&b).await.unwrap().idle_since, Some(s(20)));

    h.set(s(100));
    renewed(h.active("cad", &b).await);
    assert_eq!(h.session("cad", &b).await.idle_s, 80.0);
    for t in (100..=550).step_by(50) {
        h.set(s(t));
        renewed(h.idle("cad", &a, t as u64).await);
        renewed(h.active("cad", &b).await);
    }
    let h = h.reopen().await;
    h.set(s(600));
    assert_eq!(h.store.reap(100).await.unwrap(), 1);
    let v = h.session("cad", &a).await;
    assert_eq!((v.end, v.ended_at), (Some(SessionEnd::Idle), Some(s(600))));
    assert_eq!(h.active("cad", &a).await, LOST_IDLE);
    h.finish().await;
}

/// A heartbeat on a seat no longer in the table is told how its session
/// ended, within a ttl + skew of that end, on its own license only.
#[tokio::test]
async fn a_lost_seat_is_told_why() {
    let h = Harness::new();
    let released = h.fresh(req("plain", "r")).await;
    let revoked = h.fresh(req("plain", "v")).await;
    let lapsed = h.fresh(req("plain", "p")).await;

    h.set(s(10));
    assert!(h.store.release("plain", &released.seat_id).await.unwrap());
    let revoke = h
        .store
        .revoke(&revoked.seat_id, None, None, false)
        .await
        .unwrap();
    assert!(revoke.revoked().is_some());
    let released_again = HeartbeatOutcome::Lost(SeatLostReason::Released);
    let revoked_again = HeartbeatOutcome::Lost(SeatLostReason::Revoked);
    assert_eq!(h.active("plain", &released).await, released_again);
    assert_eq!(h.idle("plain", &revoked, 5).await, revoked_again);
    // Another license's key: that license has no such session.
    assert_eq!(h.active("cad", &released).await, LOST_LAPSED);

    h.set(s(75));
    assert_eq!(h.active("plain", &released).await, released_again);
    assert_eq!(h.active("plain", &revoked).await, revoked_again);
    h.set(s(76));
    assert_eq!(h.active("plain", &released).await, LOST_LAPSED);
    assert_eq!(h.active("plain", &revoked).await, LOST_LAPSED);

    h.set(s(81));
    assert_eq!(h.store.reap(100).await.unwrap(), 1);
    assert_eq!(h.active("plain", &lapsed).await, LOST_LAPSED);
    h.finish().await;
}

/// Idle periods are pruned with the rest of the history, at most `limit` a
/// call: a session that outlives the retention loses the periods older
/// than it.
#[tokio::test]
async fn idle_periods_are_pruned_past_the_retention() {
    let h = Harness::new();
    let a = h.fresh(req("long", "alice")).await;
    h.set(s(60));
    renewed(h.idle("long", &a, 60).await);
    h.set(s(180));
    renewed(h.active("long", &a).await);
    h.set(s(300));
    renewed(h.idle("long", &a, 60).await);
    h.set(s(400));
    renewed(h.active("long", &a).await);
    assert_eq!(h.session("long", &a).await.idle_s, 340.0);

    // 401 days on, kept by a heartbeat every 20 days (the retention is 400).
    let day = 24 * 3600;
    for d in (20..=401).step_by(20) {
        h.set(s(d * day));
        renewed(h.active("long", &a).await);
    }
    h.set(s(401 * day));
    renewed(h.active("long", &a).await);
    assert_hours(h.idle_hours("long", s(0), s(1000)).await, 340.0);

    assert!(h.store.prune_history(1).await.unwrap() >= 1);
    let left = h.session("long", &a).await.idle_s;
    assert!(left == 180.0 || left == 160.0, "one period a call: {left}");
    assert!(h.store.prune_history(1).await.unwrap() >= 1);
    let v = h.session("long", &a).await;
    assert_eq!((v.end, v.idle_s), (None, 0.0), "the session itself stays");
    assert_hours(h.idle_hours("long", s(0), s(1000)).await, 0.0);
    assert_eq!(h.store.prune_history(1).await.unwrap(), 0);
    h.finish().await;
}

/// A database from before idle reclaim (schema v9) gains `idle_since`
/// (NULL: active) and the idle history on open; its leases go on.
#[tokio::test]
async fn sqlite_a_v9_database_gains_idle_reclaim() {
    let db = TestDb::sqlite();
    {
        let mut c = rusqlite::Connection::open(db.sqlite_path()).unwrap();
        sqlite_migrate_to(&mut c, 9).unwrap();
        c.execute(
            "INSERT INTO leases (seat_id, license_id, holder, checked_out_at, issued_at, expires_at)
             VALUES ('00aa', 'cad', 'alice', ?1, ?1, ?2)",
            rusqlite::params![s(0).as_millis(), s(60).as_millis()],
        )
        .unwrap();
    }
    let h = Harness::on(db);
    let version: i64 = rusqlite::Connection::open(h.db.sqlite_path())
        .unwrap()
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap();
    assert_eq!(version, SCHEMA_VERSION);
    let old = h.store.find_seat("00aa").await.unwrap().unwrap();
    assert_eq!(old.idle_since, None);
    h.set(s(30));
    assert_eq!(
        renewed(h.idle("cad", &old, 20).await).idle_since,
        Some(s(10))
    );
    let h = h.reopen().await;
    assert_eq!(h.seat(&old).await.unwrap().idle_since, Some(s(10)));
    h.finish().await;
}
