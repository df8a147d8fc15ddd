//! Commands that share a batch are answered as if one by one: a known
//! sequence, and random bursts (a proptest).

use std::sync::atomic::Ordering;

use leasehold_server::store::{
    CheckoutOutcome, CheckoutRequest, HeartbeatOutcome, LeaseRow, RevokeOutcome,
};
use proptest::prelude::*;

use crate::support::NO_STALL;
use crate::{Harness, req, req_fp, secs};

// ---------------------------------------------------------------------------
// Commands that share a batch
// ---------------------------------------------------------------------------

/// `caps`: 4 seats, 2 per holder, a group `team` that may hold 2 and keeps 1
/// reserved.
const CAPS: &str = r#"
[[license]]
id = "caps"
key = "caps-key"
seats = 4
ttl = "60s"
skew = "5s"
reap_grace = "15s"
max_per_holder = 2

[[license.group]]
name = "team"
holders = ["t-*"]
max = 2
reserve = 1
"#;

/// One command of a burst: as written (holder and fingerprint, the n-th
/// seat taken before it), then as sent.
enum Burst<C, R> {
    Checkout(C),
    Release(R),
}

/// A burst's command as written: (holder, fingerprint or ""), or the n-th
/// seat taken before the burst.
type Written = Burst<(&'static str, &'static str), usize>;

fn outcome(o: CheckoutOutcome) -> String {
    match o {
        CheckoutOutcome::Granted { reused: false, .. } => "granted".to_string(),
        CheckoutOutcome::Full { live, reserved, .. } => format!("full {live} reserved {reserved}"),
        CheckoutOutcome::LimitReached { limit, max, .. } => format!("{limit:?} cap {max}"),
        other => format!("{other:?}"),
    }
}

/// Commands sent at once, in order, are answered as if one by one, however
/// the writer cuts them into batches: each checkout sees the seats the
/// commands before it took and freed, for the pool, a group's reservation
/// and cap and a holder's cap. (On PostgreSQL a batch reads each count once
/// for the licenses it checks out from and follows its own writes, and
/// keeps new leases to insert them together; this is what must not drift.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commands_sent_at_once_are_answered_as_if_one_by_one() {
    use Burst::{Checkout, Release};
    let h = Harness::with(CAPS, NO_STALL);
    let burst: [(Written, &str); 13] = [
        (Checkout(("x-3", "")), "granted"),
        (Checkout(("x-4", "")), "full 4 reserved 0"),
        (Release(1), "released"),
        (Checkout(("x-4", "")), "granted"),
        (Checkout(("t-2", "")), "full 4 reserved 0"),
        // The team's member leaves: its reserved seat is free again, for
        // the team only.
        (Release(0), "released"),
        (Checkout(("x-5", "")), "full 3 reserved 1"),
        (Checkout(("t-1", "")), "granted"),
        (Release(2), "released"),
        (Checkout(("t-1", "")), "granted"),
        (Checkout(("t-1", "")), "Holder cap 2"),
        (Checkout(("t-3", "")), "Group cap 2"),
        (Checkout(("x-6", "fp")), "full 4 reserved 0"),
    ];
    let stats = h.store.writer_stats();
    let before = (
        stats.batches.load(Ordering::Relaxed),
        stats.commands.load(Ordering::Relaxed),
    );
    for round in 0..12 {
        // Before each burst: a team member and two others hold seats.
        let mut held = Vec::new();
        for holder in ["t-1", "x-1", "x-2"] {
            held.push(h.fresh(req("caps", holder)).await);
        }
        let answers = futures_util::future::join_all(burst.iter().map(|(step, _)| {
            let store = h.store.clone();
            let step = match step {
                Checkout((holder, "")) => Checkout(req("caps", holder)),
                Checkout((holder, fp)) => Checkout(req_fp("caps", holder, fp)),
                Release(n) => Release(held[*n].seat_id.clone()),
            };
            async move {
                match step {
                    Checkout(r) => outcome(store.checkout(r).await.unwrap()),
                    Release(seat) => match store.release("caps", &seat).await {
                        Ok(true) => "released".to_string(),
                        other => format!("{other:?}"),
                    },
                }
            }
        }))
        .await;
        let want: Vec<&str> = burst.iter().map(|(_, want)| *want).collect();
        assert_eq!(answers, want, "round {round}");
        assert_eq!(h.live("caps").await, 4, "round {round}");
        for seat in h.store.seats(Some("caps")).await.unwrap() {
            assert!(h.store.release("caps", &seat.seat_id).await.unwrap());
        }
    }
    let batches = stats.batches.load(Ordering::Relaxed) - before.0;
    let commands = stats.commands.load(Ordering::Relaxed) - before.1;
    assert!(
        commands > batches,
        "no batch held two commands ({commands} in {batches}): nothing here shared a batch"
    );
    h.finish().await;
}

