//! What a violation's picture shows, on the server's clock: the window,
//! its lanes and what is in each, before either drawing of it.

use std::collections::HashMap;

use crate::check::Violation;
use crate::history::{History, Kind, Micros, Op, Outcome};

/// Shown on each side of the violation's instant at least.
const MARGIN: Micros = 2_000_000;

pub struct Picture<'h> {
    pub history: &'h History,
    pub violation: &'h Violation,
    /// The window, on the server's clock.
    pub from: Micros,
    pub to: Micros,
    /// The violation's seats first.
    pub lanes: Vec<Lane>,
    pub faults: Vec<Band>,
}

/// What a lane is about.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum LaneKey {
    Seat(String),
    /// A client's operations that name no seat and were granted none.
    NoSeat(u32),
    /// Events that name no seat.
    Server,
}

pub struct Lane {
    pub key: LaneKey,
    /// One of the violation's seats.
    pub involved: bool,
    /// By sending instant.
    pub bars: Vec<Bar>,
    pub lives: Vec<Life>,
    pub ticks: Vec<Tick>,
}

impl Lane {
    pub fn label(&self) -> String {
        match &self.key {
            LaneKey::Seat(seat) => format!("seat {}", short(seat)),
            LaneKey::NoSeat(client) => format!("client {client}, no seat"),
            LaneKey::Server => "server".to_string(),
        }
    }

    /// The full seat id, for a hover.
    pub fn seat(&self) -> Option<&str> {
        match &self.key {
            LaneKey::Seat(seat) => Some(seat),
            _ => None,
        }
    }
}

/// How an operation ended, for its colour.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    Ok,
    /// A refusal other than a lost seat: `409`, `404`, ...
    Refused,
    /// `410 seat_lost`.
    Lost,
    Unknown,
}

impl Class {
    pub fn css(self) -> &'static str {
        match self {
            Class::Ok => "ok",
            Class::Refused => "refused",
            Class::Lost => "lost",
            Class::Unknown => "unknown",
        }
    }
}

/// One operation, from its sending to its answer.
pub struct Bar {
    /// Its index in the history.
    pub op: usize,
    pub client: u32,
    pub kind: Kind,
    /// `ok`, `409 no_seats_available`, `410 lapsed`, `unknown`.
    pub outcome: String,
    pub class: Class,
    pub sent: Micros,
    pub answered: Micros,
    /// `unknown`: it may take effect at any instant after its sending.
    pub open: bool,
    /// Named by the violation.
    pub named: bool,
    /// The expiry an `ok` grant or renewal signed.
    pub expires: Option<Micros>,
    /// Why an `unknown` is unknown.
    pub why: Option<String>,
}

/// A lease's life as the server signed it.
pub struct Life {
    /// The grant or renewal that signed it.
    pub op: usize,
    pub issued: Micros,
    pub expires: Micros,
    /// `expires + skew`.
    pub counts_until: Micros,
}

/// An event of the server's log.
pub struct Tick {
    pub id: i64,
    pub at: Micros,
    pub kind: String,
    pub detail: Option<String>,
}

/// A fault, across all lanes.
pub struct Band {
    pub what: String,
    pub from: Micros,
    pub to: Micros,
}

/// The first 8 characters of a seat id.
/// Which license a violation is about, for its header.
pub fn license_words(v: &crate::check::Violation) -> String {
    v.license
        .as_deref()
        .map_or("all licenses".to_string(), |l| format!("license {l}"))
}

pub fn short(seat: &str) -> &str {
    seat.char_indices().nth(8).map_or(seat, |(i, _)| &seat[..i])
}

pub fn kind_name(kind: Kind) -> &'static str {
    match kind {
        Kind::Checkout => "checkout",
        Kind::Borrow => "borrow",
        Kind::Heartbeat => "heartbeat",
        Kind::Release => "release",
        Kind::Revoke => "revoke",
    }
}

fn outcome_of(op: &Op) -> (String, Class) {
    match &op.outcome {
        Outcome::Ok { .. } => ("ok".to_string(), Class::Ok),
        Outcome::Fail {
            status,
            error,
            reason,
        } => {
            let word = reason.as_deref().unwrap_or(error);
            let class = if *status == 410 {
                Class::Lost
            } else {
                Class::Refused
            };
            (format!("{status} {word}"), class)
        }
        Outcome::Unknown { .. } => ("unknown".to_string(), Class::Unknown),
    }
}

