//! The generators: licenses with seat policies and operation sequences,
//! one set for each driver. The in-memory test of the rules
//! ([`rules_licenses`], [`rules_op`]) reaches every rule: waiters ahead,
//! borrows, idle reports, outages, policy reloads, runs of clients. The
//! store's model test ([`store_licenses`], [`store_op`]) sends what a
//! store must answer the same on SQLite and PostgreSQL: plain and policed
//! checkouts (licenses of no seats too), repeats, heartbeats without idle
//! reports, releases, revokes, reaps and clock moves.

use leasehold_common::api::MAX_IDLE_S;
use proptest::prelude::*;

use super::ops::{Edge, Lic, Op, Report, Target};
use super::policy::{BorrowPol, Change, GroupPol, Pol, SeatPol};

/// ttl, skew and reap_grace in ms (reap_grace > skew).
fn timing() -> impl Strategy<Value = (u64, u64, u64)> {
    (
        prop_oneof![(1u64..=10).prop_map(|s| s * 1000), 1_000u64..=10_000],
        prop_oneof![(0u64..=2).prop_map(|s| s * 1000), 0u64..=2_000],
        // reap_grace - skew: 1 ms (the tightest legal policy) or up to 5 s.
        prop_oneof![
            1 => Just(1u64),
            2 => (1u64..=5).prop_map(|s| s * 1000),
            2 => 1u64..=5_000,
        ],
    )
        .prop_map(|(ttl_ms, skew_ms, extra)| (ttl_ms, skew_ms, skew_ms + extra))
}

/// 1-4 seats, and an `idle_timeout` on about half the licenses.
fn rules_pol() -> impl Strategy<Value = Pol> {
    (
        1u32..=4,
        timing(),
        // idle_timeout - ttl: none (half the licenses), 1 ms (the tightest
        // legal policy), up to 20 s, or 50-80 s (periods past a minute).
        prop_oneof![
            4 => Just(None),
            1 => Just(Some(1u64)),
            2 => (1u64..=20).prop_map(|s| Some(s * 1000)),
            1 => (1u64..=20_000).prop_map(Some),
            1 => (50u64..=80).prop_map(|s| Some(s * 1000)),
        ],
    )
        .prop_map(|(seats, (ttl_ms, skew_ms, grace_ms), idle_extra)| Pol {
            seats,
            ttl_ms,
            skew_ms,
            grace_ms,
            idle_ms: idle_extra.map(|e| ttl_ms + e),
        })
}

/// 0-4 seats (a license of none now and then), no `idle_timeout`.
fn store_pol() -> impl Strategy<Value = Pol> {
    (prop_oneof![1 => Just(0u32), 6 => 1u32..=4], timing()).prop_map(
        |(seats, (ttl_ms, skew_ms, grace_ms))| Pol {
            seats,
            ttl_ms,
            skew_ms,
            grace_ms,
            idle_ms: None,
        },
    )
}

fn group_pol(i: usize) -> impl Strategy<Value = GroupPol> {
    (
        proptest::sample::subsequence(vec!["h0", "h1", "h2", "h*"], 0..=2),
        proptest::sample::subsequence(vec!["f0", "f1", "f*"], 0..=1),
        0u32..=2,
        proptest::option::weighted(0.7, 1u32..=3),
    )
        .prop_map(move |(holders, fingerprints, reserve, max)| {
            let mut holders: Vec<String> = holders.into_iter().map(String::from).collect();
            if holders.is_empty() && fingerprints.is_empty() {
                holders.push(format!("h{i}"));
            }
            GroupPol {
                name: format!("g{i}"),
                holders,
                fingerprints: fingerprints.into_iter().map(String::from).collect(),
                reserve,
                max,
            }
        })
}

fn borrow_pol() -> impl Strategy<Value = BorrowPol> {
    (
        prop_oneof![Just(60u64), Just(120), Just(600)],
        1u32..=2,
        prop_oneof![
            2 => Just(None),
            1 => Just(Some(vec!["h0".to_string(), "@g1".to_string()])),
        ],
    )
        .prop_map(|(max_s, seats, allow)| BorrowPol {
            max_s,
            seats,
            allow,
        })
}

