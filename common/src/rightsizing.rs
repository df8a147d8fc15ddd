//! Wire types of right-sizing: why a checkout was refused, the recorded
//! denials (`GET /v1/admin/denials`), and the replay of the recorded
//! demand against other seat counts (`GET /v1/admin/usage/what-if`).
//! Re-exported from [`crate::api`]; the field names are the contract.

use serde::{Deserialize, Serialize};

use crate::time::Timestamp;

/// Why a counted checkout was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DenialReason {
    /// `409 no_seats_available` (reservations included): the one reason
    /// that can mean a shortage.
    Full,
    /// `409 limit_reached`, the holder's `max_per_holder`.
    Holder,
    /// `409 limit_reached`, the group's `max`.
    Group,
    /// `409 limit_reached`, the license's borrowing cap.
    Borrow,
    /// `403 not_allowed` by the `allow`/`deny` lists.
    NotAllowed,
    /// `403 blocked` by an admin's revoke.
    Blocked,
    /// `403 version_not_entitled`: the license's entitlement covers other
    /// versions.
    Version,
    /// `403 not_entitled`: no entitlement of the license's vendor grants it.
    Entitlement,
}

impl DenialReason {
    pub const ALL: [DenialReason; 8] = [
        DenialReason::Full,
        DenialReason::Holder,
        DenialReason::Group,
        DenialReason::Borrow,
        DenialReason::NotAllowed,
        DenialReason::Blocked,
        DenialReason::Version,
        DenialReason::Entitlement,
    ];

    /// The wire name (`full`, `not_allowed`, ...), also the stored one.
    pub fn as_str(self) -> &'static str {
        match self {
            DenialReason::Full => "full",
            DenialReason::Holder => "holder",
            DenialReason::Group => "group",
            DenialReason::Borrow => "borrow",
            DenialReason::NotAllowed => "not_allowed",
            DenialReason::Blocked => "blocked",
            DenialReason::Version => "version",
            DenialReason::Entitlement => "entitlement",
        }
    }

    pub fn parse(text: &str) -> Option<DenialReason> {
        DenialReason::ALL.into_iter().find(|r| r.as_str() == text)
    }
}

/// Counted denials per reason; every key is always present.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DenialsByReason {
    pub full: u64,
    pub holder: u64,
    pub group: u64,
    pub borrow: u64,
    pub not_allowed: u64,
    pub blocked: u64,
    /// Absent from servers that predate entitlements.
    #[serde(default)]
    pub version: u64,
    #[serde(default)]
    pub entitlement: u64,
}

impl DenialsByReason {
    pub fn add(&mut self, reason: DenialReason, count: u64) {
        *self.slot(reason) += count;
    }

    pub fn get(&self, reason: DenialReason) -> u64 {
        match reason {
            DenialReason::Full => self.full,
            DenialReason::Holder => self.holder,
            DenialReason::Group => self.group,
            DenialReason::Borrow => self.borrow,
            DenialReason::NotAllowed => self.not_allowed,
            DenialReason::Blocked => self.blocked,
            DenialReason::Version => self.version,
            DenialReason::Entitlement => self.entitlement,
        }
    }

    /// Denials by caps, lists and blocks: never a shortage on their own.
    pub fn not_shortage(&self) -> u64 {
        self.total() - self.full
    }

    pub fn total(&self) -> u64 {
        DenialReason::ALL.into_iter().map(|r| self.get(r)).sum()
    }

    fn slot(&mut self, reason: DenialReason) -> &mut u64 {
        match reason {
            DenialReason::Full => &mut self.full,
            DenialReason::Holder => &mut self.holder,
            DenialReason::Group => &mut self.group,
            DenialReason::Borrow => &mut self.borrow,
            DenialReason::NotAllowed => &mut self.not_allowed,
            DenialReason::Blocked => &mut self.blocked,
            DenialReason::Version => &mut self.version,
            DenialReason::Entitlement => &mut self.entitlement,
        }
    }
}

/// One recorded denial (`GET /v1/admin/denials`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DenialView {
    /// The instant of the denial, to the millisecond.
    pub at: Timestamp,
    pub license_id: String,
    pub holder: String,
    pub fingerprint: Option<String>,
    pub reason: DenialReason,
    /// A `full` denial whose holder was not granted a seat of the license
    /// within the tolerance after it; always `false` for other reasons.
    #[serde(rename = "true")]
    pub is_true: bool,
}

/// `GET /v1/admin/denials`: newest first; `next` is the `after` of the
/// following page (`None` on the last).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DenialsResponse {
    pub denials: Vec<DenialView>,
    pub next: Option<String>,
}

/// One seat count of the what-if replay.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WhatIfPoint {
    pub seats: u32,
    pub denials: u64,
    /// Percent of the replayed requests denied, 0..=100, not rounded.
    pub denial_rate: f64,
    pub peak: u32,
    /// Seconds with all `seats` in use.
    pub full_s: f64,
    /// Seat time used ÷ (`seats` × covered span), 0..=1.
    pub utilization: f64,
}

/// The smallest seat count of the curve whose denial rate meets the target.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WhatIfRecommendation {
    pub seats: u32,
    pub denial_rate: f64,
}

/// `GET /v1/admin/usage/what-if`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WhatIfResponse {
    pub license_id: String,
    pub from: Timestamp,
    pub covered_from: Timestamp,
    pub to: Timestamp,
    pub seats_now: u32,
    /// Every replayed request, the returns an idle cut adds included.
    pub requests: u64,
    /// Recorded sessions overlapping the covered range.
    pub sessions: u64,
    /// True denials in the covered range (every retry counted).
    pub true_denials: u64,
    /// The true denials grouped per holder and fingerprint into episodes
    /// (a denial at most the tolerance after the previous one joins it):
    /// each is one replayed request.
    #[serde(default)]
    pub episodes: u64,
    /// Sessions the idle timeout cut.
    pub idle_cut: u64,
    pub curve: Vec<WhatIfPoint>,
    pub recommended: Option<WhatIfRecommendation>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasons_round_trip_by_their_wire_names() {
        for r in DenialReason::ALL {
            assert_eq!(DenialReason::parse(r.as_str()), Some(r));
            assert_eq!(
                serde_json::to_string(&r).unwrap(),
                format!("\"{}\"", r.as_str())
            );
        }
        assert_eq!(DenialReason::parse("Full"), None);
    }

    #[test]
    fn every_reason_is_a_key_and_caps_are_not_shortage() {
        let mut by = DenialsByReason::default();
        by.add(DenialReason::Full, 2);
        by.add(DenialReason::Holder, 3);
        by.add(DenialReason::Blocked, 1);
        by.add(DenialReason::Entitlement, 2);
        assert_eq!((by.total(), by.not_shortage()), (8, 6));
        let json = serde_json::to_value(by).unwrap();
        assert_eq!(json.as_object().unwrap().len(), 8);
        assert_eq!(
            (json["version"].as_u64(), json["entitlement"].as_u64()),
            (Some(0), Some(2))
        );
        let view = DenialView {
            at: Timestamp::from_millis(1),
            license_id: "l".into(),
            holder: "h".into(),
            fingerprint: None,
            reason: DenialReason::Full,
            is_true: true,
        };
        assert_eq!(serde_json::to_value(&view).unwrap()["true"], true);
    }
}
