//! A replica's side of everything that is not the writer's
//! ([`StoreBackend`]), and how a replica starts.

use std::sync::{Arc, Mutex};

use futures_util::future::BoxFuture;
use leasehold_common::Timestamp;
use leasehold_common::api::{DenialView, Event, SessionView};
use tokio::sync::{broadcast, watch};

use super::line::SharedLine;
use super::pool::PgPool;
use super::writer::{DecisionClock, PgBatches};
use super::{StartPoint, connect_sync, denials, follower, history, publish_licenses_sync};
use crate::licenses::LicensesHandle;
use crate::store::backend::{Answer, Published, StoreBackend};
use crate::store::batch::{Writer, WriterStats};
use crate::store::denials::DenialsQuery;
use crate::store::entitlement_ids::EntitlementId;
use crate::store::history::{SessionsQuery, UsageQuery};
use crate::store::outbox::{AlertState, DeliveriesQuery, DeliveryRow, WebhookStats};
use crate::store::seat_query::{SeatQuery, SeatsPage};
use crate::store::sign_ins::{SignInOp, SignInRow};
use crate::store::{LeaseRow, StoreError, StoreKind, StoreOptions};
use crate::usage::Usage;
use crate::usage::what_if::{Demand, WhatIfQuery};

/// A replica's parts, for `Store::open_postgres` to start: this module
/// does not name the `Store` handle, which names the backend trait.
pub struct Opened {
    pub writer: Writer<PgBatches>,
    pub backend: Arc<PgBackend>,
    pub events: broadcast::Sender<Event>,
    pub stats: Arc<WriterStats>,
    /// The waiting line every replica shares.
    pub line: SharedLine,
}

/// This replica's parts, after [`super::prepare`]: the writer, the pool
/// and the event follower (which feeds the store's subscribers with every
/// replica's events).
pub fn open(
    config: tokio_postgres::Config,
    clock: DecisionClock,
    start: StartPoint,
    licenses: LicensesHandle,
    options: StoreOptions,
) -> Opened {
    let (events, _) = broadcast::channel(4096);
    let stats = Arc::new(WriterStats::default());
    let batches = PgBatches::new(
        postgres::Config::from(config.clone()),
        clock,
        licenses,
        start.licenses_version,
        stats.clone(),
    );
    let writer = Writer::new(batches, options.clone(), stats.clone(), None);
    let (stop_follower, stop) = watch::channel(false);
    let follower = tokio::spawn(follower::follow(
        config.clone(),
        events.clone(),
        start.last_event_id,
        stop,
    ));
    let backend = PgBackend {
        pool: Arc::new(PgPool::new(config.clone())),
        stop_follower,
        follower: Mutex::new(Some(follower)),
        config,
    };
    let line = SharedLine::new(backend.pool.clone());
    Opened {
        writer,
        backend: Arc::new(backend),
        events,
        stats,
        line,
    }
}

/// A replica's pool, event follower and cluster policy.
pub struct PgBackend {
    pool: Arc<PgPool>,
    /// Flipping it stops the event follower.
    stop_follower: watch::Sender<bool>,
    follower: Mutex<Option<tokio::task::JoinHandle<()>>>,
    config: tokio_postgres::Config,
}

impl PgBackend {
    /// Run `f` on the pool.
    fn on_pool<T, F>(&self, f: impl FnOnce(Arc<PgPool>) -> F) -> Answer<T>
    where
        F: Future<Output = Result<T, StoreError>> + Send + 'static,
    {
        Box::pin(f(self.pool.clone()))
    }
}

impl StoreBackend for PgBackend {
    fn kind(&self) -> StoreKind {
        StoreKind::Postgres
    }

    fn health(&self) -> Answer<()> {
        self.on_pool(|pool| async move { pool.health().await })
    }

    fn seats(&self, license_id: Option<String>) -> Answer<Vec<LeaseRow>> {
        self.on_pool(|pool| async move { pool.seats(license_id.as_deref()).await })
    }

    fn seats_page(&self, query: SeatQuery) -> Answer<SeatsPage> {
        self.on_pool(|pool| async move { pool.seats_page(&query).await })
    }

