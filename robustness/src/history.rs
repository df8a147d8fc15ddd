//! A recorded history: every operation the clients sent, with the instant
//! it was sent and the instant its answer came, what the answer was, the
//! faults injected meanwhile and the server's event log at the end. Saved
//! as JSON beside a failing test's output, so a history can be checked
//! again.
//!
//! All instants are microseconds since the Unix epoch. A client records
//! its own wall clock (and its monotonic clock, to show the wall clock did
//! not jump); the server's instants (`issued_at`, `expires_at`, an event's
//! `at`) are on the server's clock, which a [`ClockStep`] may have moved.
//! [`History::server_time`] puts a client instant on the server's clock.

use serde::{Deserialize, Serialize};

/// Microseconds since the Unix epoch.
pub type Micros = i64;

/// One instant on the client, read from both of its clocks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stamp {
    /// The wall clock, microseconds since the Unix epoch.
    pub wall: Micros,
    /// The monotonic clock, microseconds since the recording began.
    pub mono: Micros,
}

impl Stamp {
    /// An instant whose two clocks agree (hand-written histories).
    pub fn at(wall: Micros) -> Stamp {
        Stamp { wall, mono: wall }
    }
}

/// What the client asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// `POST /v1/licenses/{id}/seats`.
    Checkout,
    /// A checkout with `borrow_s`: a seat for offline use.
    Borrow,
    /// `POST .../seats/{seat}/heartbeat`.
    Heartbeat,
    /// `DELETE .../seats/{seat}`.
    Release,
    /// `DELETE /v1/admin/seats/{seat}`.
    Revoke,
}

impl Kind {
    /// Checkouts and borrows grant a seat.
    pub fn grants(self) -> bool {
        matches!(self, Kind::Checkout | Kind::Borrow)
    }

    /// Releases and revokes end a seat.
    pub fn ends(self) -> bool {
        matches!(self, Kind::Release | Kind::Revoke)
    }
}

/// A lease as the server signed it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Granted {
    pub seat: String,
    pub issued_at: Micros,
    pub expires_at: Micros,
}

/// How the operation ended, as the client saw it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "outcome")]
pub enum Outcome {
    /// A 2xx answer; a checkout, borrow or heartbeat carries the lease.
    Ok { lease: Option<Granted> },
    /// A definite refusal (4xx): the operation took no effect.
    Fail {
        status: u16,
        /// The body's `error` (`no_seats`, `seat_lost`, ...).
        error: String,
        /// The body's `reason`, when it has one (`lapsed`, `revoked`, ...).
        reason: Option<String>,
    },
    /// No definite answer (the connection died, a timeout, a 5xx): the
    /// operation may or may not have taken effect, at any instant after it
    /// was sent.
    Unknown { why: String },
}

/// One operation of one client.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Op {
    /// Which client sent it (a client sends one operation at a time).
    pub client: u32,
    pub license: String,
    pub kind: Kind,
    /// The seat it names (heartbeat, release, revoke); for a checkout or
    /// borrow, `None` (the seat granted is in the outcome).
    pub seat: Option<String>,
    pub sent: Stamp,
    pub answered: Stamp,
    #[serde(flatten)]
    pub outcome: Outcome,
}

impl Op {
    /// The lease an `ok` answer carried.
    pub fn granted(&self) -> Option<&Granted> {
        match &self.outcome {
            Outcome::Ok { lease } => lease.as_ref(),
            _ => None,
        }
    }

    /// The seat this operation is about: the one it names, or the one it
    /// was granted.
    pub fn seat_id(&self) -> Option<&str> {
        self.seat
            .as_deref()
            .or_else(|| self.granted().map(|g| g.seat.as_str()))
    }

    pub fn is_ok(&self) -> bool {
        matches!(self.outcome, Outcome::Ok { .. })
    }

    pub fn is_unknown(&self) -> bool {
        matches!(self.outcome, Outcome::Unknown { .. })
    }

