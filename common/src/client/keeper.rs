//! `LeaseKeeper`: holds one seat for a Rust application.
//!
//! ```no_run
//! # async fn app() {
//! use leasehold_common::client::{KeeperConfig, KeeperState, LeaseKeeper};
//!
//! let keeper = LeaseKeeper::start(KeeperConfig::new(
//!     "http://127.0.0.1:7400", "demo-cad", "demo-cad-key", "alice", "machine-7f3a",
//! ))
//! .unwrap();
//! // On every input of the user (opts in to idle reclaim; see below):
//! keeper.activity();
//! let mut state = keeper.subscribe();
//! tokio::spawn(async move {
//!     while state.changed().await.is_ok() {
//!         let held = state.borrow_and_update().is_held();
//!         // Degrade (read-only mode, a banner) only when not held.
//!         let _ = held;
//!     }
//! });
//! // ... the application runs ...
//! keeper.shutdown().await; // releases the seat
//! # }
//! ```
//!
//! The decisions live in the pure [`super::machine::Machine`]; this module is
//! the driver that sends the requests it asks for, verifies every lease token
//! against the server's JWKS, publishes state changes and releases on
//! shutdown.
//!
//! **Borrowing.** [`LeaseKeeper::borrow`] turns the held seat into a borrow
//! (the server keeps the same seat out, without heartbeats, until the
//! borrow's end): the state stays `Held`, with the borrowed lease (whose
//! token, verified like any, says `borrowed`), and the keeper sends nothing
//! until the borrow ends, when it checks out a seat the usual way.
//! [`LeaseKeeper::give_back`] returns the borrow early and goes back to
//! plain keeping at once (a new seat kept by heartbeats, which may mean
//! `Waiting` if the pool filled meanwhile). [`LeaseKeeper::shutdown`] does
//! *not* return a borrowed seat: a borrow is meant to outlive the program
//! (a restarted keeper on the same machine gets it back from its first
//! checkout, and holds it without heartbeats until its `expires_at` read on
//! the local clock, as an offline JWT check would: that one case needs a
//! clock that is about right); call `give_back` first to return it.
//!
//! **Idleness.** On a license with an `idle_timeout`, the server reclaims a
//! seat whose user has been away that long, as its heartbeats report.
//! Reporting is opt-in: call [`LeaseKeeper::activity`] whenever the user does
//! something (a key, a click; it is an atomic store, no throttling needed).
//! From the first call on, every heartbeat carries `{"idle_s": N}`, the
//! whole seconds since the latest call, on the keeper's monotonic clock.
//! An application that never calls it sends no body, exactly as before, and
//! is never reclaimed for idleness (a 410 `idle` it gets anyway, for a seat
//! an earlier process reported idle, is handled like a revoke: it checks out
//! again at once). After a reclaim (410 `seat_lost`, reason `idle`) the
//! state is [`KeeperState::Reclaimed`], with the server's message, and the
//! keeper takes no seat until the next `activity()`: then `Acquiring`, and
//! `Held` (or `Waiting`, polling, if the pool filled meanwhile). Tell the
//! user on both changes. A user active again before the server heard of it
//! (back just before the reaper freed the seat) is not made to act twice:
//! the keeper checks out again at once.
//!
//! **Entitlements** (opt-in: [`KeeperConfig::vendor_key`], with
//! [`KeeperConfig::version`]). A vendor's application cannot trust a server
//! its customer runs, so it checks, offline, that each lease comes from an
//! entitled server: after every checkout and borrow the keeper fetches the
//! license's entitlements (`GET /v1/licenses/{id}/entitlements`) and runs
//! [`crate::entitlement::check_chain`] with the server's JWKS on the
//! keeper's clock (the application's own: rolling back every workstation's
//! clock is harder than one server's). It checks again when the
//! entitlement it relied on ends on that clock, and when a renewal runs the
//! lease past that end (a renewed entitlement then keeps the seat). A lease
//! that is not entitled is released and the keeper stops:
//! [`KeeperState::Failed`] with the reason, and [`LeaseKeeper::error`]
//! returns [`ClientError::NotEntitled`] naming the link that failed. It
//! does not try again: start a new keeper for that (after the customer
//! installed a new entitlement, say). Entitlements that cannot be fetched
//! (the server away) are tried again; once the entitlement relied on has
//! ended, the seat is released meanwhile and a new one checked out, so a
//! server that hides its entitlements never keeps a seat held. Every
//! checkout carries the version, which the server checks too.

