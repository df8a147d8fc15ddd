//! The delivery worker, one per replica: every [`POLL`] it asks the store
//! (a read) whether a delivery is due, claims as many as it has free slots
//! through the writer, and sends each on a task of its own; then records
//! the attempt through the writer and counts its result. At most
//! [`MAX_IN_FLIGHT`] deliveries are held in memory; the rest wait in the
//! store. A slow receiver holds only its own slot, never the writer.

use std::sync::Arc;
use std::time::Duration;

use leasehold_common::alerts::DeliveryStatus;
use tokio::sync::watch;
use tokio::task::JoinSet;

use super::send::{Sender, Target};
use crate::clock::SharedClock;
use crate::licenses::LicensesHandle;
use crate::metrics::Metrics;
use crate::store::Store;
use crate::store::outbox::DueDelivery;

/// Deliveries attempted at once per replica.
pub const MAX_IN_FLIGHT: usize = 8;
/// How often the worker asks whether a delivery is due.
pub const POLL: Duration = Duration::from_millis(250);
/// At shutdown, attempts under way get this long to finish and be
/// recorded; the rest are dropped, and their claims lapse and they are
/// sent again (at least once: a receiver de-duplicates on the id).
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(2);

/// What every attempt needs.
struct Worker {
    store: Store,
    licenses: LicensesHandle,
    metrics: Arc<Metrics>,
    clock: SharedClock,
    sender: Sender,
}

/// Run until `stop` turns true.
pub async fn run(
    store: Store,
    licenses: LicensesHandle,
    metrics: Arc<Metrics>,
    clock: SharedClock,
    mut stop: watch::Receiver<bool>,
) {
    let sender = match Sender::new() {
        Ok(s) => s,
        Err(e) => {
            tracing::error!("webhook deliveries are off: cannot build the HTTP client: {e}");
            return;
        }
    };
    let worker = Arc::new(Worker {
        store,
        licenses,
        metrics,
        clock,
        sender,
    });
    let mut in_flight: JoinSet<()> = JoinSet::new();
    let mut tick = tokio::time::interval(POLL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut store_failing = false;
    while !*stop.borrow() {
        tokio::select! {
            changed = stop.changed() => {
                // The server dropped its end: stop too.
                if changed.is_err() {
                    break;
                }
            }
            Some(_) = in_flight.join_next(), if !in_flight.is_empty() => {}
            _ = tick.tick() => {
                let free = MAX_IN_FLIGHT.saturating_sub(in_flight.len());
                match worker.claim(free).await {
                    Ok(claimed) => {
                        if store_failing {
                            tracing::info!("webhook deliveries: the store answers again");
                            store_failing = false;
                        }
                        for due in claimed {
                            let w = worker.clone();
                            in_flight.spawn(async move { w.attempt(due).await });
                        }
                    }
                    Err(e) => {
                        if !store_failing {
                            tracing::warn!("webhook deliveries wait: the store cannot answer: {e}");
                            store_failing = true;
                        }
                    }
                }
            }
        }
    }
    drain(in_flight).await;
}

/// Let attempts under way finish for [`SHUTDOWN_GRACE`], then drop them.
async fn drain(mut in_flight: JoinSet<()>) {
    if in_flight.is_empty() {
        return;
    }
    let wait_all = async { while in_flight.join_next().await.is_some() {} };
    if tokio::time::timeout(SHUTDOWN_GRACE, wait_all)
        .await
        .is_err()
    {
        tracing::info!(
            "stopping with {} webhook delivery attempt(s) unfinished; they are sent again later",
            in_flight.len()
        );
        in_flight.shutdown().await;
    }
}

impl Worker {
    /// Claim up to `free` due deliveries, asking first with a read so an
    /// idle outbox never costs the writer a command.
    async fn claim(&self, free: usize) -> Result<Vec<DueDelivery>, crate::store::StoreError> {
        if free == 0 || !self.store.deliveries_due(self.clock.now()).await? {
            return Ok(Vec::new());
        }
        self.store.claim_deliveries(free).await
    }

    /// Send one claimed delivery, record the attempt, count and log it.
    async fn attempt(&self, due: DueDelivery) {
        let target = self
            .licenses
            .current()
            .webhook(&due.webhook)
            .map(|w| Target {
                url: w.url.clone(),
                secret: w.secret.clone(),
            });
        let result = match &target {
            // The rules fail it for good (nobody would receive it).
            None => Err(format!(
                "webhook {:?} is no longer in the licenses file",
                due.webhook
            )),
            Some(target) => {
                let t = self.clock.now().as_millis().div_euclid(1000);
                self.sender.send(target, &due.id, &due.body, t).await
            }
        };
        let (id, webhook) = (due.id.clone(), due.webhook.clone());
        match self.store.record_attempt(due, result).await {
            Ok(record) => {
                self.metrics.count_delivery(&webhook, record.status);
                let error = record.error.as_deref().unwrap_or("");
                let n = record.attempts;
                match record.status {
                    DeliveryStatus::Delivered => {
                        tracing::debug!("webhook {webhook}: delivery {id} delivered (attempt {n})");
                    }
                    DeliveryStatus::Pending => tracing::info!(
                        "webhook {webhook}: delivery {id} attempt {n} failed ({error}); retried at {}",
                        record.next_attempt_at
                    ),
                    DeliveryStatus::Failed => tracing::warn!(
                        "webhook {webhook}: delivery {id} failed for good after {n} attempt(s): {error}"
                    ),
                }
            }
            Err(e) => tracing::warn!(
                "webhook {webhook}: delivery {id}: the attempt could not be recorded ({e}); \
                 it is sent again when its claim lapses"
            ),
        }
    }
}
