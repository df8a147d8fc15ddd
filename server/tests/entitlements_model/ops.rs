//! The operations a case runs, and how proptest draws them. Times in a
//! file are drawn relative to the clock when the file is signed, so a
//! shrunk case keeps its meaning.

use proptest::prelude::*;

/// A file to put in the next set.
#[derive(Debug, Clone, Copy)]
pub enum Add {
    /// A file of id `e{id % 4}` (a new id, or one more file of an id in
    /// use), issued `iat_back_s` ago.
    New {
        id: u8,
        iat_back_s: u16,
        terms: Terms,
    },
    /// A renewal of a signed file's id, other seats and terms: issued
    /// `iat_s` from now (ahead of the clock: the decision clock's floor),
    /// and in any case after every file of the id.
    Renew { of: u8, iat_s: i16, terms: Terms },
    /// A tombstone of a signed file's id, issued as a renewal is: it
    /// withdraws the id (from its `nbf`, if it has one).
    Tombstone {
        of: u8,
        iat_s: i16,
        nbf_s: Option<i16>,
    },
    /// A file signed before, put back as it was (an older one comes back
    /// after its renewal, or a tombstone's victim).
    Again { of: u8 },
}

/// What a file grants `cad`, and its term (seconds from signing).
#[derive(Debug, Clone, Copy)]
pub struct Terms {
    pub seats: u8,
    pub overage: u8,
    pub nbf_s: Option<i16>,
    /// `exp` this long after `nbf` (or the signing, without one).
    pub exp_s: Option<u16>,
    pub grace_s: Option<u8>,
}

#[derive(Debug, Clone, Copy)]
pub enum Edge {
    Nbf,
    Exp,
    /// `exp + grace`.
    End,
}

#[derive(Debug, Clone)]
pub enum Op {
    /// A new set in force: the files of the current one whose bit is set
    /// in `keep` (by position, mod 8), and `add`.
    Install {
        keep: u8,
        add: Vec<Add>,
    },
    /// The licenses file's `seats` for `cad` set (narrowing) or cleared.
    Narrow(Option<u8>),
    Advance {
        ms: u32,
    },
    /// The wall clock set earlier.
    StepBack {
        ms: u32,
    },
    /// The wall clock set onto an instant of a signed file, give or take.
    ToEdge {
        of: u8,
        edge: Edge,
        delta_ms: i16,
    },
    Checkout {
        plain: bool,
        holder: u8,
    },
    /// A heartbeat of a seat in the table, or (`gone`) of any seat
    /// granted before, which may have left it.
    Heartbeat {
        of: u8,
        gone: bool,
    },
    /// Every seat of `cad` in the table heartbeats, starting at the one
    /// picked: afterwards no more are live than the grant lets stay.
    HeartbeatAll(u8),
    Release(u8),
}

pub fn terms() -> impl Strategy<Value = Terms> {
    (
        1u8..=5,
        prop_oneof![3 => Just(0u8), 1 => 1u8..=2],
        prop::option::weighted(0.4, -120i16..=180),
        prop::option::weighted(0.7, prop_oneof![2 => 1u16..=120, 1 => 120u16..=900]),
        prop::option::weighted(0.5, 0u8..=60),
    )
        .prop_map(|(seats, overage, nbf_s, exp_s, grace_s)| Terms {
            seats,
            overage,
            nbf_s,
            exp_s,
            grace_s,
        })
}

pub fn new_file() -> impl Strategy<Value = Add> {
    (any::<u8>(), 0u16..=600, terms()).prop_map(|(id, iat_back_s, terms)| Add::New {
        id,
        iat_back_s,
        terms,
    })
}

fn add() -> impl Strategy<Value = Add> {
    prop_oneof![
        4 => new_file(),
        3 => (any::<u8>(), iat(), terms()).prop_map(|(of, iat_s, terms)| Add::Renew {
            of,
            iat_s,
            terms,
        }),
        1 => (any::<u8>(), iat(), prop::option::weighted(0.5, -120i16..=300)).prop_map(
            |(of, iat_s, nbf_s)| Add::Tombstone { of, iat_s, nbf_s }
        ),
        2 => any::<u8>().prop_map(|of| Add::Again { of }),
    ]
}

/// A renewal's `iat` from now: mostly just issued, sometimes ahead.
fn iat() -> impl Strategy<Value = i16> {
    prop_oneof![4 => -60i16..=0, 1 => 1i16..=90]
}

fn edge() -> impl Strategy<Value = Edge> {
    prop_oneof![Just(Edge::Nbf), Just(Edge::Exp), Just(Edge::End)]
}

pub fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (any::<u8>(), prop::collection::vec(add(), 0..=3))
            .prop_map(|(keep, add)| Op::Install { keep, add }),
        1 => prop::option::weighted(0.7, 0u8..=6).prop_map(Op::Narrow),
        4 => prop_oneof![
            1 => 1u32..=999,
            4 => 1_000u32..=20_000,
            2 => 20_000u32..=90_000,
            1 => 90_000u32..=900_000,
        ]
        .prop_map(|ms| Op::Advance { ms }),
        1 => prop_oneof![1u32..=1_000, 1_000u32..=300_000].prop_map(|ms| Op::StepBack { ms }),
        2 => (
            any::<u8>(),
            edge(),
            prop::sample::select(vec![-1_000i16, -1, 0, 1, 1_000])
        )
            .prop_map(|(of, edge, delta_ms)| Op::ToEdge { of, edge, delta_ms }),
        8 => (0u8..4).prop_map(|holder| Op::Checkout {
            plain: false,
            holder
        }),
        2 => (0u8..4).prop_map(|holder| Op::Checkout {
            plain: true,
            holder
        }),
        6 => (any::<u8>(), prop::bool::weighted(0.2))
            .prop_map(|(of, gone)| Op::Heartbeat { of, gone }),
        4 => any::<u8>().prop_map(Op::HeartbeatAll),
        2 => any::<u8>().prop_map(Op::Release),
    ]
}