/// A plain license (one in four), or one with seat policies: overage,
/// linger, a holder cap, 0-2 groups, allow/deny, and (`borrow`) lending.
fn seat_pol(borrow: bool) -> impl Strategy<Value = SeatPol> {
    let allow_deny = prop_oneof![
        4 => Just((None, vec![])),
        1 => Just((None, vec!["h2".to_string()])),
        1 => Just((Some(vec!["@g0".to_string(), "h0".to_string()]), vec![])),
        1 => Just((Some(vec!["h*".to_string()]), vec!["@g1".to_string()])),
    ];
    let lends = if borrow {
        proptest::option::weighted(0.7, borrow_pol()).boxed()
    } else {
        Just(None).boxed()
    };
    prop_oneof![
        1 => Just(SeatPol::default()),
        3 => (
            0u32..=2,
            proptest::option::weighted(0.7, prop_oneof![Just(1_000u64), 1_000u64..=20_000]),
            proptest::option::weighted(0.4, 1u32..=2),
            prop_oneof![
                1 => Just(vec![]),
                2 => group_pol(0).prop_map(|g| vec![g]),
                2 => (group_pol(0), group_pol(1)).prop_map(|(a, b)| vec![a, b]),
            ],
            allow_deny,
            lends,
        )
            .prop_map(
                |(overage, linger_ms, max_per_holder, groups, (allow, deny), borrow)| SeatPol {
                    overage,
                    linger_ms,
                    max_per_holder,
                    allow,
                    deny,
                    groups,
                    borrow,
                },
            ),
    ]
}

/// Policies valid for their seats.
fn clamped(
    pol: impl Strategy<Value = Pol>,
    borrow: bool,
    n: std::ops::RangeInclusive<usize>,
) -> impl Strategy<Value = Vec<(Pol, SeatPol)>> {
    proptest::collection::vec((pol, seat_pol(borrow)), n).prop_map(|v| {
        v.into_iter()
            .map(|(p, sp)| (p, sp.clamp(p.seats)))
            .collect()
    })
}

/// The in-memory test's licenses: one or two, with idle timeouts and
/// borrowing.
pub fn rules_licenses() -> impl Strategy<Value = Vec<(Pol, SeatPol)>> {
    clamped(rules_pol(), true, 1..=2)
}

/// The store test's licenses: two or three, some of no seats, no idle
/// timeout, no borrowing.
pub fn store_licenses() -> impl Strategy<Value = Vec<(Pol, SeatPol)>> {
    clamped(store_pol(), false, 2..=3)
}

fn report() -> impl Strategy<Value = Report> {
    prop_oneof![
        3 => Just(Report::Absent),
        1 => Just(Report::Zero),
        2 => (1u64..=5).prop_map(Report::Secs),
        3 => (-3i64..=3).prop_map(Report::Continue),
        3 => (-2i64..=2).prop_map(Report::NearTimeout),
        1 => prop_oneof![Just(600u64), Just(3_600), Just(MAX_IDLE_S)].prop_map(Report::Large),
    ]
}

fn target() -> impl Strategy<Value = Target> {
    prop_oneof![
        4 => (0usize..8).prop_map(Target::Live),
        3 => (0usize..8).prop_map(Target::Held),
        2 => (0usize..16).prop_map(Target::Issued),
        1 => (0usize..16).prop_map(Target::Foreign),
        1 => Just(Target::Never),
    ]
}

fn block_ms() -> impl Strategy<Value = Option<u64>> {
    prop_oneof![
        Just(None),
        Just(Some(0)),
        (1u64..=30).prop_map(|s| Some(s * 1000)),
        (1u64..=30_000).prop_map(Some),
    ]
}

fn edge() -> impl Strategy<Value = Op> {
    (
        0usize..8,
        prop_oneof![
            Just(Edge::LastLive),
            Just(Edge::FirstLapsed),
            Just(Edge::LastKept),
            Just(Edge::FirstReapable),
        ],
    )
        .prop_map(|(lease, edge)| Op::ToEdge { lease, edge })
}

fn block_end() -> impl Strategy<Value = Op> {
    (0usize..4, any::<bool>()).prop_map(|(block, ended)| Op::ToBlockEnd { block, ended })
}

