//! Waiting for a seat: `POST …/seats?wait=SECONDS`.
//!
//! Each license has a first-come-first-served line of waiting checkouts. A
//! checkout is told how many waiters stand ahead of it and the writer treats
//! those seats as spoken for (`live + ahead >= seats` is full), so a newcomer
//! never jumps the line and a waiter wins only when every waiter ahead of it
//! could win too. Waiters re-try when something may have freed a seat
//! (release, revoke, reap, a config reload, someone leaving the line) and when
//! the earliest live lease lapses. A waiter whose client disconnects is
//! dropped by hyper, and its [`Ticket`] leaves the line without taking a seat.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use leasehold_common::api::EventKind;
use tokio::sync::{Notify, broadcast, watch};
use tokio::time::Instant;

use crate::store::{CheckoutOutcome, CheckoutRequest, Store, StoreError};

/// The longest a checkout may wait.
pub const MAX_WAIT_S: u64 = 60;

#[derive(Default)]
pub struct WaitQueues {
    lines: Mutex<HashMap<String, VecDeque<u64>>>,
    next_ticket: AtomicU64,
    /// Something changed that may let a waiter in.
    pub changed: Notify,
}

/// A place in a license's line; leaves the line when dropped.
pub struct Ticket {
    queues: Arc<WaitQueues>,
    license_id: String,
    id: u64,
}

impl WaitQueues {
    /// How many wait in `license_id`'s line now.
    pub fn waiting(&self, license_id: &str) -> usize {
        self.lock().get(license_id).map_or(0, VecDeque::len)
    }

    /// Join the back of the line.
    pub fn join(self: &Arc<Self>, license_id: &str) -> Ticket {
        let id = self.next_ticket.fetch_add(1, Ordering::Relaxed);
        self.lock()
            .entry(license_id.to_string())
            .or_default()
            .push_back(id);
        Ticket {
            queues: self.clone(),
            license_id: license_id.to_string(),
            id,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, VecDeque<u64>>> {
        self.lines.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Ticket {
    /// Waiters ahead of this one.
    pub fn ahead(&self) -> usize {
        self.queues
            .lock()
            .get(&self.license_id)
            .and_then(|line| line.iter().position(|&t| t == self.id))
            .unwrap_or(0)
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        {
            let mut lines = self.queues.lock();
            if let Some(line) = lines.get_mut(&self.license_id) {
                line.retain(|&t| t != self.id);
                if line.is_empty() {
                    lines.remove(&self.license_id);
                }
            }
        }
        // Everyone behind moved up one place.
        self.queues.changed.notify_waiters();
    }
}

/// Check out, standing in the license's line for up to `wait` while the pool
/// is full; with a `wait` of zero, one plain attempt.
///
/// `prepare` builds the answer from the writer's final decision while its
/// batch commits (see [`crate::store::Applied`]); the answer is returned with
/// the committed outcome. The place in line is held until then, so the
/// waiter behind moves up only once this decision is durable.
pub async fn checkout_in_line<R>(
    store: &Store,
    queues: &Arc<WaitQueues>,
    req: CheckoutRequest,
    wait: Duration,
    prepare: impl FnOnce(&CheckoutOutcome) -> R,
) -> Result<(R, CheckoutOutcome), StoreError> {
    let deadline = Instant::now() + wait;
    let mut ticket: Option<Ticket> = None;
    loop {
        // Armed before the attempt, so a seat freed during it still wakes us.
        let notified = queues.changed.notified();
        let mut notified = std::pin::pin!(notified);
        notified.as_mut().enable();
        let ahead = match &ticket {
            Some(t) => t.ahead(),
            None => queues.waiting(&req.license_id),
        };
        let applied = store
            .checkout_applied(req.clone(), u32::try_from(ahead).unwrap_or(u32::MAX))
            .await?;
        match applied.value {
            CheckoutOutcome::Full { retry_after, .. } if Instant::now() < deadline => {
                applied.committed().await?;
                if ticket.is_none() {
                    ticket = Some(queues.join(&req.license_id));
                }
                // Wake on a freed seat, on the earliest lease lapsing, or at
                // the end of the wait (one last try, then 409).
                let recheck = Instant::now() + retry_after;
                tokio::select! {
                    _ = notified => {}
                    _ = tokio::time::sleep_until(recheck.min(deadline)) => {}
                }
            }
            _ => {
                let answer = prepare(&applied.value);
                let outcome = applied.committed().await?;
                return Ok((answer, outcome));
            }
        }
    }
}

/// Wake waiters on every committed event that may free a seat.
pub async fn forward_events(
    queues: Arc<WaitQueues>,
    mut events: broadcast::Receiver<leasehold_common::api::Event>,
    mut shutdown: watch::Receiver<bool>,
) {
    loop {
        tokio::select! {
            ev = events.recv() => match ev {
                Ok(ev) if matches!(ev.kind, EventKind::Release | EventKind::Revoke | EventKind::Reap | EventKind::Config) => {
                    queues.changed.notify_waiters();
                }
                Ok(_) => {}
                Err(broadcast::error::RecvError::Lagged(_)) => queues.changed.notify_waiters(),
                Err(broadcast::error::RecvError::Closed) => return,
            },
            _ = shutdown.wait_for(|stop| *stop) => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_is_first_come_first_served_and_tickets_leave_on_drop() {
        let q = Arc::new(WaitQueues::default());
        let a = q.join("l");
        let b = q.join("l");
        let c = q.join("l");
        let other = q.join("m");
        assert_eq!(
            (a.ahead(), b.ahead(), c.ahead(), other.ahead()),
            (0, 1, 2, 0)
        );
        drop(b);
        assert_eq!((a.ahead(), c.ahead()), (0, 1));
        assert_eq!(q.waiting("l"), 2);
        drop(a);
        drop(c);
        assert_eq!(q.waiting("l"), 0);
    }
}
