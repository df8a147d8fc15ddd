//! What [`super::LeaseKeeper::activity`] shares with the keeper's task: the
//! local time of the user's last activity and a wake-up for a task parked
//! after an idle reclaim. An atomic store and a notify, so an application can
//! call it on every key press without throttling.

use std::sync::atomic::{AtomicI64, Ordering};

use tokio::sync::Notify;

use crate::time::Timestamp;

/// No activity reported yet.
const NEVER: i64 = i64::MIN;

#[derive(Debug)]
pub(crate) struct Activity {
    /// Local milliseconds of the latest activity, or [`NEVER`].
    last_ms: AtomicI64,
    wake: Notify,
}

impl Activity {
    pub fn new() -> Self {
        Activity {
            last_ms: AtomicI64::new(NEVER),
            wake: Notify::new(),
        }
    }

    /// The user did something at `at`. Never moves the time back (two
    /// threads reporting at once may store out of order).
    pub fn report(&self, at: Timestamp) {
        self.last_ms.fetch_max(at.as_millis(), Ordering::Relaxed);
        // Stores a permit when the task is not waiting: at worst one
        // spurious wake-up, which finds nothing new and waits again.
        self.wake.notify_one();
    }

    /// The latest activity, if any was reported.
    pub fn latest(&self) -> Option<Timestamp> {
        let ms = self.last_ms.load(Ordering::Relaxed);
        (ms != NEVER).then(|| Timestamp::from_millis(ms))
    }

    /// Wait for the next [`Activity::report`] (or a permit left by one).
    pub async fn reported(&self) {
        self.wake.notified().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_latest_activity_never_moves_back() {
        let a = Activity::new();
        assert_eq!(a.latest(), None);
        a.report(Timestamp::from_millis(2_000));
        a.report(Timestamp::from_millis(1_000));
        assert_eq!(a.latest(), Some(Timestamp::from_millis(2_000)));
        a.report(Timestamp::from_millis(3_000));
        assert_eq!(a.latest(), Some(Timestamp::from_millis(3_000)));
    }

    #[tokio::test]
    async fn a_report_wakes_the_waiting_task_even_if_it_came_first() {
        let a = Activity::new();
        a.report(Timestamp::from_millis(1));
        // The permit left by the report: no hang.
        tokio::time::timeout(std::time::Duration::from_secs(1), a.reported())
            .await
            .expect("woken");
    }
}
