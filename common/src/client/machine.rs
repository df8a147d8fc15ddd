//! The keeper's pure core: when to act, what to send, and which state follows
//! from each answer. No I/O, no clock: every call takes the local `now` (and
//! the local time a request was sent), so the unit tests (`machine/tests.rs`)
//! drive it by hand through outages, revokes, lapses and full pools.
//!
//! Time rule: a lease is measured by its own window (`expires_at −
//! issued_at`, both on the server's clock) laid over the *local* time at
//! which the request that produced it was sent. The server issued the lease
//! no earlier than that send, so `sent + window` is never later than the real
//! expiry in elapsed time (the honest direction), and a client clock that is
//! hours off, fast or slow, changes nothing.
//!
//! Borrowed leases are never heartbeated (the server answers 409
//! `borrowed`): the machine sleeps to the borrow's deadline, then checks out
//! again like after a lost seat. A borrowed lease a *plain* checkout handed
//! back (the machine borrowed it earlier, e.g. with `leasehold borrow`) was
//! issued long before the request, so its window says nothing about the
//! time left: it is held until the earlier of `sent + window` and its
//! `expires_at` read on the local clock, as an offline JWT check would.
//!
//! Idleness: from the first [`Machine::on_activity`] on, every heartbeat
//! carries `idle_s`, the whole seconds from the last activity to the
//! heartbeat (on the local clock: a duration, so no skew enters). Before
//! it, heartbeats carry nothing, as before idle reclaim existed, and the
//! server never finds the seat idle. A 410 with reason `idle` parks the
//! machine in [`KeeperState::Reclaimed`] when the server knew everything:
//! no activity since the one the last *renewed* heartbeat reported (taking
//! the seat back for a user who is away would only have it reclaimed
//! again). Then it checks out at the next activity. Any other 410 `idle`
//! is a reclaim the user has already answered, or one this keeper never
//! asked for, and is treated like any other 410 (check out again at once):
//! an activity newer than the server heard of (the user came back just
//! before the reaper freed the seat, or while the heartbeat reporting it
//! was in flight), or no activity ever reported (a seat re-claimed by
//! fingerprint from an earlier process that did report), so an application
//! that never reports activity cannot end up parked.

use std::time::Duration;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::error::ClientError;
use super::state::KeeperState;
use crate::api::{Lease, MAX_IDLE_S, SeatLostReason};
use crate::time::{Timestamp, duration_millis};
use crate::token::LeaseClaims;

/// Heartbeat at this fraction of the window...
pub const HEARTBEAT_FRACTION: f64 = 1.0 / 3.0;
/// ...scaled by a random factor in `1 ± HEARTBEAT_JITTER`, so clients that
/// started together do not heartbeat in lockstep.
pub const HEARTBEAT_JITTER: f64 = 0.1;
/// The window assumed before the first lease tells the real one.
pub const DEFAULT_WINDOW: Duration = Duration::from_secs(60);
/// Wait this long on a 409 without a `Retry-After`.
pub const DEFAULT_RETRY_AFTER: Duration = Duration::from_secs(5);
/// A request never gets less time than this, even right before the deadline.
pub const MIN_REQUEST_TIMEOUT: Duration = Duration::from_millis(250);

/// The local timing of a held lease.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeldTiming {
    /// Local time at which the request that produced the lease was sent.
    pub sent: Timestamp,
    /// The lease's own window, `expires_at − issued_at`, in milliseconds.
    pub window_ms: i64,
}

impl HeldTiming {
    pub fn of(lease: &Lease, sent: Timestamp) -> Self {
        HeldTiming {
            sent,
            window_ms: lease.expires_at.millis_since(lease.issued_at).max(0),
        }
    }

    /// Local time from which the lease must be taken as expired.
    pub fn deadline(&self) -> Timestamp {
        Timestamp::from_millis(self.sent.as_millis().saturating_add(self.window_ms))
    }

    /// When to heartbeat: a third of the window after the send, times
    /// `factor` (the jitter, near 1).
    pub fn heartbeat_at(&self, factor: f64) -> Timestamp {
        let ms = (self.window_ms as f64 * HEARTBEAT_FRACTION * factor).round() as i64;
        Timestamp::from_millis(self.sent.as_millis().saturating_add(ms.max(0)))
    }
}

