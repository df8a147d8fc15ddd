//! The checker: does the lease model explain a recorded history?
//!
//! The model: a seat counts from its grant (its signed `issued_at`) until
//! its signed `expires_at + skew`, or until a release or revoke takes
//! effect, somewhere between that operation's sending and its answer (at
//! any instant after its sending when its answer is `unknown`). A
//! heartbeat renews a seat only while it counts. The server's outage rule
//! may give a seat live when every writer stopped one TTL from when they
//! came back.
//!
//! Porcupine and Knossos search the orders in which the operations could
//! have taken effect, since their models (a register, a queue) admit no
//! shortcut. The lease model does: each promise is broken under every
//! admissible placement exactly when it is broken under one extreme
//! placement, so each check is a sweep, not a search:
//!
//! - **over-grant**: a seat surely counts from its grant until the
//!   earliest instant anything could have ended it (a release or revoke
//!   sent, a `410` asked, its proven expiry plus skew); more such seats
//!   than `capacity` at one instant is a violation under every placement.
//!   Unknown checkouts are placed where they add nothing.
//! - **renewed after a lapse**: a heartbeat answered `ok` when the latest
//!   expiry any placement allows (unknown heartbeats applied as late as
//!   they could still renew, the outage rule applied) had passed.
//! - **lost before expiry**: a `410` while the seat surely counted and
//!   nothing that could end it had been sent.
//! - **renewed after its release**: a heartbeat sent after a release or
//!   revoke of its seat was acknowledged, answered `ok`.
//! - **refused while free**: a checkout refused `no_seats_available` while fewer
//!   seats than the pool could have counted, under the placement that
//!   counts the most: every seat from its grant to the latest end any
//!   placement allows, and every grant the event log shows that no answer
//!   carried (an unknown checkout that took effect).
//! - **granted twice**: two grants of one seat id.
//! - **reaped too soon**: a `reap` event before the seat's proven expiry
//!   plus `reap_grace`.
//! - **the event log**: a gap in its ids; an acknowledged checkout,
//!   release or revoke without its event; an event whose instant is
//!   outside its operation's window; events in an order the answers
//!   contradict (an operation answered before another was sent has the
//!   smaller id).
//!
//! Each license is checked alone; every check is a sort and a sweep, so
//! the time grows as `n log n`.

mod count;
mod events;
mod free;
mod lapse;
mod seat;
mod seats;

use std::collections::BTreeMap;
use std::fmt;

use crate::history::{History, Micros, Terms};

/// How far apart two clocks on one machine may read for the checker to
/// still call an order proven: the server's instants have millisecond
/// precision, and the client reads its clock a little before sending and
/// after the answer.
pub const TOLERANCE: Micros = 2_000;

/// Events that take a seat out of the table.
const ENDS_A_SEAT: [&str; 4] = ["release", "revoke", "reap", "reclaim"];

/// How long before a fault began the server may last have recorded that it
/// was alive (its outage rule extends what was live then): the stall
/// threshold's default.
const OUTAGE_LOOKBACK: Micros = 3_000_000;

/// The latest expiry the outage rule may have given a lease expiring at
/// `expires`, by `until`: each outage that began while it may have counted
/// gives it one TTL from when the server came back (the rule ran at some
/// instant between the fault's start and its end).
fn after_outages(
    outages: &[(Micros, Micros)],
    mut expires: Micros,
    until: Micros,
    terms: &Terms,
) -> Micros {
    for &(began, ended) in outages {
        if began <= until && expires + terms.skew >= began - OUTAGE_LOOKBACK {
            expires = expires.max(until.min(ended) + terms.ttl);
        }
    }
    expires
}

/// A length of time for people: `1.234 s`.
fn span(us: Micros) -> String {
    format!("{:.3} s", us as f64 / 1e6)
}

/// The promise a violation breaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Broken {
    /// More seats counted at one instant than `seats + overage`.
    OverGrant,
    /// A seat id granted twice.
    GrantedTwice,
    /// A checkout refused `no_seats_available` while a seat was surely free.
    RefusedWhileFree,
    /// A `410` for a seat that still counted, nothing having ended it.
    LostBeforeExpiry,
    /// A heartbeat renewed a seat after its release or revoke was
    /// acknowledged.
    RenewedAfterRelease,
    /// A heartbeat renewed a seat that had lapsed.
    RenewedAfterLapse,
    /// The reaper deleted a seat before `expires_at + reap_grace`.
    ReapedTooSoon,
    /// An acknowledged operation has no event.
    EventMissing,
    /// The event ids are not consecutive.
    EventGap,
    /// An event's instant is outside its operation's window, or events
    /// are in an order the answers contradict.
    EventOrder,
}

impl Broken {
    pub fn as_str(self) -> &'static str {
        match self {
            Broken::OverGrant => "over-grant",
            Broken::GrantedTwice => "granted twice",
            Broken::RefusedWhileFree => "refused while free",
            Broken::LostBeforeExpiry => "lost before expiry",
            Broken::RenewedAfterRelease => "renewed after its release",
            Broken::RenewedAfterLapse => "renewed after a lapse",
            Broken::ReapedTooSoon => "reaped too soon",
            Broken::EventMissing => "event missing",
            Broken::EventGap => "event gap",
            Broken::EventOrder => "event order",
        }
    }
}

/// One proven violation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    pub broken: Broken,
    /// `None` for the event log's ids, which are the server's.
    pub license: Option<String>,
    /// The instant it is proven at, on the server's clock.
    pub at: Micros,
    /// The operations it involves (indexes into `History::ops`).
    pub ops: Vec<usize>,
    /// The seats it involves.
    pub seats: Vec<String>,
    /// What happened, in a sentence.
    pub message: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let at = chrono::DateTime::from_timestamp_micros(self.at)
            .map(|t| t.format("%H:%M:%S%.6f").to_string())
            .unwrap_or_else(|| self.at.to_string());
        write!(f, "{} at {at}", self.broken.as_str())?;
        if let Some(l) = &self.license {
            write!(f, " on {l}")?;
        }
        write!(f, ": {}", self.message)
    }
}

/// What the checker found.
#[derive(Debug, Clone, Default)]
pub struct Verdict {
    /// Operations checked.
    pub ops: usize,
    /// Events checked.
    pub events: usize,
    /// Every violation proven, earliest first.
    pub violations: Vec<Violation>,
}

impl Verdict {
    /// The earliest violation proven.
    pub fn first(&self) -> Option<&Violation> {
        self.violations.first()
    }

    pub fn holds(&self) -> bool {
        self.violations.is_empty()
    }
}

/// Check `history` against the lease model.
pub fn check(history: &History) -> Verdict {
    let mut by_license: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for (i, op) in history.ops.iter().enumerate() {
        by_license.entry(op.license.as_str()).or_default().push(i);
    }
    let mut violations = Vec::new();
    for (license, ops) in &by_license {
        match history.terms_of(license) {
            Some(terms) => violations.extend(seats::check_license(history, terms, ops)),
            None => panic!("the history has no terms for license {license}"),
        }
    }
    violations.extend(events::check_events(history));
    violations.sort_by_key(|v| (v.at, v.broken));
    Verdict {
        ops: history.ops.len(),
        events: history.events.len(),
        violations,
    }
}
