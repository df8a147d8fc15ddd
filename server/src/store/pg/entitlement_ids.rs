//! The remembered entitlement ids on PostgreSQL (see
//! `store/entitlement_ids.rs`): plain statements on the read pool; every
//! replica reads and writes the same rows.

use super::super::StoreError;
use super::pool::PgPool;
use crate::store::entitlement_ids::{EntitlementId, SELECT_SQL, UPSERT_SQL};

impl PgPool {
    pub async fn entitlement_ids(&self) -> Result<Vec<EntitlementId>, StoreError> {
        let client = self.client().await?;
        let rows = client.query(SELECT_SQL, &[]).await?;
        Ok(rows
            .iter()
            .map(|r| EntitlementId {
                vendor: r.get(0),
                id: r.get(1),
                iat: r.get(2),
                nbf: r.get(3),
                claims_hash: r.get(4),
            })
            .collect())
    }

    pub async fn remember_entitlement_ids(
        &self,
        ids: &[EntitlementId],
    ) -> Result<usize, StoreError> {
        let client = self.client().await?;
        let mut changed = 0;
        for e in ids {
            changed += client
                .execute(
                    UPSERT_SQL,
                    &[&e.vendor, &e.id, &e.iat, &e.nbf, &e.claims_hash],
                )
                .await? as usize;
        }
        Ok(changed)
    }
}

/// An event of `kind` (not tied to a seat) at the cluster's time, with the
/// next event id (as a batch numbers its events), in `tx`.
async fn record_event(
    tx: &tokio_postgres::Transaction<'_>,
    kind: &str,
    detail: &str,
) -> Result<(), tokio_postgres::Error> {
    tx.execute(super::RECORD_EVENT_SQL, &[&detail, &kind])
        .await?;
    Ok(())
}

impl PgPool {
    /// Make `set` (a [`JudgedSet`](crate::store::entitlement_set::JudgedSet)
    /// as JSON) the cluster's entitlements, with `events`, in one
    /// transaction; nothing when the cluster's set is already `set` (another
    /// replica published it, and recorded its events). True if it changed.
    pub async fn publish_entitlements(
        &self,
        set: &str,
        events: &[String],
    ) -> Result<bool, StoreError> {
        let mut client = self.client().await?;
        let tx = client.transaction().await?;
        let current: Option<String> = tx
            .query_one(
                "SELECT entitlements_json FROM cluster WHERE id = 1 FOR UPDATE",
                &[],
            )
            .await?
            .get(0);
        if current.as_deref() == Some(set) {
            tx.commit().await?;
            return Ok(false);
        }
        tx.execute(
            "UPDATE cluster SET entitlements_json = $1,
                 entitlements_version = entitlements_version + 1 WHERE id = 1",
            &[&set],
        )
        .await?;
        for detail in events {
            record_event(&tx, "entitlement", detail).await?;
        }
        tx.execute(&format!("NOTIFY {}", super::EVENTS_CHANNEL), &[])
            .await?;
        tx.commit().await?;
        Ok(true)
    }

    /// Record an event of `kind` once for the cluster, whichever replica
    /// saw it first (`key` says which it is). True if this one did.
    pub async fn record_event_once(
        &self,
        key: &str,
        kind: &str,
        detail: &str,
    ) -> Result<bool, StoreError> {
        let mut client = self.client().await?;
        let tx = client.transaction().await?;
        let first = tx
            .execute(
                "INSERT INTO entitlement_events_seen (key) VALUES ($1) ON CONFLICT DO NOTHING",
                &[&key],
            )
            .await?
            == 1;
        if first {
            record_event(&tx, kind, detail).await?;
            tx.execute(&format!("NOTIFY {}", super::EVENTS_CHANNEL), &[])
                .await?;
        }
        tx.commit().await?;
        Ok(first)
    }
}