/// Delay before retrying after the `failures`-th failure in a row (1-based):
/// exponential from a twentieth of the window up to a sixth of it, within
/// sane absolute bounds, times `factor` (the jitter, near 1).
pub fn backoff(window: Duration, failures: u32, factor: f64) -> Duration {
    let base = (window / 20).clamp(Duration::from_millis(50), Duration::from_secs(1));
    let cap = (window / 6).clamp(Duration::from_millis(200), Duration::from_secs(10));
    let exp = failures.saturating_sub(1).min(16);
    let d = base.saturating_mul(1u32 << exp).min(cap);
    d.mul_f64(factor.max(0.0))
}

/// What the lease body must say, besides what its token says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Expected {
    pub license: String,
    pub holder: String,
    pub fingerprint: Option<String>,
}

/// How a lease differs from its token or from what was asked for.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LeaseMismatch {
    #[error("token claims {claims} do not match the lease body (seat {seat})")]
    TokenDiffers { claims: String, seat: String },
    #[error("lease is for license {0:?}")]
    OtherLicense(String),
    #[error("lease is for holder {0:?}")]
    OtherHolder(String),
    #[error("lease has fingerprint {0:?}")]
    OtherFingerprint(Option<String>),
    #[error("heartbeat of seat {asked} returned seat {got}")]
    OtherSeat { asked: String, got: String },
    #[error("lease expires before it was issued")]
    ExpiresBeforeIssued,
}

/// Check a lease against its verified token claims and what was asked for
/// (and, on heartbeat, the seat held).
pub fn check_lease(
    lease: &Lease,
    claims: &LeaseClaims,
    expected: &Expected,
    seat: Option<&str>,
) -> Result<(), LeaseMismatch> {
    if !claims.matches(lease) {
        return Err(LeaseMismatch::TokenDiffers {
            claims: format!("{claims:?}"),
            seat: lease.seat_id.clone(),
        });
    }
    if lease.license_id != expected.license {
        return Err(LeaseMismatch::OtherLicense(lease.license_id.clone()));
    }
    if lease.holder != expected.holder {
        return Err(LeaseMismatch::OtherHolder(lease.holder.clone()));
    }
    if lease.fingerprint != expected.fingerprint {
        return Err(LeaseMismatch::OtherFingerprint(lease.fingerprint.clone()));
    }
    if let Some(seat) = seat
        && lease.seat_id != seat
    {
        return Err(LeaseMismatch::OtherSeat {
            asked: seat.to_string(),
            got: lease.seat_id.clone(),
        });
    }
    if lease.expires_at < lease.issued_at {
        return Err(LeaseMismatch::ExpiresBeforeIssued);
    }
    Ok(())
}

/// What the driver should do next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Nothing until this local time (or shutdown).
    SleepUntil(Timestamp),
    /// `POST .../seats` with this `Idempotency-Key`.
    Checkout { idempotency_key: String },
    /// `POST .../seats/{seat_id}/heartbeat`, with `{"idle_s": …}` as its
    /// body when `Some` (activity has been reported), none when `None`.
    Heartbeat {
        seat_id: String,
        idle_s: Option<u64>,
    },
    /// Reclaimed for idleness: nothing until the next activity (or shutdown).
    AwaitActivity,
    /// A terminal state was reached: wait for shutdown.
    Finish,
}

#[derive(Debug, Clone)]
struct Held {
    lease: Lease,
    timing: HeldTiming,
}

/// The keeper's state machine.
#[derive(Debug)]
pub struct Machine {
    held: Option<Held>,
    /// The key of the checkout attempt in progress: kept across transient
    /// failures (a retry of the same attempt), dropped once the server answers.
    attempt_key: Option<String>,
    failures: u32,
    /// The loss in progress is a lapse (the held lease expired), not a 410.
    lapsed: bool,
    /// The last activity reported (local time); `None` until the first,
    /// and heartbeats carry no `idle_s` until then.
    last_activity: Option<Timestamp>,
    /// The activity the heartbeat in flight reports...
    reporting: Option<Timestamp>,
    /// ...and the one the last renewed heartbeat reported: what the server
    /// knows of the user.
    acknowledged: Option<Timestamp>,
    window: Duration,
    next_at: Timestamp,
    state: KeeperState,
    rng: StdRng,
}

