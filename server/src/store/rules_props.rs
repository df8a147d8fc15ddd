//! Fast tests of the lease rules ([`Rules`]) on the in-memory store
//! ([`MemoryStore`]): a property test of random operation sequences against
//! a small reference model, and named unit tests of the checkout steps, the
//! outage rule and the pool-size history.
//!
//! The property test drives the rules directly (no writer thread, no
//! database), so 1,000 sequences of up to 60 operations run in a few
//! seconds in a debug build (with the seat policies and idle reclaim:
//! ~2.2 s CPU, 2.5 s wall for `rules_match_the_model` on a 2-core box at
//! load 4; 1.7 s CPU before idle reclaim). The real stores are held to the
//! same answers by the slower model test in `server/tests/model.rs`.
//!
//! The model restates each rule from the one predicate
//! (`leasehold_common::liveness`), never by calling the rules; after every
//! operation it checks the answer, the events, the sessions, the denial
//! count and the blocks against the model, and these invariants against
//! the store's own state:
//!
//! - live (by `is_live`) ≤ seats + overage for every license, and
//!   `live_counts` says the same (live, lingering, per group); a fresh
//!   grant only when `live + ahead + others' unused reservations <
//!   seats + overage`, to an allowed holder below `max_per_holder`, into a
//!   group below its `max`, flagged `overage` exactly when `live >= seats`;
//! - until a policy change (which never evicts a seat, so seats granted
//!   before it may sit above a cap it lowered): no group above its `max`,
//!   no holder above `max_per_holder`, and the seats outside a group never
//!   reach into its reservation (`outside + reserve <= seats + overage`);
//! - `Full` only when `live + ahead + reserved >= seats + overage` and the
//!   caller had no seat it may get back (by key or fingerprint);
//!   `retry_after` is the time until the earliest live lease lapses
//!   (`lapses_at`), one TTL when the reservations alone refuse;
//! - linger: a release keeps the seat (`lingering`, until now + linger), a
//!   heartbeat on it is lost, a second release changes nothing, only its
//!   holder on its machine (still allowed) takes it back, and its reap ends
//!   the session as a `Release` when the linger ended;
//! - a replay or re-claim returns the caller's seat, renewed, and adds no
//!   lease;
//! - reap takes exactly the reapable leases (`is_reapable`), oldest first,
//!   up to the limit, never a live one;
//! - every seat that left has exactly one session, ended as the rules say
//!   (`Lapse` at `live_until` for a lapsed seat, else `Release`/`Revoke`
//!   at now), and no seat in the table has one;
//! - event ids strictly increase, and the events the rules return are the
//!   ones the store appended;
//! - one live (not lingering) seat per fingerprint and holder, and one
//!   lease per Idempotency-Key.
//!
//! The generated licenses carry seat policies (parsed from a generated
//! licenses file): 0-2 groups with holder/fingerprint patterns matching
//! some of the generated holders, reserves and maxes, `max_per_holder`,
//! `overage`, allow/deny and `linger`; a `Repolicy` step reloads the file
//! with a group's max lowered, a group dropped, linger dropped or added,
//! a holder cap or a deny added.
//!
//! Idle reclaim: some licenses have an `idle_timeout` (from 1 ms to 80 s
//! longer than the ttl), and heartbeats carry an idle report (none, 0, a
//! few seconds, the seat's idle time so far ± jitter, around the timeout,
//! or long). The model keeps each seat's `idle_since` by the brief's rule
//! (its own restatement, not `idle::after_report`): `now − idle_s`, not
//! before checkout; a start more than 2 s later than the last one's means
//! the user came back; 0 or none is activity. It says when a heartbeat
//! renews (with the new `idle_since`) or reclaims (410 `idle`, the seat
//! gone, session `Idle` at `idle_since + timeout`, a `reclaim` event, no
//! linger), which seats the reaper reclaims (live, kept by heartbeats,
//! idle past the timeout; within its limit, before lapsed seats), which
//! idle periods (≥ 60 s) are recorded and when (came back; the session
//! ended; released into linger; taken back by a checkout; turned into a
//! borrow), and the exact 410 reason for a seat that is not in the table.
//! A `Clients` step runs the clients of one license's seats for a while:
//! heartbeats every ttl (or half) reporting activity or an honest idle
//! time, with or without a reaper sweep between rounds, and may end with
//! the idle machines borrowing their seats. Explicit checks
//! on the store's own state, besides the model, for the four properties
//! of issue 30: (1) a seat whose client reports activity at least every
//! ttl is never reclaimed; (2) after a sweep with room in its limit no
//! live seat is idle past its timeout, and the live count dropped in that
//! same command; (3) a borrowed seat is never reclaimed; (4) a reclaim
//! ends its session `Idle` at `idle_since + timeout`, never as a lapse,
//! and a license without `idle_timeout` never reclaims.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;
use std::time::Duration;

use leasehold_common::api::{
    DenialReason, Event, EventKind, MAX_IDLE_S, SeatLostReason, SessionEnd,
};
use leasehold_common::liveness::{lapses_at, live_until};
use leasehold_common::policy::format_duration;
use leasehold_common::{Licenses, Timestamp, is_live, is_reapable};
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;

use super::memory::{MemoryStore, StoredDenial, StoredLease, StoredSession};
use super::rules::{EventThrottle, LeaseTx, Rules, reap_detail};
use super::{
    CheckoutOutcome, CheckoutRequest, HeartbeatOutcome, LeaseRow, Limit, NotAllowedBecause,
    PoolCounts, RevokeOutcome, SeatMode, Waiter,
};

// ---------------------------------------------------------------------------
// A world: a store, the policies, the writer's throttle and the time
// ---------------------------------------------------------------------------

/// An arbitrary start, far from zero so nothing saturates.
const T0: i64 = 1_700_000_000_000;
/// Events kept by a reap's prune: more than any test appends.
const RETENTION: i64 = 1_000_000;
/// The writer's throttle window for denied and lost events (restated).
const THROTTLE_MS: i64 = 10_000;