use std::ops::ControlFlow;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinHandle;

use super::activity::Activity;
use super::clock::{LocalClock, SystemClock};
use super::config::KeeperConfig;
use super::error::ClientError;
use super::http::Client;
use super::machine::{Action, Expected, Machine};
use super::state::KeeperState;
use super::stats::{Counters, KeeperStats, bump};
use crate::api::{CheckoutRequest, Lease};
use crate::time::Timestamp;
use crate::token::Jwks;

mod checks;
mod requests;

use checks::Gate;

/// Why [`LeaseKeeper::borrow`] or [`LeaseKeeper::give_back`] did nothing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeeperError {
    /// The keeper has stopped (shut down, or in a terminal state).
    #[error("the keeper has stopped")]
    Stopped,
    /// A borrow needs the machine's fingerprint, and the config has none.
    #[error("a borrow needs a fingerprint (KeeperConfig::fingerprint is empty)")]
    NoFingerprint,
    /// `give_back` without a borrowed seat held.
    #[error("no borrowed seat is held")]
    NotBorrowed,
    /// The server refused, or could not be asked; the seat held before is
    /// kept as it was.
    #[error(transparent)]
    Client(#[from] ClientError),
}

/// Asked of the driver task, answered on the oneshot.
enum Request {
    Borrow(Duration, oneshot::Sender<Result<Lease, KeeperError>>),
    GiveBack(oneshot::Sender<Result<(), KeeperError>>),
}

/// Holds one seat in a background task until [`LeaseKeeper::shutdown`] (or
/// drop, which also releases the seat if the runtime is still running; a
/// borrowed seat stays out, see the module doc).
pub struct LeaseKeeper {
    state: watch::Receiver<KeeperState>,
    stop: watch::Sender<bool>,
    requests: mpsc::Sender<Request>,
    task: Option<JoinHandle<()>>,
    counters: Arc<Counters>,
    clock: Arc<dyn LocalClock>,
    activity: Arc<Activity>,
    /// The error that stopped the keeper, once it stopped on one.
    failure: Arc<Mutex<Option<ClientError>>>,
}

impl std::fmt::Debug for LeaseKeeper {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LeaseKeeper")
            .field("state", &*self.state.borrow())
            .finish()
    }
}

impl LeaseKeeper {
    /// Start keeping a seat. Must be called inside a Tokio runtime.
    pub fn start(config: KeeperConfig) -> Result<LeaseKeeper, ClientError> {
        LeaseKeeper::start_with_clock(config, Arc::new(SystemClock::new()))
    }

    /// Start with a given local clock (tests run keepers hours off).
    pub fn start_with_clock(
        config: KeeperConfig,
        clock: Arc<dyn LocalClock>,
    ) -> Result<LeaseKeeper, ClientError> {
        let client = Client::new(&config.server, &config.license, &config.key)?;
        let machine = Machine::new(clock.now());
        let (state_tx, state_rx) = watch::channel(KeeperState::Acquiring);
        let (stop_tx, stop_rx) = watch::channel(false);
        let (requests_tx, requests_rx) = mpsc::channel(4);
        let counters = Arc::new(Counters::default());
        let activity = Arc::new(Activity::new());
        let fingerprint = Some(config.fingerprint.clone()).filter(|f| !f.is_empty());
        let failure = Arc::new(Mutex::new(None));
        let driver = Driver {
            expected: Expected {
                license: config.license.clone(),
                holder: config.holder.clone(),
                fingerprint: fingerprint.clone(),
            },
            request: CheckoutRequest {
                holder: config.holder.clone(),
                fingerprint,
                borrow_s: None,
                version: config.version.clone(),
            },
            gate: Gate::new(&config),
            config,
            client,
            clock: clock.clone(),
            jwks: None,
            machine,
            state: state_tx,
            stop: stop_rx,
            requests: requests_rx,
            counters: counters.clone(),
            activity: activity.clone(),
            last_error: None,
            failure: failure.clone(),
        };
        let task = tokio::spawn(driver.run());
        Ok(LeaseKeeper {
            state: state_rx,
            stop: stop_tx,
            requests: requests_tx,
            task: Some(task),
            counters,
            clock,
            activity,
            failure,
        })
    }