impl<'h> Picture<'h> {
    pub fn new(history: &'h History, violation: &'h Violation) -> Picture<'h> {
        let (from, to) = window(history, violation);
        let mut picture = Picture {
            history,
            violation,
            from,
            to,
            lanes: Vec::new(),
            faults: Vec::new(),
        };
        let mut lanes = Lanes::default();
        for seat in &violation.seats {
            lanes.get(&mut picture.lanes, LaneKey::Seat(seat.clone()), true);
        }
        for (i, op) in history.ops.iter().enumerate() {
            if picture.shows(i, op) {
                let key = match op.seat_id() {
                    Some(seat) => LaneKey::Seat(seat.to_string()),
                    None => LaneKey::NoSeat(op.client),
                };
                let lane = lanes.get(&mut picture.lanes, key, false);
                let bar = picture.bar(i, op);
                picture.lanes[lane].bars.push(bar);
            }
        }
        picture.add_ticks(&mut lanes);
        picture.add_lives(&lanes);
        picture.add_faults();
        picture.order_lanes();
        picture
    }

    fn of_license(&self, license: Option<&str>) -> bool {
        match (&self.violation.license, license) {
            (None, _) => true,
            (Some(wanted), Some(license)) => wanted == license,
            (Some(_), None) => false,
        }
    }

    fn shows(&self, i: usize, op: &Op) -> bool {
        if self.violation.ops.contains(&i) {
            return true;
        }
        if !self.of_license(Some(&op.license)) {
            return false;
        }
        let sent = self.history.server_time(op.sent.wall);
        let answered = self.history.server_time(op.answered.wall);
        if sent <= self.to && answered >= self.from {
            return true;
        }
        // An unknown sent earlier may still take effect in the window:
        // shown when it is about one of the violation's seats.
        let about_violation = op
            .seat_id()
            .is_some_and(|s| self.violation.seats.iter().any(|v| v == s));
        op.is_unknown() && sent < self.from && about_violation
    }

    fn bar(&self, i: usize, op: &Op) -> Bar {
        let (outcome, class) = outcome_of(op);
        let why = match &op.outcome {
            Outcome::Unknown { why } => Some(why.clone()),
            _ => None,
        };
        Bar {
            op: i,
            client: op.client,
            kind: op.kind,
            outcome,
            class,
            sent: self.history.server_time(op.sent.wall),
            answered: self.history.server_time(op.answered.wall),
            open: op.is_unknown(),
            named: self.violation.ops.contains(&i),
            expires: op.granted().map(|g| g.expires_at),
            why,
        }
    }

    fn add_ticks(&mut self, lanes: &mut Lanes) {
        for event in &self.history.events {
            let in_window = event.at >= self.from && event.at <= self.to;
            if !in_window || !self.of_license(event.license.as_deref()) {
                continue;
            }
            let key = match &event.seat {
                Some(seat) => LaneKey::Seat(seat.clone()),
                None => LaneKey::Server,
            };
            let lane = lanes.get(&mut self.lanes, key, false);
            self.lanes[lane].ticks.push(Tick {
                id: event.id,
                at: event.at,
                kind: event.kind.clone(),
                detail: event.detail.clone(),
            });
        }
    }

    /// Every grant or renewal of a lane's seat whose life reaches into the
    /// window, the operation shown or not.
    fn add_lives(&mut self, lanes: &Lanes) {
        for (i, op) in self.history.ops.iter().enumerate() {
            let Some(granted) = op.granted() else {
                continue;
            };
            let Some(&lane) = lanes.index.get(&LaneKey::Seat(granted.seat.clone())) else {
                continue;
            };
            let skew = self.history.terms_of(&op.license).map_or(0, |t| t.skew);
            let counts_until = granted.expires_at + skew;
            if granted.issued_at <= self.to && counts_until >= self.from {
                self.lanes[lane].lives.push(Life {
                    op: i,
                    issued: granted.issued_at,
                    expires: granted.expires_at,
                    counts_until,
                });
            }
        }
    }

    fn add_faults(&mut self) {
        for fault in &self.history.faults {
            let from = self.history.server_time(fault.began.wall);
            let to = self.history.server_time(fault.ended.wall);
            if from <= self.to && to >= self.from {
                self.faults.push(Band {
                    what: fault.what.clone(),
                    from,
                    to,
                });
            }
        }
    }

    /// The violation's seats (already first, in its order), then the other
    /// seats by their first instant shown, then clients without a seat, then
    /// the server's own events.
    fn order_lanes(&mut self) {
        for lane in &mut self.lanes {
            lane.bars.sort_by_key(|b| (b.sent, b.op));
            lane.ticks.sort_by_key(|t| (t.at, t.id));
        }
        let first_instant = |lane: &Lane| {
            let bars = lane.bars.iter().map(|b| b.sent);
            bars.chain(lane.ticks.iter().map(|t| t.at))
                .min()
                .unwrap_or(Micros::MAX)
        };
        self.lanes.sort_by_key(|lane| match &lane.key {
            _ if lane.involved => (0, 0, 0),
            LaneKey::Seat(_) => (1, first_instant(lane), 0),
            LaneKey::NoSeat(client) => (2, 0, *client),
            LaneKey::Server => (3, 0, 0),
        });
    }
}

/// The lanes made so far, by key.
#[derive(Default)]
struct Lanes {
    index: HashMap<LaneKey, usize>,
}

impl Lanes {
    fn get(&mut self, lanes: &mut Vec<Lane>, key: LaneKey, involved: bool) -> usize {
        *self.index.entry(key.clone()).or_insert_with(|| {
            lanes.push(Lane {
                key,
                involved,
                bars: Vec::new(),
                lives: Vec::new(),
                ticks: Vec::new(),
            });
            lanes.len() - 1
        })
    }
}

/// Two seconds on each side of the violation, widened to cover the
/// operations it names (an unknown one to its giving up).
fn window(history: &History, violation: &Violation) -> (Micros, Micros) {
    let mut from = violation.at - MARGIN;
    let mut to = violation.at + MARGIN;
    for op in violation.ops.iter().filter_map(|&i| history.ops.get(i)) {
        from = from.min(history.server_time(op.sent.wall));
        to = to.max(history.server_time(op.answered.wall));
    }
    (from, to)
}
