//! Usage history on a real store with a clock moved by hand (SQLite, or
//! PostgreSQL with `LEASEHOLD_TEST_STORE=postgres`): a scripted day whose
//! usage and session list were worked out by hand, below, from the script.

#[allow(dead_code)] // each test binary uses a part of it
mod support;

use std::sync::Arc;
use std::time::Duration;

use leasehold_common::api::{DenialsByReason, SessionEnd, SessionView, UsagePoint};
use leasehold_common::{Licenses, Timestamp};
use leasehold_server::clock::{Clock, ManualClock};
use leasehold_server::licenses::LicensesHandle;
use leasehold_server::store::history::{SessionCursor, SessionsQuery, UsageQuery};
use leasehold_server::store::{
    Ahead, CheckoutOutcome, CheckoutRequest, HeartbeatOutcome, LeaseRow, Store, pg,
    sqlite_migrate_to,
};
use leasehold_server::usage::{Usage, UsageRange};
use support::{TestDb, at, license_toml};

const TTL_MS: u64 = 60_000;
const SKEW_MS: u64 = 5_000;
const GRACE_MS: u64 = 15_000;
/// Steps of the clock stay below it; one jump (the outage) goes far beyond.
const STALL: Duration = Duration::from_secs(25);

fn s(n: i64) -> Timestamp {
    at(n * 1000)
}

struct Day {
    _db: TestDb,
    clock: Arc<ManualClock>,
    licenses: LicensesHandle,
    store: Store,
}

impl Day {
    fn new(seats: u32) -> Day {
        Day::on(TestDb::new(), seats)
    }

    fn on(db: TestDb, seats: u32) -> Day {
        let toml = license_toml("day", seats, TTL_MS, SKEW_MS, GRACE_MS);
        let clock = ManualClock::new(at(0));
        let licenses = LicensesHandle::new(Licenses::parse(&toml).unwrap());
        let store = db.open(&toml, &licenses, &clock, STALL).unwrap();
        Day {
            _db: db,
            clock,
            licenses,
            store,
        }
    }

    /// Move the clock to `to`, waking the writer every 20 s on the way (as
    /// the alive tick does), so the walk is not taken for an outage.
    async fn walk(&self, to: Timestamp) {
        loop {
            let next = self
                .clock
                .now()
                .saturating_add(Duration::from_secs(20))
                .min(to);
            self.clock.set(next);
            self.store.tick().await.unwrap();
            if next >= to {
                return;
            }
        }
    }

    async fn checkout(&self, req: CheckoutRequest) -> CheckoutOutcome {
        self.store.checkout(req).await.unwrap()
    }

    async fn grant(&self, req: CheckoutRequest, want_reused: bool) -> LeaseRow {
        match self.checkout(req.clone()).await {
            CheckoutOutcome::Granted {
                lease,
                reused,
                overage: false,
            } if reused == want_reused => lease,
            other => panic!("{req:?} at {}: {other:?}", self.clock.now()),
        }
    }

    async fn full(&self, holder: &str) {
        let outcome = self.checkout(req(holder, None, None)).await;
        assert!(
            matches!(outcome, CheckoutOutcome::Full { .. }),
            "{holder}: {outcome:?}"
        );
    }

    async fn usage(&self, from: Timestamp, to: Timestamp, step_ms: i64) -> Usage {
        let range = UsageRange::new(from, to, Some(step_ms), self.clock.now()).unwrap();
        self.store
            .usage(UsageQuery {
                license_id: "day".into(),
                range,
                skew: Duration::from_millis(SKEW_MS),
                tolerance: Duration::from_secs(60),
            })
            .await
            .unwrap()
    }

    async fn sessions(
        &self,
        holder: Option<&str>,
        from: Timestamp,
        to: Timestamp,
        after: Option<SessionCursor>,
        limit: usize,
    ) -> Vec<SessionView> {
        self.store
            .sessions_page(SessionsQuery {
                license_id: "day".into(),
                holder: holder.map(str::to_string),
                from,
                to,
                now: self.clock.now(),
                skew: Duration::from_millis(SKEW_MS),
                after,
                limit,
            })
            .await
            .unwrap()
    }
}

