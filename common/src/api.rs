//! JSON wire types of the HTTP contract (`assets/openapi.yaml`).
//!
//! Field names here *are* the contract: clients in other languages, scripts
//! and outside tests rely on them, so rename nothing without changing the
//! OpenAPI document too.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::time::Timestamp;

pub use crate::alerts::{
    AlertView, AlertsResponse, DeliveriesResponse, DeliveryStatus, DeliveryType, DeliveryView,
    WebhookView, WebhooksResponse,
};
pub use crate::entitlement_views::{
    EntitledBorrow, EntitledLicense, EntitlementView, EntitlementsResponse, LicenseEntitlements,
};
pub use crate::events::{Event, EventKind, EventsResponse};
pub use crate::rightsizing::{
    DenialReason, DenialView, DenialsByReason, DenialsResponse, WhatIfPoint, WhatIfRecommendation,
    WhatIfResponse,
};

/// A lease on one seat, as returned by checkout and heartbeat.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lease {
    pub license_id: String,
    /// Server-assigned, 128-bit random, lowercase hex. A capability: together
    /// with the license key it lets its holder renew or release the seat.
    pub seat_id: String,
    pub holder: String,
    pub fingerprint: Option<String>,
    pub issued_at: Timestamp,
    pub expires_at: Timestamp,
    /// A seat granted beyond the license's `seats`, from its `overage`
    /// allowance. Absent (false) from servers that predate it.
    #[serde(default)]
    pub overage: bool,
    /// A seat borrowed for offline use: not renewed by heartbeats.
    #[serde(default)]
    pub borrowed: bool,
    /// Granted while the license's entitlement is in its grace period
    /// after its term (only from a license with a vendor).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub grace: bool,
    /// A license with a vendor: when its entitled seats next drop (`None`:
    /// never). Absent for a license without a vendor.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entitlement_ends_at: Option<Option<Timestamp>>,
    /// Compact JWS (EdDSA) over the lease's claims; see [`crate::token`].
    pub token: String,
}

/// `POST /v1/licenses/{license}/seats` body.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckoutRequest {
    pub holder: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fingerprint: Option<String>,
    /// Borrow the seat for this many seconds, for offline use: no
    /// heartbeats until then (needs `[license.borrow]` and a fingerprint).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub borrow_s: Option<u64>,
    /// The application's version (`"2026.2"`): required by a license whose
    /// entitlement names a version range, ignored by any other.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
}

/// Every error response: `{"error": "<code>", "message": "<sentence>"}`, plus
/// `seats`, `live` and `reserved` on `no_seats_available`, and `limit`,
/// `max` (and `group`) on `limit_reached`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorBody {
    pub error: String,
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seats: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub live: Option<u32>,
    /// Seats held back for groups the requester is not in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reserved: Option<u32>,
    /// Which cap: `holder` or `group` (`borrow` for borrowing).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    /// Why a `410 seat_lost` seat is gone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<SeatLostReason>,
    /// The range the entitlement covers, on `version_not_entitled`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub versions: Option<String>,
}

/// Why a heartbeat was told `410 seat_lost`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SeatLostReason {
    /// An admin revoked it.
    Revoked,
    /// It was not renewed in time (or the server does not know it).
    Lapsed,
    /// Its client released it.
    Released,
    /// Its user was idle for the license's `idle_timeout`.
    Idle,
    /// The license's entitlement ended or shrank below the live seats, and
    /// this seat is among the newest over the count.
    Expired,
}

/// A heartbeat's optional body: whole seconds since the user last used the
/// application, on the client's own clock. Any other body is ignored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct HeartbeatRequest {
    pub idle_s: u64,
}

/// The largest `idle_s` a heartbeat may report: a year.
pub const MAX_IDLE_S: u64 = 31_536_000;

