//! [`Store`], the handle the server holds: async methods that queue a
//! command to the writer thread and await its answer, and reads that run
//! beside it on the store's [`StoreBackend`]. Opening one, and the calls
//! only PostgreSQL answers, are in `open.rs`: `sqlite` and `pg` name this
//! handle, so it names neither of them.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use leasehold_common::Timestamp;
use leasehold_common::api::{DenialView, Event, EventKind};
use tokio::sync::{broadcast, mpsc, oneshot};

use crate::usage::Usage;

use super::SharedLine;
use super::backend::StoreBackend;
use super::batch::{BatchStore, Writer, WriterStats};
use super::command::{Command, RuleCommand};
use super::entitlement_ids::EntitlementId;
use super::error::StoreError;
use super::history;
use super::lease::LeaseRow;
use super::options::{StoreKind, StoreOptions};
use super::outbox::{
    AlertState, AttemptRecord, DeliveriesQuery, DeliveryRow, DueDelivery, WebhookStats,
};
use super::outcome::{Applied, CheckoutOutcome, HeartbeatOutcome, PoolCounts, RevokeOutcome};
use super::repeats::RepeatedDenials;
use super::request::{Ahead, CheckoutRequest, Waiter};
use super::seat_query::{SeatQuery, SeatsPage};
use super::sign_ins::{SignInOp, SignInRow};

/// A cheap, cloneable handle on the store: the writer's queue and the
/// read side.
#[derive(Clone)]
pub struct Store {
    commands: mpsc::Sender<Command>,
    pub(super) reads: Arc<dyn StoreBackend>,
    events: broadcast::Sender<Event>,
    stats: Arc<WriterStats>,
    writer_thread: Arc<Mutex<Option<JoinHandle<()>>>>,
    /// PostgreSQL's waiting line, shared by every replica (`None` on
    /// SQLite, where the line is the server's own, in memory).
    pub(super) shared_line: Option<SharedLine>,
    /// Denials the writer lets this handle repeat (SQLite).
    pub(super) repeats: Option<Arc<RepeatedDenials>>,
}