    fn find_seat(&self, seat_id: String) -> Answer<Option<LeaseRow>> {
        self.on_pool(|pool| async move { pool.find_seat(&seat_id).await })
    }

    fn events_after(&self, after: i64, limit: usize) -> Answer<Vec<Event>> {
        self.on_pool(|pool| async move { pool.events_after(after, limit).await })
    }

    fn sessions_page(&self, query: SessionsQuery) -> Answer<Vec<SessionView>> {
        self.on_pool(|pool| async move { history::sessions_page(&pool, &query).await })
    }

    fn usage(&self, query: UsageQuery) -> Answer<Usage> {
        self.on_pool(|pool| async move { history::usage(&pool, &query).await })
    }

    fn what_if_demand(&self, query: WhatIfQuery) -> Answer<Demand> {
        self.on_pool(|pool| async move { super::what_if::what_if_demand(&pool, &query).await })
    }

    fn denials_page(&self, query: DenialsQuery) -> Answer<Vec<DenialView>> {
        self.on_pool(|pool| async move { denials::denials_page(&pool, &query).await })
    }

    fn webhook_stats(&self) -> Answer<Vec<WebhookStats>> {
        self.on_pool(|pool| async move { super::outbox::read::webhook_stats(&pool).await })
    }

    fn deliveries_page(&self, query: DeliveriesQuery) -> Answer<Vec<DeliveryRow>> {
        self.on_pool(
            |pool| async move { super::outbox::read::deliveries_page(&pool, &query).await },
        )
    }

    fn alert_states(&self) -> Answer<Vec<AlertState>> {
        self.on_pool(|pool| async move { super::outbox::read::alert_states(&pool).await })
    }

    fn deliveries_due(&self, now: Timestamp) -> Answer<bool> {
        self.on_pool(|pool| async move { super::outbox::read::deliveries_due(&pool, now).await })
    }

    fn sign_in(&self, id_sha256: String) -> Answer<Option<SignInRow>> {
        self.on_pool(|pool| async move { pool.sign_in(&id_sha256).await })
    }

    fn sign_in_write(&self, op: SignInOp) -> Answer<usize> {
        self.on_pool(|pool| async move { pool.sign_in_write(&op).await })
    }

    fn entitlement_ids(&self) -> Answer<Vec<EntitlementId>> {
        self.on_pool(|pool| async move { pool.entitlement_ids().await })
    }

    fn remember_entitlement_ids(&self, ids: Vec<EntitlementId>) -> Answer<usize> {
        self.on_pool(|pool| async move { pool.remember_entitlement_ids(&ids).await })
    }

    fn close(&self) -> BoxFuture<'static, ()> {
        let _ = self.stop_follower.send(true);
        let follower = self.follower.lock().map(|mut g| g.take()).unwrap_or(None);
        Box::pin(async move {
            if let Some(follower) = follower {
                let _ = follower.await;
            }
        })
    }

    fn read_pool_idle(&self) -> Option<usize> {
        Some(self.pool.idle())
    }

    fn publish_entitlements(&self, set: String, events: Vec<String>) -> Option<Answer<bool>> {
        Some(self.on_pool(|pool| async move { pool.publish_entitlements(&set, &events).await }))
    }

    fn record_event_once(
        &self,
        key: String,
        kind: leasehold_common::api::EventKind,
        detail: String,
    ) -> Option<Answer<bool>> {
        Some(self.on_pool(|pool| async move {
            pool.record_event_once(&key, kind.as_str(), &detail).await
        }))
    }

    /// On a blocking connection of its own: publishing takes the cluster
    /// row's lock in a transaction.
    fn publish_licenses(
        &self,
        text: String,
        licenses: leasehold_common::Licenses,
        why: &'static str,
    ) -> Option<Answer<Published>> {
        let config = postgres::Config::from(self.config.clone());
        Some(Box::pin(async move {
            tokio::task::spawn_blocking(move || {
                let mut client = connect_sync(&config)?;
                publish_licenses_sync(&mut client, &text, &licenses, why).map_err(StoreError::from)
            })
            .await
            .map_err(|_| StoreError::Closed)?
        }))
    }
}