/// The `error` codes of the contract.
pub mod code {
    pub const UNAUTHORIZED: &str = "unauthorized";
    pub const UNKNOWN_LICENSE: &str = "unknown_license";
    pub const NO_SEATS_AVAILABLE: &str = "no_seats_available";
    pub const INVALID_REQUEST: &str = "invalid_request";
    pub const SEAT_LOST: &str = "seat_lost";
    pub const UNKNOWN_SEAT: &str = "unknown_seat";
    pub const BLOCKED: &str = "blocked";
    /// `403`: no entitlement of the license's vendor grants it now.
    pub const NOT_ENTITLED: &str = "not_entitled";
    /// `403`: the checkout's `version` is absent or outside the range the
    /// license's entitlement covers.
    pub const VERSION_NOT_ENTITLED: &str = "version_not_entitled";
    pub const PAYLOAD_TOO_LARGE: &str = "payload_too_large";
    pub const NOT_FOUND: &str = "not_found";
    pub const METHOD_NOT_ALLOWED: &str = "method_not_allowed";
    pub const UNSUPPORTED_MEDIA_TYPE: &str = "unsupported_media_type";
    pub const UNAVAILABLE: &str = "unavailable";
    pub const INTERNAL: &str = "internal";
    /// Authenticated, but the role may not do this (a viewer's `DELETE`).
    pub const FORBIDDEN: &str = "forbidden";
    /// A state change authenticated by the sign-in cookie without a
    /// matching `X-CSRF-Token` or from another origin.
    pub const CSRF_FAILED: &str = "csrf_failed";
    /// Too many failed sign-ins (or wrong bearer tokens) from this
    /// address; see `Retry-After`.
    pub const RATE_LIMITED: &str = "rate_limited";
    /// The request body did not arrive within the server's body timeout.
    pub const REQUEST_TIMEOUT: &str = "request_timeout";
    /// The license's `deny` matches the requester, or its `allow` does not.
    pub const NOT_ALLOWED: &str = "not_allowed";
    /// The requester's holder or group is at its cap; see `limit`, `max`.
    pub const LIMIT_REACHED: &str = "limit_reached";
    /// A borrowed seat is not renewed, and an admin frees one only with
    /// `"force": true`.
    pub const BORROWED: &str = "borrowed";
}

/// One pool in `GET /v1/admin/licenses`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LicenseSummary {
    pub id: String,
    pub seats: u32,
    pub live: u32,
    /// `?wait=` checkouts standing in this license's line now. Absent in
    /// answers of servers that predate it.
    #[serde(default)]
    pub waiting: u32,
    pub ttl_s: f64,
    pub skew_s: f64,
    pub reap_grace_s: f64,
    /// Seats that may be granted beyond `seats`.
    #[serde(default)]
    pub overage: u32,
    /// How long a released seat keeps counting; `null`: no linger.
    #[serde(default)]
    pub linger_s: Option<f64>,
    #[serde(default)]
    pub max_per_holder: Option<u32>,
    /// A seat idle this long is reclaimed; `null`: never.
    #[serde(default)]
    pub idle_timeout_s: Option<f64>,
    #[serde(default)]
    pub borrow: Option<BorrowSummary>,
    /// Of `live`: seats borrowed, and seats released but lingering.
    #[serde(default)]
    pub borrowed: u32,
    #[serde(default)]
    pub lingering: u32,
    /// The groups' unused reservations, summed.
    #[serde(default)]
    pub reserved: u32,
    #[serde(default)]
    pub groups: Vec<GroupSummary>,
    /// Names of this license's alerts that are firing now.
    #[serde(default)]
    pub alerts_firing: Vec<String>,
    /// The `[[vendor]]` whose entitlements grant the seats; `null`: the
    /// licenses file's `seats` are the seats (and the fields below are
    /// null or false).
    #[serde(default)]
    pub vendor: Option<String>,
    /// The customer the newest entitlement in force names (`sub`).
    #[serde(default)]
    pub customer: Option<String>,
    /// The seats the entitlements in force grant, before the licenses
    /// file narrows them (`seats` is after).
    #[serde(default)]
    pub entitled_seats: Option<u32>,
    /// The next instant at which the entitled seats drop, counting every
    /// verified file (a renewal already installed moves it); null if they
    /// never drop.
    #[serde(default)]
    pub entitlement_ends_at: Option<Timestamp>,
    #[serde(default)]
    pub in_grace: bool,
    /// The version range the newest entitlement in force covers.
    #[serde(default)]
    pub versions: Option<String>,
}

/// A license's `[license.borrow]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BorrowSummary {
    pub max_s: f64,
    pub seats: u32,
}

/// One `[[license.group]]` and the seats that count for it now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupSummary {
    pub name: String,
    pub reserve: u32,
    pub max: Option<u32>,
    pub live: u32,
}