    /// The user did something, now. From the first call on, heartbeats
    /// report the whole seconds since the latest call (`idle_s`), and after
    /// an idle reclaim ([`KeeperState::Reclaimed`]) the next call checks out
    /// again. Cheap (an atomic store and a wake-up): call it on every input.
    /// See the module doc.
    pub fn activity(&self) {
        self.activity.report(self.clock.now());
    }

    /// A receiver of state changes.
    pub fn subscribe(&self) -> watch::Receiver<KeeperState> {
        self.state.clone()
    }

    /// The state now.
    pub fn state(&self) -> KeeperState {
        self.state.borrow().clone()
    }

    pub fn stats(&self) -> KeeperStats {
        self.counters.snapshot()
    }

    /// The error that stopped the keeper ([`KeeperState::Failed`] or
    /// [`KeeperState::Blocked`]), as the client saw it: e.g.
    /// [`ClientError::NotEntitled`] with the link of the chain that failed.
    /// `None` while it runs.
    pub fn error(&self) -> Option<ClientError> {
        self.failure.lock().map(|e| e.clone()).unwrap_or(None)
    }

    /// Wait until a seat is held (returns its lease) or the keeper stops
    /// trying (returns that terminal state).
    pub async fn wait_for_lease(&self) -> Result<Lease, KeeperState> {
        let mut rx = self.state.clone();
        let state = match rx.wait_for(|s| s.is_held() || s.is_terminal()).await {
            Ok(s) => s.clone(),
            Err(_) => return Err(KeeperState::Stopped),
        };
        match state {
            KeeperState::Held(l) => Ok(l),
            other => Err(other),
        }
    }

    /// Borrow the held seat for `duration` (whole seconds, rounded up; at
    /// most the license's `borrow.max`): the server keeps it out without
    /// heartbeats until then, and the keeper stays `Held` with the borrowed
    /// lease, sending nothing until it ends. A borrow while one is held
    /// extends it; with no seat held, a new seat is borrowed. A denial
    /// ([`ClientError::LimitReached`] with `limit` `borrow`,
    /// [`ClientError::NotAllowed`], [`ClientError::Rejected`]) leaves the
    /// seat as it was, kept by heartbeats.
    pub async fn borrow(&self, duration: Duration) -> Result<Lease, KeeperError> {
        let (tx, rx) = oneshot::channel();
        self.ask(Request::Borrow(duration, tx)).await?;
        rx.await.map_err(|_| KeeperError::Stopped)?
    }

    /// Return the borrowed seat early (it is free at once) and go back to
    /// keeping a seat by heartbeats: state `Acquiring`, then `Held` with a
    /// new lease (or `Waiting`, if the pool filled meanwhile).
    pub async fn give_back(&self) -> Result<(), KeeperError> {
        let (tx, rx) = oneshot::channel();
        self.ask(Request::GiveBack(tx)).await?;
        rx.await.map_err(|_| KeeperError::Stopped)?
    }

    async fn ask(&self, request: Request) -> Result<(), KeeperError> {
        self.requests
            .send(request)
            .await
            .map_err(|_| KeeperError::Stopped)
    }

    /// Stop, release the seat (if one is held and not borrowed) and wait
    /// for both. A request
    /// in flight is allowed to finish first (it is bounded by the request
    /// timeout), so a checkout the server granted is released, not leaked.
    pub async fn shutdown(mut self) -> KeeperState {
        let _ = self.stop.send(true);
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
        self.state.borrow().clone()
    }
}

impl Drop for LeaseKeeper {
    fn drop(&mut self) {
        // The task sees this and releases the seat on its own.
        let _ = self.stop.send(true);
    }
}

