//! Waiting for a seat: `POST …/seats?wait=SECONDS`.
//!
//! Each license has a first-come-first-served line of waiting checkouts. A
//! checkout is told who stands ahead of it, and the rules give those
//! waiters their seats first (on paper, in arrival order, each only if the
//! rules would let it in now), so a newcomer never jumps the line, and a
//! waiter who cannot use a freed seat (reserved for a group it is not in,
//! its holder or group at its cap) does not hold up one behind it who can.
//! Waiters re-try when something may have freed a seat
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

use crate::store::pg::line::SharedLine;
use crate::store::rules::waits_in_line;
use crate::store::{Ahead, CheckoutOutcome, CheckoutRequest, Store, StoreError, Waiter};

/// The longest a checkout may wait.
pub const MAX_WAIT_S: u64 = 60;

#[derive(Default)]
/// The waiting lines, one per license: this server's own, or the one the
/// replicas share.
pub struct Lines {
    /// Each license's line on this server (one store, or SQLite).
    local: Mutex<HashMap<String, VecDeque<(u64, Waiter)>>>,
    next_ticket: AtomicU64,
    /// Something changed that may let a waiter in.
    pub changed: Notify,
    /// Several replicas: the line lives in the database, one for the
    /// cluster; the local lines above are then not used.
    shared: Option<ReplicaLine>,
}

/// The cluster's line (PostgreSQL) and this replica's name in it.
struct ReplicaLine {
    line: SharedLine,
    replica: String,
}

/// A place in a license's line; leaves the line when dropped.
pub struct Ticket {
    lines: Arc<Lines>,
    license_id: String,
    place: Place,
}

enum Place {
    Local(u64),
    Shared(i64),
}

impl Lines {
    /// The line of a replica on PostgreSQL: shared with every replica.
    pub fn shared(line: SharedLine) -> Self {
        Lines {
            shared: Some(ReplicaLine {
                line,
                replica: hex::encode(rand::random::<[u8; 8]>()),
            }),
            ..Lines::default()
        }
    }

    /// How many wait in `license_id`'s line now.
    pub async fn waiting(&self, license_id: &str) -> Result<usize, StoreError> {
        Ok(self.line(license_id).await?.len())
    }

    /// Who waits in `license_id`'s line now, first come first.
    pub async fn line(&self, license_id: &str) -> Result<Vec<Waiter>, StoreError> {
        match &self.shared {
            Some(line) => line.line.waiters(license_id).await,
            None => Ok(self
                .lock()
                .get(license_id)
                .map(|line| line.iter().map(|(_, w)| w.clone()).collect())
                .unwrap_or_default()),
        }
    }

    /// Who stands ahead of a checkout not yet in line: everyone in it. The
    /// shared line is read by the writer, in the checkout's transaction.
    pub fn ahead_of_newcomer(&self, license_id: &str) -> Ahead {
        match &self.shared {
            Some(_) => Ahead::SharedLine { before: None },
            None => Ahead::Waiters(
                self.lock()
                    .get(license_id)
                    .map(|line| line.iter().map(|(_, w)| w.clone()).collect())
                    .unwrap_or_default(),
            ),
        }
    }