impl Machine {
    pub fn new(now: Timestamp) -> Self {
        Machine::with_rng(now, StdRng::from_entropy())
    }

    pub fn with_rng(now: Timestamp, rng: StdRng) -> Self {
        Machine {
            held: None,
            attempt_key: None,
            failures: 0,
            lapsed: false,
            last_activity: None,
            reporting: None,
            acknowledged: None,
            window: DEFAULT_WINDOW,
            next_at: now,
            state: KeeperState::Acquiring,
            rng,
        }
    }

    pub fn state(&self) -> &KeeperState {
        &self.state
    }

    /// The seat this keeper holds or is trying to renew, if any.
    pub fn seat_id(&self) -> Option<&str> {
        self.held.as_ref().map(|h| h.lease.seat_id.as_str())
    }

    /// The timing of the held lease, if any.
    pub fn timing(&self) -> Option<HeldTiming> {
        self.held.as_ref().map(|h| h.timing)
    }

    /// The held lease is a borrowed one (no heartbeats until it ends).
    pub fn holds_borrow(&self) -> bool {
        self.held.as_ref().is_some_and(|h| h.lease.borrowed)
    }

    /// Whole seconds from the last activity to `now` (at most
    /// [`MAX_IDLE_S`]), or `None` before the first activity.
    pub fn idle_s(&self, now: Timestamp) -> Option<u64> {
        let last = self.last_activity?;
        let secs = now.millis_since(last).max(0) / 1000;
        Some((secs as u64).min(MAX_IDLE_S))
    }

    /// The user did something at local time `at`. An activity no later
    /// than the last one seen changes nothing; a newer one after an idle
    /// reclaim checks out again at once. Returns the new state if it changed.
    pub fn on_activity(&mut self, at: Timestamp) -> Option<KeeperState> {
        if self.last_activity.is_some_and(|last| at <= last) {
            return None;
        }
        self.last_activity = Some(at);
        if !matches!(self.state, KeeperState::Reclaimed { .. }) {
            return None;
        }
        self.attempt_key = None;
        self.failures = 0;
        self.next_at = at;
        self.set(KeeperState::Acquiring)
    }

