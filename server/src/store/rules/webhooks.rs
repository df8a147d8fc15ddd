//! Deliveries, as the rules queue them: an event of a kind a webhook
//! forwards, an alert's transition, a test. Each is queued in the same
//! transaction as what caused it (the outbox), so a crash between the two
//! cannot happen; the delivery worker claims and attempts them through the
//! writer ([`Rules::claim_deliveries`], [`Rules::record_attempt`]).

use leasehold_common::alerts::{AlertSettings, DeliveryStatus, DeliveryType};
use leasehold_common::api::Event;
use leasehold_common::policy::Webhook;

use super::{LeaseTx, Result, Rules, new_seat_id};
use crate::store::StoreError;
use crate::store::outbox::{
    AttemptRecord, CLAIM_FOR, Content, DueDelivery, KEEP_FINISHED, after_attempt,
};

/// What an alert transition tells its webhooks.
pub(super) struct Transition<'e> {
    pub kind: DeliveryType,
    pub license_id: &'e str,
    pub alert: AlertSettings,
    pub webhooks: &'e [String],
    pub text: String,
}

/// The sentence a forwarded event's delivery carries.
fn event_text(e: &Event) -> String {
    let mut text = e.kind.as_str().to_string();
    if let Some(license) = &e.license_id {
        text.push_str(&format!(" on {license}"));
    }
    let who = [e.holder.as_deref(), e.detail.as_deref()]
        .into_iter()
        .flatten()
        .collect::<Vec<_>>()
        .join(": ");
    if !who.is_empty() {
        text.push_str(&format!(" — {who}"));
    }
    text
}

impl<T: LeaseTx> Rules<'_, T> {
    /// Queue a delivery of each just-appended event to every webhook that
    /// forwards its kind. `events` are the last the transaction appended,
    /// in order. A file without webhooks costs one check.
    pub(super) fn forward_events(&mut self, events: &[Event]) -> Result<()> {
        let webhooks = self.licenses.webhooks();
        if webhooks.is_empty() {
            return Ok(());
        }
        let mut queued = Vec::new();
        for (i, e) in events.iter().enumerate() {
            for w in webhooks.iter().filter(|w| w.events.contains(&e.kind)) {
                queued.push(Content {
                    id: new_seat_id(),
                    webhook: w.name.clone(),
                    format: w.format,
                    kind: DeliveryType::Event,
                    at: e.at,
                    license_id: e.license_id.clone(),
                    alert: None,
                    event: Some(e.clone()),
                    event_from_last: Some(events.len() - 1 - i),
                    text: event_text(e),
                });
            }
        }
        if queued.is_empty() {
            return Ok(());
        }
        self.tx.queue_deliveries(queued)
    }

    /// Queue an alert transition's delivery to each of its webhooks still
    /// in the file.
    pub(super) fn queue_transition(&mut self, t: Transition<'_>) -> Result<()> {
        let queued: Vec<Content> = t
            .webhooks
            .iter()
            .filter_map(|name| self.licenses.webhook(name))
            .map(|w: &Webhook| Content {
                id: new_seat_id(),
                webhook: w.name.clone(),
                format: w.format,
                kind: t.kind,
                at: self.now,
                license_id: Some(t.license_id.to_string()),
                alert: Some(t.alert.clone()),
                event: None,
                event_from_last: None,
                text: t.text.clone(),
            })
            .collect();
        if queued.is_empty() {
            return Ok(());
        }
        self.tx.queue_deliveries(queued)
    }

    /// `POST /v1/admin/webhooks/{name}/test`: an ordinary delivery of type
    /// `test`. Its id.
    pub fn queue_test(&mut self, webhook: &str) -> Result<String> {
        let Some(w) = self.licenses.webhook(webhook) else {
            return Err(StoreError::UnknownWebhook(webhook.to_string()));
        };
        let id = new_seat_id();
        let content = Content {
            id: id.clone(),
            webhook: w.name.clone(),
            format: w.format,
            kind: DeliveryType::Test,
            at: self.now,
            license_id: None,
            alert: None,
            event: None,
            event_from_last: None,
            text: format!("Test delivery from Leasehold to webhook {}", w.name),
        };
        self.tx.queue_deliveries(vec![content])?;
        Ok(id)
    }

    /// Claim up to `limit` due deliveries for one attempt each.
    pub fn claim_deliveries(&mut self, limit: usize) -> Result<Vec<DueDelivery>> {
        let until = self.now.saturating_add(CLAIM_FOR);
        self.tx.claim_deliveries(self.now, until, limit)
    }

    /// Store an attempt's outcome by the retry schedule. A delivery whose
    /// webhook left the file fails at once: nobody would receive it.
    pub fn record_attempt(
        &mut self,
        due: &DueDelivery,
        result: std::result::Result<(), String>,
    ) -> Result<AttemptRecord> {
        let mut record = after_attempt(due, result, self.now);
        if self.licenses.webhook(&due.webhook).is_none() {
            record.status = DeliveryStatus::Failed;
            record.error = Some(format!(
                "webhook {:?} is no longer in the licenses file",
                due.webhook
            ));
        }
        self.tx.record_attempt(&record)?;
        Ok(record)
    }

    /// Delete finished deliveries older than [`KEEP_FINISHED`], at most
    /// `limit`.
    pub(super) fn prune_deliveries(&mut self, limit: usize) -> Result<usize> {
        let before = self.now.saturating_sub(KEEP_FINISHED);
        self.tx.prune_deliveries(before, limit)
    }
}
