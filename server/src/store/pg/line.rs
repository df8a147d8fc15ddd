//! The waiting line of `?wait=` checkouts, shared by every replica: one
//! row per waiter in `waiters`, first come (lowest id) first served.
//!
//! A replica refreshes `seen_ms` of its own waiters every second; a waiter
//! not seen for [`STALE_MS`] belonged to a replica that died and no longer
//! stands in anyone's way. Times are the database's clock.

use super::super::{StoreError, Waiter};
use std::sync::Arc;

use super::pool::PgPool;
use super::rows::waiters;
// The line's SQL, which the writer's statements ask too.
pub use super::statements::STALE_MS;
use super::statements::{DB_NOW, waiters_ahead_sql};

/// Rows of dead replicas are deleted after this long.
const FORGET_MS: i64 = 60_000;

/// The line, on the replica's pool.
#[derive(Clone)]
pub struct SharedLine {
    pool: Arc<PgPool>,
}

impl SharedLine {
    pub fn new(pool: Arc<PgPool>) -> Self {
        SharedLine { pool }
    }

    /// Join the back of `license_id`'s line; the waiter's id.
    pub async fn join(
        &self,
        license_id: &str,
        replica: &str,
        waiter: &Waiter,
    ) -> Result<i64, StoreError> {
        let client = self.pool.client().await?;
        let id: i64 = client
            .query_one(
                &format!(
                    "INSERT INTO waiters (license_id, replica, seen_ms, holder, fingerprint)
                     VALUES ($1, $2, {DB_NOW}, $3, $4)
                     RETURNING id"
                ),
                &[&license_id, &replica, &waiter.holder, &waiter.fingerprint],
            )
            .await?
            .get(0);
        Ok(id)
    }

    /// Every live waiter of the license, first come first (what admins see;
    /// a checkout's writer reads the waiters ahead of it itself).
    pub async fn waiters(&self, license_id: &str) -> Result<Vec<Waiter>, StoreError> {
        let client = self.pool.client().await?;
        let rows = client
            .query(
                &waiters_ahead_sql(),
                &[&license_id, &None::<i64>, &STALE_MS],
            )
            .await?;
        Ok(waiters(&rows))
    }

    /// Leave the line.
    pub async fn leave(&self, id: i64) -> Result<(), StoreError> {
        let client = self.pool.client().await?;
        client
            .execute("DELETE FROM waiters WHERE id = $1", &[&id])
            .await?;
        Ok(())
    }

    /// Say this replica's waiters are still there, and forget long-dead
    /// replicas' rows.
    pub async fn refresh(&self, replica: &str) -> Result<(), StoreError> {
        let client = self.pool.client().await?;
        client
            .execute(
                &format!("UPDATE waiters SET seen_ms = {DB_NOW} WHERE replica = $1"),
                &[&replica],
            )
            .await?;
        client
            .execute(
                &format!("DELETE FROM waiters WHERE seen_ms < {DB_NOW} - $1"),
                &[&FORGET_MS],
            )
            .await?;
        Ok(())
    }
}