/// Seconds as a JSON number (fractional only for sub-second policies).
pub fn seconds(d: Duration) -> f64 {
    d.as_secs_f64()
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LicensesResponse {
    pub now: Timestamp,
    pub licenses: Vec<LicenseSummary>,
}

/// `live`, `lingering` (released, still counting), `borrowed`, or `lapsed`
/// (past expiry + skew, not yet reaped).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SeatState {
    Live,
    Lingering,
    Borrowed,
    Lapsed,
}

/// One seat in `GET /v1/admin/seats`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SeatView {
    pub license_id: String,
    pub seat_id: String,
    pub holder: String,
    pub fingerprint: Option<String>,
    pub checked_out_at: Timestamp,
    pub issued_at: Timestamp,
    pub expires_at: Timestamp,
    pub state: SeatState,
    /// The group the seat counts for.
    #[serde(default)]
    pub group: Option<String>,
    /// Seconds its user has been idle as of now, from its client's last
    /// report; `null` when active or never reported.
    #[serde(default)]
    pub idle_s: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SeatsResponse {
    pub now: Timestamp,
    pub seats: Vec<SeatView>,
}

/// `GET /v1/admin/seats`: [`SeatsResponse`] plus the paging fields. Clients
/// that read only `now` and `seats` may keep using [`SeatsResponse`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SeatsPage {
    pub now: Timestamp,
    pub seats: Vec<SeatView>,
    /// Seats matching the filters (`license`, `q`), on every page.
    pub total: u64,
    /// Opaque cursor for the next page (`after=`), `null` on the last one.
    pub next: Option<String>,
}

/// `POST /ui/login` as JSON (a form post sends `token=` instead).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LoginRequest {
    pub token: String,
}

/// `GET /ui/session`: who the sign-in cookie signs in (schema `UiSession`:
/// the path and the schema keep the older word).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UiSignIn {
    /// `admin` or `viewer`.
    pub role: String,
    /// Send as `X-CSRF-Token` on every state change made with the cookie.
    pub csrf_token: String,
    /// When the sign-in ends unless used again (idle timeout), or its
    /// absolute end, whichever is earlier.
    pub expires_at: Timestamp,
}

/// Optional body of `DELETE /v1/admin/seats/{seat_id}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RevokeRequest {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Refuse re-checkout by the same holder + fingerprint for this long.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub block_s: Option<u64>,
    /// Free a borrowed seat too (its token stays valid offline until its
    /// expiry, so the pool may be over-used until then).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub force: bool,
}

/// `GET /v1/admin/usage`: one license's use over a time range, in buckets.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UsageResponse {
    pub license_id: String,
    pub from: Timestamp,
    pub to: Timestamp,
    pub step_s: f64,
    pub points: Vec<UsagePoint>,
    pub summary: UsageSummary,
}

/// One bucket `[t, t + step)` (the last one clipped at `to`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UsagePoint {
    pub t: Timestamp,
    /// The pool size in force at the end of the bucket.
    pub seats: u32,
    /// The most sessions open at any one instant of the bucket (exact).
    pub peak: u32,
    /// Seconds of the bucket with more sessions open than the pool size in
    /// force (overage, or a pool shrunk below the seats still held), exact.
    pub over_s: f64,
    /// Sessions started in the bucket.
    pub checkouts: u64,
    /// Counted denials in the bucket (a `?wait=` once, when it gives
    /// up), exactly.
    pub denials: u64,
    /// `denials` by reason.
    #[serde(default)]
    pub denials_by_reason: DenialsByReason,
    /// `full` denials not followed by a grant to the same holder within
    /// the tolerance.
    #[serde(default)]
    pub true_denials: u64,
}

