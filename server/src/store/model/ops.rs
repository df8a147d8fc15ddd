//! The operations a generated sequence is made of, and the names they use
//! for licenses, seats and clock edges (resolved against the model's state
//! when the operation runs: [`super::Model::resolve`],
//! [`super::Model::request`]).

use super::policy::Change;

/// Which license a checkout names.
#[derive(Debug, Clone, Copy)]
pub enum Lic {
    /// The n-th license (mod the number of licenses).
    Known(usize),
    /// A license that is not in the policy.
    Unknown,
    /// As the license, holder and fingerprint of the n-th (mod) block ever
    /// set (ended or not); `Known(n)` if there is none.
    Blocked(usize),
    /// As the license, holder and fingerprint of the n-th (mod) seat in the
    /// table (a re-claim, of a lingering seat too); `Known(n)` if none.
    Seat(usize),
    /// As the license, holder and fingerprint of the n-th (mod) lingering
    /// seat; `Seat(n)` if none lingers. An even `n` asks for it back
    /// plainly (no borrow), so that path stays common.
    Lingering(usize),
}

/// Which seat a heartbeat, release or revoke names.
#[derive(Debug, Clone, Copy)]
pub enum Target {
    /// The n-th (mod) live seat in issue order, under its own license (a
    /// held one if none is live).
    Live(usize),
    /// The n-th (mod) seat in the table, live or lapsed, in issue order,
    /// under its own license.
    Held(usize),
    /// The n-th (mod) seat ever granted (maybe released, revoked or reaped
    /// since), under its own license.
    Issued(usize),
    /// The n-th (mod) seat ever granted, presented under the next license.
    Foreign(usize),
    /// A seat id that was never issued.
    Never,
}

/// A boundary of a held lease to move the clock exactly onto.
#[derive(Debug, Clone, Copy)]
pub enum Edge {
    /// `expires_at + skew`: the last live millisecond.
    LastLive,
    /// `expires_at + skew + 1 ms`: the first lapsed one.
    FirstLapsed,
    /// `expires_at + reap_grace`: the last millisecond it is kept.
    LastKept,
    /// `expires_at + reap_grace + 1 ms`: the first reapable one.
    FirstReapable,
}

/// The idle report a heartbeat carries (`idle_s`, whole seconds).
#[derive(Debug, Clone, Copy)]
pub enum Report {
    /// No report: active.
    Absent,
    /// `idle_s: 0`: active.
    Zero,
    /// A few seconds.
    Secs(u64),
    /// The seat's idle time so far (whole seconds, 0 if active), off by
    /// this many seconds: still idle with jitter, or back a moment ago.
    Continue(i64),
    /// The license's timeout (whole seconds, rounded up; 60 s for a license
    /// without one), off by this many seconds.
    NearTimeout(i64),
    /// Ten minutes, an hour, or the most HTTP accepts.
    Large(u64),
}

#[derive(Debug, Clone)]
pub enum Op {
    Checkout {
        license: Lic,
        holder: u8,
        fingerprint: Option<u8>,
        key: Option<u8>,
        /// The waiters ahead in line: holder and fingerprint numbers.
        ahead: Vec<(u8, Option<u8>)>,
        counted: bool,
        /// `borrow_s` (a fingerprint is then always sent, as HTTP requires).
        borrow_s: Option<u64>,
    },
    /// The last checkout again, as a client retrying asks it (on SQLite a
    /// repeated denial may be answered beside the writer: `repeats.rs`);
    /// nothing before the first checkout.
    Again,
    Heartbeat(Target, Report),
    Release(Target),
    Revoke {
        target: Target,
        force: bool,
        reason: bool,
        block_ms: Option<u64>,
    },
    Reap {
        limit: usize,
    },
    /// Move the clock forward.
    Advance {
        ms: u64,
    },
    /// Move the clock forward exactly onto a boundary of the n-th (mod)
    /// held lease whose boundary is not yet past (no-op if there is none).
    ToEdge {
        lease: usize,
        edge: Edge,
    },
    /// Move the clock forward to the last blocked millisecond of the n-th
    /// (mod) block in force, or to the first free one.
    ToBlockEnd {
        block: usize,
        ended: bool,
    },
    /// Nobody could renew for `gap_ms`: jump the clock and apply the
    /// outage rule with `last_alive` = the time before the jump.
    Outage {
        gap_ms: u64,
    },
    /// The licenses file reloads with the n-th (mod) license's policy
    /// changed: no seat may be evicted by it.
    Repolicy {
        license: usize,
        change: Change,
    },
    /// The clients of the n-th (mod) license's live seats kept by
    /// heartbeats run for `rounds`: each round each client heartbeats (until
    /// told its seat is lost), then the clock moves by the ttl (or half)
    /// and the reaper sweeps (with `sweep`). A client whose bit is set in
    /// `idle` (by its seat's issue number, mod 8) reports its user idle
    /// since the seat's idle start (or, if none, the run's start; for an
    /// odd issue number its checkout), in whole seconds rounded down, or
    /// (odd rounds) a second more; the others report activity (0, then
    /// none, in turn). First, holders `h0`.. (on machines `f0`..) ask
    /// for `checkouts` seats of the license; last, with `lend`, each idle
    /// client still holding its seat asks to borrow it for 60 s.
    Clients {
        license: usize,
        checkouts: u8,
        rounds: u8,
        half: bool,
        idle: u8,
        sweep: bool,
        lend: bool,
    },
}

/// The sequence with each `Again` replaced by the checkout before it (and
/// dropped before the first checkout), each with its index in `ops`, as
/// the drivers run it.
pub fn resolve_again(ops: &[Op]) -> Vec<(usize, Op)> {
    let mut last = None;
    let mut out = Vec::with_capacity(ops.len());
    for (i, op) in ops.iter().enumerate() {
        match op {
            Op::Again => out.extend(last.clone().map(|op| (i, op))),
            Op::Checkout { .. } => {
                last = Some(op.clone());
                out.push((i, op.clone()));
            }
            op => out.push((i, op.clone())),
        }
    }
    out
}
