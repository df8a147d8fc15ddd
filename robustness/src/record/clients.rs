//! The client behaviours: holders that heartbeat on time, late
//! heartbeaters that renew inside the skew, lapsers that let their seat
//! lapse and ask after it before the reaper does, churners, a borrower and
//! an admin who revokes. Each is a task sending one operation at a time
//! until told to stop.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio::task::JoinHandle;

use super::Api;
use crate::history::{Micros, Op, Outcome, Terms};

/// How many clients of each behaviour.
#[derive(Debug, Clone, Copy)]
pub struct Mix {
    pub holders: u32,
    pub late_heartbeaters: u32,
    pub lapsers: u32,
    pub churners: u32,
    pub borrowers: u32,
    pub revokers: u32,
}

impl Default for Mix {
    /// 18 clients, 17 of which want a seat: more than a pool of 8, so
    /// checkouts are refused too.
    fn default() -> Self {
        Mix {
            holders: 6,
            late_heartbeaters: 3,
            lapsers: 3,
            churners: 4,
            borrowers: 1,
            revokers: 1,
        }
    }
}

impl Mix {
    pub fn clients(&self) -> u32 {
        self.holders
            + self.late_heartbeaters
            + self.lapsers
            + self.churners
            + self.borrowers
            + self.revokers
    }
}

/// The running client tasks.
#[derive(Debug)]
pub struct Crowd {
    stop: Arc<AtomicBool>,
    tasks: Vec<JoinHandle<()>>,
}

impl Crowd {
    /// Start `mix`'s clients on `api`, numbered from 1; `terms` are the
    /// license's, for the late heartbeaters' and lapsers' timing.
    pub fn start(api: &Api, terms: &Terms, mix: &Mix) -> Crowd {
        let stop = Arc::new(AtomicBool::new(false));
        let mut tasks = Vec::new();
        let mut next = 0;
        let mut spawn = |count: u32, role: Role| {
            for _ in 0..count {
                next += 1;
                let client = Client::new(api, terms, next, stop.clone());
                tasks.push(tokio::spawn(role.run(client)));
            }
        };
        spawn(mix.holders, Role::Holder);
        spawn(mix.late_heartbeaters, Role::LateHeartbeater);
        spawn(mix.lapsers, Role::Lapser);
        spawn(mix.churners, Role::Churner);
        spawn(mix.borrowers, Role::Borrower);
        spawn(mix.revokers, Role::Revoker);
        Crowd { stop, tasks }
    }

    /// Stop every client and wait until each has its last answer (at most
    /// one request timeout); a client that panicked fails the caller.
    pub async fn stop(self) {
        self.stop.store(true, Ordering::Relaxed);
        for task in self.tasks {
            if let Err(e) = task.await {
                std::panic::resume_unwind(e.into_panic());
            }
        }
    }
}

#[derive(Debug, Clone, Copy)]
enum Role {
    Holder,
    LateHeartbeater,
    Lapser,
    Churner,
    Borrower,
    Revoker,
}

impl Role {
    async fn run(self, mut c: Client) {
        match self {
            Role::Holder => hold(&mut c).await,
            Role::LateHeartbeater => {
                // Inside the skew: the lease still counts, so it renews.
                let late = c.terms.skew / 2;
                beat_late(&mut c, late).await;
            }
            Role::Lapser => {
                // Past the skew, before the reaper: `410` lapsed.
                let late = c.terms.skew + (c.terms.reap_grace - c.terms.skew) / 2;
                beat_late(&mut c, late).await;
            }
            Role::Churner => churn(&mut c).await,
            Role::Borrower => borrow(&mut c).await,
            Role::Revoker => revoke(&mut c).await,
        }
    }
}

/// One client: its number, its name, and the stop flag.
struct Client {
    api: Api,
    terms: Terms,
    id: u32,
    holder: String,
    stop: Arc<AtomicBool>,
    /// Checkouts sent so far. Each has a fingerprint of its own, so none
    /// re-claims a live seat (which grants that seat id again).
    sent: u64,
    rng: StdRng,
}

impl Client {
    fn new(api: &Api, terms: &Terms, id: u32, stop: Arc<AtomicBool>) -> Client {
        Client {
            api: api.clone(),
            terms: terms.clone(),
            id,
            holder: format!("client-{id}"),
            stop,
            sent: 0,
            rng: StdRng::from_entropy(),
        }
    }

    fn stopping(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    /// Sleep for `d`, cut short by the stop; false once stopping.
    async fn pause(&self, d: Duration) -> bool {
        let until = Instant::now() + d;
        while !self.stopping() {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return true;
            }
            tokio::time::sleep(left.min(Duration::from_millis(100))).await;
        }
        false
    }

    async fn pause_ms(&mut self, from: u64, to: u64) -> bool {
        let ms = self.rng.gen_range(from..to);
        self.pause(Duration::from_millis(ms)).await
    }

    /// Sleep until our wall clock reads `wall`.
    async fn pause_until(&self, wall: Micros) -> bool {
        let left = wall - self.api.recorder.now().wall;
        self.pause(Duration::from_micros(left.max(0) as u64)).await
    }

    /// Our wall clock when the server's reads `server`, for a lease from
    /// an operation sent at our `sent` (the server's clock may have been
    /// moved since).
    fn our_wall(&self, server: Micros, sent: Micros) -> Micros {
        server - self.api.recorder.offset_at(sent)
    }

