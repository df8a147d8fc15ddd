//! A replica's pool of async connections to PostgreSQL (everything but its
//! writer uses it: reads, dashboard sessions, the shared waiting line), and
//! the plain reads of leases and events. The pool is deadpool-postgres:
//! measured against the one we had written, it did as well (BENCHMARKS.md,
//! "Session 8"), and it is one thing less of our own to keep right.

use std::time::Duration;

use deadpool_postgres::{Manager, ManagerConfig, Object, Pool, RecyclingMethod, Runtime};
use leasehold_common::api::Event;
use tokio_postgres::{Client, NoTls};

use super::rows::{event_from_row, lease_from_row};
use crate::store::{LeaseRow, StoreError, lease_columns};

/// Read connections open at once; a read beyond that waits for one to come
/// back. Opening a connection forks a database backend, which costs
/// more than the query it serves: with connections opened on demand, the
/// checkouts' waiting-line reads opened ≈ 280 a second and held ≈ 1.4
/// cores of the database at 400 checkouts/s.
const POOL_SIZE: usize = 16;
/// The health probe's own connections, so that reads filling the pool (a
/// long CSV export) never make a reachable database look away.
const HEALTH_POOL_SIZE: usize = 2;
/// A health probe that takes longer than this counts as "database away".
const HEALTH_TIMEOUT: Duration = Duration::from_secs(2);

/// A read connection on loan; back to its pool when dropped (deadpool
/// checks that it is still open before lending it again).
pub type PooledClient = Object;

/// The replica's connections for reads (deadpool-postgres), and a pool of
/// two for the health probe.
pub struct PgPool {
    pool: Pool,
    health: Pool,
}

fn pool(config: &tokio_postgres::Config, size: usize) -> Pool {
    let manager = Manager::from_config(
        config.clone(),
        NoTls,
        ManagerConfig {
            recycling_method: RecyclingMethod::Fast,
        },
    );
    Pool::builder(manager)
        .max_size(size)
        .runtime(Runtime::Tokio1)
        .build()
        .expect("a pool with a runtime and no hooks always builds")
}

fn unavailable(e: deadpool_postgres::PoolError) -> StoreError {
    match e {
        deadpool_postgres::PoolError::Backend(e) => StoreError::from(e),
        other => StoreError::Unavailable(other.to_string()),
    }
}

impl PgPool {
    pub fn new(config: tokio_postgres::Config) -> Self {
        PgPool {
            pool: pool(&config, POOL_SIZE),
            health: pool(&config, HEALTH_POOL_SIZE),
        }
    }

    /// Connections idle in the pool now (for `/metrics`).
    pub fn idle(&self) -> usize {
        self.pool.status().available
    }

    pub(super) async fn client(&self) -> Result<PooledClient, StoreError> {
        self.pool.get().await.map_err(unavailable)
    }

    /// Every lease (optionally of one license), live or lapsed-unreaped.
    pub async fn seats(&self, license_id: Option<&str>) -> Result<Vec<LeaseRow>, StoreError> {
        let client = self.client().await?;
        let rows = client
            .query(
                concat!(
                    "SELECT ",
                    lease_columns!(),
                    " FROM leases WHERE ($1::text IS NULL OR license_id = $1)
                 ORDER BY license_id, checked_out_at, seat_id"
                ),
                &[&license_id],
            )
            .await?;
        Ok(rows.iter().map(lease_from_row).collect())
    }

    pub async fn find_seat(&self, seat_id: &str) -> Result<Option<LeaseRow>, StoreError> {
        let client = self.client().await?;
        let row = client
            .query_opt(
                concat!(
                    "SELECT ",
                    lease_columns!(),
                    " FROM leases WHERE seat_id = $1"
                ),
                &[&seat_id],
            )
            .await?;
        Ok(row.as_ref().map(lease_from_row))
    }

    pub async fn events_after(&self, after: i64, limit: usize) -> Result<Vec<Event>, StoreError> {
        let client = self.client().await?;
        let events = events_after(&client, after, limit).await?;
        Ok(events)
    }

    /// The last event id handed out in the cluster.
    pub async fn last_event_id(&self) -> Result<i64, StoreError> {
        let client = self.client().await?;
        let id: i64 = client
            .query_one("SELECT last_event_id FROM cluster WHERE id = 1", &[])
            .await?
            .get(0);
        Ok(id)
    }

    /// Can this replica reach the database right now?
    pub async fn health(&self) -> Result<(), StoreError> {
        let probe = async {
            let client = self.health.get().await.map_err(unavailable)?;
            client.query_one("SELECT 1", &[]).await?;
            Ok::<(), StoreError>(())
        };
        match tokio::time::timeout(HEALTH_TIMEOUT, probe).await {
            Ok(result) => result,
            Err(_) => Err(StoreError::Unavailable(
                "the database did not answer a health probe in time".into(),
            )),
        }
    }
}

pub(super) async fn events_after(
    client: &Client,
    after: i64,
    limit: usize,
) -> Result<Vec<Event>, StoreError> {
    let rows = client
        .query(
            "SELECT id, at, kind, license_id, seat_id, holder, detail
             FROM events WHERE id > $1 ORDER BY id LIMIT $2",
            &[&after, &(limit as i64)],
        )
        .await?;
    rows.iter().map(event_from_row).collect()
}