/// The whole range at once.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UsageSummary {
    /// The pool size in force at `to`.
    pub seats: u32,
    pub peak: u32,
    /// The first instant at which `peak` sessions were open (`None` when
    /// nothing was ever open).
    pub peak_at: Option<Timestamp>,
    /// Seconds of the range during which every seat was in use (at least
    /// as many sessions open as the pool size, on a pool of at least one
    /// seat); time over the pool counts here too.
    pub full_s: f64,
    /// Seconds of the range with more sessions open than the pool size in
    /// force: seats granted as overage, or held on a pool shrunk below
    /// them (a pool of 0 seats included).
    pub over_s: f64,
    pub denials: u64,
    #[serde(default)]
    pub denials_by_reason: DenialsByReason,
    #[serde(default)]
    pub true_denials: u64,
    /// Distinct holders with at least one true denial in the range.
    #[serde(default)]
    pub denied_holders: u64,
    /// Session time inside the range, in hours.
    pub seat_hours: f64,
    /// The part of `seat_hours` on seats borrowed for offline use.
    #[serde(default)]
    pub borrowed_hours: f64,
    /// Seat-hours inside recorded idle periods (of at least 60 s).
    #[serde(default)]
    pub idle_hours: f64,
    /// Seat time used ÷ seat time available (pool size over time), 0..=1.
    pub utilization: f64,
    /// Distinct holders with a session in the range.
    pub holders: u64,
    /// Where the server's history covers the range from: the later of
    /// `from` and the license's first recorded pool size (the server's
    /// first start, or when the license was added); `to` when nothing is
    /// recorded. A verdict or a share of "the range" is over
    /// `[covered_from, to)`, and so is `utilization`. The server always
    /// sends it; `None` only from a server older than the field, whose
    /// answer is then judged over the whole range.
    #[serde(default)]
    pub covered_from: Option<Timestamp>,
}

/// How a session ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SessionEnd {
    Release,
    Revoke,
    /// The predicate stopped counting it: `ended_at` is `expires_at + skew`.
    Lapse,
    /// Reclaimed for idleness: `ended_at` is when its user had been idle
    /// for the license's `idle_timeout`.
    Idle,
}

impl SessionEnd {
    pub fn as_str(self) -> &'static str {
        match self {
            SessionEnd::Release => "release",
            SessionEnd::Revoke => "revoke",
            SessionEnd::Lapse => "lapse",
            SessionEnd::Idle => "idle",
        }
    }

    pub fn parse(s: &str) -> Option<SessionEnd> {
        match s {
            "release" => Some(SessionEnd::Release),
            "revoke" => Some(SessionEnd::Revoke),
            "lapse" => Some(SessionEnd::Lapse),
            "idle" => Some(SessionEnd::Idle),
            _ => None,
        }
    }
}

/// One seat from checkout to its end (`ended_at`/`end` null while open).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionView {
    pub seat_id: String,
    pub license_id: String,
    pub holder: String,
    pub fingerprint: Option<String>,
    pub started_at: Timestamp,
    pub ended_at: Option<Timestamp>,
    pub end: Option<SessionEnd>,
    /// Its length; an open session's time so far.
    pub duration_s: f64,
    /// The group the seat counted for.
    #[serde(default)]
    pub group: Option<String>,
    /// The seat was borrowed for offline use when it ended (or is now).
    #[serde(default)]
    pub borrowed: bool,
    /// Seconds inside its recorded idle periods (each at least 60 s).
    #[serde(default)]
    pub idle_s: f64,
}

/// `GET /v1/admin/sessions` (JSON): newest first, keyset-paged.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionsResponse {
    pub sessions: Vec<SessionView>,
    /// Pass as `after` for the next page; `None` on the last one.
    pub next: Option<String>,
}

/// `GET /healthz`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Health {
    pub status: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_kind_names_round_trip() {
        for k in EventKind::ALL {
            assert_eq!(EventKind::parse(k.as_str()), Some(k));
            assert_eq!(serde_json::to_value(k).unwrap(), k.as_str());
        }
        assert_eq!(EventKind::parse("nope"), None);
    }

    #[test]
    fn lease_field_names_are_the_contract() {
        let lease = Lease {
            license_id: "l".into(),
            seat_id: "s".into(),
            holder: "h".into(),
            fingerprint: None,
            issued_at: Timestamp::from_millis(0),
            expires_at: Timestamp::from_millis(60_000),
            overage: false,
            borrowed: false,
            grace: false,
            entitlement_ends_at: None,
            token: "t".into(),
        };
        let v = serde_json::to_value(&lease).unwrap();
        let mut keys: Vec<_> = v.as_object().unwrap().keys().cloned().collect();
        keys.sort();
        assert_eq!(
            keys,
            [
                "borrowed",
                "expires_at",
                "fingerprint",
                "holder",
                "issued_at",
                "license_id",
                "overage",
                "seat_id",
                "token"
            ]
        );
        assert!(v["fingerprint"].is_null(), "fingerprint is present as null");
        assert_eq!(
            v["overage"], false,
            "overage and borrowed are always present"
        );
        assert_eq!(v["borrowed"], false);
        assert_eq!(v["expires_at"], "1970-01-01T00:01:00.000Z");
    }
}