fn req(holder: &str, fingerprint: Option<&str>, key: Option<&str>) -> CheckoutRequest {
    CheckoutRequest {
        license_id: "day".into(),
        holder: holder.into(),
        fingerprint: fingerprint.map(str::to_string),
        idempotency_key: key.map(str::to_string),
        borrow: None,
        version: None,
    }
}

/// (holder, started_at s, ended_at s, end, duration s)
type Expected<'a> = (&'a str, i64, Option<i64>, Option<SessionEnd>, f64);

fn assert_sessions(got: &[SessionView], want: &[Expected<'_>]) {
    let got: Vec<Expected<'_>> = got
        .iter()
        .map(|v| {
            (
                v.holder.as_str(),
                (v.started_at.as_millis() - at(0).as_millis()) / 1000,
                v.ended_at
                    .map(|e| (e.as_millis() - at(0).as_millis()) / 1000),
                v.end,
                v.duration_s,
            )
        })
        .collect();
    assert_eq!(got, want);
}

/// The day, in seconds after T0, on a pool of 2 (3 from 130 s); ttl 60 s,
/// skew 5 s, grace 15 s:
///
/// ```text
///   0 alice checks out (fingerprint fa, key ka)          A [0, …)
///  10 bob                                                B [10, …)   full
///  20 carol refused twice (409, 409), 21 a ?wait= attempt refused and
///     not counted
///  30 alice's retry with key ka: the same seat, renewed (expires 90)
///  40 bob releases; carol (fingerprint fc) checks out    B [10, 40)  C [40, …)
///  45 alice again by fingerprint: the same seat (expires 105)
///  50 carol revoked, blocked 100 s                       C [40, 50)
///  55 carol refused (403)
///  60 dave                                               D [60, …)   full
/// 100 dave heartbeats (expires 160)
/// 110 alice's lease stops being live (105 + skew)        A [0, 110)
/// 115 erin takes alice's lapsed seat                     E [115, …)
/// 130 the pool grows to 3
/// 140 alice reaped (ended at 110, as read before)
/// 140…300 the server is down: dave and erin are extended to 360
/// 300 frank                                              F [300, …)  full (3 of 3)
/// 310 gina refused (409)
/// 320 dave releases                                      D [60, 320)
/// 340 erin heartbeats; frank does not (expires 360)
/// 365 frank's lease stops being live                     F [300, 365)
/// 370 now
/// ```
#[tokio::test]
async fn a_scripted_day_adds_up_to_the_hand_count() {
    let d = Day::new(2);
    d.store.tick().await.unwrap(); // the pool size (2) is recorded at 0

    let a = d.grant(req("alice", Some("fa"), Some("ka")), false).await;
    d.walk(s(10)).await;
    let b = d.grant(req("bob", None, None), false).await;
    d.walk(s(20)).await;
    d.full("carol").await;
    d.full("carol").await;
    d.clock.set(s(21));
    let waiting = d
        .store
        .checkout_applied(req("carol", None, None), Ahead::Waiters(Vec::new()), false)
        .await
        .unwrap()
        .committed()
        .await
        .unwrap();
    assert!(matches!(waiting, CheckoutOutcome::Full { .. }));
    d.walk(s(30)).await;
    let replay = d.grant(req("alice", Some("fa"), Some("ka")), true).await;
    assert_eq!(
        (replay.seat_id.as_str(), replay.expires_at),
        (a.seat_id.as_str(), s(90))
    );
    d.walk(s(40)).await;
    assert!(d.store.release("day", &b.seat_id).await.unwrap());
    let c = d.grant(req("carol", Some("fc"), None), false).await;
    d.walk(s(45)).await;
    let reclaim = d.grant(req("alice", Some("fa"), None), true).await;
    assert_eq!(
        (reclaim.seat_id.as_str(), reclaim.expires_at),
        (a.seat_id.as_str(), s(105))
    );
    d.walk(s(50)).await;
    let block = Some(Duration::from_secs(100));
    assert!(
        d.store
            .revoke(&c.seat_id, Some("test".into()), block, false)
            .await
            .unwrap()
            .revoked()
            .is_some()
    );
    d.walk(s(55)).await;
    let blocked = d.checkout(req("carol", Some("fc"), None)).await;
    assert!(
        matches!(blocked, CheckoutOutcome::Blocked { .. }),
        "{blocked:?}"
    );
    d.walk(s(60)).await;
    let dave = d.grant(req("dave", None, None), false).await;
    d.walk(s(100)).await;
    assert!(matches!(
        d.store.heartbeat("day", &dave.seat_id).await.unwrap(),
        HeartbeatOutcome::Renewed(_)
    ));

    // 110: alice's lease is still counted at 110.000, not at 110.001.
    d.walk(s(110)).await;
    let alice = d.sessions(Some("alice"), s(0), s(400), None, 10).await;
    assert_sessions(&alice, &[("alice", 0, None, None, 110.0)]);
    d.clock.set(at(110_001));
    let alice = d.sessions(Some("alice"), s(0), s(400), None, 10).await;
    assert_sessions(
        &alice,
        &[("alice", 0, Some(110), Some(SessionEnd::Lapse), 110.0)],
    );

    d.walk(s(115)).await;
    let erin = d.grant(req("erin", None, None), false).await;
    d.walk(s(120)).await;
    let grown = license_toml("day", 3, TTL_MS, SKEW_MS, GRACE_MS);
    d.licenses.replace(Licenses::parse(&grown).unwrap());
    let _ = d
        .store
        .publish_licenses(grown.clone(), Licenses::parse(&grown).unwrap(), "test")
        .await;
    d.walk(s(130)).await;
    d.walk(s(140)).await;
    assert_eq!(d.store.reap(100).await.unwrap(), 1, "alice's lease");
    let alice = d.sessions(Some("alice"), s(0), s(400), None, 10).await;
    assert_sessions(
        &alice,
        &[("alice", 0, Some(110), Some(SessionEnd::Lapse), 110.0)],
    );

    // The outage: nothing runs from 140 to 300.
    d.clock.set(s(300));
    let frank = d.grant(req("frank", None, None), false).await;
    let dave_now = d
        .store
        .find_seat(&dave.seat_id)
        .await
        .unwrap()
        .expect("dave survives");
    assert_eq!(dave_now.expires_at, s(360), "extended by the outage rule");
    d.walk(s(310)).await;
    d.full("gina").await;
    d.walk(s(320)).await;
    assert!(d.store.release("day", &dave.seat_id).await.unwrap());
    d.walk(s(340)).await;
    assert!(matches!(
        d.store.heartbeat("day", &erin.seat_id).await.unwrap(),
        HeartbeatOutcome::Renewed(_)
    ));
    d.walk(s(370)).await;
    assert!(
        d.store.find_seat(&frank.seat_id).await.unwrap().is_some(),
        "frank is not reaped yet"
    );

    // The session list, newest first; frank's lapse is read from his lease.
    let all = [
        ("frank", 300, Some(365), Some(SessionEnd::Lapse), 65.0),
        ("erin", 115, None, None, 255.0),
        ("dave", 60, Some(320), Some(SessionEnd::Release), 260.0),
        ("carol", 40, Some(50), Some(SessionEnd::Revoke), 10.0),
        ("bob", 10, Some(40), Some(SessionEnd::Release), 30.0),
        ("alice", 0, Some(110), Some(SessionEnd::Lapse), 110.0),
    ];
    let page = d.sessions(None, s(0), s(400), None, 100).await;
    assert_sessions(&page, &all);
    // Pages of four: no session lost or repeated.
    let first = d.sessions(None, s(0), s(400), None, 4).await;
    assert_sessions(&first, &all[..4]);
    let cursor = SessionCursor::decode(&SessionCursor::of(first.last().unwrap()).encode()).unwrap();
    let second = d.sessions(None, s(0), s(400), Some(cursor), 4).await;
    assert_sessions(&second, &all[4..]);
    // Only what overlaps [111, 299): dave and erin.
    let middle = d.sessions(None, s(111), s(299), None, 100).await;
    assert_sessions(&middle, &[all[1], all[2]]);
    let carol = d.sessions(Some("carol"), s(0), s(400), None, 100).await;
    assert_sessions(&carol, &[all[3]]);

    let u = d.usage(s(0), s(400), 60_000).await;
    // Denials: (full, blocked, true at the default 60 s tolerance).
    let point =
        |t: i64, seats: u32, peak: u32, checkouts: u64, (full, blocked, true_n)| UsagePoint {
            t: s(t),
            seats,
            peak,
            over_s: 0.0,
            checkouts,
            denials: full + blocked,
            denials_by_reason: DenialsByReason {
                full,
                blocked,
                ..Default::default()
            },
            true_denials: true_n,
        };
    let none = (0, 0, 0);
    assert_eq!(
        u.points,
        [
            // alice, bob, carol; carol's 409 ×2 (she had a seat 20 s
            // later: not true) and her 403
            point(0, 2, 2, 3, (2, 1, 0)),
            point(60, 2, 2, 2, none), // dave, erin
            point(120, 3, 2, 0, none),
            point(180, 3, 2, 0, none),
            point(240, 3, 2, 0, none),
            point(300, 3, 3, 1, (1, 0, 1)), // frank; gina's 409, true
            point(360, 3, 2, 0, none),      // [360, 400): erin and frank until 365
        ]
    );
    let sum = &u.summary;
    assert_eq!((sum.seats, sum.peak, sum.peak_at), (3, 3, Some(s(300))));
    // Every seat in use: [10, 50) + [60, 110) + [115, 130) + [300, 320).
    assert_eq!(sum.full_s, 125.0);
    assert_eq!(
        sum.over_s, 0.0,
        "the pool never shrinks below the seats held"
    );
    assert_eq!(sum.denials, 4, "the ?wait= attempt does not count");
    // 110 + 30 + 10 + 260 + 255 + 65 seat-seconds, of 2 × 130 + 3 × 240
    // available until now.
    assert!(
        (sum.seat_hours - 730.0 / 3600.0).abs() < 1e-12,
        "{}",
        sum.seat_hours
    );
    assert!(
        (sum.utilization - 730.0 / 980.0).abs() < 1e-12,
        "{}",
        sum.utilization
    );
    assert_eq!(sum.holders, 6);

    // A window inside the day: [115, 130) is all full on 2 seats, nothing
    // in it after.
    let u = d.usage(s(115), s(130), 5_000).await;
    assert_eq!(u.summary.full_s, 15.0);
    assert_eq!(
        (u.summary.peak, u.summary.peak_at, u.summary.holders),
        (2, Some(s(115)), 2)
    );
    d.store.close().await;
}

/// Before any session and after "now" nothing is used; a range wholly in
/// the future has nothing available either.
#[tokio::test]
async fn an_empty_history_and_the_future() {
    let d = Day::new(4);
    d.store.tick().await.unwrap();
    d.walk(s(60)).await;
    let u = d.usage(s(0), s(120), 60_000).await;
    assert_eq!(u.points.len(), 2);
    assert!(u.points.iter().all(|p| p.peak == 0 && p.seats == 4));
    assert_eq!(
        (u.summary.peak, u.summary.peak_at, u.summary.full_s),
        (0, None, 0.0)
    );
    assert_eq!((u.summary.utilization, u.summary.seat_hours), (0.0, 0.0));
    let future = d.usage(s(1000), s(2000), 100_000).await;
    assert_eq!(future.summary.utilization, 0.0);
    assert!(d.sessions(None, s(0), s(120), None, 10).await.is_empty());
    d.store.close().await;
}

/// A database written by a v4 build (sessions keyed by seat id, an open
/// session a row of its own) moves to the current schema (v5 re-keys the
/// sessions, v6 keeps an open session only on its lease) with every
/// session kept, and the open ones are still ended by what ends their
/// lease: a release, a revoke, a reap (as a lapse at expiry + skew).
///
/// ```text
///   0 old1 [0, 20) released      5 old2 [5, 70) lapsed (both closed in v4)
///  10 rel, rev, lap check out (expire 70), then this build opens it
///  30 rel releases, rev is revoked; 40 new checks out (expires 100)
///  75 lap stops being live (70 + skew); 91 lap reaped (grace 15 s)
/// ```
#[tokio::test]
async fn a_v4_history_migrates_and_its_open_sessions_still_end() {
    let db = TestDb::new();
    write_v4(&db);
    let d = Day::on(db, 10);
    d.walk(s(10)).await;
    assert_sessions(
        &d.sessions(None, s(0), s(1000), None, 100).await,
        &[
            ("rel", 10, None, None, 0.0),
            ("rev", 10, None, None, 0.0),
            ("lap", 10, None, None, 0.0),
            ("old2", 5, Some(70), Some(SessionEnd::Lapse), 65.0),
            ("old1", 0, Some(20), Some(SessionEnd::Release), 20.0),
        ],
    );

    d.walk(s(30)).await;
    assert!(d.store.release("day", "ffrel").await.unwrap());
    assert!(
        d.store
            .revoke("ddrev", None, None, false)
            .await
            .unwrap()
            .revoked()
            .is_some()
    );
    d.walk(s(40)).await;
    d.grant(req("new", None, None), false).await;
    d.walk(s(91)).await;
    assert_eq!(d.store.reap(100).await.unwrap(), 1);
    assert!(d.store.find_seat("bblap").await.unwrap().is_none());
    assert_sessions(
        &d.sessions(None, s(0), s(1000), None, 100).await,
        &[
            ("new", 40, None, None, 51.0),
            ("rel", 10, Some(30), Some(SessionEnd::Release), 20.0),
            ("rev", 10, Some(30), Some(SessionEnd::Revoke), 20.0),
            ("lap", 10, Some(75), Some(SessionEnd::Lapse), 65.0),
            ("old2", 5, Some(70), Some(SessionEnd::Lapse), 65.0),
            ("old1", 0, Some(20), Some(SessionEnd::Release), 20.0),
        ],
    );
    d.store.close().await;
}

/// The sessions and leases of the v4 test above, written at schema v4.
fn write_v4(db: &TestDb) {
    let ms = |n: i64| s(n).as_millis();
    let rows = [
        ("00old1", "old1", ms(0), Some(ms(20)), Some("release")),
        ("00old2", "old2", ms(5), Some(ms(70)), Some("lapse")),
        ("ffrel", "rel", ms(10), None, None),
        ("ddrev", "rev", ms(10), None, None),
        ("bblap", "lap", ms(10), None, None),
    ];
    const SESSION: &str =
        "INSERT INTO sessions (seat_id, license_id, holder, started_at, ended_at, end_kind)
         VALUES ($1, 'day', $2, $3, $4, $5)";
    const LEASE: &str =
        "INSERT INTO leases (seat_id, license_id, holder, checked_out_at, issued_at, expires_at)
         VALUES ($1, 'day', $2, $3, $3, $4)";
    match db {
        TestDb::Sqlite(_) => {
            let mut c = rusqlite::Connection::open(db.sqlite_path()).unwrap();
            sqlite_migrate_to(&mut c, 4).unwrap();
            for (seat, holder, start, end, kind) in rows {
                c.execute(SESSION, rusqlite::params![seat, holder, start, end, kind])
                    .unwrap();
                if end.is_none() {
                    c.execute(
                        LEASE,
                        rusqlite::params![seat, holder, start, start + 60_000],
                    )
                    .unwrap();
                }
            }
        }
        TestDb::Postgres(url) => {
            let url = url.clone();
            // The blocking client runs its own runtime: not on this one.
            std::thread::spawn(move || {
                let mut c = postgres::Client::connect(&url, postgres::NoTls).unwrap();
                pg::schema::migrate_to(&mut c, 4).unwrap();
                for (seat, holder, start, end, kind) in rows {
                    c.execute(SESSION, &[&seat, &holder, &start, &end, &kind])
                        .unwrap();
                    if end.is_none() {
                        c.execute(LEASE, &[&seat, &holder, &start, &(start + 60_000)])
                            .unwrap();
                    }
                }
            })
            .join()
            .unwrap();
        }
    }
}