/// `burst`: 4 seats and 1 of overage, 2 per holder, linger, a group `team`
/// that may hold 2 and keeps 1 reserved, and 1 seat lent for up to an hour
/// (not to x-3).
const BURST: &str = r#"
[[license]]
id = "burst"
key = "burst-key"
seats = 4
overage = 1
ttl = "60s"
skew = "5s"
reap_grace = "15s"
max_per_holder = 2
linger = "30s"

[[license.group]]
name = "team"
holders = ["t-*"]
max = 2
reserve = 1

[license.borrow]
max = "1h"
seats = 1
allow = ["t-*", "x-1", "x-2"]
"#;

/// One command of a random burst on `burst`.
#[derive(Debug, Clone)]
enum BurstOp {
    Checkout {
        holder: &'static str,
        fingerprint: Option<&'static str>,
        key: Option<&'static str>,
        /// Borrow for this many seconds (more than an hour is refused).
        borrow_s: Option<u64>,
    },
    /// Release, heartbeat or revoke the n-th (mod) seat held before the burst.
    Release(usize),
    Heartbeat(usize),
    Revoke(usize),
}

fn burst_op() -> impl Strategy<Value = BurstOp> {
    prop_oneof![
        6 => (
            prop::sample::select(vec!["t-1", "t-2", "x-1", "x-2", "x-3"]),
            proptest::option::weighted(0.6, prop::sample::select(vec!["fa", "fb", "fd"])),
            proptest::option::weighted(0.3, prop::sample::select(vec!["ka", "kb"])),
            proptest::option::weighted(0.4, prop::sample::select(vec![600u64, 3600, 7200])),
        )
            .prop_map(|(holder, fingerprint, key, borrow_s)| BurstOp::Checkout {
                holder,
                fingerprint,
                key,
                // A borrow names its machine (the HTTP layer demands one).
                borrow_s: borrow_s.filter(|_| fingerprint.is_some()),
            }),
        2 => (0usize..5).prop_map(BurstOp::Release),
        1 => (0usize..5).prop_map(BurstOp::Heartbeat),
        1 => (0usize..5).prop_map(BurstOp::Revoke),
    ]
}