    fn fingerprint(&mut self) -> String {
        self.sent += 1;
        format!("{}-{}", self.holder, self.sent)
    }

    async fn checkout(&mut self) -> Op {
        let fingerprint = self.fingerprint();
        self.api.checkout(self.id, &self.holder, &fingerprint).await
    }

    /// Check out until granted (a pause after each refusal); `None` once
    /// stopping.
    async fn take_seat(&mut self) -> Option<Op> {
        while !self.stopping() {
            let op = self.checkout().await;
            if op.granted().is_some() {
                return Some(op);
            }
            if !self.pause_ms(150, 250).await {
                break;
            }
        }
        None
    }

    /// Send `op` again until its answer is definite (`ok` or a 4xx);
    /// `None` once stopping.
    async fn surely<F, Fut>(&self, mut send: F) -> Option<Op>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Op>,
    {
        while !self.stopping() {
            let op = send().await;
            if definite(&op) {
                return Some(op);
            }
            if !self.pause(Duration::from_millis(200)).await {
                break;
            }
        }
        None
    }

    async fn heartbeat_surely(&self, seat: &str) -> Option<Op> {
        self.surely(|| self.api.heartbeat(self.id, seat)).await
    }

    async fn release_surely(&self, seat: &str) -> Option<Op> {
        self.surely(|| self.api.release(self.id, seat)).await
    }
}

/// An answer that settles what happened: `ok`, or a refusal that reached
/// a server.
fn definite(op: &Op) -> bool {
    match &op.outcome {
        Outcome::Ok { .. } => true,
        Outcome::Fail { status, .. } => *status >= 400,
        Outcome::Unknown { .. } => false,
    }
}

fn ttl(c: &Client) -> Duration {
    Duration::from_micros(c.terms.ttl as u64)
}

/// A holder: a heartbeat every third of the TTL; lost, it checks out
/// again; every 4 to 6 s it releases and checks out again.
async fn hold(c: &mut Client) {
    while let Some(granted) = c.take_seat().await {
        let mut seat = granted
            .granted()
            .map(|g| g.seat.clone())
            .unwrap_or_default();
        let keep = Duration::from_millis(c.rng.gen_range(4_000..6_000));
        let since = Instant::now();
        loop {
            if !c.pause(ttl(c) / 3).await {
                return;
            }
            if since.elapsed() >= keep {
                c.release_surely(&seat).await;
                break;
            }
            let beat = c.api.heartbeat(c.id, &seat).await;
            if let Some(lease) = beat.granted() {
                seat = lease.seat.clone();
            } else if beat.lost_reason().is_some() {
                break;
            }
            // Anything else: the next beat is the retry.
        }
    }
}

/// A heartbeat `late` after each lease's `expires_at`, from its grant on:
/// renewed, it waits for the new lease's expiry; lost, it checks out again.
async fn beat_late(c: &mut Client, late: Micros) {
    'seat: while let Some(mut op) = c.take_seat().await {
        while let Some(lease) = op.granted().cloned() {
            let at = c.our_wall(lease.expires_at, op.sent.wall) + late;
            if !c.pause_until(at).await {
                return;
            }
            match c.heartbeat_surely(&lease.seat).await {
                Some(beat) => op = beat,
                None => return,
            }
        }
        continue 'seat;
    }
}

/// A churner: check out, hold 0 to 500 ms (a heartbeat halfway through a
/// long hold), release.
async fn churn(c: &mut Client) {
    while !c.stopping() {
        let op = c.checkout().await;
        let Some(seat) = op.granted().map(|g| g.seat.clone()) else {
            c.pause_ms(100, 300).await;
            continue;
        };
        let hold = Duration::from_millis(c.rng.gen_range(0..500));
        if hold > Duration::from_millis(250) {
            c.pause(hold / 2).await;
            c.api.heartbeat(c.id, &seat).await;
        }
        c.pause(hold / 2).await;
        c.release_surely(&seat).await;
    }
}

/// A borrower: borrow for 3 to 6 s, return it after 1 to 2 s.
async fn borrow(c: &mut Client) {
    while !c.stopping() {
        let fingerprint = c.fingerprint();
        let borrow_s = c.rng.gen_range(3..=6);
        let op = c.api.borrow(c.id, &c.holder, &fingerprint, borrow_s).await;
        match op.granted().map(|g| g.seat.clone()) {
            Some(seat) => {
                c.pause_ms(1_000, 2_000).await;
                c.release_surely(&seat).await;
            }
            None => {
                c.pause_ms(200, 400).await;
            }
        }
    }
}

/// An admin: every 500 to 900 ms, revoke one of the license's seats at
/// random (not a borrowed one: that is refused without `force`).
async fn revoke(c: &mut Client) {
    while c.pause_ms(500, 900).await {
        let Some(seats) = c.api.seats().await else {
            continue;
        };
        let revocable: Vec<&String> = seats
            .iter()
            .filter(|(_, state)| state != "borrowed")
            .map(|(seat, _)| seat)
            .collect();
        if revocable.is_empty() {
            continue;
        }
        let seat = revocable[c.rng.gen_range(0..revocable.len())].clone();
        c.api.revoke(c.id, &seat).await;
    }
}