struct Driver {
    config: KeeperConfig,
    client: Client,
    clock: Arc<dyn LocalClock>,
    jwks: Option<Jwks>,
    expected: Expected,
    request: CheckoutRequest,
    machine: Machine,
    state: watch::Sender<KeeperState>,
    stop: watch::Receiver<bool>,
    requests: mpsc::Receiver<Request>,
    counters: Arc<Counters>,
    activity: Arc<Activity>,
    /// The pinned vendor keys and when to check the chain again (`None`:
    /// not opted in).
    gate: Option<Gate>,
    /// The latest error of a request; published with a terminal state.
    last_error: Option<ClientError>,
    failure: Arc<Mutex<Option<ClientError>>>,
}

impl Driver {
    /// The keeper's algorithm: until told to stop, answer the application's
    /// requests, then do what the machine asks next; once stopped, release
    /// the seat (a borrowed one stays out) and publish `Stopped`.
    async fn run(mut self) {
        while !self.stop_requested() {
            // Borrow and give-back requests run between the machine's
            // actions, never during one.
            self.answer_pending_requests().await;
            self.note_activity();
            if self.recheck_if_due().await {
                continue;
            }
            let now = self.clock.now();
            match self.machine.next_action(now) {
                Action::Finish => {
                    self.hold_terminal_state_until_stopped().await;
                    break;
                }
                Action::SleepUntil(until) => {
                    let until = self.wake_for_recheck(until);
                    if self.sleep_until(now, until).await.is_break() {
                        break;
                    }
                }
                Action::AwaitActivity => {
                    if self.await_activity().await.is_break() {
                        break;
                    }
                }
                Action::Checkout { idempotency_key } => self.checkout(&idempotency_key).await,
                Action::Heartbeat { seat_id, idle_s } => self.heartbeat(&seat_id, idle_s).await,
            }
        }
        self.release_unless_borrowed().await;
        let change = self.machine.on_stopped();
        self.publish(change);
    }

    fn stop_requested(&self) -> bool {
        *self.stop.borrow()
    }

    /// Answer the borrow and give-back requests already queued.
    async fn answer_pending_requests(&mut self) {
        while let Ok(request) = self.requests.try_recv() {
            self.answer(request).await;
        }
    }

    /// Terminal: keep the state visible (and answer requests) until shutdown.
    async fn hold_terminal_state_until_stopped(&mut self) {
        while !self.stop_requested() {
            tokio::select! {
                changed = self.stop.changed() => {
                    if changed.is_err() {
                        break;
                    }
                }
                Some(request) = self.requests.recv() => self.answer(request).await,
            }
        }
    }

    /// Hand the latest activity to the machine (it ignores one it has seen).
    fn note_activity(&mut self) {
        if let Some(at) = self.activity.latest() {
            let change = self.machine.on_activity(at);
            self.publish(change);
        }
    }

    /// Reclaimed for idleness: wait for an activity, a stop or a request.
    /// `Break` when the stop channel is gone (the keeper dropped).
    async fn await_activity(&mut self) -> ControlFlow<()> {
        tokio::select! {
            _ = self.activity.reported() => {}
            changed = self.stop.changed() => {
                if changed.is_err() {
                    return ControlFlow::Break(());
                }
            }
            Some(request) = self.requests.recv() => self.answer(request).await,
        }
        ControlFlow::Continue(())
    }

    /// Sleep until the machine's next deadline, waking early for a stop or
    /// a request. `Break` when the stop channel is gone (the keeper dropped).
    async fn sleep_until(&mut self, now: Timestamp, until: Timestamp) -> ControlFlow<()> {
        let ms = until.millis_since(now).max(0) as u64;
        // Shown in the stats while asleep: nothing is sent before `until`.
        let quiet = |c: &Counters, ms: i64| c.quiet_until_ms.store(ms, Ordering::Relaxed);
        quiet(&self.counters, until.as_millis());
        let flow = tokio::select! {
            _ = tokio::time::sleep(Duration::from_millis(ms)) => ControlFlow::Continue(()),
            changed = self.stop.changed() => {
                if changed.is_err() {
                    ControlFlow::Break(())
                } else {
                    ControlFlow::Continue(())
                }
            }
            Some(request) = self.requests.recv() => {
                quiet(&self.counters, 0);
                self.answer(request).await;
                ControlFlow::Continue(())
            }
        };
        quiet(&self.counters, 0);
        flow
    }

