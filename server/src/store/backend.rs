//! What a store does outside its writer: the reads of admin views and
//! `/healthz`, the dashboard's sign-ins, and on PostgreSQL the
//! waiting line and policy every replica shares. None of it is a lease
//! rule, and none of it waits for the writer. SQLite (`SqliteBackend`) and
//! PostgreSQL (`PgBackend`) each implement it, and neither is named here (the
//! stores name this trait; the trait naming them back would be a cycle); lease changes go through the
//! writer's command queue (see [`super::batch`]).

use futures_util::future::BoxFuture;
use leasehold_common::api::{DenialView, Event, SessionView};

use super::denials::DenialsQuery;
use super::entitlement_ids::EntitlementId;
use super::history::{SessionsQuery, UsageQuery};
use super::outbox::{AlertState, DeliveriesQuery, DeliveryRow, WebhookStats};
use super::seat_query::{SeatQuery, SeatsPage};
use super::sign_ins::{SignInOp, SignInRow};
use super::{LeaseRow, StoreError, StoreKind};
use crate::usage::Usage;
use crate::usage::what_if::{Demand, WhatIfQuery};

/// What publishing a licenses file did (PostgreSQL, where a cluster
/// shares one policy).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Published {
    /// The cluster's policy version now.
    pub version: i64,
    /// How the cluster's policy changed (empty: it already was this one).
    pub changes: Vec<String>,
}

/// A read's answer, to be awaited on the runtime.
pub type Answer<T> = BoxFuture<'static, Result<T, StoreError>>;

/// One store's side of everything that is not the writer's.
pub trait StoreBackend: Send + Sync {
    fn kind(&self) -> StoreKind;
    /// Can the store take writes right now?
    fn health(&self) -> Answer<()>;
    /// Every lease (optionally of one license), live or lapsed-unreaped.
    fn seats(&self, license_id: Option<String>) -> Answer<Vec<LeaseRow>>;
    /// One page of seats, filtered, sorted and cut in SQL.
    fn seats_page(&self, query: SeatQuery) -> Answer<SeatsPage>;
    fn find_seat(&self, seat_id: String) -> Answer<Option<LeaseRow>>;
    fn events_after(&self, after: i64, limit: usize) -> Answer<Vec<Event>>;
    /// One page of a license's sessions, newest first.
    fn sessions_page(&self, query: SessionsQuery) -> Answer<Vec<SessionView>>;
    /// A license's usage over a range.
    fn usage(&self, query: UsageQuery) -> Answer<Usage>;
    /// A license's recorded demand over a range, for the what-if replay.
    fn what_if_demand(&self, query: WhatIfQuery) -> Answer<Demand>;
    /// One page of a license's recorded denials, newest first.
    fn denials_page(&self, query: DenialsQuery) -> Answer<Vec<DenialView>>;
    /// Each webhook's stored deliveries by status, its last success and
    /// its last attempt's error (webhooks with no delivery are absent).
    fn webhook_stats(&self) -> Answer<Vec<WebhookStats>>;
    /// One page of deliveries, newest first.
    fn deliveries_page(&self, query: DeliveriesQuery) -> Answer<Vec<DeliveryRow>>;
    /// Every stored alert state.
    fn alert_states(&self) -> Answer<Vec<AlertState>>;
    /// Whether a `pending` delivery is due by `now` and unclaimed at `now`
    /// (the delivery worker asks before it claims through the writer).
    fn deliveries_due(&self, now: leasehold_common::Timestamp) -> Answer<bool>;
    /// The dashboard sign-in whose id hashes to `id_sha256`, expired or not.
    fn sign_in(&self, id_sha256: String) -> Answer<Option<SignInRow>>;
    /// Create, touch or delete dashboard sign-ins; the rows changed. Not a
    /// lease rule, so not the writer's business.
    fn sign_in_write(&self, op: SignInOp) -> Answer<usize>;
    /// What the store remembers of every vendor's entitlement ids.
    fn entitlement_ids(&self) -> Answer<Vec<EntitlementId>>;
    /// Remember these ids (an `iat` never goes down); the rows changed.
    fn remember_entitlement_ids(&self, ids: Vec<EntitlementId>) -> Answer<usize>;
    /// Stop what runs beside the writer (after the writer stopped).
    fn close(&self) -> BoxFuture<'static, ()>;

    /// Idle connections in the read pool, where it is a fixed pool.
    fn read_pool_idle(&self) -> Option<usize> {
        None
    }
    /// Make a judged set (JSON) the cluster's entitlements, recording
    /// `events` with it if it changed anything, where a cluster shares one
    /// (on SQLite the server's own scan is the set: `None`). True if it
    /// changed.
    fn publish_entitlements(&self, set: String, events: Vec<String>) -> Option<Answer<bool>> {
        let _ = (set, events);
        None
    }
    /// Record an event not tied to a seat once for the cluster, by `key`,
    /// where a cluster shares one (`None`: record it as any event).
    fn record_event_once(
        &self,
        key: String,
        kind: leasehold_common::api::EventKind,
        detail: String,
    ) -> Option<Answer<bool>> {
        let _ = (key, kind, detail);
        None
    }
    /// Make `text` the cluster's policy, where a cluster shares one (on
    /// SQLite the file is the policy: `None`).
    fn publish_licenses(
        &self,
        text: String,
        licenses: leasehold_common::Licenses,
        why: &'static str,
    ) -> Option<Answer<Published>> {
        let _ = (text, licenses, why);
        None
    }
}
