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

use leasehold_common::api::EventKind;
use tokio::sync::{Notify, broadcast, watch};

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
