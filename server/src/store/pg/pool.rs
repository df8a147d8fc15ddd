//! A replica's pool of async connections to PostgreSQL (everything but its
//! writer uses it: reads, dashboard sessions, the shared waiting line), and
//! the plain reads of leases and events.

use std::ops::{Deref, DerefMut};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use leasehold_common::Timestamp;
use leasehold_common::api::{Event, EventKind};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_postgres::{Client, NoTls, Row};

pub(super) use super::tx::lease_from_row;
use crate::store::{LeaseRow, StoreError, lease_columns};

/// Read connections open at once; a read beyond that waits for one to be
/// given back. Opening a connection forks a database backend, which costs
/// more than the query it serves: with connections opened on demand, the
/// checkouts' waiting-line reads opened ≈ 280 a second and held ≈ 1.4
/// cores of the database at 400 checkouts/s.
const POOL_SIZE: usize = 16;
/// The health probe's own connections, so that reads filling the pool (a
/// long CSV export) never make a reachable database look away.
const HEALTH_POOL_SIZE: usize = 2;
/// A health probe that takes longer than this counts as "database away".
const HEALTH_TIMEOUT: Duration = Duration::from_secs(2);

/// At most `permits` connections, kept open between reads.
struct Pool {
    idle: Mutex<Vec<Client>>,
    permits: Arc<Semaphore>,
}

impl Pool {
    fn new(size: usize) -> Arc<Pool> {
        Arc::new(Pool {
            idle: Mutex::new(Vec::with_capacity(size)),
            permits: Arc::new(Semaphore::new(size)),
        })
    }

    async fn get(
        self: &Arc<Pool>,
        config: &tokio_postgres::Config,
    ) -> Result<PooledClient, StoreError> {
        let permit = self
            .permits
            .clone()
            .acquire_owned()
            .await
            .map_err(|_| StoreError::Unavailable("the read pool is closed".into()))?;
        loop {
            let pooled = self.idle.lock().ok().and_then(|mut idle| idle.pop());
            match pooled {
                Some(c) if !c.is_closed() => return Ok(self.lend(c, permit)),
                Some(_) => continue,
                None => break,
            }
        }
        let (client, connection) = config.connect(NoTls).await?;
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::debug!("store: read connection ended: {e}");
            }
        });
        Ok(self.lend(client, permit))
    }

    fn lend(self: &Arc<Pool>, client: Client, permit: OwnedSemaphorePermit) -> PooledClient {
        PooledClient {
            client,
            pool: self.clone(),
            _permit: permit,
        }
    }
}

/// A read connection on loan: [`PgReads::give_back`] returns it for reuse;
/// dropped instead (a read that failed part-way), it is closed. Either way
/// its place in the pool is free again.
pub struct PooledClient {
    client: Client,
    pool: Arc<Pool>,
    _permit: OwnedSemaphorePermit,
}

impl Deref for PooledClient {
    type Target = Client;
    fn deref(&self) -> &Client {
        &self.client
    }
}

impl DerefMut for PooledClient {
    fn deref_mut(&mut self) -> &mut Client {
        &mut self.client
    }
}

pub struct PgPool {
    config: tokio_postgres::Config,
    pool: Arc<Pool>,
    health: Arc<Pool>,
}

impl PgPool {
    pub fn new(config: tokio_postgres::Config) -> Self {
        PgPool {
            config,
            pool: Pool::new(POOL_SIZE),
            health: Pool::new(HEALTH_POOL_SIZE),
        }
    }

    /// Connections idle in the pool now (for `/metrics`).
    pub fn idle(&self) -> usize {
        self.pool.idle.lock().map_or(0, |idle| idle.len())
    }

    pub(super) async fn client(&self) -> Result<PooledClient, StoreError> {
        self.pool.get(&self.config).await
    }

    /// Back to its pool for the next read (the permit goes with the
    /// connection's return, so a waiting read finds it idle).
    pub(super) fn give_back(&self, loan: PooledClient) {
        let PooledClient {
            client,
            pool,
            _permit,
        } = loan;
        if !client.is_closed()
            && let Ok(mut idle) = pool.idle.lock()
        {
            idle.push(client);
        }
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
        self.give_back(client);
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
        self.give_back(client);
        Ok(row.as_ref().map(lease_from_row))
    }

    pub async fn events_after(&self, after: i64, limit: usize) -> Result<Vec<Event>, StoreError> {
        let client = self.client().await?;
        let events = events_after(&client, after, limit).await?;
        self.give_back(client);
        Ok(events)
    }

    /// The last event id handed out in the cluster.
    pub async fn last_event_id(&self) -> Result<i64, StoreError> {
        let client = self.client().await?;
        let id: i64 = client
            .query_one("SELECT last_event_id FROM cluster WHERE id = 1", &[])
            .await?
            .get(0);
        self.give_back(client);
        Ok(id)
    }

    /// Can this replica reach the database right now?
    pub async fn health(&self) -> Result<(), StoreError> {
        let probe = async {
            let client = self.health.get(&self.config).await?;
            client.query_one("SELECT 1", &[]).await?;
            self.give_back(client);
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

fn event_from_row(r: &Row) -> Result<Event, StoreError> {
    let kind: String = r.get(2);
    Ok(Event {
        id: r.get(0),
        at: Timestamp::from_millis(r.get(1)),
        kind: EventKind::parse(&kind).ok_or(StoreError::UnknownEventKind(kind))?,
        license_id: r.get(3),
        seat_id: r.get(4),
        holder: r.get(5),
        detail: r.get(6),
    })
}
