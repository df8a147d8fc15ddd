//! Webhook deliveries leave the server here (issue 32). The rules queue
//! each delivery in the store, in the transaction of what caused it
//! (`store/rules/webhooks.rs`); this module sends them:
//!
//! - [`worker`]: the per-replica delivery loop (at most
//!   [`worker::MAX_IN_FLIGHT`] at once, claimed and recorded through the
//!   writer, stopped by the server's `stop` watch).
//! - [`send`]: one attempt: the signed `POST`, no redirects, a 10 s
//!   timeout, at most 1 KiB of the answer read.
//! - [`sign`]: the `Leasehold-Signature` header.
//!
//! [`gauges`] reads what `/metrics` shows of webhooks and alerts at scrape
//! time. No secret leaves this module: not in a log line, an error text
//! or a metric.

pub mod send;
pub mod sign;
#[cfg(test)]
mod tests;
pub mod worker;

use std::collections::HashMap;

use leasehold_common::Licenses;

use crate::metrics::{AlertGauge, WebhookGauges};
use crate::store::Store;

pub use worker::run;

/// Every configured webhook's pending deliveries (and any other webhook's
/// still pending), and every configured alert's state, from the store. A
/// part the store cannot answer is left out rather than shown as 0; a file
/// without webhooks and alerts reads nothing.
pub async fn gauges(store: &Store, licenses: &Licenses) -> WebhookGauges {
    let mut out = WebhookGauges::default();
    if !licenses.webhooks().is_empty() {
        if let Ok(stats) = store.webhook_stats().await {
            let mut pending: Vec<(String, u64)> = licenses
                .webhooks()
                .iter()
                .map(|w| (w.name.clone(), 0))
                .collect();
            for s in stats {
                match pending.iter_mut().find(|(name, _)| *name == s.webhook) {
                    Some(entry) => entry.1 = s.pending,
                    None if s.pending > 0 => pending.push((s.webhook, s.pending)),
                    None => {}
                }
            }
            out.pending = Some(pending);
        }
        out.webhooks = licenses.webhooks().iter().map(|w| w.name.clone()).collect();
    }
    if licenses.alerts().next().is_some()
        && let Ok(states) = store.alert_states().await
    {
        let firing: HashMap<String, bool> = states
            .into_iter()
            .map(|s| (s.alert, s.firing_since.is_some()))
            .collect();
        out.alerts = Some(
            licenses
                .alerts()
                .map(|(license, alert)| AlertGauge {
                    license: license.id.clone(),
                    alert: alert.name.clone(),
                    firing: firing.get(&alert.name).copied().unwrap_or(false),
                })
                .collect(),
        );
    }
    out
}