fn rules_checkout() -> impl Strategy<Value = Op> {
    (
        prop_oneof![
            12 => (0usize..2).prop_map(Lic::Known),
            1 => Just(Lic::Unknown),
            2 => (0usize..4).prop_map(Lic::Blocked),
            4 => (0usize..8).prop_map(Lic::Seat),
            5 => (0usize..8).prop_map(Lic::Lingering),
        ],
        0u8..3,
        proptest::option::weighted(0.6, 0u8..3),
        proptest::option::weighted(0.4, 0u8..3),
        prop_oneof![
            4 => Just(Vec::new()),
            1 => proptest::collection::vec(
                (0u8..3, proptest::option::weighted(0.6, 0u8..3)),
                1..=3
            ),
        ],
        any::<bool>(),
        prop_oneof![
            10 => Just(None),
            6 => prop_oneof![Just(30u64), Just(60), Just(90)].prop_map(Some),
            1 => prop_oneof![Just(0u64), Just(601)].prop_map(Some),
        ],
    )
        .prop_map(
            |(license, holder, fingerprint, key, ahead, counted, borrow_s)| Op::Checkout {
                license,
                holder,
                fingerprint,
                key,
                ahead,
                counted,
                borrow_s,
            },
        )
}

fn clients() -> impl Strategy<Value = Op> {
    (
        (0usize..2, 0u8..=2),
        1u8..=24,
        any::<bool>(),
        any::<u8>(),
        (any::<bool>(), any::<bool>()),
    )
        .prop_map(
            |((license, checkouts), rounds, half, idle, (sweep, lend))| Op::Clients {
                license,
                checkouts,
                rounds,
                half,
                idle,
                sweep,
                lend,
            },
        )
}

fn repolicy() -> impl Strategy<Value = Op> {
    (
        0usize..2,
        prop_oneof![
            Just(Change::LowerMaxes),
            Just(Change::DropGroup),
            Just(Change::DropLinger),
            Just(Change::OneEach),
            Just(Change::DenyH0),
            Just(Change::AddLinger),
        ],
    )
        .prop_map(|(license, change)| Op::Repolicy { license, change })
}

/// One operation of the in-memory test.
pub fn rules_op() -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => rules_checkout(),
        5 => (target(), report()).prop_map(|(t, r)| Op::Heartbeat(t, r)),
        3 => target().prop_map(Op::Release),
        2 => ((target(), any::<bool>()), any::<bool>(), block_ms()).prop_map(
            |((target, force), reason, block_ms)| Op::Revoke {
                target,
                force,
                reason,
                block_ms,
            }
        ),
        2 => (0usize..5).prop_map(|limit| Op::Reap { limit }),
        4 => (0u64..=2_000).prop_map(|ms| Op::Advance { ms }),
        1 => (2_000u64..=60_000).prop_map(|ms| Op::Advance { ms }),
        3 => edge(),
        1 => block_end(),
        1 => prop_oneof![0u64..=3_000, 3_000u64..=60_000].prop_map(|gap_ms| Op::Outage { gap_ms }),
        1 => repolicy(),
        1 => clients(),
    ]
}

/// A checkout of the store test: no waiters ahead, always counted, no
/// borrow; a seat named by `Lic::Lingering` (lingering ones first).
fn store_checkout() -> impl Strategy<Value = Op> {
    (
        prop_oneof![
            12 => (0usize..3).prop_map(Lic::Known),
            1 => Just(Lic::Unknown),
            3 => (0usize..8).prop_map(Lic::Lingering),
        ],
        0u8..3,
        proptest::option::weighted(0.5, 0u8..3),
        proptest::option::weighted(0.4, 0u8..3),
    )
        .prop_map(|(license, holder, fingerprint, key)| Op::Checkout {
            license,
            holder,
            fingerprint,
            key,
            ahead: Vec::new(),
            counted: true,
            borrow_s: None,
        })
}

/// One operation of the store test.
pub fn store_op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => store_checkout(),
        4 => Just(Op::Again),
        5 => target().prop_map(|t| Op::Heartbeat(t, Report::Absent)),
        3 => target().prop_map(Op::Release),
        3 => (target(), block_ms()).prop_map(|(target, block_ms)| Op::Revoke {
            target,
            force: false,
            reason: true,
            block_ms,
        }),
        2 => (0usize..5).prop_map(|limit| Op::Reap { limit }),
        4 => (0u64..=2_000).prop_map(|ms| Op::Advance { ms }),
        1 => (2_000u64..=60_000).prop_map(|ms| Op::Advance { ms }),
        3 => edge(),
        1 => block_end(),
    ]
}