/// A store's answer with the seat ids left out (they are random) and times
/// from `now`.
fn answer_shape(h: &Harness, op: &BurstOp, seats: &[LeaseRow]) -> impl Future<Output = String> {
    let store = h.store.clone();
    let now = h.now();
    let seat = |n: usize| seats[n % seats.len()].seat_id.clone();
    let sent = match op {
        BurstOp::Checkout {
            holder,
            fingerprint,
            key,
            borrow_s,
        } => Sent::Checkout(CheckoutRequest {
            fingerprint: fingerprint.map(str::to_string),
            idempotency_key: key.map(str::to_string),
            borrow: borrow_s.map(secs),
            ..req("burst", holder)
        }),
        BurstOp::Release(n) => Sent::Release(seat(*n)),
        BurstOp::Heartbeat(n) => Sent::Heartbeat(seat(*n)),
        BurstOp::Revoke(n) => Sent::Revoke(seat(*n)),
    };
    async move {
        match sent {
            Sent::Checkout(r) => match store.checkout(r).await.unwrap() {
                CheckoutOutcome::Granted {
                    lease,
                    reused,
                    overage,
                } => format!(
                    "granted {} {:?} {:?} {:?} expires +{}ms reused={reused} overage={overage}",
                    lease.holder,
                    lease.fingerprint,
                    lease.group,
                    lease.mode,
                    lease.expires_at.millis_since(now)
                ),
                other => format!("{other:?}"),
            },
            Sent::Release(seat) => {
                format!("release {}", store.release("burst", &seat).await.unwrap())
            }
            Sent::Heartbeat(seat) => match store.heartbeat("burst", &seat).await.unwrap() {
                HeartbeatOutcome::Renewed(l) => {
                    format!("renewed +{}ms", l.expires_at.millis_since(now))
                }
                HeartbeatOutcome::Borrowed { expires_at } => {
                    format!("borrowed until +{}ms", expires_at.millis_since(now))
                }
                other => format!("{other:?}"),
            },
            Sent::Revoke(seat) => match store.revoke(&seat, None, None, false).await.unwrap() {
                RevokeOutcome::Revoked(l) => format!("revoked {}", l.holder),
                RevokeOutcome::Borrowed(l) => format!(
                    "borrowed by {} until +{}ms",
                    l.holder,
                    l.expires_at.millis_since(now)
                ),
                other => format!("{other:?}"),
            },
        }
    }
}

/// A [`BurstOp`] as sent: its request or the seat it names.
enum Sent {
    Checkout(CheckoutRequest),
    Release(String),
    Heartbeat(String),
    Revoke(String),
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 16,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    /// A random burst of checkouts (holder and group caps, reservations,
    /// overage, fingerprints, Idempotency-Keys, borrows), releases into linger,
    /// heartbeats and revokes, some on a lapsed seat, sent at once in order, is answered exactly
    /// as the same commands sent one by one from the same state at the
    /// same time (whatever batches the writer cut): what a batch keeps
    /// between commands (on PostgreSQL: counts, new leases, renewals,
    /// leases read up front) never answers otherwise than the table would.
    #[test]
    fn a_burst_is_answered_as_its_commands_one_by_one(
        ops in prop::collection::vec(burst_op(), 4..24),
    ) {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async {
            let h = Harness::with(BURST, NO_STALL);
            let mut answers = Vec::new();
            for at_once in [true, false] {
                // The same state before each run, a quarter hour after the
                // last: a seat that lapsed 5 s ago (not yet reapable), a
                // team member, two others, and a seat left lingering by
                // x-3 on its machine.
                h.advance(secs(900));
                let mut held = vec![h.fresh(req_fp("burst", "x-4", "fe")).await];
                h.advance(secs(70));
                for (holder, fp) in [("t-1", "fa"), ("x-1", "fb"), ("x-2", "fc"), ("x-3", "fd")] {
                    held.push(h.fresh(req_fp("burst", holder, fp)).await);
                }
                assert!(h.store.release("burst", &held[4].seat_id).await.unwrap());
                let mut got = Vec::new();
                if at_once {
                    let sent: Vec<_> = ops.iter().map(|op| answer_shape(&h, op, &held)).collect();
                    got = futures_util::future::join_all(sent).await;
                } else {
                    for op in &ops {
                        got.push(answer_shape(&h, op, &held).await);
                    }
                }
                answers.push(got);
                for seat in h.store.seats(Some("burst")).await.unwrap() {
                    h.store.revoke(&seat.seat_id, None, None, true).await.unwrap();
                }
                assert_eq!(h.live("burst").await, 0);
            }
            assert_eq!(&answers[0], &answers[1], "at once (left) vs one by one (right): {ops:?}");
            h.finish().await;
        });
    }
}