    /// A `410 seat_lost` answer, with its reason.
    pub fn lost_reason(&self) -> Option<&str> {
        match &self.outcome {
            Outcome::Fail {
                status: 410,
                reason,
                ..
            } => Some(reason.as_deref().unwrap_or("")),
            _ => None,
        }
    }
}

/// The lease terms of one license, as its licenses file sets them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Terms {
    pub license: String,
    /// `seats + overage`: the most seats that may count at once.
    pub capacity: u32,
    pub ttl: Micros,
    /// A lease counts until `expires_at + skew`.
    pub skew: Micros,
    /// The reaper deletes a lease only after `expires_at + reap_grace`.
    pub reap_grace: Micros,
}

/// A fault injected while recording.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fault {
    /// What was done, for people: "kill -9 and restart", "stall 4 s", ...
    pub what: String,
    pub began: Stamp,
    /// When it was over: the server answering again, the stall released.
    pub ended: Stamp,
    /// Nobody could renew meanwhile (every writer was down): the server's
    /// outage rule may give each lease live when it began one TTL from
    /// when it ended.
    pub stops_writes: bool,
}

/// From `from` (client wall clock) on, the server's clock reads `offset`
/// ahead of the client's: `faketime` moved it between restarts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClockStep {
    pub from: Micros,
    pub offset: Micros,
}

/// One entry of the server's event log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Event {
    pub id: i64,
    /// On the server's clock.
    pub at: Micros,
    /// `checkout`, `release`, `revoke`, `reap`, `lost`, `config`, ...
    pub kind: String,
    pub license: Option<String>,
    pub seat: Option<String>,
    pub detail: Option<String>,
}

/// Everything recorded in one run.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct History {
    /// What the run was, for people: "kill -9 and restart (SQLite)".
    pub scenario: String,
    pub terms: Vec<Terms>,
    pub ops: Vec<Op>,
    pub faults: Vec<Fault>,
    pub clock_steps: Vec<ClockStep>,
    /// The whole event log, read after the last operation was answered.
    pub events: Vec<Event>,
}

impl History {
    /// The server's clock at client wall instant `wall`.
    pub fn server_time(&self, wall: Micros) -> Micros {
        let offset = self
            .clock_steps
            .iter()
            .filter(|s| s.from <= wall)
            .max_by_key(|s| s.from)
            .map_or(0, |s| s.offset);
        wall + offset
    }

    /// When an operation could have taken effect, on the server's clock:
    /// from its sending to its answer (to forever for an `unknown`).
    pub fn window(&self, op: &Op) -> (Micros, Micros) {
        let from = self.server_time(op.sent.wall);
        let to = if op.is_unknown() {
            Micros::MAX
        } else {
            self.server_time(op.answered.wall)
        };
        (from, to)
    }

    /// How far the client's wall clock moved against its monotonic clock
    /// over the recording: the checker reads every instant on the wall
    /// clock, so a step (NTP, an admin) would make the orders it reads
    /// doubtful.
    pub fn wall_clock_drift(&self) -> Micros {
        let offsets = self
            .ops
            .iter()
            .flat_map(|op| [op.sent, op.answered])
            .map(|s| s.wall - s.mono);
        let (low, high) = offsets.fold((Micros::MAX, Micros::MIN), |(lo, hi), d| {
            (lo.min(d), hi.max(d))
        });
        high.checked_sub(low).unwrap_or(0).max(0)
    }

    /// The faults that stopped every writer, on the server's clock:
    /// (began, ended).
    pub fn outages(&self) -> Vec<(Micros, Micros)> {
        self.faults
            .iter()
            .filter(|f| f.stops_writes)
            .map(|f| {
                (
                    self.server_time(f.began.wall),
                    self.server_time(f.ended.wall),
                )
            })
            .collect()
    }

    pub fn terms_of(&self, license: &str) -> Option<&Terms> {
        self.terms.iter().find(|t| t.license == license)
    }
}
