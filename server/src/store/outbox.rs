//! The webhook outbox, the same on every store: what a queued delivery
//! holds, the exact body it sends (rendered once, so every retry sends the
//! same bytes), how long a failed attempt waits, and the alert states that
//! make a transition happen once.
//!
//! A delivery is written by the rules in the transaction of the event or
//! alert transition that causes it (`rules/alerts.rs`); the delivery worker
//! (`crate::webhooks`) claims due ones through the writer, sends them, and
//! records each attempt through the writer again.
//!
//! Each store's half: `sqlite/outbox.rs`; `pg/outbox/` (the writer's
//! statements in `mod.rs`, the read pool's in `read.rs`), with the batch's
//! kept deliveries (`pg/outbox_batch.rs`) and prepared statements
//! (`pg/outbox_statements.rs`) beside it, since the batch state and the
//! batch's statements hold them and the outbox uses both (inside, that
//! would be an import cycle).

use std::time::Duration;

use leasehold_common::Timestamp;
use leasehold_common::alerts::{AlertSettings, DeliveryBody, DeliveryStatus, DeliveryType};
use leasehold_common::api::Event;
use leasehold_common::policy::WebhookFormat;

/// The first retry waits this long; each next one twice as long.
pub const FIRST_RETRY: Duration = Duration::from_secs(1);
/// The longest wait between attempts.
pub const MAX_RETRY: Duration = Duration::from_secs(5 * 60);
/// A delivery not delivered this long after it was queued is `failed`.
pub const GIVE_UP_AFTER: Duration = Duration::from_secs(24 * 3600);
/// How long a claim keeps other workers (other replicas) off a delivery:
/// longer than an attempt may take (10 s), so only a worker that died
/// leaves one behind, and it is tried again this long after.
pub const CLAIM_FOR: Duration = Duration::from_secs(30);
/// Delivered and failed deliveries are kept this long, then pruned.
pub const KEEP_FINISHED: Duration = Duration::from_secs(7 * 24 * 3600);

/// A delivery as the rules queue it, body rendered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewDelivery {
    /// 128 random bits, lowercase hex: the body's `id` and the
    /// `Leasehold-Delivery` header.
    pub id: String,
    pub webhook: String,
    pub kind: DeliveryType,
    pub license_id: Option<String>,
    pub created_at: Timestamp,
    /// What is POSTed, byte for byte, on every attempt.
    pub body: String,
}

/// What a delivery says before its body is rendered; the event, if any,
/// may be numbered only at commit (PostgreSQL), so the store renders the
/// body ([`Content::render`]) once the event's id is known.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Content {
    pub id: String,
    pub webhook: String,
    pub format: WebhookFormat,
    pub kind: DeliveryType,
    pub at: Timestamp,
    pub license_id: Option<String>,
    pub alert: Option<AlertSettings>,
    pub event: Option<Event>,
    /// Where `event` is among the events this transaction appended,
    /// counted from the last (0: the last one), for a store that numbers
    /// events only at commit.
    pub event_from_last: Option<usize>,
    pub text: String,
}

impl Content {
    /// The delivery, with the body in the webhook's format. `event_id`:
    /// the event's id, where the store knows it only now.
    pub fn render(self, event_id: Option<i64>) -> NewDelivery {
        let body = match self.format {
            WebhookFormat::Slack => serde_json::json!({ "text": self.text }).to_string(),
            WebhookFormat::Json => {
                let mut event = self.event;
                if let (Some(e), Some(id)) = (event.as_mut(), event_id) {
                    e.id = id;
                }
                let body = DeliveryBody {
                    id: self.id.clone(),
                    kind: self.kind,
                    at: self.at,
                    license_id: self.license_id.clone(),
                    alert: self.alert,
                    event,
                    text: self.text,
                };
                // A struct of strings, numbers and options always serializes.
                serde_json::to_string(&body).unwrap_or_default()
            }
        };
        NewDelivery {
            id: self.id,
            webhook: self.webhook,
            kind: self.kind,
            license_id: self.license_id,
            created_at: self.at,
            body,
        }
    }
}

/// A delivery claimed for one attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DueDelivery {
    pub id: String,
    pub webhook: String,
    pub body: String,
    /// Attempts made before this one.
    pub attempts: u32,
    pub created_at: Timestamp,
}

/// What one attempt's result does to its delivery, decided by the rules
/// ([`after_attempt`]) and stored as told.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttemptRecord {
    pub id: String,
    pub status: DeliveryStatus,
    /// Attempts made, this one included.
    pub attempts: u32,
    pub attempted_at: Timestamp,
    /// When a `pending` delivery is tried next.
    pub next_attempt_at: Timestamp,
    /// `None` after a success.
    pub error: Option<String>,
}