fn at(ms_since_t0: i64) -> Timestamp {
    Timestamp::from_millis(T0 + ms_since_t0)
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn license_toml(id: &str, seats: u32, ttl_ms: u64, skew_ms: u64, grace_ms: u64) -> String {
    format!(
        "[[license]]\nid = \"{id}\"\nkey = \"{id}-key\"\nseats = {seats}\n\
         ttl = \"{ttl_ms}ms\"\nskew = \"{skew_ms}ms\"\nreap_grace = \"{grace_ms}ms\"\n"
    )
}

/// One `[[license.group]]` of a generated license.
#[derive(Debug, Clone, PartialEq)]
struct GroupPol {
    name: String,
    holders: Vec<String>,
    fingerprints: Vec<String>,
    reserve: u32,
    max: Option<u32>,
}

/// The seat-policy fields of a generated license (all absent: a plain
/// license, which must decide exactly as before them).
#[derive(Debug, Clone, Default, PartialEq)]
struct SeatPol {
    overage: u32,
    linger_ms: Option<u64>,
    max_per_holder: Option<u32>,
    allow: Option<Vec<String>>,
    deny: Vec<String>,
    groups: Vec<GroupPol>,
    borrow: Option<BorrowPol>,
}

/// `[license.borrow]` of a generated license.
#[derive(Debug, Clone, PartialEq)]
struct BorrowPol {
    max_s: u64,
    seats: u32,
    allow: Option<Vec<String>>,
}

fn toml_list(items: &[String]) -> String {
    let quoted: Vec<String> = items.iter().map(|i| format!("\"{i}\"")).collect();
    format!("[{}]", quoted.join(", "))
}

impl SeatPol {
    /// The policy's lines of a `[[license]]` (after its plain fields).
    fn toml(&self) -> String {
        let mut t = String::new();
        if self.overage > 0 {
            t += &format!("overage = {}\n", self.overage);
        }
        if let Some(l) = self.linger_ms {
            t += &format!("linger = \"{l}ms\"\n");
        }
        if let Some(m) = self.max_per_holder {
            t += &format!("max_per_holder = {m}\n");
        }
        if let Some(allow) = &self.allow {
            t += &format!("allow = {}\n", toml_list(allow));
        }
        if !self.deny.is_empty() {
            t += &format!("deny = {}\n", toml_list(&self.deny));
        }
        for g in &self.groups {
            t += &format!("[[license.group]]\nname = \"{}\"\n", g.name);
            if !g.holders.is_empty() {
                t += &format!("holders = {}\n", toml_list(&g.holders));
            }
            if !g.fingerprints.is_empty() {
                t += &format!("fingerprints = {}\n", toml_list(&g.fingerprints));
            }
            if g.reserve > 0 {
                t += &format!("reserve = {}\n", g.reserve);
            }
            if let Some(m) = g.max {
                t += &format!("max = {m}\n");
            }
        }
        if let Some(b) = &self.borrow {
            t += &format!(
                "[license.borrow]\nmax = \"{}s\"\nseats = {}\n",
                b.max_s, b.seats
            );
            if let Some(allow) = &b.allow {
                t += &format!("allow = {}\n", toml_list(allow));
            }
        }
        t
    }

    /// allow/deny, then `borrow.allow` (absent: whoever may check out).
    fn allows_borrow(&self, holder: &str, fp: Option<&str>) -> bool {
        let Some(b) = &self.borrow else {
            return false;
        };
        self.allows(holder, fp)
            && b.allow
                .as_ref()
                .is_none_or(|a| a.iter().any(|w| self.who(w, holder, fp)))
    }

    /// `*` only at the end in the generated patterns.
    fn pattern_matches(p: &str, s: &str) -> bool {
        match p.strip_suffix('*') {
            Some(prefix) => s.starts_with(prefix),
            None => p == s,
        }
    }

    fn member(g: &GroupPol, holder: &str, fp: Option<&str>) -> bool {
        g.holders.iter().any(|p| Self::pattern_matches(p, holder))
            || fp.is_some_and(|f| g.fingerprints.iter().any(|p| Self::pattern_matches(p, f)))
    }

    /// The first group in file order the checkout is a member of.
    fn group_of(&self, holder: &str, fp: Option<&str>) -> Option<&GroupPol> {
        self.groups.iter().find(|g| Self::member(g, holder, fp))
    }

    fn who(&self, who: &str, holder: &str, fp: Option<&str>) -> bool {
        match who.strip_prefix('@') {
            Some(name) => self
                .groups
                .iter()
                .any(|g| g.name == name && Self::member(g, holder, fp)),
            None => Self::pattern_matches(who, holder),
        }
    }

    /// deny first, then allow (absent: everyone).
    fn allows(&self, holder: &str, fp: Option<&str>) -> bool {
        if self.deny.iter().any(|w| self.who(w, holder, fp)) {
            return false;
        }
        self.allow
            .as_ref()
            .is_none_or(|a| a.iter().any(|w| self.who(w, holder, fp)))
    }

    /// A valid policy for `seats` from raw generated parts: reserves fit in
    /// the seats, a max is at least its reserve, overage at most seats.
    fn clamp(mut self, seats: u32) -> Self {
        self.overage = self.overage.min(seats);
        let mut reserved = 0;
        for g in &mut self.groups {
            g.reserve = g.reserve.min(seats - reserved);
            reserved += g.reserve;
            g.max = g.max.map(|m| m.max(g.reserve).max(1));
        }
        let names: Vec<String> = self.groups.iter().map(|g| format!("@{}", g.name)).collect();
        let known = |w: &String| !w.starts_with('@') || names.contains(w);
        self.deny.retain(known);
        if seats == 0 {
            self.borrow = None;
        }
        if let Some(b) = &mut self.borrow {
            b.seats = b.seats.clamp(1, seats);
            if let Some(a) = &mut b.allow {
                a.retain(known);
                if a.is_empty() {
                    b.allow = None;
                }
            }
        }
        if let Some(a) = &mut self.allow {
            a.retain(known);
            if a.is_empty() {
                self.allow = None;
            }
        }
        self
    }
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

fn seat_pol() -> impl Strategy<Value = SeatPol> {
    let allow_deny = prop_oneof![
        4 => Just((None, vec![])),
        1 => Just((None, vec!["h2".to_string()])),
        1 => Just((Some(vec!["@g0".to_string(), "h0".to_string()]), vec![])),
        1 => Just((Some(vec!["h*".to_string()]), vec!["@g1".to_string()])),
    ];
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
            proptest::option::weighted(
                0.7,
                (
                    prop_oneof![Just(60u64), Just(120), Just(600)],
                    1u32..=2,
                    prop_oneof![
                        2 => Just(None),
                        1 => Just(Some(vec!["h0".to_string(), "@g1".to_string()])),
                    ],
                )
                    .prop_map(|(max_s, seats, allow)| BorrowPol { max_s, seats, allow }),
            ),
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

/// The generated licenses: timing and seats, and the seat policies
/// (valid for the seats).
fn licenses() -> impl Strategy<Value = Vec<(Pol, SeatPol)>> {
    proptest::collection::vec((pol(), seat_pol()), 1..=2).prop_map(|v| {
        v.into_iter()
            .map(|(p, sp)| {
                let sp = sp.clamp(p.seats);
                (p, sp)
            })
            .collect()
    })
}

/// A policy change: what a reload of the licenses file may do to one
/// license (never its seats, overage or timing).
#[derive(Debug, Clone, Copy)]
enum Change {
    /// Every group's max down to its reserve (at least 1).
    LowerMaxes,
    /// The last group goes (its seats count as ungrouped).
    DropGroup,
    /// No more linger (lingering seats keep their expiry).
    DropLinger,
    /// One live seat per holder.
    OneEach,
    /// `h0` denied.
    DenyH0,
    /// A 3 s linger.
    AddLinger,
}

impl Change {
    fn apply(self, sp: &mut SeatPol) {
        match self {
            Change::LowerMaxes => {
                for g in &mut sp.groups {
                    g.max = Some(g.reserve.max(1).min(g.max.unwrap_or(u32::MAX)));
                }
            }
            Change::DropGroup => {
                sp.groups.pop();
            }
            Change::DropLinger => sp.linger_ms = None,
            Change::OneEach => sp.max_per_holder = Some(1),
            Change::DenyH0 => sp.deny.push("h0".to_string()),
            Change::AddLinger => sp.linger_ms = Some(3_000),
        }
    }
}

/// A time as an offset from T0, for readable failures.
struct Rel(Timestamp);

impl fmt::Display for Rel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let d = self.0.as_millis() - T0;
        write!(f, "T0{:+}ms", d)
    }
}

struct World {
    store: MemoryStore,
    licenses: Licenses,
    throttle: EventThrottle,
    now: Timestamp,
}

impl World {
    fn new(toml: &str) -> Self {
        World {
            store: MemoryStore::default(),
            licenses: Licenses::parse(toml).expect("test policy"),
            throttle: EventThrottle::default(),
            now: at(0),
        }
    }

    /// One command: the rules over the store at `now`; its answer and the
    /// events the rules say they wrote.
    fn run<R>(&mut self, f: impl FnOnce(&mut Rules<'_, MemoryStore>) -> R) -> (R, Vec<Event>) {
        let mut rules = Rules::new(
            &mut self.store,
            self.now,
            &self.licenses,
            &mut self.throttle,
        );
        let r = f(&mut rules);
        (r, rules.events)
    }

    fn checkout(&mut self, req: &CheckoutRequest, ahead: &[Waiter]) -> CheckoutOutcome {
        self.run(|r| r.checkout(req, ahead, true)).0.unwrap()
    }

    fn heartbeat(&mut self, license: &str, seat: &str) -> HeartbeatOutcome {
        self.run(|r| r.heartbeat(license, seat, None)).0.unwrap()
    }

    fn advance(&mut self, d: u64) {
        self.now = self.now.saturating_add(ms(d));
    }
}

fn req(license: &str, holder: &str, fp: Option<&str>, key: Option<&str>) -> CheckoutRequest {
    CheckoutRequest {
        license_id: license.into(),
        holder: holder.into(),
        fingerprint: fp.map(str::to_string),
        idempotency_key: key.map(str::to_string),
        borrow: None,
    }
}

fn waiter(holder: &str, fp: Option<&str>) -> Waiter {
    Waiter {
        holder: holder.into(),
        fingerprint: fp.map(str::to_string),
    }
}

fn granted(outcome: CheckoutOutcome) -> (LeaseRow, bool) {
    match outcome {
        CheckoutOutcome::Granted {
            lease,
            reused,
            overage: false,
        } => (lease, reused),
        other => panic!("expected a grant, got {other:?}"),
    }
}

// ---------------------------------------------------------------------------
// Generated input
// ---------------------------------------------------------------------------

/// License ids, in the order the rules iterate them (id order).
const LICENSE_IDS: [&str; 2] = ["a", "b"];

/// One license's policy in milliseconds (reap_grace > skew and
/// idle_timeout > ttl, as validation demands).
#[derive(Debug, Clone, Copy)]
struct Pol {
    seats: u32,
    ttl_ms: u64,
    skew_ms: u64,
    grace_ms: u64,
    idle_ms: Option<u64>,
}

impl Pol {
    fn ttl(&self) -> Duration {
        ms(self.ttl_ms)
    }
    fn skew(&self) -> Duration {
        ms(self.skew_ms)
    }
    fn grace(&self) -> Duration {
        ms(self.grace_ms)
    }
    fn idle_timeout(&self) -> Option<Duration> {
        self.idle_ms.map(ms)
    }
    /// The license's `idle_timeout` line, if it has one.
    fn idle_toml(&self) -> String {
        self.idle_ms
            .map(|t| format!("idle_timeout = \"{t}ms\"\n"))
            .unwrap_or_default()
    }
}

fn pol() -> impl Strategy<Value = Pol> {
    (
        1u32..=4,
        prop_oneof![(1u64..=10).prop_map(|s| s * 1000), 1_000u64..=10_000],
        prop_oneof![(0u64..=2).prop_map(|s| s * 1000), 0u64..=2_000],
        // reap_grace - skew: 1 ms (the tightest legal policy) or up to 5 s.
        prop_oneof![
            1 => Just(1u64),
            2 => (1u64..=5).prop_map(|s| s * 1000),
            2 => 1u64..=5_000,
        ],
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
        .prop_map(|(seats, ttl_ms, skew_ms, extra, idle_extra)| Pol {
            seats,
            ttl_ms,
            skew_ms,
            grace_ms: skew_ms + extra,
            idle_ms: idle_extra.map(|e| ttl_ms + e),
        })
}

/// Which license a checkout names.
#[derive(Debug, Clone, Copy)]
enum Lic {
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
enum Target {
    /// The n-th (mod) live seat in issue order (a held one if none is live).
    Live(usize),
    /// The n-th (mod) seat in the table, live or lapsed.
    Held(usize),
    /// The n-th (mod) seat ever granted (maybe gone since).
    Issued(usize),
    /// The n-th (mod) seat ever granted, under the wrong license.
    Foreign(usize),
    /// A seat id that was never issued.
    Never,
}

/// A boundary of a held lease to move the clock exactly onto.
#[derive(Debug, Clone, Copy)]
enum Edge {
    /// `expires_at + skew`: the last live millisecond.
    LastLive,
    /// The first lapsed millisecond.
    FirstLapsed,
    /// `expires_at + reap_grace`: the last millisecond it is kept.
    LastKept,
    /// The first reapable millisecond.
    FirstReapable,
}

/// The idle report a heartbeat carries (`idle_s`, whole seconds).
#[derive(Debug, Clone, Copy)]
enum Report {
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
enum Op {
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
    Advance {
        ms: u64,
    },
    /// Move the clock onto a boundary of the n-th (mod) held lease whose
    /// boundary is not yet past.
    ToEdge {
        lease: usize,
        edge: Edge,
    },
    /// Move the clock to the last blocked millisecond of the n-th (mod)
    /// block in force, or to the first free one.
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

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => (
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
            ),
        5 => (target(), report()).prop_map(|(t, r)| Op::Heartbeat(t, r)),
        3 => target().prop_map(Op::Release),
        2 => (
            (target(), any::<bool>()),
            any::<bool>(),
            prop_oneof![
                Just(None),
                Just(Some(0)),
                (1u64..=30).prop_map(|s| Some(s * 1000)),
                (1u64..=30_000).prop_map(Some),
            ],
        )
            .prop_map(|((target, force), reason, block_ms)| Op::Revoke {
                target,
                force,
                reason,
                block_ms,
            }),
        2 => (0usize..5).prop_map(|limit| Op::Reap { limit }),
        4 => (0u64..=2_000).prop_map(|ms| Op::Advance { ms }),
        1 => (2_000u64..=60_000).prop_map(|ms| Op::Advance { ms }),
        3 => (
            0usize..8,
            prop_oneof![
                Just(Edge::LastLive),
                Just(Edge::FirstLapsed),
                Just(Edge::LastKept),
                Just(Edge::FirstReapable),
            ],
        )
            .prop_map(|(lease, edge)| Op::ToEdge { lease, edge }),
        1 => (0usize..4, any::<bool>()).prop_map(|(block, ended)| Op::ToBlockEnd { block, ended }),
        1 => prop_oneof![0u64..=3_000, 3_000u64..=60_000].prop_map(|gap_ms| Op::Outage { gap_ms }),
        1 => (
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
            .prop_map(|(license, change)| Op::Repolicy { license, change }),
        1 => (
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
                }
            ),
    ]
}

// ---------------------------------------------------------------------------
// The reference model
// ---------------------------------------------------------------------------

/// What the model says a checkout must answer.
#[derive(Debug)]
enum Expect {
    /// A new seat (its id comes from the rules), and whether it came from
    /// the overage allowance.
    Fresh(LeaseRow, bool),
    Reused(LeaseRow),
    /// The machine's own seat, turned into a borrow or its borrow extended
    /// (already applied to the model).
    Lent(LeaseRow),
    BorrowTooLong {
        max: Duration,
    },
    Full {
        seats: u32,
        live: u32,
        reserved: u32,
        retry_after: Duration,
    },
    LimitReached {
        limit: Limit,
        max: u32,
        group: Option<String>,
        retry_after: Duration,
    },
    NotAllowed(NotAllowedBecause),
    Blocked {
        until: Timestamp,
    },
    UnknownLicense,
}

/// An event the model expects; `detail: None` leaves the wording of
/// throttled denied/lost events unchecked.
#[derive(Debug)]
struct WantEvent {
    kind: EventKind,
    license: Option<String>,
    seat: Option<String>,
    holder: Option<String>,
    detail: Option<Option<String>>,
}

impl WantEvent {
    fn matches(&self, e: &Event, now: Timestamp) -> bool {
        e.kind == self.kind
            && e.at == now
            && e.license_id == self.license
            && e.seat_id == self.seat
            && e.holder == self.holder
            && self.detail.as_ref().is_none_or(|d| e.detail == *d)
    }
}

/// Seats given (on paper) to waiters ahead in line: (holder, group).
type Spoken = Vec<(String, Option<String>)>;

/// What the cap and count steps say.
enum Admit {
    /// In, counting for this group.
    Grant(Option<String>),
    HolderCap(u32),
    GroupCap(String, u32),
    Full {
        others: u32,
    },
}

struct Model {
    now: Timestamp,
    pols: Vec<(String, Pol)>,
    /// The seat policies in force, by license (same order as `pols`).
    seat_pols: Vec<(String, SeatPol)>,
    /// A policy change happened: seats granted before it may be above a
    /// cap it lowered (never evicted), so the caps hold for new grants only.
    changed: bool,
    /// Every lease in the table, by seat id, with its Idempotency-Key.
    leases: BTreeMap<String, StoredLease>,
    /// (license, holder, fingerprint or "") → blocked until (exclusive).
    blocks: BTreeMap<(String, String, String), Timestamp>,
    /// Every seat ever granted, in issue order: (license, seat).
    issued: Vec<(String, String)>,
    /// Seats released, revoked or reaped.
    gone: BTreeSet<String>,
    /// Throttle key → when an event for it was last logged.
    logged: HashMap<String, i64>,
    /// How each gone seat's session ended: seat → (license, end, at).
    ended: BTreeMap<String, (String, SessionEnd, Timestamp)>,
    /// Every idle period recorded, in order: (license, seat, from, to).
    periods: Vec<IdlePeriodRow>,
}

type IdlePeriodRow = (String, String, Timestamp, Timestamp);

/// Shorter idle periods are not history (the brief: "at least 60 s").
const MIN_IDLE_MS: i64 = 60_000;
/// A report whose idle start is more than this later than the last one's
/// means the user came back (the brief: "more than 2 s").
const CAME_BACK_MS: i64 = 2_000;

/// What an idle report does to a live seat kept by heartbeats.
#[derive(Debug)]
enum Verdict {
    /// Its user had been idle for the timeout since `since` (the seat's
    /// idle start after this report) at `at`: reclaimed as of `at`.
    Reclaim { since: Timestamp, at: Timestamp },
    /// Renewed with this idle start; `ended`: the period its user came
    /// back from.
    Renew {
        idle_since: Option<Timestamp>,
        ended: Option<(Timestamp, Timestamp)>,
    },
}

impl Model {
    fn pol(&self, license: &str) -> Option<Pol> {
        self.pols
            .iter()
            .find(|(id, _)| id == license)
            .map(|(_, p)| *p)
    }

    fn sp(&self, license: &str) -> &SeatPol {
        &self
            .seat_pols
            .iter()
            .find(|(id, _)| id == license)
            .unwrap()
            .1
    }

    /// Live leases of a license matching `f`.
    fn live_where(&self, license: &str, f: impl Fn(&LeaseRow) -> bool) -> Vec<&LeaseRow> {
        self.leases
            .values()
            .map(|s| &s.lease)
            .filter(|l| l.license_id == license && self.live(l) && f(l))
            .collect()
    }

    /// Until the earliest of these lapses; one TTL if none.
    fn retry_after(&self, pol: Pol, rows: &[&LeaseRow]) -> Duration {
        let ms_left = rows
            .iter()
            .map(|l| lapses_at(l.expires_at, pol.skew()).millis_since(self.now))
            .min()
            .unwrap_or(pol.ttl_ms as i64);
        ms(ms_left.max(0) as u64)
    }

    /// The cap and count steps for `holder`, with the seats `spoken` for
    /// waiters ahead (holder, group) counted as live.
    fn admit(&self, license: &str, holder: &str, fp: Option<&str>, spoken: &Spoken) -> Admit {
        let pol = self.pol(license).unwrap();
        let sp = self.sp(license);
        let count = |f: &dyn Fn(&str, Option<&str>) -> bool| {
            let stored = self.live_where(license, |l| f(&l.holder, l.group.as_deref()));
            let ahead = spoken.iter().filter(|(h, g)| f(h, g.as_deref()));
            (stored.len() + ahead.count()) as u32
        };
        if let Some(max) = sp.max_per_holder
            && count(&|h, _| h == holder) >= max
        {
            return Admit::HolderCap(max);
        }
        let group = sp.group_of(holder, fp);
        if let Some(g) = group
            && let Some(max) = g.max
            && count(&|_, of| of == Some(g.name.as_str())) >= max
        {
            return Admit::GroupCap(g.name.clone(), max);
        }
        let others: u32 = sp
            .groups
            .iter()
            .filter(|g| g.reserve > 0 && Some(&g.name) != group.map(|own| &own.name))
            .map(|g| {
                g.reserve
                    .saturating_sub(count(&|_, of| of == Some(g.name.as_str())))
            })
            .sum();
        if u64::from(count(&|_, _| true)) + u64::from(others)
            >= u64::from(pol.seats) + u64::from(sp.overage)
        {
            return Admit::Full { others };
        }
        Admit::Grant(group.map(|g| g.name.clone()))
    }

    /// The waiters ahead, in arrival order, each given a seat if the rules
    /// let it in now (with the seats given to those before it).
    fn spoken_for(&self, license: &str, ahead: &[Waiter]) -> Spoken {
        let mut spoken = Spoken::new();
        for w in ahead {
            let fp = w.fingerprint.as_deref();
            if !self.sp(license).allows(&w.holder, fp) {
                continue;
            }
            if let Admit::Grant(group) = self.admit(license, &w.holder, fp, &spoken) {
                spoken.push((w.holder.clone(), group));
            }
        }
        spoken
    }

    /// A lingering seat goes back only to the holder and machine that
    /// released it, while the license still lets that holder in.
    fn lingering_for_another(&self, row: &LeaseRow, req: &CheckoutRequest) -> bool {
        row.mode == SeatMode::Linger
            && (row.holder != req.holder
                || req.fingerprint.is_none()
                || row.fingerprint != req.fingerprint
                || !self
                    .sp(&req.license_id)
                    .allows(&req.holder, req.fingerprint.as_deref()))
    }

    fn live(&self, row: &LeaseRow) -> bool {
        let pol = self.pol(&row.license_id).unwrap();
        is_live(row.expires_at, self.now, pol.skew())
    }

    fn live_count(&self, license: &str) -> u32 {
        self.leases
            .values()
            .filter(|s| s.lease.license_id == license && self.live(&s.lease))
            .count() as u32
    }

    /// Once per key per throttle window, as the writer logs denied and lost
    /// events (the clock only moves forward here).
    fn first_in_window(&mut self, key: String) -> bool {
        let now = self.now.as_millis();
        match self.logged.get(&key) {
            Some(&t) if now - t < THROTTLE_MS => false,
            _ => {
                self.logged.insert(key, now);
                true
            }
        }
    }

    fn held(&self) -> Vec<&LeaseRow> {
        self.issued
            .iter()
            .filter_map(|(_, seat)| self.leases.get(seat).map(|s| &s.lease))
            .collect()
    }

    /// (license, seat id) a target names.
    fn resolve(&self, target: Target) -> (String, String) {
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

    fn renew(&mut self, seat: &str, idle_since: Option<Timestamp>) -> LeaseRow {
        let ttl = self.pol(&self.leases[seat].lease.license_id).unwrap().ttl();
        let now = self.now;
        let s = self.leases.get_mut(seat).unwrap();
        s.lease.issued_at = now;
        s.lease.expires_at = now.saturating_add(ttl);
        s.lease.mode = SeatMode::Heartbeat;
        s.lease.idle_since = idle_since;
        s.lease.clone()
    }

    /// The seat's idle period (if any) ends at `to`: recorded if a minute
    /// or longer.
    fn close(&mut self, lease: &LeaseRow, to: Timestamp) {
        if let Some(from) = lease.idle_since
            && to.millis_since(from) >= MIN_IDLE_MS
        {
            self.periods
                .push((lease.license_id.clone(), lease.seat_id.clone(), from, to));
        }
    }

    /// The `idle_s` a report sends for the seat (`None`: no report).
    fn idle_secs(&self, seat: &str, report: Report) -> Option<u64> {
        let row = self.leases.get(seat).map(|s| &s.lease);
        let idle_so_far = row
            .and_then(|l| l.idle_since)
            .map_or(0, |since| self.now.millis_since(since) / 1000);
        let timeout_s = row
            .and_then(|l| self.pol(&l.license_id))
            .and_then(|p| p.idle_ms)
            .map_or(60, |t| t.div_ceil(1000) as i64);
        match report {
            Report::Absent => None,
            Report::Zero => Some(0),
            Report::Secs(s) | Report::Large(s) => Some(s),
            Report::Continue(d) => Some((idle_so_far + d).max(0) as u64),
            Report::NearTimeout(d) => Some((timeout_s + d).max(0) as u64),
        }
    }

    /// The brief's rule for a report on a live seat kept by heartbeats:
    /// `idle_since = now − idle_s`, not before checkout; a start more than
    /// 2 s later than the last one's ends the last period (the user came
    /// back); 0 or none is activity; reclaimed once `now − idle_since`
    /// reaches the timeout (the period in force first: a report cannot
    /// undo a timeout already reached).
    fn after_report(&self, row: &LeaseRow, idle_s: Option<u64>) -> Verdict {
        let timeout = self.pol(&row.license_id).unwrap().idle_timeout();
        let reached = |since: Timestamp| {
            let at = since.saturating_add(timeout?);
            (at <= self.now).then_some(Verdict::Reclaim { since, at })
        };
        if let Some(verdict) = row.idle_since.and_then(reached) {
            return verdict;
        }
        let reported = idle_s.filter(|&s| s > 0).map(|s| {
            self.now
                .saturating_sub(Duration::from_secs(s))
                .max(row.checked_out_at)
        });
        let (idle_since, ended) = match (row.idle_since, reported) {
            (None, new) => (new, None),
            (Some(last), Some(new)) if new.millis_since(last) <= CAME_BACK_MS => {
                (Some(last.min(new)), None)
            }
            // Back: the last period ended when the user last used the
            // application (now, if active now).
            (Some(last), new) => (new, Some((last, new.unwrap_or(self.now)))),
        };
        match idle_since.and_then(reached) {
            Some(verdict) => verdict,
            None => Verdict::Renew { idle_since, ended },
        }
    }

    /// The 410 reason for a seat not in the table (under this license):
    /// how its session ended, if within a ttl + skew; else lapsed.
    fn gone_because(&self, license: &str, seat: &str) -> SeatLostReason {
        let Some(pol) = self.pol(license) else {
            return SeatLostReason::Lapsed;
        };
        let since = self
            .now
            .saturating_sub(pol.ttl())
            .saturating_sub(pol.skew());
        match self.ended.get(seat) {
            Some((lic, end, at)) if lic == license && *at >= since => match end {
                SessionEnd::Release => SeatLostReason::Released,
                SessionEnd::Revoke => SeatLostReason::Revoked,
                SessionEnd::Idle => SeatLostReason::Idle,
                SessionEnd::Lapse => SeatLostReason::Lapsed,
            },
            _ => SeatLostReason::Lapsed,
        }
    }

    /// The seats a sweep with `limit` reclaims, in the order taken, with
    /// the instant each reached its timeout: live, kept by heartbeats,
    /// idle that long; licenses in id order, the longest idle first (then
    /// seat id).
    fn reclaimable(&self, limit: usize) -> Vec<(LeaseRow, Timestamp)> {
        let mut out = Vec::new();
        for (id, pol) in &self.pols {
            let Some(timeout) = pol.idle_timeout() else {
                continue;
            };
            let mut mine: Vec<(LeaseRow, Timestamp)> = self
                .leases
                .values()
                .map(|s| &s.lease)
                .filter(|l| &l.license_id == id && l.mode == SeatMode::Heartbeat && self.live(l))
                .filter_map(|l| {
                    let at = l.idle_since?.saturating_add(timeout);
                    (at <= self.now).then(|| (l.clone(), at))
                })
                .collect();
            mine.sort_by(|(a, _), (b, _)| {
                (a.idle_since, &a.seat_id).cmp(&(b.idle_since, &b.seat_id))
            });
            out.extend(mine.into_iter().take(limit.saturating_sub(out.len())));
        }
        out
    }

    /// The live seat this request's machine may take back (as the store's
    /// fingerprint lookup finds it), unless it lingers for another holder.
    fn machine_seat(&self, req: &CheckoutRequest) -> Option<String> {
        let fp = req.fingerprint.as_ref()?;
        let seat = self
            .leases
            .iter()
            .filter(|(_, s)| {
                s.lease.license_id == req.license_id
                    && s.lease.fingerprint.as_ref() == Some(fp)
                    && self.live(&s.lease)
            })
            // Not lingering for another holder first, then the
            // latest-expiring, then the greatest seat id.
            .max_by_key(|(seat, s)| {
                let takeable = s.lease.mode != SeatMode::Linger || s.lease.holder == req.holder;
                (takeable, s.lease.expires_at, seat.as_str())
            })
            .map(|(seat, _)| seat.clone())?;
        // A lingering seat goes back only to the holder that released it,
        // while still allowed in; the rules look at the one row the store
        // finds and no other.
        (!self.lingering_for_another(&self.leases[&seat].lease, req)).then_some(seat)
    }

    /// A seat asked for again: renewed, its user active (an idle period
    /// ends now), but a borrowed one as stored.
    fn take_back(&mut self, seat: &str) -> LeaseRow {
        let row = self.leases[seat].lease.clone();
        match row.mode {
            SeatMode::Borrow => row,
            SeatMode::Heartbeat | SeatMode::Linger => {
                self.close(&row, self.now);
                self.renew(seat, None)
            }
        }
    }

    /// Decide a checkout and apply its effects (renewal, a freed key), but
    /// not the insertion of a fresh seat: see [`Model::insert`].
    fn checkout(&mut self, req: &CheckoutRequest, ahead: &[Waiter]) -> Expect {
        let Some(pol) = self.pol(&req.license_id) else {
            return Expect::UnknownLicense;
        };
        if let Some(b) = req.borrow {
            match &self.sp(&req.license_id).borrow {
                None => return Expect::NotAllowed(NotAllowedBecause::LendsNothing),
                Some(terms) if b.is_zero() || b.as_secs() > terms.max_s => {
                    return Expect::BorrowTooLong {
                        max: Duration::from_secs(terms.max_s),
                    };
                }
                Some(_) => {}
            }
        }
        let block = (
            req.license_id.clone(),
            req.holder.clone(),
            req.fingerprint.clone().unwrap_or_default(),
        );
        if let Some(&until) = self.blocks.get(&block)
            && until > self.now
        {
            return Expect::Blocked { until };
        }
        if let Some(key) = &req.idempotency_key {
            let seat = self
                .leases
                .iter()
                .find(|(_, s)| {
                    s.lease.license_id == req.license_id && s.idempotency_key.as_ref() == Some(key)
                })
                .map(|(seat, _)| seat.clone());
            if let Some(seat) = seat {
                let row = &self.leases[&seat].lease;
                if self.live(row) && !self.lingering_for_another(row, req) {
                    return Expect::Reused(self.take_back(&seat));
                }
                self.leases.get_mut(&seat).unwrap().idempotency_key = None;
            }
        }
        if req.borrow.is_none()
            && let Some(seat) = self.machine_seat(req)
        {
            return Expect::Reused(self.take_back(&seat));
        }
        let license = req.license_id.as_str();
        let fp = req.fingerprint.as_deref();
        let sp = self.sp(license).clone();
        if !sp.allows(&req.holder, fp) {
            return Expect::NotAllowed(NotAllowedBecause::Lists);
        }
        if let (Some(b), Some(terms)) = (req.borrow, &sp.borrow) {
            if !sp.allows_borrow(&req.holder, fp) {
                return Expect::NotAllowed(NotAllowedBecause::BorrowAllow);
            }
            let own = self.machine_seat(req);
            let own_borrow = own
                .as_ref()
                .is_some_and(|seat| self.leases[seat].lease.mode == SeatMode::Borrow);
            let borrowed = self.live_where(license, |l| l.mode == SeatMode::Borrow);
            if !own_borrow && borrowed.len() as u32 >= terms.seats {
                return Expect::LimitReached {
                    limit: Limit::Borrow,
                    max: terms.seats,
                    group: None,
                    retry_after: self.retry_after(pol, &borrowed),
                };
            }
            if let Some(seat) = own {
                let now = self.now;
                // Out on loan: no heartbeats report idleness until it is back.
                let row = self.leases[&seat].lease.clone();
                self.close(&row, now);
                let s = &mut self.leases.get_mut(&seat).unwrap().lease;
                s.idle_since = None;
                let until = now.saturating_add(b);
                s.expires_at = match s.mode {
                    SeatMode::Borrow => s.expires_at.max(until),
                    SeatMode::Heartbeat | SeatMode::Linger => until,
                };
                s.issued_at = now;
                s.mode = SeatMode::Borrow;
                return Expect::Lent(s.clone());
            }
        }
        let spoken = self.spoken_for(license, ahead);
        match self.admit(license, &req.holder, fp, &spoken) {
            Admit::HolderCap(max) => {
                let mine = self.live_where(license, |l| l.holder == req.holder);
                Expect::LimitReached {
                    limit: Limit::Holder,
                    max,
                    group: None,
                    retry_after: self.retry_after(pol, &mine),
                }
            }
            Admit::GroupCap(group, max) => {
                let theirs = self.live_where(license, |l| l.group.as_ref() == Some(&group));
                Expect::LimitReached {
                    limit: Limit::Group,
                    max,
                    group: Some(group),
                    retry_after: self.retry_after(pol, &theirs),
                }
            }
            Admit::Full { others } => {
                let retry_after = if pol.seats + sp.overage > others {
                    self.retry_after(pol, &self.live_where(license, |_| true))
                } else {
                    pol.ttl()
                };
                Expect::Full {
                    seats: pol.seats,
                    live: self.live_count(license),
                    reserved: others,
                    retry_after,
                }
            }
            Admit::Grant(group) => {
                let live = self.live_count(license);
                Expect::Fresh(
                    LeaseRow {
                        seat_id: String::new(),
                        license_id: req.license_id.clone(),
                        holder: req.holder.clone(),
                        fingerprint: req.fingerprint.clone(),
                        checked_out_at: self.now,
                        issued_at: self.now,
                        expires_at: self.now.saturating_add(req.borrow.unwrap_or(pol.ttl())),
                        group,
                        mode: match req.borrow {
                            Some(_) => SeatMode::Borrow,
                            None => SeatMode::Heartbeat,
                        },
                        idle_since: None,
                    },
                    live >= pol.seats,
                )
            }
        }
    }

    fn insert(&mut self, lease: LeaseRow, idempotency_key: Option<String>) {
        self.issued
            .push((lease.license_id.clone(), lease.seat_id.clone()));
        self.leases.insert(
            lease.seat_id.clone(),
            StoredLease {
                lease,
                idempotency_key,
            },
        );
    }

    /// The session a seat leaving the table now gets.
    fn ended(&self, lease: LeaseRow, end: SessionEnd) -> StoredSession {
        let skew = self.pol(&lease.license_id).unwrap().skew();
        if is_live(lease.expires_at, self.now, skew) {
            StoredSession {
                lease,
                end,
                at: self.now,
            }
        } else {
            let at = live_until(lease.expires_at, skew);
            StoredSession {
                lease,
                end: SessionEnd::Lapse,
                at,
            }
        }
    }

    fn remove(&mut self, seat: &str) -> LeaseRow {
        self.gone.insert(seat.to_string());
        self.leases.remove(seat).unwrap().lease
    }

    /// The leases a reap with `limit` takes, in the order taken: licenses
    /// in id order, each earliest expiry first (then seat id).
    fn reapable(&self, limit: usize) -> Vec<LeaseRow> {
        let mut out = Vec::new();
        for (id, pol) in &self.pols {
            let mut mine: Vec<LeaseRow> = self
                .leases
                .values()
                .map(|s| &s.lease)
                .filter(|l| &l.license_id == id && is_reapable(l.expires_at, self.now, pol.grace()))
                .cloned()
                .collect();
            mine.sort_by(|a, b| (a.expires_at, &a.seat_id).cmp(&(b.expires_at, &b.seat_id)));
            out.extend(mine.into_iter().take(limit - out.len()));
        }
        out
    }
}

// ---------------------------------------------------------------------------
// Driving the rules
// ---------------------------------------------------------------------------

macro_rules! ensure {
    ($cond:expr, $($fmt:tt)+) => {
        if !$cond {
            return Err(format!($($fmt)+));
        }
    };
}

macro_rules! ensure_eq {
    ($got:expr, $want:expr, $($fmt:tt)+) => {{
        let (g, w) = (&$got, &$want);
        if g != w {
            return Err(format!("{}\n  rules: {:?}\n  model: {:?}", format!($($fmt)+), g, w));
        }
    }};
}

struct Run {
    w: World,
    m: Model,
    /// How often each rule step was taken, to show the generator reaches
    /// them all.
    stats: BTreeMap<&'static str, usize>,
}

/// What one operation must leave behind besides its answer.
#[derive(Default)]
struct Effects {
    events: Vec<WantEvent>,
    sessions: Vec<StoredSession>,
    denials: Vec<StoredDenial>,
}

impl Run {
    fn licenses_toml(lics: &[(Pol, SeatPol)]) -> String {
        lics.iter()
            .zip(LICENSE_IDS)
            .map(|((p, sp), id)| {
                license_toml(id, p.seats, p.ttl_ms, p.skew_ms, p.grace_ms)
                    + &p.idle_toml()
                    + &sp.toml()
            })
            .collect()
    }

    fn new(lics: &[(Pol, SeatPol)]) -> Self {
        let toml = Self::licenses_toml(lics);
        Run {
            stats: BTreeMap::new(),
            w: World::new(&toml),
            m: Model {
                now: at(0),
                pols: lics
                    .iter()
                    .zip(LICENSE_IDS)
                    .map(|((p, _), id)| (id.to_string(), *p))
                    .collect(),
                seat_pols: lics
                    .iter()
                    .zip(LICENSE_IDS)
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
            },
        }
    }

    fn note(&mut self, what: &'static str) {
        *self.stats.entry(what).or_default() += 1;
    }

    fn set_now(&mut self, t: Timestamp) {
        assert!(t >= self.m.now, "the clock only moves forward here");
        self.m.now = t;
        self.w.now = t;
    }

    /// A seat left the table: its session, which also ends its idle
    /// period (recorded if a minute or longer).
    fn end_session(&mut self, fx: &mut Effects, s: StoredSession) {
        self.m.close(&s.lease, s.at);
        let how = (s.lease.license_id.clone(), s.end, s.at);
        self.m.ended.insert(s.lease.seat_id.clone(), how);
        fx.sessions.push(s);
    }

    /// A reclaim, as the model says it: the seat gone, its session ended
    /// `Idle` at `at` (its idle start + the timeout), a `reclaim` event;
    /// the seat's idle start as recorded with it (and so the idle period's
    /// `from`) is `recorded`.
    fn reclaimed(
        &mut self,
        fx: &mut Effects,
        seat: &str,
        recorded: Option<Timestamp>,
        at: Timestamp,
    ) {
        let row = self.m.remove(seat);
        let timeout = self.m.pol(&row.license_id).unwrap().idle_timeout();
        let timeout = timeout.map(format_duration).unwrap_or_default();
        let detail = match recorded {
            Some(since) => format!("idle since {since}: idle_timeout {timeout}"),
            None => format!("idle: idle_timeout {timeout}"),
        };
        fx.events.push(WantEvent {
            kind: EventKind::Reclaim,
            license: Some(row.license_id.clone()),
            seat: Some(row.seat_id.clone()),
            holder: Some(row.holder.clone()),
            detail: Some(Some(detail)),
        });
        let lease = LeaseRow {
            idle_since: recorded,
            ..row
        };
        let end = SessionEnd::Idle;
        self.end_session(fx, StoredSession { lease, end, at });
    }

    /// Live leases of a license in the store, by the one predicate.
    fn stored_live(&self, license: &str) -> Vec<&LeaseRow> {
        let skew = self.m.pol(license).unwrap().skew();
        self.w
            .store
            .leases
            .values()
            .map(|s| &s.lease)
            .filter(|l| l.license_id == license && is_live(l.expires_at, self.w.now, skew))
            .collect()
    }

    /// One operation, then every check of what it left behind and the
    /// invariants.
    fn step(&mut self, op: &Op) -> std::result::Result<(), String> {
        if let Op::Clients {
            license,
            checkouts,
            rounds,
            half,
            idle,
            sweep,
            lend,
        } = *op
        {
            for holder in 0..checkouts {
                let who = (holder, Some(holder), None, None);
                self.checked(|run, fx| run.checkout(Lic::Known(license), who, &[], true, fx))?;
            }
            return self.clients(license, (rounds, half), idle, (sweep, lend));
        }
        self.checked(|run, fx| run.act(op, fx))
    }

    /// One command (`f`, which says in `fx` what it must leave behind),
    /// then the checks of its effects and the invariants.
    fn checked(
        &mut self,
        f: impl FnOnce(&mut Self, &mut Effects) -> std::result::Result<Vec<Event>, String>,
    ) -> std::result::Result<(), String> {
        let events_before = self.w.store.events.len();
        let sessions_before = self.w.store.sessions.len();
        let denials_before = self.w.store.denials.len();
        let leases_before = self.w.store.leases.clone();
        let periods_before = self.m.periods.len();
        let mut fx = Effects::default();
        let returned = f(self, &mut fx)?;
        for _ in periods_before..self.m.periods.len() {
            self.note("idle period recorded");
        }

        // The events: what the store appended is what the rules returned,
        // and what the model expects.
        let appended = &self.w.store.events[events_before..];
        ensure_eq!(appended, returned.as_slice(), "events appended vs returned");
        ensure!(
            appended.len() == fx.events.len()
                && appended
                    .iter()
                    .zip(&fx.events)
                    .all(|(e, want)| want.matches(e, self.m.now)),
            "events at {}\n  rules: {appended:#?}\n  model: {:#?}",
            Rel(self.m.now),
            fx.events
        );
        ensure_eq!(
            &self.w.store.sessions[sessions_before..],
            fx.sessions.as_slice(),
            "sessions recorded"
        );
        ensure_eq!(
            &self.w.store.denials[denials_before..],
            fx.denials.as_slice(),
            "denials counted (reason, holder, fingerprint, time)"
        );
        for e in &fx.events {
            self.note(match e.kind {
                EventKind::Checkout => "event: checkout",
                EventKind::Release => "event: release",
                EventKind::Revoke => "event: revoke",
                EventKind::Reap => "event: reap",
                EventKind::Denied => "event: denied",
                EventKind::Lost => "event: lost",
                EventKind::Config => "event: config",
                EventKind::Reclaim => "event: reclaim",
                EventKind::Alert => "event: alert",
            });
        }
        for s in &fx.sessions {
            self.note(match s.end {
                SessionEnd::Release => "session: release",
                SessionEnd::Revoke => "session: revoke",
                SessionEnd::Lapse => "session: lapse",
                SessionEnd::Idle => "session: idle",
            });
        }
        self.idle_properties(&leases_before, sessions_before, events_before)?;
        self.invariants()
    }

    /// What one operation (other than `Clients`) does to the rules and the
    /// model.
    fn act(&mut self, op: &Op, fx: &mut Effects) -> std::result::Result<Vec<Event>, String> {
        Ok(match *op {
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
                self.checkout(license, who, ahead, counted, fx)?
            }
            Op::Heartbeat(target, report) => self.heartbeat(target, report, fx)?,
            Op::Release(target) => {
                let (license, seat) = self.m.resolve(target);
                let (got, events) = self.w.run(|r| r.release(&license, &seat));
                let got = got.map_err(|e| e.to_string())?;
                let here = self
                    .m
                    .leases
                    .get(&seat)
                    .filter(|s| s.lease.license_id == license)
                    .map(|s| s.lease.clone());
                ensure_eq!(got, here.is_some(), "release {license}/{seat}");
                let linger = self
                    .m
                    .seat_pols
                    .iter()
                    .find(|(id, _)| *id == license)
                    .and_then(|(_, sp)| sp.linger_ms);
                let lingers = here
                    .as_ref()
                    .zip(linger)
                    .and_then(|(row, linger)| match row.mode {
                        SeatMode::Linger => Some(None),
                        SeatMode::Heartbeat if self.m.live(row) => Some(Some(linger)),
                        _ => None,
                    });
                if let Some(linger) = lingers {
                    // Released on a license with linger: the seat stays.
                    match linger {
                        None => self.note("release: again while lingering"),
                        Some(linger) => {
                            let now = self.m.now;
                            // Released: its user is done, idle or not.
                            let row = self.m.leases[&seat].lease.clone();
                            self.m.close(&row, now);
                            let s = self.m.leases.get_mut(&seat).unwrap();
                            s.lease.mode = SeatMode::Linger;
                            s.lease.idle_since = None;
                            s.lease.expires_at = now.saturating_add(ms(linger));
                            let detail = format!("lingering until {}", s.lease.expires_at);
                            let holder = s.lease.holder.clone();
                            fx.events.push(WantEvent {
                                kind: EventKind::Release,
                                license: Some(license),
                                seat: Some(seat),
                                holder: Some(holder),
                                detail: Some(Some(detail)),
                            });
                            self.note("release: lingering");
                        }
                    }
                } else if got {
                    let row = self.m.remove(&seat);
                    fx.events.push(WantEvent {
                        kind: EventKind::Release,
                        license: Some(license),
                        seat: Some(seat),
                        holder: Some(row.holder.clone()),
                        detail: Some(None),
                    });
                    let ended = self.m.ended(row, SessionEnd::Release);
                    self.end_session(fx, ended);
                }
                events
            }
            Op::Revoke {
                target,
                force,
                reason,
                block_ms,
            } => {
                let (_, seat) = self.m.resolve(target);
                let reason_text = reason.then(|| "by the test".to_string());
                let block = block_ms.map(ms);
                let (got, events) = self
                    .w
                    .run(|r| r.revoke(&seat, reason_text.clone(), block, force));
                let got = got.map_err(|e| e.to_string())?;
                let here = self.m.leases.get(&seat).map(|s| s.lease.clone());
                let on_loan = here
                    .as_ref()
                    .is_some_and(|row| row.mode == SeatMode::Borrow && self.m.live(row));
                let want = match &here {
                    None => RevokeOutcome::Unknown,
                    Some(row) if on_loan && !force => RevokeOutcome::Borrowed(row.clone()),
                    Some(row) => RevokeOutcome::Revoked(row.clone()),
                };
                ensure_eq!(got, want, "revoke {seat} (force {force})");
                if let RevokeOutcome::Borrowed(_) = got {
                    self.note("revoke: borrowed, kept");
                }
                if let RevokeOutcome::Revoked(row) = got {
                    self.m.remove(&seat);
                    let mut detail = reason_text.unwrap_or_default();
                    if on_loan {
                        if !detail.is_empty() {
                            detail.push_str("; ");
                        }
                        detail.push_str(&format!(
                            "borrowed until {}: its token stays valid offline until then",
                            row.expires_at
                        ));
                        self.note("revoke: borrowed, forced");
                    }
                    if let Some(block) = block.filter(|b| !b.is_zero()) {
                        let until = self.m.now.saturating_add(block);
                        self.m.blocks.insert(
                            (
                                row.license_id.clone(),
                                row.holder.clone(),
                                row.fingerprint.clone().unwrap_or_default(),
                            ),
                            until,
                        );
                        if !detail.is_empty() {
                            detail.push_str("; ");
                        }
                        detail.push_str(&format!("re-checkout blocked until {until}"));
                        self.note("revoke: blocked");
                    }
                    fx.events.push(WantEvent {
                        kind: EventKind::Revoke,
                        license: Some(row.license_id.clone()),
                        seat: Some(seat),
                        holder: Some(row.holder.clone()),
                        detail: Some((!detail.is_empty()).then_some(detail)),
                    });
                    let ended = self.m.ended(row, SessionEnd::Revoke);
                    self.end_session(fx, ended);
                }
                events
            }
            Op::Reap { limit } => self.reap(limit, fx)?,
            Op::Advance { ms: d } => {
                self.set_now(self.m.now.saturating_add(ms(d)));
                Vec::new()
            }
            Op::ToEdge { lease, edge } => {
                let now = self.m.now;
                let targets: Vec<Timestamp> = self
                    .m
                    .held()
                    .into_iter()
                    .map(|l| {
                        let pol = self.m.pol(&l.license_id).unwrap();
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
                    .filter(|&t| t >= now)
                    .collect();
                if !targets.is_empty() {
                    self.set_now(targets[lease % targets.len()]);
                }
                Vec::new()
            }
            Op::ToBlockEnd { block, ended } => {
                let now = self.m.now;
                let ends: Vec<Timestamp> = self
                    .m
                    .blocks
                    .values()
                    .copied()
                    .filter(|&until| until > now)
                    .collect();
                if !ends.is_empty() {
                    let until = ends[block % ends.len()];
                    self.set_now(if ended {
                        until
                    } else {
                        until.saturating_sub(ms(1))
                    });
                }
                Vec::new()
            }
            Op::Outage { gap_ms } => self.outage(gap_ms)?,
            Op::Repolicy { license, change } => {
                let i = license % self.m.seat_pols.len();
                let seats = self.m.pols[i].1.seats;
                let sp = &mut self.m.seat_pols[i].1;
                change.apply(sp);
                *sp = sp.clone().clamp(seats);
                let lics: Vec<(Pol, SeatPol)> = self
                    .m
                    .pols
                    .iter()
                    .zip(&self.m.seat_pols)
                    .map(|((_, p), (_, sp))| (*p, sp.clone()))
                    .collect();
                self.w.licenses = Licenses::parse(&Self::licenses_toml(&lics))
                    .map_err(|e| format!("changed policy: {e}"))?;
                self.m.changed = true;
                self.note("policy change");
                Vec::new()
            }
            Op::Clients { .. } => unreachable!("run by step"),
        })
    }

    fn checkout(
        &mut self,
        license: Lic,
        (holder, fingerprint, key, borrow_s): (u8, Option<u8>, Option<u8>, Option<u64>),
        ahead: &[(u8, Option<u8>)],
        counted: bool,
        fx: &mut Effects,
    ) -> std::result::Result<Vec<Event>, String> {
        let blocks: Vec<_> = self.m.blocks.keys().cloned().collect();
        let (license_id, holder, fingerprint) = match license {
            Lic::Blocked(n) if !blocks.is_empty() => {
                let (license, holder, fp) = blocks[n % blocks.len()].clone();
                (license, holder, Some(fp).filter(|f| !f.is_empty()))
            }
            Lic::Lingering(n) if self.m.held().iter().any(|l| l.mode == SeatMode::Linger) => {
                let mut held = self.m.held();
                held.retain(|l| l.mode == SeatMode::Linger);
                let l = held[n % held.len()];
                (
                    l.license_id.clone(),
                    l.holder.clone(),
                    l.fingerprint.clone(),
                )
            }
            Lic::Seat(n) | Lic::Lingering(n) if !self.m.held().is_empty() => {
                let held = self.m.held();
                let l = held[n % held.len()];
                (
                    l.license_id.clone(),
                    l.holder.clone(),
                    l.fingerprint.clone(),
                )
            }
            Lic::Known(n) | Lic::Blocked(n) | Lic::Seat(n) | Lic::Lingering(n) => (
                self.m.pols[n % self.m.pols.len()].0.clone(),
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
        // HTTP refuses a borrow without a fingerprint before the rules.
        let fingerprint = match borrow_s {
            Some(_) => fingerprint.or(Some("f0".to_string())),
            None => fingerprint,
        };
        let req = CheckoutRequest {
            license_id: license_id.clone(),
            holder,
            fingerprint,
            idempotency_key: key.map(|k| format!("k{k}")),
            borrow: borrow_s.map(Duration::from_secs),
        };
        let known = self.m.pol(&license_id);
        // The store's view before the checkout, for the direct checks.
        let live_before: Vec<LeaseRow> = match known {
            Some(_) => self.stored_live(&license_id).into_iter().cloned().collect(),
            None => Vec::new(),
        };
        let leases_before = self.w.store.leases.len();
        let ahead: Vec<Waiter> = ahead
            .iter()
            .map(|&(h, f)| Waiter {
                holder: format!("h{h}"),
                fingerprint: f.map(|f| format!("f{f}")),
            })
            .collect();
        let spoken = match known {
            Some(_) => self.m.spoken_for(&license_id, &ahead),
            None => Vec::new(),
        };
        let expect = self.m.checkout(&req, &ahead);
        let (got, events) = self.w.run(|r| r.checkout(&req, &ahead, counted));
        let got = got.map_err(|e| e.to_string())?;
        let ctx = format!("checkout {req:?} ahead {ahead:?}");
        match (got, expect) {
            (
                CheckoutOutcome::Granted {
                    lease,
                    reused: false,
                    overage,
                },
                Expect::Fresh(mut want, want_overage),
            ) => {
                ensure_eq!(overage, want_overage, "{ctx}: overage flag");
                let seats = known.unwrap().seats;
                let sp = self.m.sp(&license_id).clone();
                // Directly on the store: room for one more, counting the
                // other groups' unused reservations, within the caps.
                let of_group = |g: &str| {
                    let stored = live_before.iter().filter(|l| l.group.as_deref() == Some(g));
                    let ahead = spoken.iter().filter(|(_, of)| of.as_deref() == Some(g));
                    (stored.count() + ahead.count()) as u32
                };
                let others: u32 = sp
                    .groups
                    .iter()
                    .filter(|g| Some(&g.name) != lease.group.as_ref())
                    .map(|g| g.reserve.saturating_sub(of_group(&g.name)))
                    .sum();
                ensure!(
                    (live_before.len() + spoken.len()) as u64 + u64::from(others)
                        < u64::from(seats + sp.overage),
                    "{ctx}: fresh grant with {} live + {} spoken for + {others} reserved \
                     for others of {seats} seats + {} overage",
                    live_before.len(),
                    spoken.len(),
                    sp.overage
                );
                if spoken.len() < ahead.len() {
                    self.note("checkout: past a waiter who cannot use the seat");
                }
                ensure_eq!(
                    overage,
                    live_before.len() as u32 >= seats,
                    "{ctx}: overage flag vs the live seats"
                );
                if let Some(g) = sp
                    .groups
                    .iter()
                    .find(|g| Some(&g.name) == lease.group.as_ref())
                    && let Some(max) = g.max
                {
                    ensure!(
                        of_group(&g.name) < max,
                        "{ctx}: granted to group {} at its max {max}",
                        g.name
                    );
                }
                if let Some(max) = sp.max_per_holder {
                    let mine = live_before
                        .iter()
                        .filter(|l| l.holder == lease.holder)
                        .count();
                    ensure!(
                        (mine as u32) < max,
                        "{ctx}: granted to a holder with {mine} of {max} seats"
                    );
                }
                ensure!(
                    sp.allows(&lease.holder, lease.fingerprint.as_deref()),
                    "{ctx}: granted to a holder not allowed"
                );
                if lease.mode == SeatMode::Borrow {
                    // No second seat for a borrowing machine.
                    let sp = self.m.sp(&license_id);
                    let mine = live_before.iter().find(|l| {
                        l.fingerprint == req.fingerprint
                            && (l.mode != SeatMode::Linger
                                || (l.holder == req.holder
                                    && sp.allows(&req.holder, req.fingerprint.as_deref())))
                    });
                    ensure!(
                        mine.is_none(),
                        "{ctx}: a new borrow though the machine holds {mine:?}"
                    );
                    self.note("checkout: borrow");
                }
                self.note(if overage {
                    "checkout: overage"
                } else if lease.group.is_some() {
                    "checkout: grouped"
                } else {
                    "checkout: fresh"
                });
                ensure!(
                    lease.seat_id.len() == 32
                        && !self.m.issued.iter().any(|(_, s)| *s == lease.seat_id),
                    "{ctx}: seat id {} is not new",
                    lease.seat_id
                );
                want.seat_id = lease.seat_id.clone();
                ensure_eq!(lease, want, "{ctx}: fresh seat");
                fx.events.push(WantEvent {
                    kind: EventKind::Checkout,
                    license: Some(license_id),
                    seat: Some(lease.seat_id.clone()),
                    holder: Some(lease.holder.clone()),
                    detail: Some({
                        let parts: Vec<String> = [
                            lease
                                .fingerprint
                                .as_ref()
                                .map(|f| format!("fingerprint {f}")),
                            lease.group.as_ref().map(|g| format!("group {g}")),
                            overage.then(|| "overage".to_string()),
                            (lease.mode == SeatMode::Borrow)
                                .then(|| format!("borrowed until {}", lease.expires_at)),
                        ]
                        .into_iter()
                        .flatten()
                        .collect();
                        (!parts.is_empty()).then(|| parts.join("; "))
                    }),
                });
                self.m.insert(lease, req.idempotency_key.clone());
            }
            (
                CheckoutOutcome::Granted {
                    lease,
                    reused: true,
                    overage: false,
                },
                Expect::Reused(want),
            ) => {
                ensure_eq!(lease, want, "{ctx}: replay or re-claim");
                ensure!(
                    live_before.iter().any(|l| l.seat_id == lease.seat_id),
                    "{ctx}: reused seat {} was not live",
                    lease.seat_id
                );
                ensure_eq!(
                    self.w.store.leases.len(),
                    leases_before,
                    "{ctx}: a replay or re-claim added a lease"
                );
                let stored = &self.w.store.leases[&lease.seat_id];
                ensure!(
                    (req.idempotency_key.is_some()
                        && stored.idempotency_key == req.idempotency_key)
                        || (req.fingerprint.is_some() && lease.fingerprint == req.fingerprint),
                    "{ctx}: reused {stored:?}, which is neither its key's nor its machine's"
                );
                let lingered = live_before
                    .iter()
                    .any(|l| l.seat_id == lease.seat_id && l.mode == SeatMode::Linger);
                let replay =
                    req.idempotency_key.is_some() && stored.idempotency_key == req.idempotency_key;
                if lingered {
                    self.note("checkout: lingering seat back");
                }
                if replay {
                    self.note("checkout: replay");
                } else {
                    self.note("checkout: re-claim");
                }
            }
            (
                got @ CheckoutOutcome::Full {
                    seats,
                    live,
                    reserved,
                    retry_after,
                },
                Expect::Full {
                    seats: ws,
                    live: wl,
                    reserved: wres,
                    retry_after: wr,
                },
            ) => {
                ensure_eq!(
                    (seats, live, reserved, retry_after),
                    (ws, wl, wres, wr),
                    "{ctx}: full answer"
                );
                let overage = self.m.sp(&license_id).overage;
                self.note(if reserved > 0 {
                    "checkout: full with reservations"
                } else if live < seats + overage {
                    "checkout: full by waiters ahead"
                } else {
                    "checkout: full"
                });
                // Directly on the store: really full, nothing to get back.
                ensure!(
                    live as usize == live_before.len()
                        && u64::from(live) + spoken.len() as u64 + u64::from(reserved)
                            >= u64::from(seats + overage),
                    "{ctx}: {got:?} with {} live",
                    live_before.len()
                );
                let sp = self.m.sp(&license_id);
                let mine = live_before.iter().find(|l| {
                    (req.fingerprint.is_some()
                        && l.fingerprint == req.fingerprint
                        && (l.mode != SeatMode::Linger
                            || (l.holder == req.holder
                                && sp.allows(&req.holder, req.fingerprint.as_deref()))))
                        || (req.idempotency_key.is_some()
                            && self.w.store.leases[&l.seat_id].idempotency_key
                                == req.idempotency_key)
                });
                ensure!(
                    mine.is_none(),
                    "{ctx}: {got:?} though the caller holds {mine:?}"
                );
                let earliest = live_before
                    .iter()
                    .map(|l| lapses_at(l.expires_at, known.unwrap().skew()))
                    .min();
                if let Some(e) = earliest
                    && seats + overage > reserved
                {
                    ensure_eq!(
                        retry_after,
                        ms(e.millis_since(self.m.now) as u64),
                        "{ctx}: retry_after"
                    );
                }
                self.denied(&req, counted, DenialReason::Full, fx);
            }
            (
                CheckoutOutcome::LimitReached {
                    limit,
                    max,
                    group,
                    retry_after,
                },
                Expect::LimitReached {
                    limit: wl,
                    max: wm,
                    group: wg,
                    retry_after: wr,
                },
            ) => {
                ensure_eq!(
                    (limit, max, &group, retry_after),
                    (wl, wm, &wg, wr),
                    "{ctx}: limit reached"
                );
                self.note(match limit {
                    Limit::Holder => "checkout: holder limit",
                    Limit::Group => "checkout: group limit",
                    Limit::Borrow => "checkout: borrow limit",
                });
                let reason = match limit {
                    Limit::Holder => DenialReason::Holder,
                    Limit::Group => DenialReason::Group,
                    Limit::Borrow => DenialReason::Borrow,
                };
                self.denied(&req, counted, reason, fx);
            }
            (
                CheckoutOutcome::Granted {
                    lease,
                    reused: true,
                    overage: false,
                },
                Expect::Lent(want),
            ) => {
                ensure_eq!(lease, want, "{ctx}: the machine's seat lent");
                let before = live_before.iter().find(|l| l.seat_id == lease.seat_id);
                ensure!(before.is_some(), "{ctx}: lent seat was not live");
                let was_borrowed = before.is_some_and(|l| l.mode == SeatMode::Borrow);
                self.note(if was_borrowed {
                    "checkout: borrow extended"
                } else {
                    "checkout: borrow turned"
                });
                fx.events.push(WantEvent {
                    kind: EventKind::Checkout,
                    license: Some(license_id),
                    seat: Some(lease.seat_id.clone()),
                    holder: Some(lease.holder.clone()),
                    detail: Some(Some(format!("borrowed until {}", lease.expires_at))),
                });
            }
            (CheckoutOutcome::BorrowTooLong { max }, Expect::BorrowTooLong { max: want }) => {
                ensure_eq!(max, want, "{ctx}: borrow.max");
                self.note("checkout: borrow too long");
            }
            (CheckoutOutcome::NotAllowed(got), Expect::NotAllowed(want)) if got == want => {
                self.note("checkout: not allowed");
                self.denied(&req, counted, DenialReason::NotAllowed, fx);
            }
            (CheckoutOutcome::Blocked { until }, Expect::Blocked { until: want }) => {
                ensure_eq!(until, want, "{ctx}: blocked until");
                self.note("checkout: blocked");
                ensure!(until > self.m.now, "{ctx}: a block that ended refused");
                self.denied(&req, counted, DenialReason::Blocked, fx);
            }
            (CheckoutOutcome::UnknownLicense, Expect::UnknownLicense) => {
                self.note("checkout: unknown license");
            }
            (got, want) => {
                return Err(format!("{ctx}\n  rules: {got:?}\n  model: {want:?}"));
            }
        }
        Ok(events)
    }

    /// A refused checkout: counted, with its reason, if the client sees it
    /// (a `?wait=` line retries only a full pool and a reached cap: any
    /// other denial is final and counted at once); logged once per holder
    /// per window.
    fn denied(
        &mut self,
        req: &CheckoutRequest,
        counted: bool,
        reason: DenialReason,
        fx: &mut Effects,
    ) {
        let retried = matches!(
            reason,
            DenialReason::Full | DenialReason::Holder | DenialReason::Group | DenialReason::Borrow
        );
        if counted || !retried {
            self.note(if counted {
                "denial counted"
            } else {
                "denial final at once on a ?wait= attempt"
            });
            fx.denials.push(StoredDenial {
                license_id: req.license_id.clone(),
                holder: req.holder.clone(),
                fingerprint: req.fingerprint.clone(),
                reason,
                at: self.m.now,
            });
        }
        if self
            .m
            .first_in_window(format!("denied {} {}", req.license_id, req.holder))
        {
            fx.events.push(WantEvent {
                kind: EventKind::Denied,
                license: Some(req.license_id.clone()),
                seat: None,
                holder: Some(req.holder.clone()),
                detail: None,
            });
        }
    }

    fn heartbeat(
        &mut self,
        target: Target,
        report: Report,
        fx: &mut Effects,
    ) -> std::result::Result<Vec<Event>, String> {
        let (license, seat) = self.m.resolve(target);
        let idle_s = self.m.idle_secs(&seat, report);
        self.heartbeat_seat(&license, &seat, idle_s, fx)
            .map(|(_, events)| events)
    }

    /// A heartbeat reporting `idle_s` (`None`: no report) on the seat, as
    /// the model says; its answer and the events the rules returned.
    fn heartbeat_seat(
        &mut self,
        license: &str,
        seat: &str,
        idle_s: Option<u64>,
        fx: &mut Effects,
    ) -> std::result::Result<(HeartbeatOutcome, Vec<Event>), String> {
        let live_before = self.live_by_license();
        let stored_before = self.w.store.leases.get(seat).map(|s| s.lease.clone());
        let idle = idle_s.map(Duration::from_secs);
        let (got, events) = self.w.run(|r| r.heartbeat(license, seat, idle));
        let got = got.map_err(|e| e.to_string())?;
        let ctx = format!("heartbeat {license}/{seat} idle_s {idle_s:?}");
        let here = self
            .m
            .leases
            .get(seat)
            .filter(|s| s.lease.license_id == license && self.m.pol(license).is_some())
            .map(|s| s.lease.clone());
        let mut reclaimed = None;
        match here {
            Some(row) if row.mode == SeatMode::Linger => {
                ensure_eq!(
                    got,
                    HeartbeatOutcome::Lost(SeatLostReason::Released),
                    "{ctx} (lingering)"
                );
                self.note("heartbeat: lingering");
            }
            Some(row) if row.mode == SeatMode::Borrow && self.m.live(&row) => {
                let expires_at = row.expires_at;
                ensure_eq!(got, HeartbeatOutcome::Borrowed { expires_at }, "{ctx}");
                self.note("heartbeat: borrowed");
            }
            Some(row) if self.m.live(&row) => match self.m.after_report(&row, idle_s) {
                Verdict::Reclaim { since, at } => {
                    ensure_eq!(
                        got,
                        HeartbeatOutcome::Lost(SeatLostReason::Idle),
                        "{ctx}: reclaimed (idle since {}, at {})",
                        Rel(since),
                        Rel(at)
                    );
                    // As of this report: it may have set or moved the idle
                    // start (`a_report_that_reaches_the_timeout_records_its_idle_start`).
                    self.reclaimed(fx, seat, Some(since), at);
                    reclaimed = Some(license.to_string());
                    self.note(if row.idle_since == Some(since) {
                        "heartbeat: reclaimed"
                    } else {
                        "heartbeat: reclaimed by its report"
                    });
                }
                Verdict::Renew { idle_since, ended } => {
                    if let Some((from, to)) = ended {
                        let back = LeaseRow {
                            idle_since: Some(from),
                            ..row.clone()
                        };
                        self.m.close(&back, to);
                        self.note("heartbeat: came back");
                    }
                    match (row.idle_since, idle_since) {
                        (Some(a), Some(b)) if a == b => self.note("heartbeat: still idle"),
                        (_, Some(_)) => self.note("heartbeat: idle"),
                        _ => {}
                    }
                    let want = self.m.renew(seat, idle_since);
                    let ttl = self.m.pol(license).unwrap().ttl();
                    ensure_eq!(
                        want.expires_at,
                        self.m.now.saturating_add(ttl),
                        "{ctx}: renewed expiry"
                    );
                    ensure_eq!(got, HeartbeatOutcome::Renewed(want), "{ctx}");
                    self.note("heartbeat: renewed");
                }
            },
            Some(row) => {
                ensure_eq!(
                    got,
                    HeartbeatOutcome::Lost(SeatLostReason::Lapsed),
                    "{ctx} (lapsed)"
                );
                self.note("heartbeat: lapsed");
                if self.m.first_in_window(format!("lost {seat}")) {
                    fx.events.push(WantEvent {
                        kind: EventKind::Lost,
                        license: Some(license.to_string()),
                        seat: Some(seat.to_string()),
                        holder: Some(row.holder),
                        detail: None,
                    });
                }
            }
            None => {
                let want = self.m.gone_because(license, seat);
                ensure_eq!(
                    got,
                    HeartbeatOutcome::Lost(want),
                    "{ctx} (not here; its session: {:?})",
                    self.m.ended.get(seat)
                );
                self.note(match want {
                    SeatLostReason::Released => "heartbeat (not here): released",
                    SeatLostReason::Revoked => "heartbeat (not here): revoked",
                    SeatLostReason::Idle => "heartbeat (not here): idle",
                    SeatLostReason::Lapsed => "heartbeat (not here): lapsed",
                });
            }
        }
        // (1) Activity reported on a seat (in the table) that was not idle
        // never reclaims it; (4) nor does any report on a license without
        // a timeout (nor a seat's earlier reclaim: the 410 of a seat gone).
        if got == HeartbeatOutcome::Lost(SeatLostReason::Idle) {
            let timeout = self.m.pol(license).and_then(|p| p.idle_timeout());
            ensure!(timeout.is_some(), "{ctx}: reclaimed without idle_timeout");
            ensure!(
                idle_s.unwrap_or(0) > 0
                    || stored_before
                        .as_ref()
                        .is_none_or(|l| l.idle_since.is_some()),
                "{ctx}: an active seat reclaimed: {stored_before:?}"
            );
        }
        // (2) A reclaimed seat is free at once: one live seat fewer in this
        // same command; nothing else changes the live counts.
        let mut want_live = live_before;
        if let Some(lic) = reclaimed {
            let i = self.m.pols.iter().position(|(id, _)| *id == lic).unwrap();
            want_live[i] -= 1;
        }
        ensure_eq!(self.live_by_license(), want_live, "{ctx}: the live counts");
        Ok((got, events))
    }

    /// A reaper sweep with `limit`: idle seats reclaimed first, then lapsed
    /// ones reaped, within the one limit.
    fn reap(&mut self, limit: usize, fx: &mut Effects) -> std::result::Result<Vec<Event>, String> {
        let over = self.idle_past_timeout();
        let live_before = self.live_by_license();
        let sessions_before = self.w.store.sessions.len();
        let reclaim = self.m.reclaimable(limit);
        let (got, events) = self.w.run(|r| r.reap(limit, RETENTION));
        let got = got.map_err(|e| e.to_string())?;
        let want = self.m.reapable(limit - reclaim.len());
        ensure_eq!(
            got,
            reclaim.len() + want.len(),
            "reap({limit}) count: {} idle, {} lapsed",
            reclaim.len(),
            want.len()
        );
        for (row, at) in reclaim {
            self.reclaimed(fx, &row.seat_id, row.idle_since, at);
            self.note("reap: reclaimed");
        }
        for row in want {
            let pol = self.m.pol(&row.license_id).unwrap();
            ensure!(
                !is_live(row.expires_at, self.m.now, pol.skew()),
                "a reapable lease is live: {row:?}"
            );
            self.m.remove(&row.seat_id);
            fx.events.push(WantEvent {
                kind: EventKind::Reap,
                license: Some(row.license_id.clone()),
                seat: Some(row.seat_id.clone()),
                holder: Some(row.holder.clone()),
                detail: Some(Some(reap_detail(row.expires_at))),
            });
            let at = live_until(row.expires_at, pol.skew());
            let end = if row.mode == SeatMode::Linger {
                self.note("reap: lingering");
                SessionEnd::Release
            } else {
                SessionEnd::Lapse
            };
            self.end_session(
                fx,
                StoredSession {
                    lease: row,
                    end,
                    at,
                },
            );
        }
        // The prune drops blocks that ended.
        let now = self.m.now;
        self.m.blocks.retain(|_, until| *until > now);

        // (2) Directly on the store: every seat idle past its timeout is
        // gone within this sweep (room permitting: idle ones first), and
        // its seat is free at once.
        let idle_ended: Vec<&StoredSession> = self.w.store.sessions[sessions_before..]
            .iter()
            .filter(|s| s.end == SessionEnd::Idle)
            .collect();
        ensure_eq!(
            idle_ended.len(),
            over.len().min(limit),
            "reap({limit}): sessions ended idle, of {over:?} idle past their timeout"
        );
        if over.len() <= limit {
            let left = self.idle_past_timeout();
            ensure!(
                left.is_empty(),
                "reap({limit}) left {left:?} idle past the timeout"
            );
        } else {
            ensure_eq!(got, limit, "reap({limit}) with {} idle", over.len());
        }
        let live_after = self.live_by_license();
        for (i, (id, _)) in self.m.pols.iter().enumerate() {
            let freed = idle_ended.iter().filter(|s| s.lease.license_id == *id);
            ensure_eq!(
                live_before[i] - live_after[i],
                freed.count(),
                "reap({limit}): live seats of {id} freed"
            );
        }
        Ok(events)
    }

    /// `Op::Clients`: see there. Each sweep and each heartbeat is one
    /// command, checked as any other.
    fn clients(
        &mut self,
        nth: usize,
        (rounds, half): (u8, bool),
        idle: u8,
        (sweep, lend): (bool, bool),
    ) -> std::result::Result<(), String> {
        let (license, pol) = self.m.pols[nth % self.m.pols.len()].clone();
        let step = if half { pol.ttl_ms / 2 } else { pol.ttl_ms }.max(1);
        // The clients: the license's live seats kept by heartbeats, each
        // with the instant its user last used the application (`None`:
        // active); each heartbeats until told its seat is lost.
        let now = self.m.now;
        let mut clients: Vec<(String, Option<Timestamp>)> = self
            .m
            .issued
            .iter()
            .enumerate()
            .filter_map(|(n, (_, seat))| Some((n, &self.m.leases.get(seat)?.lease)))
            .filter(|(_, l)| {
                l.license_id == license && l.mode == SeatMode::Heartbeat && self.m.live(l)
            })
            .map(|(n, l)| {
                let is_idle = idle & (1 << (n % 8)) != 0;
                // Idle from now on, or (odd seats) since the checkout: an
                // application left open at once.
                let from = if n % 2 == 0 { now } else { l.checked_out_at };
                (
                    l.seat_id.clone(),
                    is_idle.then(|| l.idle_since.unwrap_or(from)),
                )
            })
            .collect();
        // Active clients whose seat a heartbeat renewed: they keep it.
        let mut kept: BTreeSet<String> = BTreeSet::new();
        for round in 0..rounds {
            if clients.is_empty() {
                break;
            }
            let mut lost = BTreeSet::new();
            for (seat, last_used) in &clients {
                // An idle client's own clock rounds up every other round.
                let idle_s = match last_used {
                    Some(t) => {
                        Some((self.m.now.millis_since(*t) / 1000) as u64 + u64::from(round % 2))
                    }
                    None if round % 2 == 0 => Some(0),
                    None => None,
                };
                let mut answer = None;
                self.checked(|run, fx| {
                    let (got, events) = run.heartbeat_seat(&license, seat, idle_s, fx)?;
                    answer = Some(got);
                    Ok(events)
                })?;
                match answer {
                    Some(HeartbeatOutcome::Renewed(_)) => {
                        if last_used.is_none() {
                            kept.insert(seat.clone());
                        }
                    }
                    other => {
                        // (1) A client that reports activity at least every
                        // ttl keeps its seat.
                        ensure!(
                            !kept.contains(seat),
                            "clients: active seat {seat} lost: {other:?}"
                        );
                        if other == Some(HeartbeatOutcome::Lost(SeatLostReason::Idle)) {
                            self.note("clients: told idle");
                        }
                        lost.insert(seat.clone());
                    }
                }
            }
            clients.retain(|(seat, _)| !lost.contains(seat));
            self.set_now(self.m.now.saturating_add(ms(step)));
            if sweep {
                self.checked(|run, fx| run.reap(100, fx))?;
            }
        }
        for seat in &kept {
            let row = self.w.store.leases.get(seat).map(|s| &s.lease);
            ensure!(
                row.is_some_and(|l| self.m.live(l) && l.idle_since.is_none()),
                "clients: active seat {seat} not kept: {row:?}"
            );
            self.note("clients: active seat kept");
        }
        // The idle machines ask for their seats on loan (the generated
        // holders and machines are `h<n>` and `f<n>`).
        let number = |s: Option<&str>, p: char| s?.strip_prefix(p)?.parse::<u8>().ok();
        for (seat, last_used) in clients.iter().filter(|_| lend) {
            let row = self.m.leases.get(seat).map(|s| &s.lease);
            let holder = number(row.map(|l| l.holder.as_str()), 'h');
            let fp = number(row.and_then(|l| l.fingerprint.as_deref()), 'f');
            if let (Some(_), Some(h), Some(f)) = (last_used, holder, fp) {
                let who = (h, Some(f), None, Some(60));
                self.checked(|run, fx| run.checkout(Lic::Known(nth), who, &[], true, fx))?;
                self.note("clients: idle seat lent");
            }
        }
        Ok(())
    }

    /// Directly on the store: live seats kept by heartbeats whose user has
    /// been idle for their license's timeout.
    fn idle_past_timeout(&self) -> Vec<String> {
        let now = self.m.now;
        self.w
            .store
            .leases
            .values()
            .map(|s| &s.lease)
            .filter(|l| {
                let pol = self.m.pol(&l.license_id).unwrap();
                l.mode == SeatMode::Heartbeat
                    && is_live(l.expires_at, now, pol.skew())
                    && pol
                        .idle_timeout()
                        .zip(l.idle_since)
                        .is_some_and(|(t, since)| since.saturating_add(t) <= now)
            })
            .map(|l| l.seat_id.clone())
            .collect()
    }

    /// The live seats of each license in the store (licenses in id order).
    fn live_by_license(&self) -> Vec<usize> {
        self.m
            .pols
            .iter()
            .map(|(id, _)| self.stored_live(id).len())
            .collect()
    }

    /// (3), (4), on the store's own records of one command: only a seat
    /// kept by heartbeats is reclaimed (never a borrowed or lingering one),
    /// on a license with `idle_timeout`, while live; its session ends
    /// `Idle` at its idle start + the timeout; every `reclaim` event has
    /// that session (never a lapse).
    fn idle_properties(
        &self,
        before: &BTreeMap<String, StoredLease>,
        sessions_before: usize,
        events_before: usize,
    ) -> std::result::Result<(), String> {
        let sessions = &self.w.store.sessions[sessions_before..];
        for s in sessions.iter().filter(|s| s.end == SessionEnd::Idle) {
            let pol = self.m.pol(&s.lease.license_id).unwrap();
            let Some(timeout) = pol.idle_timeout() else {
                return Err(format!("reclaimed without idle_timeout: {s:?}"));
            };
            let was = before.get(&s.lease.seat_id).map(|b| &b.lease);
            ensure!(
                was.is_some_and(
                    |l| l.mode == SeatMode::Heartbeat && is_live(l.expires_at, s.at, pol.skew())
                ),
                "reclaimed {was:?}: not a live seat kept by heartbeats at {}",
                Rel(s.at)
            );
            // At the instant the timeout was reached (the model checks it
            // exactly): not before checkout + the timeout (an idle start is
            // never before checkout), not after now, nor after the recorded
            // idle start + the timeout.
            ensure!(
                s.lease.checked_out_at.saturating_add(timeout) <= s.at
                    && s.at <= self.m.now
                    && s.lease
                        .idle_since
                        .is_none_or(|since| s.at <= since.saturating_add(timeout)),
                "session {s:?} ended idle, but not at its idle start + {timeout:?}"
            );
        }
        for e in &self.w.store.events[events_before..] {
            if e.kind == EventKind::Reclaim {
                let ended = sessions
                    .iter()
                    .find(|s| Some(&s.lease.seat_id) == e.seat_id.as_ref());
                ensure!(
                    ended.is_some_and(|s| s.end == SessionEnd::Idle),
                    "reclaim {e:?} ended its session {ended:?}"
                );
            }
        }
        Ok(())
    }

    fn outage(&mut self, gap_ms: u64) -> std::result::Result<Vec<Event>, String> {
        let last_alive = self.m.now;
        self.set_now(last_alive.saturating_add(ms(gap_ms)));
        let now = self.m.now;
        let mut want = 0;
        for (id, pol) in self.m.pols.clone() {
            let until = now.saturating_add(pol.ttl());
            for s in self.m.leases.values_mut() {
                let l = &mut s.lease;
                if l.license_id == id
                    && l.mode == SeatMode::Heartbeat
                    && is_live(l.expires_at, last_alive, pol.skew())
                    && l.expires_at < until
                {
                    l.expires_at = until;
                    want += 1;
                }
            }
        }
        let (got, events) = self.w.run(|r| r.outage(last_alive));
        ensure_eq!(got, want, "outage after {gap_ms} ms: leases extended");
        if got > 0 {
            self.note("outage: extended");
        }
        // Everything live when the gap began is live for a TTL from now.
        for l in self.w.store.leases.values().map(|s| &s.lease) {
            let pol = self.m.pol(&l.license_id).unwrap();
            if l.mode == SeatMode::Heartbeat && is_live(l.expires_at, last_alive, pol.skew()) {
                ensure!(
                    l.expires_at >= now.saturating_add(pol.ttl()),
                    "outage left {l:?} short"
                );
            }
        }
        Ok(events)
    }

    /// The invariants, on the store's own state.
    fn invariants(&mut self) -> std::result::Result<(), String> {
        let now = self.m.now;
        // Field for field, the store is the model.
        ensure_eq!(self.w.store.leases, self.m.leases, "leases table");
        ensure_eq!(self.w.store.idle_periods, self.m.periods, "idle periods");
        // Idle starts: only on seats kept by heartbeats, between checkout
        // and now; recorded periods a minute or longer.
        for l in self.w.store.leases.values().map(|s| &s.lease) {
            ensure!(
                l.idle_since
                    .is_none_or(|since| l.mode == SeatMode::Heartbeat
                        && l.checked_out_at <= since
                        && since <= now),
                "idle start of {l:?} at {}",
                Rel(now)
            );
        }
        for (_, _, from, to) in &self.w.store.idle_periods {
            ensure!(
                to.millis_since(*from) >= MIN_IDLE_MS && *to <= now,
                "idle period {} .. {}",
                Rel(*from),
                Rel(*to)
            );
        }
        let blocks: BTreeMap<_, _> = self
            .w
            .store
            .blocks
            .iter()
            .map(|(k, v)| (k.clone(), *v))
            .collect();
        ensure_eq!(
            blocks,
            self.m.blocks,
            "blocks (a reap prunes the ended ones)"
        );

        // live ≤ seats + overage, the caps and the reservations hold, and
        // the rules count what the predicate counts.
        let (counts, events) = self.w.run(|r| r.live_counts());
        let counts = counts.map_err(|e| e.to_string())?;
        ensure!(events.is_empty(), "live_counts logged {events:?}");
        let mut by_predicate = Vec::new();
        for (id, pol) in &self.m.pols {
            let sp = self.m.sp(id);
            let live = self.stored_live(id);
            let n = live.len() as u32;
            ensure!(
                n <= pol.seats + sp.overage,
                "over-grant: {id} has {n} live of {} seats + {} overage at {}",
                pol.seats,
                sp.overage,
                Rel(now)
            );
            let of_group = |g: &str| {
                live.iter()
                    .filter(|l| l.group.as_deref() == Some(g))
                    .count() as u32
            };
            // A policy change may leave seats above a lowered cap (it
            // never evicts); the grant checks cover the new decisions.
            if !self.m.changed {
                for g in &sp.groups {
                    if let Some(max) = g.max {
                        ensure!(
                            of_group(&g.name) <= max,
                            "group {} of {id} holds {} > max {max}",
                            g.name,
                            of_group(&g.name)
                        );
                    }
                    // Everyone else together never reaches into g's
                    // reservation.
                    let outside = n - of_group(&g.name);
                    ensure!(
                        outside + g.reserve <= pol.seats + sp.overage,
                        "{outside} seats outside group {} of {id} with its reserve {}",
                        g.name,
                        g.reserve
                    );
                }
                if let Some(max) = sp.max_per_holder {
                    for h in live.iter().map(|l| &l.holder) {
                        let k = live.iter().filter(|l| &l.holder == h).count() as u32;
                        ensure!(k <= max, "holder {h} of {id} has {k} > {max} seats");
                    }
                }
            }
            // Never more than `borrow.seats` out, never for longer than
            // `borrow.max` from when it was last lent.
            let borrowed: Vec<_> = live.iter().filter(|l| l.mode == SeatMode::Borrow).collect();
            let terms = sp.borrow.as_ref();
            ensure!(
                borrowed.len() as u32 <= terms.map_or(0, |b| b.seats),
                "{id} has {} borrowed seats with {terms:?}",
                borrowed.len()
            );
            for l in &borrowed {
                let max_ms = terms.map_or(0, |b| b.max_s as i64 * 1000);
                ensure!(
                    l.expires_at.millis_since(l.issued_at) <= max_ms,
                    "a borrow beyond {max_ms} ms: {l:?}"
                );
            }
            let want = PoolCounts {
                live: n,
                lingering: live.iter().filter(|l| l.mode == SeatMode::Linger).count() as u32,
                borrowed: borrowed.len() as u32,
                groups: sp
                    .groups
                    .iter()
                    .map(|g| (g.name.clone(), of_group(&g.name)))
                    .collect(),
            };
            by_predicate.push((id.clone(), want));
        }
        ensure_eq!(counts, by_predicate, "live_counts");

        // Every seat that left has exactly one session; none in the table.
        let mut ended = BTreeSet::new();
        for s in &self.w.store.sessions {
            ensure!(
                ended.insert(s.lease.seat_id.clone()),
                "two sessions for {}",
                s.lease.seat_id
            );
        }
        ensure_eq!(ended, self.m.gone, "seats with a session vs seats gone");

        // Event ids strictly increase.
        for pair in self.w.store.events.windows(2) {
            ensure!(pair[0].id < pair[1].id, "event ids {pair:?}");
        }

        // One live (not lingering) seat per fingerprint and holder (two
        // holders may share a machine when one's seat lingered), one lease
        // per key; sane times (a lingering seat's expiry is its linger's end).
        let mut fps = BTreeSet::new();
        let mut keys = BTreeSet::new();
        for s in self.w.store.leases.values() {
            let l = &s.lease;
            let pol = self.m.pol(&l.license_id).unwrap();
            if let Some(fp) = &l.fingerprint
                && l.mode == SeatMode::Heartbeat
                && is_live(l.expires_at, now, pol.skew())
            {
                ensure!(
                    fps.insert((l.license_id.clone(), fp.clone(), l.holder.clone())),
                    "two live seats of {} for fingerprint {fp} and holder {}",
                    l.license_id,
                    l.holder
                );
            }
            if let Some(key) = &s.idempotency_key {
                ensure!(
                    keys.insert((l.license_id.clone(), key.clone())),
                    "two leases of {} for key {key}",
                    l.license_id
                );
            }
            ensure!(
                l.checked_out_at <= l.issued_at
                    && l.issued_at <= now
                    && (l.mode == SeatMode::Linger
                        || l.expires_at >= l.issued_at.saturating_add(pol.ttl())),
                "lease times {l:?} at {}",
                Rel(now)
            );
        }
        Ok(())
    }
}

fn run(lics: &[(Pol, SeatPol)], ops: &[Op]) -> std::result::Result<(), TestCaseError> {
    let mut run = Run::new(lics);
    for (i, op) in ops.iter().enumerate() {
        let now = Rel(run.m.now).to_string();
        run.step(op)
            .map_err(|e| TestCaseError::fail(format!("step {i} {op:?} at {now}: {e}")))?;
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig {
        // 1,000 sequences of up to 60 operations. XorShift rather than the
        // default ChaCha: unoptimized ChaCha was half of the test's time.
        cases: 1000,
        max_shrink_iters: 4096,
        failure_persistence: None,
        rng_algorithm: proptest::test_runner::RngAlgorithm::XorShift,
        ..ProptestConfig::default()
    })]

    /// Random operation sequences on one or two small pools: every answer,
    /// event and session matches the model and the invariants hold after
    /// every step.
    #[test]
    fn rules_match_the_model(
        lics in licenses(),
        ops in proptest::collection::vec(op(), 1..=60),
    ) {
        run(&lics, &ops)?;
    }
}

/// The generator's own check: a fixed sample of the sequences the property
/// test draws takes every rule step, so a change to the generator cannot
/// quietly stop testing one (replays, re-claims, waiters, blocks, lapses,
/// reaps, outages...).
#[test]
fn the_generated_sequences_reach_every_rule_step() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};

    let mut runner = TestRunner::new_with_rng(
        Config::default(),
        TestRng::deterministic_rng(RngAlgorithm::XorShift),
    );
    let strategy = (licenses(), proptest::collection::vec(op(), 1..=60));
    let mut stats: BTreeMap<&'static str, usize> = BTreeMap::new();
    const SEQUENCES: usize = 500;
    for _ in 0..SEQUENCES {
        let (pols, ops) = strategy.new_tree(&mut runner).unwrap().current();
        let mut run = Run::new(&pols);
        for op in &ops {
            run.step(op).unwrap();
        }
        for (what, n) in run.stats {
            *stats.entry(what).or_default() += n;
        }
    }
    for what in [
        "checkout: replay",
        "checkout: re-claim",
        "checkout: full",
        "checkout: full by waiters ahead",
        "checkout: past a waiter who cannot use the seat",
        "checkout: blocked",
        "checkout: unknown license",
        "heartbeat: renewed",
        "heartbeat: lapsed",
        "revoke: blocked",
        "outage: extended",
        "event: checkout",
        "event: release",
        "event: revoke",
        "event: reap",
        "event: denied",
        "event: lost",
        "session: release",
        "session: revoke",
        "session: lapse",
        "checkout: not allowed",
        "checkout: holder limit",
        "checkout: group limit",
        "checkout: full with reservations",
        "checkout: overage",
        "checkout: grouped",
        "checkout: lingering seat back",
        "release: lingering",
        "release: again while lingering",
        "heartbeat: lingering",
        "reap: lingering",
        "policy change",
        "checkout: borrow",
        "checkout: borrow turned",
        "checkout: borrow extended",
        "checkout: borrow limit",
        "checkout: borrow too long",
        "heartbeat: borrowed",
        "revoke: borrowed, kept",
        "revoke: borrowed, forced",
        "heartbeat: idle",
        "heartbeat: still idle",
        "heartbeat: came back",
        "heartbeat: reclaimed",
        "heartbeat (not here): idle",
        "heartbeat (not here): released",
        "heartbeat (not here): revoked",
        "reap: reclaimed",
        "event: reclaim",
        "session: idle",
        "idle period recorded",
        "clients: active seat kept",
        "clients: told idle",
        "clients: idle seat lent",
        "denial counted",
        "denial final at once on a ?wait= attempt",
    ] {
        let n = stats.get(what).copied().unwrap_or(0);
        assert!(
            n >= 10,
            "{what}: only {n} times in {SEQUENCES} sequences: {stats:#?}"
        );
    }
    // Rare by nature: a report that moves the idle start back (or sets the
    // first one) and reaches the timeout at once.
    let rare = "heartbeat: reclaimed by its report";
    let n = stats.get(rare).copied().unwrap_or(0);
    assert!(n >= 5, "{rare}: only {n} times in {SEQUENCES} sequences");
}

// ---------------------------------------------------------------------------
// The rule steps, one by one
// ---------------------------------------------------------------------------

/// One license `a`: 2 seats, TTL 10 s, skew 1 s, reap grace 3 s.
fn two_seats() -> World {
    World::new(&license_toml("a", 2, 10_000, 1_000, 3_000))
}

#[test]
fn a_blocked_holder_is_refused_even_with_a_live_seat_to_reclaim() {
    let mut w = two_seats();
    let (old, _) = granted(w.checkout(&req("a", "h", Some("f"), None), &[]));
    // The old seat lapses (not yet reaped); the same machine gets a new one.
    w.advance(11_001);
    let (new, reused) = granted(w.checkout(&req("a", "h", Some("f"), Some("k")), &[]));
    assert!(!reused);
    assert_ne!(new.seat_id, old.seat_id);
    // An admin revokes the lapsed seat and blocks its holder + fingerprint.
    let (revoked, _) = w.run(|r| r.revoke(&old.seat_id, None, Some(ms(5_000)), false));
    assert_eq!(revoked.unwrap().revoked().unwrap().seat_id, old.seat_id);
    let until = w.now.saturating_add(ms(5_000));
    // Blocked comes first: no re-claim by fingerprint, no replay by key.
    for r in [
        req("a", "h", Some("f"), None),
        req("a", "h", Some("f"), Some("k")),
    ] {
        assert_eq!(w.checkout(&r, &[]), CheckoutOutcome::Blocked { until });
    }
    assert_eq!(w.store.leases[&new.seat_id].lease, new, "not renewed");
    assert_eq!(w.store.denials.len(), 2);
    assert!(
        w.store
            .denials
            .iter()
            .all(|d| d.reason == DenialReason::Blocked && d.holder == "h")
    );
    // The live seat itself still renews, and without the fingerprint the
    // holder is not blocked.
    assert!(matches!(
        w.heartbeat("a", &new.seat_id),
        HeartbeatOutcome::Renewed(_)
    ));
    let (_, reused) = granted(w.checkout(&req("a", "h", None, None), &[]));
    assert!(!reused);
    // Once the block ends, the re-claim works again.
    w.now = until;
    let (again, reused) = granted(w.checkout(&req("a", "h", Some("f"), None), &[]));
    assert!(reused);
    assert_eq!(again.seat_id, new.seat_id);
}

#[test]
fn an_idempotency_key_of_a_lapsed_lease_gets_a_new_seat() {
    let mut w = two_seats();
    let first = req("a", "h", None, Some("k"));
    let (a, _) = granted(w.checkout(&first, &[]));
    // A replay while live: the same seat, renewed, nothing added.
    w.advance(5_000);
    let (again, reused) = granted(w.checkout(&first, &[]));
    assert!(reused);
    assert_eq!(again.seat_id, a.seat_id);
    assert_eq!(again.expires_at, w.now.saturating_add(ms(10_000)));
    assert_eq!(w.store.leases.len(), 1);
    // At the last live millisecond it is still a replay ...
    w.now = live_until(again.expires_at, ms(1_000));
    assert!(granted(w.checkout(&first, &[])).1);
    // ... and once it lapsed, the key buys a new seat and leaves the old one.
    let lapsed = w.store.leases[&a.seat_id].lease.clone();
    w.now = lapses_at(lapsed.expires_at, ms(1_000));
    let (b, reused) = granted(w.checkout(&first, &[]));
    assert!(!reused);
    assert_ne!(b.seat_id, a.seat_id);
    assert_eq!(w.store.leases[&a.seat_id].idempotency_key, None);
    assert_eq!(
        w.store.leases[&b.seat_id].idempotency_key.as_deref(),
        Some("k")
    );
    let (c, reused) = granted(w.checkout(&first, &[]));
    assert!(reused);
    assert_eq!(c.seat_id, b.seat_id);
}

#[test]
fn waiters_ahead_make_a_free_seat_look_full_but_not_for_a_reclaim() {
    let mut w = two_seats();
    let (a, _) = granted(w.checkout(&req("a", "h1", Some("f1"), None), &[]));
    w.advance(2_000);
    // One of two seats live, one waiter ahead: full until `a` lapses.
    let one_ahead = [waiter("h3", None)];
    let full = w.checkout(&req("a", "h2", Some("f2"), None), &one_ahead);
    let retry = lapses_at(a.expires_at, ms(1_000)).millis_since(w.now);
    assert_eq!(
        full,
        CheckoutOutcome::Full {
            seats: 2,
            live: 1,
            reserved: 0,
            retry_after: ms(retry as u64),
        }
    );
    assert_eq!(retry, 9_001);
    assert_eq!(w.store.leases.len(), 1);
    // Its own seat is no seat spoken for: a re-claim ignores the line.
    let five_ahead: Vec<_> = (0..5).map(|i| waiter(&format!("w{i}"), None)).collect();
    let (back, reused) = granted(w.checkout(&req("a", "h1", Some("f1"), None), &five_ahead));
    assert!(reused);
    assert_eq!(back.seat_id, a.seat_id);
    // Nobody ahead: the free seat is granted.
    let (_, reused) = granted(w.checkout(&req("a", "h2", Some("f2"), None), &[]));
    assert!(!reused);
    // No live lease at all and the line fills the pool: retry after a TTL.
    let mut w = two_seats();
    assert_eq!(
        w.checkout(
            &req("a", "h", None, None),
            &[waiter("x", None), waiter("y", None)]
        ),
        CheckoutOutcome::Full {
            seats: 2,
            live: 0,
            reserved: 0,
            retry_after: ms(10_000),
        }
    );
}

/// Three seats, one reserved for `render`; `ann` is in it, `bob` is not.
fn a_reserved_seat() -> World {
    World::new(
        &(license_toml("a", 3, 10_000, 1_000, 3_000)
            + "max_per_holder = 2\n\n[[license.group]]\nname = \"render\"\n\
               holders = [\"ann\", \"amy\"]\nreserve = 1\n"),
    )
}

#[test]
fn a_member_takes_its_reserved_seat_past_a_non_member_waiting_ahead() {
    let mut w = a_reserved_seat();
    granted(w.checkout(&req("a", "carl", None, None), &[]));
    granted(w.checkout(&req("a", "dave", None, None), &[]));
    // The one free seat is render's: bob, first in line, cannot use it...
    let bob = [waiter("bob", None)];
    assert!(matches!(
        w.checkout(&req("a", "bob", None, None), &[]),
        CheckoutOutcome::Full { reserved: 1, .. }
    ));
    // ...so he does not hold up ann behind him.
    let (seat, _) = granted(w.checkout(&req("a", "ann", None, None), &bob));
    assert_eq!(seat.group.as_deref(), Some("render"));
}

#[test]
fn a_waiter_ahead_who_can_use_the_seat_keeps_it() {
    let mut w = a_reserved_seat();
    granted(w.checkout(&req("a", "carl", None, None), &[]));
    granted(w.checkout(&req("a", "dave", None, None), &[]));
    // amy, a member, is ahead of ann: the reserved seat is hers.
    let amy = [waiter("amy", None)];
    assert!(matches!(
        w.checkout(&req("a", "ann", None, None), &amy),
        CheckoutOutcome::Full { .. }
    ));
    // A waiter at its holder cap cannot use a seat and holds up no one.
    let mut w = a_reserved_seat();
    granted(w.checkout(&req("a", "carl", Some("1"), None), &[]));
    granted(w.checkout(&req("a", "carl", Some("2"), None), &[]));
    let carl = [waiter("carl", Some("3"))];
    assert!(matches!(
        w.checkout(&req("a", "carl", Some("3"), None), &[]),
        CheckoutOutcome::LimitReached {
            limit: Limit::Holder,
            ..
        }
    ));
    granted(w.checkout(&req("a", "ann", None, None), &carl));
    // The first waiter takes the last unreserved seat; a non-member
    // behind finds none, a member behind still has its reserved one.
    let mut w = a_reserved_seat();
    granted(w.checkout(&req("a", "carl", None, None), &[]));
    let line = [waiter("bob", None), waiter("eve", None)];
    assert!(matches!(
        w.checkout(&req("a", "dave", None, None), &line),
        CheckoutOutcome::Full { reserved: 1, .. }
    ));
    granted(w.checkout(&req("a", "ann", None, None), &line));
}

#[test]
fn the_outage_rule_extends_exactly_the_leases_live_at_last_alive() {
    // `a`: TTL 10 s, skew 1 s; `b`: TTL 20 s, no skew.
    let toml = license_toml("a", 4, 10_000, 1_000, 3_000) + &license_toml("b", 1, 20_000, 0, 1);
    let mut w = World::new(&toml);
    // a0 lapses (T0 + 6 s) long before the writer was last alive.
    w.now = at(-5_000);
    let (a0, _) = granted(w.checkout(&req("a", "h0", None, None), &[]));
    w.now = at(0);
    let (a1, _) = granted(w.checkout(&req("a", "h1", None, None), &[]));
    w.advance(500);
    let (a2, _) = granted(w.checkout(&req("a", "h2", None, None), &[]));
    let (b1, _) = granted(w.checkout(&req("b", "h3", None, None), &[]));
    // The writer was last alive on a1's last live millisecond (T0 + 11 s),
    // when it granted a3 (expiring T0 + 21 s).
    let last_alive = live_until(a1.expires_at, ms(1_000));
    w.now = last_alive;
    let (a3, _) = granted(w.checkout(&req("a", "h4", None, None), &[]));
    let before = w.store.clone();

    // Nobody renews for a minute: all but a0 get one TTL from now.
    w.now = last_alive.saturating_add(ms(60_000));
    let (n, events) = w.run(|r| r.outage(last_alive));
    assert_eq!(n, 4);
    assert!(events.is_empty());
    for (seat, ttl) in [
        (&a1.seat_id, 10_000),
        (&a2.seat_id, 10_000),
        (&a3.seat_id, 10_000),
        (&b1.seat_id, 20_000),
    ] {
        let after = &w.store.leases[seat].lease;
        assert_eq!(after.expires_at, w.now.saturating_add(ms(ttl)), "{seat}");
        assert_eq!(after.issued_at, before.leases[seat].lease.issued_at);
    }
    assert_eq!(w.store.leases[&a0.seat_id], before.leases[&a0.seat_id]);

    // Had it been last alive one millisecond later, a1 would not count.
    let mut later = World {
        store: before.clone(),
        ..World::new(&toml)
    };
    later.now = last_alive.saturating_add(ms(60_000));
    let (n, _) = later.run(|r| r.outage(last_alive.saturating_add(ms(1))));
    assert_eq!(n, 3);
    assert_eq!(later.store.leases[&a1.seat_id], before.leases[&a1.seat_id]);

    // "At least one TTL": a lease already expiring at now + TTL (a3, with
    // no gap at all) is left alone, and a second pass changes nothing.
    let mut no_gap = World {
        store: before.clone(),
        ..World::new(&toml)
    };
    no_gap.now = last_alive;
    let (n, _) = no_gap.run(|r| r.outage(last_alive));
    assert_eq!(n, 3, "a1, a2 and b1");
    assert_eq!(no_gap.store.leases[&a3.seat_id], before.leases[&a3.seat_id]);
    let (n, _) = no_gap.run(|r| r.outage(last_alive));
    assert_eq!(n, 0);
}

#[test]
fn pool_sizes_are_recorded_only_when_they_change() {
    let two = license_toml("a", 2, 10_000, 1_000, 3_000) + &license_toml("b", 5, 10_000, 0, 1);
    let mut w = World::new(&two);
    w.run(|r| r.record_pool_sizes()).0.unwrap();
    assert_eq!(
        w.store.pool_sizes,
        vec![("a".into(), at(0), 2), ("b".into(), at(0), 5)]
    );
    // Nothing changed: nothing recorded.
    w.advance(1_000);
    w.run(|r| r.record_pool_sizes()).0.unwrap();
    assert_eq!(w.store.pool_sizes.len(), 2);
    // `a` grows to 3, `b` leaves the policy (0 seats), `c` arrives.
    w.licenses = Licenses::parse(
        &(license_toml("a", 3, 10_000, 1_000, 3_000) + &license_toml("c", 0, 10_000, 0, 1)),
    )
    .unwrap();
    w.advance(1_000);
    w.run(|r| r.record_pool_sizes()).0.unwrap();
    let mut recorded = w.store.pool_sizes[2..].to_vec();
    recorded.sort();
    assert_eq!(
        recorded,
        vec![
            ("a".into(), at(2_000), 3),
            ("b".into(), at(2_000), 0),
            ("c".into(), at(2_000), 0),
        ]
    );
    // A license that is gone stays at 0 without being recorded again.
    w.advance(1_000);
    w.run(|r| r.record_pool_sizes()).0.unwrap();
    assert_eq!(w.store.pool_sizes.len(), 5);
    let sizes = w.store.current_pool_sizes().unwrap();
    assert_eq!(sizes.get("a"), Some(&3));
    assert_eq!(sizes.get("b"), Some(&0));
}

#[test]
fn a_lapsed_seat_released_or_revoked_ends_its_session_when_it_lapsed() {
    let mut w = two_seats();
    let (a, _) = granted(w.checkout(&req("a", "h1", None, None), &[]));
    let (b, _) = granted(w.checkout(&req("a", "h2", None, None), &[]));
    // A live release ends at now.
    w.advance(4_000);
    assert!(w.run(|r| r.release("a", &a.seat_id)).0.unwrap());
    // Past its live end but not reaped: a revoke records the lapse.
    w.advance(9_000);
    assert!(
        w.run(|r| r.revoke(&b.seat_id, None, None, false))
            .0
            .unwrap()
            .revoked()
            .is_some()
    );
    let ends: Vec<(String, SessionEnd, Timestamp)> = w
        .store
        .sessions
        .iter()
        .map(|s| (s.lease.seat_id.clone(), s.end, s.at))
        .collect();
    assert_eq!(
        ends,
        vec![
            (a.seat_id.clone(), SessionEnd::Release, at(4_000)),
            (b.seat_id.clone(), SessionEnd::Lapse, at(11_000)),
        ]
    );
    // Releasing again does nothing.
    assert!(!w.run(|r| r.release("a", &a.seat_id)).0.unwrap());
    assert_eq!(w.store.sessions.len(), 2);
}

#[test]
fn a_seat_renews_only_under_its_own_license_and_while_live() {
    let toml = license_toml("a", 1, 10_000, 1_000, 3_000) + &license_toml("b", 1, 10_000, 0, 1);
    let mut w = World::new(&toml);
    let (a, _) = granted(w.checkout(&req("a", "h", None, None), &[]));
    let lapsed = HeartbeatOutcome::Lost(SeatLostReason::Lapsed);
    assert_eq!(w.heartbeat("b", &a.seat_id), lapsed);
    assert_eq!(w.heartbeat("nope", &a.seat_id), lapsed);
    assert_eq!(w.store.leases[&a.seat_id].lease, a);
    w.now = live_until(a.expires_at, ms(1_000));
    let HeartbeatOutcome::Renewed(r) = w.heartbeat("a", &a.seat_id) else {
        panic!("live at its last live millisecond");
    };
    assert_eq!(r.expires_at, w.now.saturating_add(ms(10_000)));
    w.now = lapses_at(r.expires_at, ms(1_000));
    let (lost, events) = w.run(|r| r.heartbeat("a", &a.seat_id, None));
    assert_eq!(lost.unwrap(), lapsed);
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].kind, EventKind::Lost);
    // The lapsed seat does not count: the pool of one is free again.
    let (_, reused) = granted(w.checkout(&req("a", "h2", None, None), &[]));
    assert!(!reused);
}

#[test]
fn reap_takes_the_earliest_reapable_leases_up_to_the_limit() {
    let toml = license_toml("a", 3, 10_000, 1_000, 3_000) + &license_toml("b", 2, 5_000, 0, 1);
    let mut w = World::new(&toml);
    let (a1, _) = granted(w.checkout(&req("a", "h1", None, None), &[]));
    w.advance(1_000);
    let (a2, _) = granted(w.checkout(&req("a", "h2", None, None), &[]));
    let (b1, _) = granted(w.checkout(&req("b", "h3", None, None), &[]));
    // a1 is reapable after T0 + 13 s, a2 after 14 s, b1 after 6 s + 1 ms.
    w.now = at(13_000);
    let (n, events) = w.run(|r| r.reap(10, RETENTION));
    assert_eq!(n.unwrap(), 1);
    assert_eq!(events[0].seat_id.as_deref(), Some(b1.seat_id.as_str()));
    w.now = at(14_001);
    let (n, events) = w.run(|r| r.reap(1, RETENTION));
    assert_eq!(n.unwrap(), 1, "the limit holds");
    assert_eq!(events[0].seat_id.as_deref(), Some(a1.seat_id.as_str()));
    let (n, _) = w.run(|r| r.reap(1, RETENTION));
    assert_eq!(n.unwrap(), 1);
    assert!(w.store.leases.is_empty());
    let lapse: Vec<(String, SessionEnd, Timestamp)> = w
        .store
        .sessions
        .iter()
        .map(|s| (s.lease.seat_id.clone(), s.end, s.at))
        .collect();
    assert_eq!(
        lapse,
        vec![
            (b1.seat_id, SessionEnd::Lapse, at(6_000)),
            (a1.seat_id, SessionEnd::Lapse, at(11_000)),
            (a2.seat_id, SessionEnd::Lapse, at(12_000)),
        ]
    );
}

/// `a`: 3 seats, TTL 10 s, no skew, reap grace 1 ms, idle_timeout 90 s,
/// one seat lent for up to 10 min; `b`: the same timing, no idle_timeout.
fn idle_world() -> World {
    World::new(
        &(license_toml("a", 3, 10_000, 0, 1)
            + "idle_timeout = \"90s\"\n[license.borrow]\nmax = \"600s\"\nseats = 1\n"
            + &license_toml("b", 1, 10_000, 0, 1)),
    )
}

fn beat(w: &mut World, license: &str, seat: &str, idle_s: Option<u64>) -> HeartbeatOutcome {
    let idle = idle_s.map(Duration::from_secs);
    w.run(|r| r.heartbeat(license, seat, idle)).0.unwrap()
}

fn renewed(out: HeartbeatOutcome) -> LeaseRow {
    match out {
        HeartbeatOutcome::Renewed(row) => row,
        other => panic!("expected a renewal, got {other:?}"),
    }
}

/// The issue's four properties on one timeline: clients heartbeat every
/// 10 s, the reaper sweeps 5 s after each round.
#[test]
fn idle_reclaim_keeps_active_borrowed_and_untimed_seats_and_ends_idle_ones_at_the_timeout() {
    let mut w = idle_world();
    let (ann, _) = granted(w.checkout(&req("a", "ann", None, None), &[]));
    let (bob, _) = granted(w.checkout(&req("a", "bob", None, None), &[]));
    let (dan, _) = granted(w.checkout(&req("a", "dan", Some("fd"), None), &[]));
    let (cid, _) = granted(w.checkout(&req("b", "cid", None, None), &[]));
    let mut lent = None;
    for round in 1..=30u64 {
        let t = round * 10;
        w.now = at(t as i64 * 1000);
        // (1) ann reports activity every ttl: renewed, never idle.
        let row = renewed(beat(
            &mut w,
            "a",
            &ann.seat_id,
            [None, Some(0)][round as usize % 2],
        ));
        assert_eq!(row.idle_since, None);
        // (4) cid, on a license without idle_timeout, idle since checkout.
        let row = renewed(beat(&mut w, "b", &cid.seat_id, Some(t)));
        assert_eq!(row.idle_since, Some(at(0)));
        // bob is idle since 5 s: renewed until a sweep takes the seat at
        // 5 s + 90 s; his client learns it at its next heartbeat (and a
        // heartbeat a ttl later would hear `lapsed`).
        if t <= 100 {
            let got = beat(&mut w, "a", &bob.seat_id, Some(t - 5));
            if t < 100 {
                assert_eq!(renewed(got).idle_since, Some(at(5_000)));
            } else {
                assert_eq!(got, HeartbeatOutcome::Lost(SeatLostReason::Idle));
            }
        }
        // (3) dan, idle since 5 s too, borrows his seat at 80 s: its idle
        // period closes there, and no report reopens one.
        if t == 80 {
            let mut borrow = req("a", "dan", Some("fd"), None);
            borrow.borrow = Some(Duration::from_secs(600));
            let (row, reused) = granted(w.checkout(&borrow, &[]));
            assert!(reused && row.mode == SeatMode::Borrow && row.idle_since.is_none());
            lent = Some(row);
        }
        match &lent {
            None => assert!(
                renewed(beat(&mut w, "a", &dan.seat_id, Some(t - 5)))
                    .idle_since
                    .is_some()
            ),
            Some(row) => assert_eq!(
                beat(&mut w, "a", &dan.seat_id, Some(t)),
                HeartbeatOutcome::Borrowed {
                    expires_at: row.expires_at
                }
            ),
        }
        w.now = at(t as i64 * 1000 + 5_000);
        let live = w.run(|r| r.live_counts()).0.unwrap()[0].1.live;
        let (n, events) = w.run(|r| r.reap(10, RETENTION));
        let live_after = w.run(|r| r.live_counts()).0.unwrap()[0].1.live;
        if t + 5 == 95 {
            // (2) Gone in the sweep at its timeout; free in that command.
            assert_eq!(n.unwrap(), 1);
            assert_eq!(live_after, live - 1);
            assert_eq!(events[0].kind, EventKind::Reclaim);
            assert_eq!(
                events[0].detail.as_deref(),
                Some(format!("idle since {}: idle_timeout 90s", at(5_000)).as_str())
            );
        } else {
            assert_eq!((n.unwrap(), live_after), (0, live), "at {t} s + 5 s");
        }
    }
    assert_eq!(w.store.leases[&ann.seat_id].lease.idle_since, None);
    assert_eq!(w.store.leases[&dan.seat_id].lease.mode, SeatMode::Borrow);
    // (4) bob's session ended idle at the timeout, never as a lapse; his
    // idle period is history, as are dan's (lent) and cid's (released).
    w.now = at(300_000);
    assert!(w.run(|r| r.release("b", &cid.seat_id)).0.unwrap());
    let ends: Vec<_> = w
        .store
        .sessions
        .iter()
        .map(|s| (s.lease.seat_id.as_str(), s.end, s.at))
        .collect();
    assert_eq!(
        ends,
        vec![
            (bob.seat_id.as_str(), SessionEnd::Idle, at(95_000)),
            (cid.seat_id.as_str(), SessionEnd::Release, at(300_000)),
        ]
    );
    assert_eq!(
        w.store.idle_periods,
        vec![
            ("a".into(), dan.seat_id.clone(), at(5_000), at(80_000)),
            ("a".into(), bob.seat_id.clone(), at(5_000), at(95_000)),
            ("b".into(), cid.seat_id.clone(), at(0), at(300_000)),
        ]
    );
}

/// A report that sets or moves the seat's idle start and reaches the
/// timeout at once reclaims the seat as of that report: the session, the
/// `reclaim` event and the idle period carry the reported idle start (a
/// rules bug this test found: the seat was reclaimed as it was before).
#[test]
fn a_report_that_reaches_the_timeout_records_its_idle_start() {
    // The first report already reaches the timeout: idle since 5 s.
    let mut w = idle_world();
    let (seat, _) = granted(w.checkout(&req("a", "ann", None, None), &[]));
    for t in 1..=9 {
        w.now = at(t * 10_000);
        renewed(beat(&mut w, "a", &seat.seat_id, None));
    }
    w.now = at(100_000);
    let (got, events) = w.run(|r| r.heartbeat("a", &seat.seat_id, Some(Duration::from_secs(95))));
    assert_eq!(got.unwrap(), HeartbeatOutcome::Lost(SeatLostReason::Idle));
    assert_eq!(w.store.sessions[0].at, at(95_000));
    assert_eq!(
        events[0].detail.as_deref(),
        Some(format!("idle since {}: idle_timeout 90s", at(5_000)).as_str())
    );
    assert_eq!(
        w.store.idle_periods,
        vec![("a".into(), seat.seat_id.clone(), at(5_000), at(95_000))]
    );
    // A report that moves the start back (by less than the 2 s that
    // would mean "came back"): idle since 40 s, not 45 s.
    let mut w = idle_world();
    let (seat, _) = granted(w.checkout(&req("a", "ann", None, None), &[]));
    for t in 1..=13 {
        w.now = at(t * 10_000);
        let idle = (t >= 5).then(|| t as u64 * 10 - 45);
        renewed(beat(&mut w, "a", &seat.seat_id, idle));
    }
    w.now = at(132_000);
    let (got, _) = w.run(|r| r.heartbeat("a", &seat.seat_id, Some(Duration::from_secs(92))));
    assert_eq!(got.unwrap(), HeartbeatOutcome::Lost(SeatLostReason::Idle));
    assert_eq!(w.store.sessions[0].at, at(130_000));
    assert_eq!(
        w.store.idle_periods,
        vec![("a".into(), seat.seat_id.clone(), at(40_000), at(130_000))]
    );
}