    /// The local send time of a request sent now and the time it is given
    /// (never longer than the held lease has left).
    fn start_request(&self) -> (Timestamp, Duration) {
        let sent = self.clock.now();
        let timeout = self
            .machine
            .request_timeout(sent, self.config.request_timeout);
        (sent, timeout)
    }

    /// Check out a seat, verify its lease and hand the answer to the machine.
    ///
    /// A plain checkout, not `checkout_waiting`: on a full pool the keeper
    /// publishes `Waiting { retry_after }` and polls. Waiting in line would
    /// hold a request open for up to a minute, and shutdown lets the request
    /// in flight finish (so a granted seat is released, not leaked): shutdown
    /// would stall that long, and the application would see `Acquiring`
    /// instead of `Waiting` for the whole wait.
    async fn checkout(&mut self, idempotency_key: &str) {
        let (sent, timeout) = self.start_request();
        let result = match self
            .client
            .checkout(&self.request, Some(idempotency_key), timeout)
            .await
        {
            Ok(lease) => match self.verified(lease, None, timeout).await {
                Ok(lease) => self.entitled(lease, timeout).await,
                Err(e) => Err(e),
            },
            Err(e) => Err(e),
        };
        match &result {
            Ok(lease) => {
                bump(&self.counters.checkouts);
                tracing::info!(seat = %lease.seat_id, expires_at = %lease.expires_at, "leasehold: seat checked out");
            }
            Err(e) => self.note_failure("checkout", e),
        }
        let change = self.machine.on_checkout(sent, self.clock.now(), result);
        self.publish(change);
    }

    /// Renew the held seat (reporting `idle_s` if activity is reported),
    /// verify its lease and hand the answer to the machine.
    async fn heartbeat(&mut self, seat_id: &str, idle_s: Option<u64>) {
        let (sent, timeout) = self.start_request();
        let result = match self.client.heartbeat_idle(seat_id, idle_s, timeout).await {
            Ok(lease) => self.verified(lease, Some(seat_id), timeout).await,
            Err(e) => Err(e),
        };
        match &result {
            Ok(_) => bump(&self.counters.heartbeats),
            Err(e @ ClientError::SeatLost { .. }) => {
                bump(&self.counters.seats_lost);
                if e.is_idle_reclaim() {
                    bump(&self.counters.reclaims);
                }
                tracing::warn!(seat = %seat_id, "leasehold: {e}");
            }
            Err(e) => self.note_failure("heartbeat", e),
        }
        let change = self.machine.on_heartbeat(sent, self.clock.now(), result);
        self.publish(change);
    }

    /// On stop: release the seat held, unless it is borrowed (a borrow
    /// outlives the program: returned only by `give_back`).
    async fn release_unless_borrowed(&mut self) {
        if self.machine.holds_borrow() {
            tracing::info!(seat = ?self.machine.seat_id(), "leasehold: borrowed seat stays out");
        } else if let Some(seat) = self.machine.seat_id().map(str::to_string) {
            match self
                .client
                .release(&seat, self.config.request_timeout)
                .await
            {
                Ok(()) => tracing::info!(seat = %seat, "leasehold: seat released"),
                Err(e) => {
                    tracing::warn!(seat = %seat, "leasehold: release failed ({e}); the seat lapses at its expiry")
                }
            }
        }
    }

    fn note_failure(&mut self, what: &str, e: &ClientError) {
        self.last_error = Some(e.clone());
        if e.is_transient() {
            bump(&self.counters.failures);
            tracing::warn!("leasehold: {what} failed, will retry: {e}");
        } else {
            tracing::warn!("leasehold: {what}: {e}");
        }
    }

    fn publish(&mut self, change: Option<KeeperState>) {
        let Some(state) = change else { return };
        match &state {
            KeeperState::Lapsed => {
                bump(&self.counters.lapses);
                tracing::warn!("leasehold: lease lapsed");
            }
            KeeperState::Reclaimed { .. } => {
                tracing::info!("leasehold: no seat until the user is active again");
            }
            KeeperState::Failed(_) | KeeperState::Blocked { .. } => {
                // Readable by the time the state is.
                if let Ok(mut failure) = self.failure.lock() {
                    *failure = self.last_error.clone();
                }
            }
            _ => {}
        }
        self.state.send_replace(state);
    }
}