/// The delivery's next state after an attempt at `now`: delivered; tried
/// again after 1 s, 2 s, 4 s … at most 5 min; or failed once the next try
/// would come more than 24 h after it was queued.
pub fn after_attempt(
    due: &DueDelivery,
    result: Result<(), String>,
    now: Timestamp,
) -> AttemptRecord {
    let attempts = due.attempts.saturating_add(1);
    match result {
        Ok(()) => AttemptRecord {
            id: due.id.clone(),
            status: DeliveryStatus::Delivered,
            attempts,
            attempted_at: now,
            next_attempt_at: now,
            error: None,
        },
        Err(error) => {
            let next = now.saturating_add(retry_delay(attempts));
            let give_up = due.created_at.saturating_add(GIVE_UP_AFTER);
            let status = if next > give_up {
                DeliveryStatus::Failed
            } else {
                DeliveryStatus::Pending
            };
            AttemptRecord {
                id: due.id.clone(),
                status,
                attempts,
                attempted_at: now,
                next_attempt_at: next,
                error: Some(error),
            }
        }
    }
}

/// The wait after the `attempts`-th failed attempt.
pub fn retry_delay(attempts: u32) -> Duration {
    let doublings = attempts.saturating_sub(1).min(20);
    (FIRST_RETRY * 2u32.pow(doublings)).min(MAX_RETRY)
}

/// One alert's stored state (by name, unique in the file).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AlertState {
    pub alert: String,
    pub license_id: String,
    /// Since when its condition has held (unbroken), if it holds.
    pub holding_since: Option<Timestamp>,
    /// Since when it fires, if it fires.
    pub firing_since: Option<Timestamp>,
}

/// A webhook's deliveries, for `GET /v1/admin/webhooks` and `/metrics`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WebhookStats {
    pub webhook: String,
    pub pending: u64,
    pub delivered: u64,
    pub failed: u64,
    pub last_success_at: Option<Timestamp>,
    /// The newest attempt's error, if it failed.
    pub last_error: Option<String>,
}

/// `GET /v1/admin/webhooks/deliveries`: newest first, after a cursor.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeliveriesQuery {
    pub webhook: Option<String>,
    pub status: Option<DeliveryStatus>,
    /// The `seq` of the last delivery of the previous page.
    pub after: Option<i64>,
    pub limit: usize,
}

/// One delivery as listed, with the store's sequence number (the cursor).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeliveryRow {
    pub seq: i64,
    pub view: leasehold_common::alerts::DeliveryView,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn due(attempts: u32, created_at: i64) -> DueDelivery {
        DueDelivery {
            id: "d".into(),
            webhook: "ops".into(),
            body: "{}".into(),
            attempts,
            created_at: Timestamp::from_millis(created_at),
        }
    }

    #[test]
    fn retries_double_from_one_second_to_five_minutes() {
        let waits: Vec<u64> = (1..=11).map(|n| retry_delay(n).as_secs()).collect();
        assert_eq!(waits, [1, 2, 4, 8, 16, 32, 64, 128, 256, 300, 300]);
        assert_eq!(retry_delay(u32::MAX), MAX_RETRY);
    }

    #[test]
    fn a_failure_stays_pending_until_the_next_try_would_pass_a_day() {
        let now = Timestamp::from_millis(1_000);
        let r = after_attempt(&due(0, 0), Err("500".into()), now);
        assert_eq!(r.status, DeliveryStatus::Pending);
        assert_eq!(r.attempts, 1);
        assert_eq!(r.next_attempt_at, Timestamp::from_millis(2_000));
        assert_eq!(r.error.as_deref(), Some("500"));

        let day = GIVE_UP_AFTER.as_millis() as i64;
        let late = Timestamp::from_millis(day - 300_000);
        let r = after_attempt(&due(30, 0), Err("timeout".into()), late);
        assert_eq!(
            r.status,
            DeliveryStatus::Pending,
            "exactly at the day's end"
        );
        let later = Timestamp::from_millis(day - 299_999);
        let r = after_attempt(&due(30, 0), Err("timeout".into()), later);
        assert_eq!(r.status, DeliveryStatus::Failed);
    }

    #[test]
    fn a_success_is_delivered_whatever_came_before() {
        let r = after_attempt(&due(7, 0), Ok(()), Timestamp::from_millis(5));
        assert_eq!(r.status, DeliveryStatus::Delivered);
        assert_eq!(r.attempts, 8);
        assert_eq!(r.error, None);
    }
}