    pub fn next_action(&mut self, now: Timestamp) -> Action {
        if self.state.is_terminal() {
            return Action::Finish;
        }
        if matches!(self.state, KeeperState::Reclaimed { .. }) {
            return Action::AwaitActivity;
        }
        if now < self.next_at {
            return Action::SleepUntil(self.next_at);
        }
        if self.holds_borrow() {
            // The borrow's deadline: it is over, keep a seat the usual way.
            self.held = None;
            self.attempt_key = None;
            self.failures = 0;
            self.set(KeeperState::Acquiring);
        }
        if let Some(h) = &self.held {
            self.reporting = self.last_activity;
            return Action::Heartbeat {
                seat_id: h.lease.seat_id.clone(),
                idle_s: self.idle_s(now),
            };
        }
        let rng = &mut self.rng;
        let key = self
            .attempt_key
            .get_or_insert_with(|| format!("{:032x}", rng.r#gen::<u128>()));
        Action::Checkout {
            idempotency_key: key.clone(),
        }
    }

    /// Time allowed for a request sent at `now`: the configured timeout, but
    /// no longer than the held lease has left (so a hung request cannot delay
    /// noticing a lapse), and never less than [`MIN_REQUEST_TIMEOUT`].
    pub fn request_timeout(&self, now: Timestamp, configured: Duration) -> Duration {
        match &self.held {
            Some(h) if now < h.timing.deadline() => {
                let left = Duration::from_millis(h.timing.deadline().millis_since(now) as u64);
                configured.min(left).max(MIN_REQUEST_TIMEOUT)
            }
            _ => configured,
        }
    }

    /// The outcome of a checkout sent at local time `sent`, seen at `now`.
    /// Returns the new state if it changed.
    pub fn on_checkout(
        &mut self,
        sent: Timestamp,
        now: Timestamp,
        result: Result<Lease, ClientError>,
    ) -> Option<KeeperState> {
        match result {
            Ok(lease) if lease.borrowed => self.hold_unasked_borrow(lease, sent, now),
            Ok(lease) => self.hold(lease, sent),
            Err(
                ClientError::NoSeats { retry_after, .. }
                | ClientError::LimitReached { retry_after, .. },
            ) => {
                self.attempt_key = None;
                self.failures = 0;
                let base = retry_after.unwrap_or(DEFAULT_RETRY_AFTER);
                // Spread the waiters so a freed seat is not stormed at once.
                let spread = (base / 10).max(Duration::from_millis(250));
                let wait = base + spread.mul_f64(self.rng.gen_range(0.0..=1.0));
                self.next_at = now.saturating_add(wait);
                self.set(KeeperState::Waiting { retry_after: wait })
            }
            Err(ClientError::Blocked {
                retry_after,
                message,
            }) => {
                self.attempt_key = None;
                self.set(KeeperState::Blocked {
                    retry_after,
                    message,
                })
            }
            // Permanent for this holder: a `not_allowed` does not change by
            // asking again (only an edit of the licenses file would).
            // Not entitled: asking again gives the same chain.
            Err(
                e @ (ClientError::Unauthorized(_)
                | ClientError::UnknownLicense(_)
                | ClientError::NotAllowed(_)
                | ClientError::Rejected { .. }
                | ClientError::NotEntitled(_)),
            ) => self.set(KeeperState::Failed(e.to_string())),
            Err(
                e @ (ClientError::Transient(_)
                | ClientError::SeatLost { .. }
                | ClientError::Borrowed(_)
                | ClientError::Invalid(_)),
            ) => {
                if !matches!(e, ClientError::Transient(_)) {
                    // The server did answer: the next try is a new attempt.
                    self.attempt_key = None;
                }
                self.retry_later(now);
                self.set(if self.lapsed {
                    KeeperState::Lapsed
                } else {
                    KeeperState::Acquiring
                })
            }
        }
    }

    /// The outcome of a heartbeat sent at local time `sent`, seen at `now`.
    /// Returns the new state if it changed.
    pub fn on_heartbeat(
        &mut self,
        sent: Timestamp,
        now: Timestamp,
        result: Result<Lease, ClientError>,
    ) -> Option<KeeperState> {
        let Some(held) = &self.held else {
            return None;
        };
        match result {
            Ok(lease) if lease.seat_id == held.lease.seat_id => {
                self.acknowledged = self.reporting;
                self.hold(lease, sent)
            }
            Err(ClientError::SeatLost {
                reason: Some(SeatLostReason::Idle),
                message,
            }) if self.last_activity.is_some() && self.acknowledged == self.last_activity => {
                // The user is away: wait for them (see the module doc).
                self.held = None;
                self.attempt_key = None;
                self.failures = 0;
                self.lapsed = false;
                self.set(KeeperState::Reclaimed { message })
            }
            Err(ClientError::SeatLost { .. }) => {
                // Revoked, reaped or released (or idle, but the user is
                // back or never reported: see the module doc): check out
                // again at once.
                self.held = None;
                self.attempt_key = None;
                self.failures = 0;
                self.next_at = now;
                self.set(if self.lapsed {
                    KeeperState::Lapsed
                } else {
                    KeeperState::Acquiring
                })
            }
            Err(ClientError::Borrowed(_)) => {
                // This machine borrowed the seat meanwhile (another program
                // with the same holder and fingerprint): a plain checkout
                // hands the borrowed lease back, to hold without heartbeats.
                self.held = None;
                self.attempt_key = None;
                self.failures = 0;
                self.next_at = now;
                None
            }
            Err(
                e @ (ClientError::Unauthorized(_)
                | ClientError::UnknownLicense(_)
                | ClientError::Rejected { .. }),
            ) => self.set(KeeperState::Failed(e.to_string())),
            // Transient, a response that breaks the contract (including a
            // lease for another seat), or an answer a heartbeat cannot get:
            // keep the lease, valid until its signed expiry, and retry soon.
            _ => {
                let deadline = held.timing.deadline();
                self.retry_later(now);
                if now >= deadline {
                    self.lapsed = true;
                    self.set(KeeperState::Lapsed)
                } else {
                    // Wake at the deadline at the latest to try once more.
                    self.next_at = self.next_at.min(deadline);
                    None
                }
            }
        }
    }

    /// The outcome of a borrow request sent at `sent`: a borrowed lease is
    /// held (no heartbeats until its deadline); a denial changes nothing,
    /// the seat held before is kept as it was.
    pub fn on_borrow(
        &mut self,
        sent: Timestamp,
        result: &Result<Lease, ClientError>,
    ) -> Option<KeeperState> {
        match result {
            Ok(lease) if lease.borrowed && !self.state.is_terminal() => {
                self.hold(lease.clone(), sent)
            }
            _ => None,
        }
    }

    /// The borrowed seat was returned early: check out a seat the usual way
    /// at once.
    pub fn on_given_back(&mut self, now: Timestamp) -> Option<KeeperState> {
        self.held = None;
        self.attempt_key = None;
        self.failures = 0;
        self.next_at = now;
        self.set(KeeperState::Acquiring)
    }

    /// The driver released the held seat because of `error`: its lease is
    /// not entitled, or the entitlements could not be fetched to re-check
    /// it (see [`super::keeper`], "Entitlements"). A transient `error`
    /// checks out again after a backoff (the checkout checks afresh); any
    /// other stops the keeper, as a permanent checkout error does.
    pub fn on_released(&mut self, now: Timestamp, error: &ClientError) -> Option<KeeperState> {
        self.held = None;
        self.attempt_key = None;
        self.lapsed = false;
        if error.is_transient() {
            self.retry_later(now);
            self.set(KeeperState::Acquiring)
        } else {
            self.set(KeeperState::Failed(error.to_string()))
        }
    }

    /// A shutdown released the seat (or there was none).
    pub fn on_stopped(&mut self) -> Option<KeeperState> {
        self.held = None;
        self.set(KeeperState::Stopped)
    }

    /// A borrowed lease from a plain checkout (see the module doc): held
    /// until the earlier of its window and its expiry on the local clock; one
    /// already over (still counted by the server within its skew) is not
    /// taken, and the checkout is tried again after a backoff.
    fn hold_unasked_borrow(
        &mut self,
        lease: Lease,
        sent: Timestamp,
        now: Timestamp,
    ) -> Option<KeeperState> {
        let mut timing = HeldTiming::of(&lease, sent);
        timing.window_ms = timing
            .window_ms
            .min(lease.expires_at.millis_since(sent).max(0));
        if timing.deadline() <= now {
            self.attempt_key = None;
            self.retry_later(now);
            return None;
        }
        self.hold_with(lease, timing)
    }

    fn hold(&mut self, lease: Lease, sent: Timestamp) -> Option<KeeperState> {
        let timing = HeldTiming::of(&lease, sent);
        self.hold_with(lease, timing)
    }

    fn hold_with(&mut self, lease: Lease, timing: HeldTiming) -> Option<KeeperState> {
        self.window = Duration::from_millis(timing.window_ms as u64);
        let factor = self
            .rng
            .gen_range(1.0 - HEARTBEAT_JITTER..=1.0 + HEARTBEAT_JITTER);
        // A borrowed seat is not renewed: nothing to do until it ends.
        self.next_at = if lease.borrowed {
            timing.deadline()
        } else {
            timing.heartbeat_at(factor)
        };
        self.held = Some(Held {
            lease: lease.clone(),
            timing,
        });
        self.attempt_key = None;
        self.failures = 0;
        self.lapsed = false;
        self.set(KeeperState::Held(lease))
    }

    fn retry_later(&mut self, now: Timestamp) {
        self.failures = self.failures.saturating_add(1);
        let factor = self.rng.gen_range(0.75..=1.25);
        let delay = backoff(self.window, self.failures, factor);
        self.next_at = Timestamp::from_millis(
            now.as_millis()
                .saturating_add(duration_millis(delay).max(1)),
        );
    }

    fn set(&mut self, state: KeeperState) -> Option<KeeperState> {
        if self.state == state {
            None
        } else {
            self.state = state.clone();
            Some(state)
        }
    }
}

#[cfg(test)]
mod tests;
