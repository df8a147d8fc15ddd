//! One simulated client's live state ([`Slot`]), shared between its task,
//! the samplers and the revoker, and the sampler of how many hold a seat.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::context::Ctx;
use super::plan::ClientPlan;

/// One client's plan and live state.
pub(super) struct Slot {
    pub plan: ClientPlan,
    inner: Mutex<SlotState>,
}

#[derive(Default)]
struct SlotState {
    /// The seat held and until when it is surely valid (local clock).
    held: Option<(String, Instant)>,
    /// Held by a LeaseKeeper (revoking it shows a re-acquire).
    keeper: bool,
    /// The keeper is shutting down: a renewal it published just before
    /// must not mark the seat held again after the release began.
    closing: bool,
    /// A crashed client's seat, still on the server until reaped or revoked.
    crashed: Option<String>,
    /// Seats an admin revoked: a heartbeat that raced the revoke must not
    /// count them as held again.
    revoked: Vec<String>,
}

impl Slot {
    pub fn new(plan: ClientPlan) -> Self {
        Slot {
            plan,
            inner: Mutex::new(SlotState::default()),
        }
    }

    fn state(&self) -> MutexGuard<'_, SlotState> {
        self.inner.lock().expect("slot lock")
    }

    /// Count `seat` as held until `valid_until` (unless an admin revoked it
    /// or the keeper holding it is closing).
    pub fn hold(&self, ctx: &Ctx, seat: &str, valid_until: Instant, keeper: bool) {
        let mut s = self.state();
        if s.revoked.iter().any(|r| r == seat) || (keeper && s.closing) {
            return;
        }
        s.held = Some((seat.to_string(), valid_until));
        s.keeper = keeper;
        if let Ok(mut owners) = ctx.seat_owners.lock() {
            owners.insert(seat.to_string(), self.plan.index);
        }
    }

    /// Stop counting the keeper's seat as held: it is being released.
    pub fn closing(&self, closing: bool) -> Option<String> {
        let mut s = self.state();
        s.closing = closing;
        s.held.take().map(|(seat, _)| seat)
    }

    pub fn clear(&self) -> Option<String> {
        self.state().held.take().map(|(s, _)| s)
    }

    pub fn holding(&self, now: Instant) -> bool {
        self.state()
            .held
            .as_ref()
            .is_some_and(|(_, until)| now < *until)
    }

    /// The client crashed holding `seat`: it stays on the server.
    pub fn crashed(&self, seat: &str) {
        self.state().crashed = Some(seat.to_string());
    }

    /// The reaper deleted `seat`: if it was the crashed one, nothing is stuck.
    pub fn reaped(&self, seat: &str) {
        let mut s = self.state();
        if s.crashed.as_deref() == Some(seat) {
            s.crashed = None;
        }
    }

    /// The stuck seat of a crashed client the plan lets an admin revoke.
    pub fn revocable_crash(&self) -> Option<String> {
        let s = self.state();
        s.crashed.clone().filter(|_| self.plan.revocable)
    }

    /// The seat a keeper holds now, if any.
    pub fn keeper_seat(&self, now: Instant) -> Option<String> {
        let s = self.state();
        match &s.held {
            Some((seat, until)) if s.keeper && now < *until => Some(seat.clone()),
            _ => None,
        }
    }

    pub fn was_revoked(&self) -> bool {
        !self.state().revoked.is_empty()
    }

    /// From now on `seat` does not count as held (or stuck), whatever a
    /// heartbeat in flight says.
    pub fn revoking(&self, seat: &str) {
        let mut s = self.state();
        s.revoked.push(seat.to_string());
        if s.held.as_ref().is_some_and(|(h, _)| h == seat) {
            s.held = None;
        }
        if s.crashed.as_deref() == Some(seat) {
            s.crashed = None;
        }
    }
}

/// The most simulated clients holding a valid lease at once.
pub(super) async fn sample_held(slots: Vec<Arc<Slot>>, max: Arc<Mutex<u32>>) {
    loop {
        let now = Instant::now();
        let held = slots.iter().filter(|s| s.holding(now)).count() as u32;
        if let Ok(mut m) = max.lock() {
            *m = (*m).max(held);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
