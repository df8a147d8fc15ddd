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
