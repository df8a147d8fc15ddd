//! The admin event log's wire types: what happened ([`EventKind`]) and one
//! entry ([`Event`]). Re-exported from [`crate::api`]; apart so that the
//! alert types, which carry events, need not import the whole contract.

use serde::{Deserialize, Serialize};

use crate::time::Timestamp;

/// What happened, in the admin event log.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EventKind {
    Checkout,
    Release,
    Reap,
    Revoke,
    Denied,
    Lost,
    Config,
    /// A seat freed because its user was idle for the license's
    /// `idle_timeout`.
    Reclaim,
    /// An alert of the licenses file began firing or resolved (detail
    /// `firing <name>` / `resolved <name>`).
    Alert,
    /// An entitlement file loaded, was replaced or rejected, its term
    /// entered grace or ended, or the wall clock read behind the decision
    /// clock.
    Entitlement,
}

impl EventKind {
    pub const ALL: [EventKind; 10] = [
        EventKind::Checkout,
        EventKind::Release,
        EventKind::Reap,
        EventKind::Revoke,
        EventKind::Denied,
        EventKind::Lost,
        EventKind::Config,
        EventKind::Reclaim,
        EventKind::Alert,
        EventKind::Entitlement,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            EventKind::Checkout => "checkout",
            EventKind::Release => "release",
            EventKind::Reap => "reap",
            EventKind::Revoke => "revoke",
            EventKind::Denied => "denied",
            EventKind::Lost => "lost",
            EventKind::Config => "config",
            EventKind::Reclaim => "reclaim",
            EventKind::Alert => "alert",
            EventKind::Entitlement => "entitlement",
        }
    }

    pub fn parse(s: &str) -> Option<EventKind> {
        EventKind::ALL.into_iter().find(|k| k.as_str() == s)
    }
}

/// One entry of the event log. Ids are strictly increasing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Event {
    pub id: i64,
    pub at: Timestamp,
    pub kind: EventKind,
    pub license_id: Option<String>,
    pub seat_id: Option<String>,
    pub holder: Option<String>,
    pub detail: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EventsResponse {
    pub events: Vec<Event>,
}