impl Store {
    /// Run `writer` on a thread of its own, beside `reads`.
    pub(super) fn start<S: BatchStore + Send + 'static>(
        writer: Writer<S>,
        reads: Arc<dyn StoreBackend>,
        events: broadcast::Sender<Event>,
        stats: Arc<WriterStats>,
        options: &StoreOptions,
    ) -> Result<Store, StoreError> {
        let (commands, rx) = mpsc::channel(options.queue_capacity);
        let thread = std::thread::Builder::new()
            .name("store-writer".into())
            .spawn(move || writer.run(rx))
            .map_err(|source| StoreError::ThreadSpawn {
                thread: "store-writer",
                source,
            })?;
        Ok(Store {
            commands,
            reads,
            events,
            stats,
            writer_thread: Arc::new(Mutex::new(Some(thread))),
            shared_line: None,
            repeats: None,
        })
    }

    pub fn kind(&self) -> StoreKind {
        self.reads.kind()
    }

    /// Can the store take writes right now? (SQLite: always, while open;
    /// PostgreSQL: the database answers.)
    pub async fn health(&self) -> Result<(), StoreError> {
        detached(self.reads.health()).await
    }

    /// Ask the writer to finish what is queued and stop.
    async fn stop_writer(&self) {
        let (reply, stopped) = oneshot::channel();
        if self
            .commands
            .send(Command::Shutdown { reply })
            .await
            .is_ok()
        {
            let _ = stopped.await;
        }
    }

    async fn call<T>(
        &self,
        make: impl FnOnce(oneshot::Sender<Result<T, StoreError>>) -> RuleCommand,
    ) -> Result<T, StoreError> {
        let (tx, rx) = oneshot::channel();
        self.commands
            .send(Command::Rule(make(tx)))
            .await
            .map_err(|_| StoreError::Closed)?;
        rx.await.map_err(|_| StoreError::Closed)?
    }
    pub async fn checkout(&self, req: CheckoutRequest) -> Result<CheckoutOutcome, StoreError> {
        self.checkout_applied(req, Ahead::Waiters(Vec::new()), true)
            .await?
            .committed()
            .await
    }

    /// A checkout with the waiters `ahead` of it in line, in arrival order:
    /// it succeeds only if a seat is left for it once every waiter ahead
    /// that the rules would serve has one. Answers as soon as the writer has
    /// decided; see [`Applied`].
    ///
    /// `counted`: a denial is the answer the client gets (it counts as a
    /// denial in the usage history); `false` for an attempt that will be
    /// retried while the client waits in line (a denial the line never
    /// retries, a `403`, counts anyway).
    pub async fn checkout_applied(
        &self,
        req: CheckoutRequest,
        ahead: Ahead,
        counted: bool,
    ) -> Result<Applied<CheckoutOutcome>, StoreError> {
        let nobody_ahead = matches!(&ahead, Ahead::Waiters(line) if line.is_empty());
        if let Some(repeats) = &self.repeats
            && counted
            && nobody_ahead
            && let Some(outcome) = repeats.answer(&req)
        {
            self.stats.denials_repeated.fetch_add(1, Ordering::Relaxed);
            return Ok(Applied::settled(outcome));
        }
        self.call(|reply| RuleCommand::Checkout {
            req,
            ahead,
            counted,
            reply,
        })
        .await
    }

    pub async fn heartbeat(
        &self,
        license_id: &str,
        seat_id: &str,
    ) -> Result<HeartbeatOutcome, StoreError> {
        self.heartbeat_applied(license_id, seat_id, None)
            .await?
            .committed()
            .await
    }

    /// A heartbeat, answered as soon as the writer has decided; see [`Applied`].
    /// `idle`: how long the client reports its user idle (`None`: active).
    pub async fn heartbeat_applied(
        &self,
        license_id: &str,
        seat_id: &str,
        idle: Option<Duration>,
    ) -> Result<Applied<HeartbeatOutcome>, StoreError> {
        let (license_id, seat_id) = (license_id.to_string(), seat_id.to_string());
        self.call(|reply| RuleCommand::Heartbeat {
            license_id,
            seat_id,
            idle,
            reply,
        })
        .await
    }

    /// A heartbeat that reports its user idle for `idle`, once committed.
    pub async fn heartbeat_idle(
        &self,
        license_id: &str,
        seat_id: &str,
        idle: Duration,
    ) -> Result<HeartbeatOutcome, StoreError> {
        self.heartbeat_applied(license_id, seat_id, Some(idle))
            .await?
            .committed()
            .await
    }

    /// Release a seat of `license_id`. Idempotent: `false` if it was not there.
    pub async fn release(&self, license_id: &str, seat_id: &str) -> Result<bool, StoreError> {
        let (license_id, seat_id) = (license_id.to_string(), seat_id.to_string());
        self.call(|reply| RuleCommand::Release {
            license_id,
            seat_id,
            reply,
        })
        .await
    }

    /// Revoke a seat (admin); a live borrowed one only with `force`.
    pub async fn revoke(
        &self,
        seat_id: &str,
        reason: Option<String>,
        block: Option<Duration>,
        force: bool,
    ) -> Result<RevokeOutcome, StoreError> {
        let seat_id = seat_id.to_string();
        self.call(|reply| RuleCommand::Revoke {
            seat_id,
            reason,
            block,
            force,
            reply,
        })
        .await
    }

    /// Delete up to `limit` reapable leases; returns how many.
    pub async fn reap(&self, limit: usize) -> Result<usize, StoreError> {
        self.call(|reply| RuleCommand::Reap { limit, reply }).await
    }

    /// Delete usage history older than the retention, at most `limit` rows
    /// of each record; returns how many rows went.
    pub async fn prune_history(&self, limit: usize) -> Result<usize, StoreError> {
        self.call(|reply| RuleCommand::PruneHistory { limit, reply })
            .await
    }

    /// Wake the writer so it notices stalls and records that the server is
    /// alive, even when no client is talking to it.
    pub async fn tick(&self) -> Result<(), StoreError> {
        self.tick_with_waiters(HashMap::new()).await
    }

    /// The alive tick, with the waiters of the server's own lines (by
    /// license) that a `full` alert counts as spoken for.
    pub async fn tick_with_waiters(
        &self,
        waiting: HashMap<String, Vec<Waiter>>,
    ) -> Result<(), StoreError> {
        self.call(|reply| RuleCommand::Tick { waiting, reply })
            .await
    }

    /// Claim up to `limit` due deliveries for one attempt each.
    pub async fn claim_deliveries(&self, limit: usize) -> Result<Vec<DueDelivery>, StoreError> {
        self.call(|reply| RuleCommand::ClaimDeliveries { limit, reply })
            .await
    }

    /// Record how an attempt at a claimed delivery went; answers what it
    /// did to the delivery.
    pub async fn record_attempt(
        &self,
        due: DueDelivery,
        result: Result<(), String>,
    ) -> Result<AttemptRecord, StoreError> {
        self.call(|reply| RuleCommand::RecordAttempt { due, result, reply })
            .await
    }

    /// Queue a `test` delivery to the webhook; its id.
    pub async fn queue_test_delivery(&self, webhook: String) -> Result<String, StoreError> {
        self.call(|reply| RuleCommand::QueueTest { webhook, reply })
            .await
    }

    /// Each webhook's stored deliveries (reads beside the writer).
    pub async fn webhook_stats(&self) -> Result<Vec<WebhookStats>, StoreError> {
        detached(self.reads.webhook_stats()).await
    }

    pub async fn deliveries_page(
        &self,
        query: DeliveriesQuery,
    ) -> Result<Vec<DeliveryRow>, StoreError> {
        detached(self.reads.deliveries_page(query)).await
    }

    pub async fn alert_states(&self) -> Result<Vec<AlertState>, StoreError> {
        detached(self.reads.alert_states()).await
    }

    pub async fn deliveries_due(&self, now: Timestamp) -> Result<bool, StoreError> {
        detached(self.reads.deliveries_due(now)).await
    }

    /// Append an event that is not tied to a lease change (config reloads).
    pub async fn record_event(
        &self,
        kind: EventKind,
        license_id: Option<String>,
        detail: String,
    ) -> Result<(), StoreError> {
        self.call(|reply| RuleCommand::RecordEvent {
            kind,
            license_id,
            detail,
            reply,
        })
        .await
    }

    /// Every lease (optionally of one license), live or lapsed-unreaped.
    pub async fn seats(&self, license_id: Option<&str>) -> Result<Vec<LeaseRow>, StoreError> {
        detached(self.reads.seats(license_id.map(str::to_string))).await
    }

    /// One page of seats: filtered, sorted and cut in SQL (see
    /// [`seat_query`](super::seat_query)).
    pub async fn seats_page(&self, query: SeatQuery) -> Result<SeatsPage, StoreError> {
        detached(self.reads.seats_page(query)).await
    }

    /// The dashboard sign-in whose id hashes to `id_sha256`, expired or not.
    pub async fn sign_in(&self, id_sha256: &str) -> Result<Option<SignInRow>, StoreError> {
        detached(self.reads.sign_in(id_sha256.to_string())).await
    }

    /// Create, touch or delete dashboard sign-ins. Returns the rows changed.
    /// On SQLite they are written on a connection of their own, which would
    /// wait for the writer's lock while it holds denial counts: so those
    /// are committed first.
    pub async fn sign_in_write(&self, op: SignInOp) -> Result<usize, StoreError> {
        self.commit_held_denials().await?;
        detached(self.reads.sign_in_write(op)).await
    }

    /// What the store remembers of every vendor's entitlement ids.
    pub async fn entitlement_ids(&self) -> Result<Vec<EntitlementId>, StoreError> {
        detached(self.reads.entitlement_ids()).await
    }

    /// Remember these entitlement ids (a remembered `iat` never goes
    /// down). Like sign-ins, written beside the writer on SQLite: held
    /// denial counts are committed first.
    pub async fn remember_entitlement_ids(
        &self,
        ids: Vec<EntitlementId>,
    ) -> Result<usize, StoreError> {
        if ids.is_empty() {
            return Ok(0);
        }
        self.commit_held_denials().await?;
        detached(self.reads.remember_entitlement_ids(ids)).await
    }

    /// Make a judged set the cluster's entitlements with its events (see
    /// [`StoreBackend::publish_entitlements`]); `None` on SQLite.
    pub async fn publish_entitlements(
        &self,
        set: String,
        events: Vec<String>,
    ) -> Option<Result<bool, StoreError>> {
        let answer = self.reads.publish_entitlements(set, events)?;
        Some(detached(answer).await)
    }

    /// Record an event not tied to a seat once for the cluster, by `key`;
    /// `None` on SQLite (record it as any event).
    pub async fn record_event_once(
        &self,
        key: String,
        kind: EventKind,
        detail: String,
    ) -> Option<Result<bool, StoreError>> {
        let answer = self.reads.record_event_once(key, kind, detail)?;
        Some(detached(answer).await)
    }

    /// What counts against each license's pool, by the one predicate (on
    /// SQLite from the writer's live index, so it costs no scan however
    /// many leases there are).
    pub async fn live_counts(&self) -> Result<Vec<(String, PoolCounts)>, StoreError> {
        self.call(|reply| RuleCommand::LiveCounts { reply }).await
    }

    pub async fn events_after(&self, after: i64, limit: usize) -> Result<Vec<Event>, StoreError> {
        detached(self.reads.events_after(after, limit)).await
    }

    pub async fn find_seat(&self, seat_id: &str) -> Result<Option<LeaseRow>, StoreError> {
        detached(self.reads.find_seat(seat_id.to_string())).await
    }

    /// One page of a license's sessions, newest first (see
    /// [`history::SessionsQuery`]). A read: it never waits for the writer.
    pub async fn sessions_page(
        &self,
        query: history::SessionsQuery,
    ) -> Result<Vec<leasehold_common::api::SessionView>, StoreError> {
        detached(self.reads.sessions_page(query)).await
    }

    /// A license's usage over a range (see [`crate::usage`]). A read: the
    /// writer only commits held denial counts first.
    pub async fn usage(&self, query: history::UsageQuery) -> Result<Usage, StoreError> {
        self.commit_held_denials().await?;
        detached(self.reads.usage(query)).await
    }

    /// One page of a license's recorded denials, newest first (see
    /// [`super::denials`]). A read: the writer only commits held denial
    /// counts first.
    pub async fn denials_page(
        &self,
        query: super::denials::DenialsQuery,
    ) -> Result<Vec<DenialView>, StoreError> {
        self.commit_held_denials().await?;
        detached(self.reads.denials_page(query)).await
    }

    /// A license's recorded demand over a range, for the what-if replay
    /// (see [`crate::usage::what_if`]). A read: the writer only commits held
    /// denial counts first.
    pub async fn what_if_demand(
        &self,
        query: crate::usage::what_if::WhatIfQuery,
    ) -> Result<crate::usage::what_if::Demand, StoreError> {
        self.commit_held_denials().await?;
        detached(self.reads.what_if_demand(query)).await
    }

    /// Have the writer commit denial counts it holds (SQLite, in a retry
    /// storm: `sqlite/writer.rs`), so a read of the history that follows
    /// sees every denial already answered. Free when none are held.
    async fn commit_held_denials(&self) -> Result<(), StoreError> {
        let repeated = self.repeats.as_ref().is_some_and(|r| r.has_uncounted());
        if !repeated && !self.stats.denials_held.load(Ordering::Acquire) {
            return Ok(());
        }
        self.call(|reply| RuleCommand::Flush { reply }).await
    }

    /// The decision time as near as a reader can tell: the writer's last
    /// batch's, or the wall clock's `wall` if that is later (the decision
    /// clock never runs back, so a wall clock set back reads its time).
    pub fn decision_time(&self, wall: Timestamp) -> Timestamp {
        let decided = self.stats.decided_at_ms.load(Ordering::Relaxed);
        wall.max(Timestamp::from_millis(decided))
    }

    /// Batches, commands and time spent by the writer so far.
    pub fn writer_stats(&self) -> &WriterStats {
        &self.stats
    }

    /// Events as they are committed. Subscribe *before* reading the backlog
    /// with [`Store::events_after`] so nothing falls in between.
    pub fn subscribe(&self) -> broadcast::Receiver<Event> {
        self.events.subscribe()
    }

    /// Finish queued commands, record a clean stop and join the writer.
    /// Commands sent after this fail with [`StoreError::Closed`].
    pub async fn close(&self) {
        let _ = self.stop_writer().await;
        let handle = self
            .writer_thread
            .lock()
            .map(|mut g| g.take())
            .unwrap_or(None);
        if let Some(handle) = handle {
            let _ = tokio::task::spawn_blocking(move || handle.join()).await;
        }
        self.reads.close().await;
    }
}

/// Run a read as its own task: its future is `Send` but not `Sync`, and some
/// callers (SSE streams) must be both. It is spawned at once, so the
/// caller's future holds only the handle.
fn detached<T: Send + 'static>(
    read: impl Future<Output = Result<T, StoreError>> + Send + 'static,
) -> impl Future<Output = Result<T, StoreError>> + Send + Sync {
    let task = tokio::spawn(read);
    async move { task.await.map_err(|_| StoreError::Closed)? }
}
