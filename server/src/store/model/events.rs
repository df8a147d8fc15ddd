//! What one operation must leave behind besides its answer, as the model
//! says it: the events, the sessions ended and the denials counted.

use leasehold_common::Timestamp;
use leasehold_common::api::{DenialReason, Event, EventKind, SessionEnd};

use crate::store::LeaseRow;

/// An event the model expects; `detail: None` leaves the wording of
/// throttled denied/lost events unchecked.
#[derive(Debug)]
pub struct WantEvent {
    pub kind: EventKind,
    pub license: Option<String>,
    pub seat: Option<String>,
    pub holder: Option<String>,
    pub detail: Option<Option<String>>,
}

impl WantEvent {
    pub fn matches(&self, e: &Event, now: Timestamp) -> bool {
        e.kind == self.kind
            && e.at == now
            && e.license_id == self.license
            && e.seat_id == self.seat
            && e.holder == self.holder
            && self.detail.as_ref().is_none_or(|d| e.detail == *d)
    }

    /// An event about one seat, with its wording.
    pub fn seat(kind: EventKind, lease: &LeaseRow, detail: Option<String>) -> Self {
        WantEvent {
            kind,
            license: Some(lease.license_id.clone()),
            seat: Some(lease.seat_id.clone()),
            holder: Some(lease.holder.clone()),
            detail: Some(detail),
        }
    }
}

/// A seat's session: the seat as it left, how and when it ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Session {
    pub lease: LeaseRow,
    pub end: SessionEnd,
    pub at: Timestamp,
}

/// A counted denial.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Denial {
    pub license_id: String,
    pub holder: String,
    pub fingerprint: Option<String>,
    pub reason: DenialReason,
    pub at: Timestamp,
}

/// What one operation must leave behind besides its answer.
#[derive(Debug, Default)]
pub struct Effects {
    pub events: Vec<WantEvent>,
    pub sessions: Vec<Session>,
    pub denials: Vec<Denial>,
}