    /// Join the back of the line.
    pub async fn join(
        self: &Arc<Self>,
        license_id: &str,
        waiter: Waiter,
    ) -> Result<Ticket, StoreError> {
        let place = match &self.shared {
            Some(line) => Place::Shared(line.line.join(license_id, &line.replica, &waiter).await?),
            None => {
                let id = self.next_ticket.fetch_add(1, Ordering::Relaxed);
                self.lock()
                    .entry(license_id.to_string())
                    .or_default()
                    .push_back((id, waiter));
                Place::Local(id)
            }
        };
        Ok(Ticket {
            lines: self.clone(),
            license_id: license_id.to_string(),
            place,
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, VecDeque<(u64, Waiter)>>> {
        self.local.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Ticket {
    /// The waiters ahead of this one, first come first (the shared line's
    /// are read by the writer).
    pub fn ahead(&self) -> Ahead {
        match &self.place {
            Place::Shared(id) => Ahead::SharedLine { before: Some(*id) },
            Place::Local(id) => Ahead::Waiters(
                self.lines
                    .lock()
                    .get(&self.license_id)
                    .map(|line| {
                        line.iter()
                            .take_while(|(t, _)| t != id)
                            .map(|(_, w)| w.clone())
                            .collect()
                    })
                    .unwrap_or_default(),
            ),
        }
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        match (&self.place, &self.lines.shared) {
            (Place::Shared(id), Some(line)) => {
                let (shared, id) = (line.line.clone(), *id);
                // Drop cannot wait; if the delete fails the row goes stale
                // and stops counting after line::STALE_MS.
                tokio::spawn(async move {
                    if let Err(e) = shared.leave(id).await {
                        tracing::warn!("waiting line: cannot leave: {e}");
                    }
                });
            }
            (Place::Local(id), _) => {
                let mut by_license = self.lines.lock();
                if let Some(line) = by_license.get_mut(&self.license_id) {
                    line.retain(|(t, _)| t != id);
                    if line.is_empty() {
                        by_license.remove(&self.license_id);
                    }
                }
            }
            (Place::Shared(_), None) => {}
        }
        // Everyone behind moved up one place.
        self.lines.changed.notify_waiters();
    }
}

/// Keep this replica's waiters in the shared line (PostgreSQL), until
/// `shutdown` flips. A no-op for a server's own line.
pub async fn refresh_shared_line(lines: Arc<Lines>, mut shutdown: watch::Receiver<bool>) {
    let Some(line) = &lines.shared else { return };
    loop {
        if let Err(e) = line.line.refresh(&line.replica).await {
            tracing::warn!("waiting line: cannot refresh: {e}");
        }
        tokio::select! {
            _ = tokio::time::sleep(SHARED_REFRESH) => {}
            _ = shutdown.wait_for(|stop| *stop) => return,
        }
    }
}

/// How often a replica says its waiters are still there.
const SHARED_REFRESH: Duration = Duration::from_secs(1);
/// Waiters in a shared line also look again this often: a waiter ahead on
/// another replica may have left the line without any event to say so.
const SHARED_RECHECK: Duration = Duration::from_millis(250);

/// Check out, standing in the license's line for up to `wait` while the pool
/// is full; with a `wait` of zero, one plain attempt.
///
/// `prepare` builds the answer from the writer's final decision while its
/// batch commits (see [`crate::store::Applied`]); the answer is returned with
/// the committed outcome. The place in line is held until then, so the
/// waiter behind moves up only once this decision is durable.
pub async fn checkout_in_line<R>(
    store: &Store,
    lines: &Arc<Lines>,
    req: CheckoutRequest,
    wait: Duration,
    prepare: impl FnOnce(&CheckoutOutcome) -> R,
) -> Result<(R, CheckoutOutcome), StoreError> {
    let deadline = Instant::now() + wait;
    let mut ticket: Option<Ticket> = None;
    loop {
        // Armed before the attempt, so a seat freed during it still wakes us.
        let notified = lines.changed.notified();
        let mut notified = std::pin::pin!(notified);
        notified.as_mut().enable();
        let ahead = match &ticket {
            Some(t) => t.ahead(),
            None => lines.ahead_of_newcomer(&req.license_id),
        };
        // Decided before the attempt, so the attempt whose denial the
        // client sees is the one counted as a denial, exactly once; a
        // denial the line does not retry is final and counted at once
        // (the rules and this loop ask the same `waits_in_line`).
        let last_try = Instant::now() >= deadline;
        let applied = store.checkout_applied(req.clone(), ahead, last_try).await?;
        match waits_in_line(&applied.value) {
            Some(retry_after) if !last_try => {
                applied.committed().await?;
                if ticket.is_none() {
                    ticket = Some(lines.join(&req.license_id, Waiter::from(&req)).await?);
                }
                // Wake on a freed seat, on the earliest lease lapsing, or at
                // the end of the wait (one last try, then 409).
                let retry_after = match lines.shared {
                    Some(_) => retry_after.min(SHARED_RECHECK),
                    None => retry_after,
                };
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
    lines: Arc<Lines>,
    mut events: broadcast::Receiver<leasehold_common::api::Event>,
    mut shutdown: watch::Receiver<bool>,
) {
    loop {
        tokio::select! {
            ev = events.recv() => match ev {
                Ok(ev) if matches!(ev.kind, EventKind::Release | EventKind::Revoke | EventKind::Reap | EventKind::Config) => {
                    lines.changed.notify_waiters();
                }
                Ok(_) => {}
                Err(broadcast::error::RecvError::Lagged(_)) => lines.changed.notify_waiters(),
                Err(broadcast::error::RecvError::Closed) => return,
            },
            _ = shutdown.wait_for(|stop| *stop) => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn waiter(holder: &str) -> Waiter {
        Waiter {
            holder: holder.to_string(),
            fingerprint: None,
        }
    }

    fn holders(line: Vec<Waiter>) -> Vec<String> {
        line.into_iter().map(|w| w.holder).collect()
    }

    fn ahead_of(ticket: &Ticket) -> Vec<String> {
        match ticket.ahead() {
            Ahead::Waiters(line) => holders(line),
            shared => panic!("a server's own line, not {shared:?}"),
        }
    }

    #[tokio::test]
    async fn line_is_first_come_first_served_and_tickets_leave_on_drop() {
        let lines = Arc::new(Lines::default());
        let a = lines.join("l", waiter("a")).await.unwrap();
        let b = lines.join("l", waiter("b")).await.unwrap();
        let c = lines.join("l", waiter("c")).await.unwrap();
        let other = lines.join("m", waiter("x")).await.unwrap();
        assert!(ahead_of(&a).is_empty());
        assert_eq!(ahead_of(&b), ["a"]);
        assert_eq!(ahead_of(&c), ["a", "b"]);
        assert!(ahead_of(&other).is_empty());
        drop(b);
        assert_eq!(ahead_of(&c), ["a"]);
        assert_eq!(holders(lines.line("l").await.unwrap()), ["a", "c"]);
        drop(a);
        drop(c);
        assert_eq!(lines.waiting("l").await.unwrap(), 0);
    }
}
