//! Wire types of alerts and webhooks: the deliveries a webhook receives,
//! and what admins see of webhooks, deliveries and firing alerts
//! (`GET /v1/admin/webhooks`, `/v1/admin/webhooks/deliveries`,
//! `/v1/admin/alerts`). Re-exported from [`crate::api`]; the field names
//! are the contract.

use serde::{Deserialize, Serialize};

use crate::events::{Event, EventKind};
use crate::time::Timestamp;

/// What a delivery reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum DeliveryType {
    #[serde(rename = "alert.firing")]
    AlertFiring,
    #[serde(rename = "alert.resolved")]
    AlertResolved,
    /// An event of a kind the webhook forwards.
    #[serde(rename = "event")]
    Event,
    /// Queued by `POST /v1/admin/webhooks/{name}/test`.
    #[serde(rename = "test")]
    Test,
}

impl DeliveryType {
    pub const ALL: [DeliveryType; 4] = [
        DeliveryType::AlertFiring,
        DeliveryType::AlertResolved,
        DeliveryType::Event,
        DeliveryType::Test,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            DeliveryType::AlertFiring => "alert.firing",
            DeliveryType::AlertResolved => "alert.resolved",
            DeliveryType::Event => "event",
            DeliveryType::Test => "test",
        }
    }

    pub fn parse(s: &str) -> Option<DeliveryType> {
        DeliveryType::ALL.into_iter().find(|t| t.as_str() == s)
    }
}

/// Where a delivery stands. A failed attempt leaves it `pending` (with
/// `last_error`) until it succeeds or its 24 hours of retries run out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DeliveryStatus {
    Pending,
    Delivered,
    Failed,
}

impl DeliveryStatus {
    pub const ALL: [DeliveryStatus; 3] = [
        DeliveryStatus::Pending,
        DeliveryStatus::Delivered,
        DeliveryStatus::Failed,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            DeliveryStatus::Pending => "pending",
            DeliveryStatus::Delivered => "delivered",
            DeliveryStatus::Failed => "failed",
        }
    }

    pub fn parse(s: &str) -> Option<DeliveryStatus> {
        DeliveryStatus::ALL.into_iter().find(|t| t.as_str() == s)
    }
}

/// An alert's settings as a delivery carries them: `name`, `when`, and the
/// settings of its kind (`for`; `percent`; `count` and `within`; `before`), durations
/// as in the licenses file (`"5m"`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AlertSettings {
    pub name: String,
    /// `full`, `usage`, `denials` or `expiry`.
    pub when: String,
    #[serde(rename = "for", default, skip_serializing_if = "Option::is_none")]
    pub for_: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub percent: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub within: Option<String>,
    /// `expiry`: how long before the entitled seats drop it fires.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub before: Option<String>,
}

/// The body of a delivery of format `json` (format `slack` sends only
/// `{"text": …}`, the same sentence).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeliveryBody {
    /// The delivery's id: also its `Leasehold-Delivery` header, the same on
    /// every retry.
    pub id: String,
    #[serde(rename = "type")]
    pub kind: DeliveryType,
    pub at: Timestamp,
    pub license_id: Option<String>,
    pub alert: Option<AlertSettings>,
    pub event: Option<Event>,
    /// One human sentence; an alert's starts with its name and state.
    pub text: String,
}

/// One `[[webhook]]` in `GET /v1/admin/webhooks` (never its secret).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WebhookView {
    pub name: String,
    /// Without any userinfo.
    pub url: String,
    /// `json` or `slack`.
    pub format: String,
    /// The event kinds it forwards as they happen.
    #[serde(default)]
    pub events: Vec<EventKind>,
    /// Its stored deliveries by status, tests included.
    pub pending: u64,
    pub delivered: u64,
    pub failed: u64,
    pub last_success_at: Option<Timestamp>,
    /// The last failed attempt's status or error, if none succeeded since.
    pub last_error: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WebhooksResponse {
    pub webhooks: Vec<WebhookView>,
}

/// One delivery in `GET /v1/admin/webhooks/deliveries`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeliveryView {
    pub id: String,
    pub webhook: String,
    #[serde(rename = "type")]
    pub kind: DeliveryType,
    pub status: DeliveryStatus,
    pub attempts: u32,
    pub created_at: Timestamp,
    pub last_attempt_at: Option<Timestamp>,
    pub last_error: Option<String>,
    /// When a pending delivery is tried next.
    #[serde(default)]
    pub next_attempt_at: Option<Timestamp>,
    #[serde(default)]
    pub license_id: Option<String>,
}

/// Newest first; `next` is the `after` of the next page, `null` at the end.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeliveriesResponse {
    pub deliveries: Vec<DeliveryView>,
    pub next: Option<String>,
}

/// One `[[license.alert]]` and its state, in `GET /v1/admin/alerts`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AlertView {
    pub license_id: String,
    pub alert: AlertSettings,
    pub firing: bool,
    /// Since when it fires (`firing`), or since when its condition has
    /// held without firing yet (waiting out `for`).
    pub since: Option<Timestamp>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AlertsResponse {
    pub alerts: Vec<AlertView>,
}
