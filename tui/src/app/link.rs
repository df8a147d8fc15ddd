//! The state of one connection (the poller or the event stream).

use leasehold_common::Timestamp;

/// State of one connection (the poller or the event stream).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Link {
    Connecting,
    Up,
    Down {
        /// Local time of the first failure in this outage.
        since: Timestamp,
        failures: u32,
        error: String,
    },
}

impl Link {
    /// Record a failure at `now`: the first one opens an outage, later ones
    /// count into it (its start stays).
    pub(super) fn fail(&mut self, now: Timestamp, error: String) {
        *self = match std::mem::replace(self, Link::Connecting) {
            Link::Down {
                since, failures, ..
            } => Link::Down {
                since,
                failures: failures + 1,
                error,
            },
            _ => Link::Down {
                since: now,
                failures: 1,
                error,
            },
        };
    }

    pub fn is_down(&self) -> bool {
        matches!(self, Link::Down { .. })
    }
}
