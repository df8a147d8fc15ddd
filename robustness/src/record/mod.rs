//! The recording side: a [`Recorder`] every client task shares, the HTTP
//! calls that record one operation each ([`Api`]), and the client
//! behaviours that load a real `leaseholdd` while faults are injected
//! ([`Crowd`]).
//!
//! Each client sends one operation at a time and records it with the
//! instants it was sent and answered. A 2xx is `ok`, a 4xx is `fail`
//! (nothing happened), a refused connection is `fail` with status 0 (the
//! request never reached a server); everything else (a timeout, a
//! connection cut mid-request, a 5xx) is `unknown`.

mod api;
mod clients;

use std::sync::Mutex;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

pub use api::{Api, event_log};
pub use clients::{Crowd, Mix};

use crate::history::{ClockStep, Event, Fault, History, Micros, Op, Stamp, Terms};

/// What the client tasks share: the clocks, and everything recorded.
#[derive(Debug)]
pub struct Recorder {
    start: Instant,
    ops: Mutex<Vec<Op>>,
    faults: Mutex<Vec<PendingFault>>,
    clock_steps: Mutex<Vec<ClockStep>>,
}

/// A fault whose end may not be known yet.
#[derive(Debug)]
struct PendingFault {
    what: String,
    began: Stamp,
    ended: Option<Stamp>,
    stops_writes: bool,
}

/// Names a fault begun with [`Recorder::fault_began`], to end it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FaultToken(usize);

impl Default for Recorder {
    fn default() -> Self {
        Recorder::new()
    }
}

impl Recorder {
    pub fn new() -> Recorder {
        Recorder {
            start: Instant::now(),
            ops: Mutex::default(),
            faults: Mutex::default(),
            clock_steps: Mutex::default(),
        }
    }

    /// This instant on both of the client's clocks.
    pub fn now(&self) -> Stamp {
        let wall = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_micros() as Micros);
        let mono = self.start.elapsed().as_micros() as Micros;
        Stamp { wall, mono }
    }

    pub fn record(&self, op: Op) {
        lock(&self.ops).push(op);
    }

    /// A fault begins now; `stops_writes` when no writer is left to renew.
    pub fn fault_began(&self, what: &str, stops_writes: bool) -> FaultToken {
        let mut faults = lock(&self.faults);
        faults.push(PendingFault {
            what: what.to_string(),
            began: self.now(),
            ended: None,
            stops_writes,
        });
        FaultToken(faults.len() - 1)
    }

    pub fn fault_ended(&self, token: FaultToken) {
        let now = self.now();
        lock(&self.faults)[token.0].ended.get_or_insert(now);
    }

    /// The fault ended at our earlier wall instant `wall` (known from the
    /// server's log, more exactly than our clocks could read it).
    pub fn fault_ended_at(&self, token: FaultToken, wall: Micros) {
        let ended = self.earlier(wall);
        lock(&self.faults)[token.0].ended.get_or_insert(ended);
    }

    /// The stamp of an earlier wall instant: the monotonic clock as far
    /// back from now as the wall clock.
    fn earlier(&self, wall: Micros) -> Stamp {
        let now = self.now();
        Stamp {
            wall,
            mono: now.mono - (now.wall - wall),
        }
    }

    /// The faults that stopped every writer so far, on our wall clock
    /// (one not ended yet: to now).
    pub fn outages_so_far(&self) -> Vec<(Micros, Micros)> {
        let now = self.now().wall;
        let faults = lock(&self.faults);
        let stopped = faults.iter().filter(|f| f.stops_writes);
        stopped
            .map(|f| (f.began.wall, f.ended.map_or(now, |e| e.wall)))
            .collect()
    }

    /// Faults begun so far.
    pub fn faults_injected(&self) -> usize {
        lock(&self.faults).len()
    }

    /// From now on the server's clock reads `offset` ahead of ours.
    pub fn clock_step(&self, offset: Micros) {
        let from = self.now().wall;
        lock(&self.clock_steps).push(ClockStep { from, offset });
    }

    /// How far the server's clock read ahead of ours at our `wall`
    /// instant (as [`History::server_time`] puts it).
    pub fn offset_at(&self, wall: Micros) -> Micros {
        lock(&self.clock_steps)
            .iter()
            .filter(|s| s.from <= wall)
            .max_by_key(|s| s.from)
            .map_or(0, |s| s.offset)
    }

    /// An outage the server reported in its log (its outage rule ran),
    /// from our wall instant `began` to `ended`: a fault that stopped
    /// every writer though no test injected it (a starved machine can
    /// stall the writer past its threshold), recorded so that the rule's
    /// extensions are explained.
    pub fn outage_reported(&self, what: &str, began: Micros, ended: Micros) {
        let (began, ended) = (self.earlier(began), self.earlier(ended));
        lock(&self.faults).push(PendingFault {
            what: what.to_string(),
            began,
            ended: Some(ended),
            stops_writes: true,
        });
    }

    /// Our wall instant of the server's instant `at`, by the clock step
    /// in force then.
    pub fn wall_of_server(&self, at: Micros) -> Micros {
        let steps = lock(&self.clock_steps).clone();
        let offsets = steps.iter().map(|s| s.offset).chain([0]);
        offsets
            .filter(|&offset| self.offset_at(at - offset) == offset)
            .map(|offset| at - offset)
            .max()
            .unwrap_or(at)
    }

    /// Everything recorded, ops in the order they were sent. A fault not
    /// yet ended ends now.
    pub fn finish(self, scenario: &str, terms: Vec<Terms>, events: Vec<Event>) -> History {
        let now = self.now();
        let mut ops = into_inner(self.ops);
        ops.sort_by_key(|op| (op.sent.mono, op.client));
        let faults = into_inner(self.faults)
            .into_iter()
            .map(|f| Fault {
                what: f.what,
                began: f.began,
                ended: f.ended.unwrap_or(now),
                stops_writes: f.stops_writes,
            })
            .collect();
        History {
            scenario: scenario.to_string(),
            terms,
            ops,
            faults,
            clock_steps: into_inner(self.clock_steps),
            events,
        }
    }
}

/// A client task that panicked holding a lock leaves its records intact.
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn into_inner<T>(m: Mutex<T>) -> T {
    m.into_inner()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}
