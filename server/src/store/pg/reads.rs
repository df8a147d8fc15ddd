//! Read-side queries on PostgreSQL, on a small pool of async connections,
//! so admin views never wait for the writer.

use std::sync::Mutex;
use std::time::Duration;

use leasehold_common::Timestamp;
use leasehold_common::api::{Event, EventKind};
use tokio_postgres::{Client, NoTls, Row};

use super::super::{LeaseRow, StoreError};
pub(super) use super::tx::lease_from_row;

/// Idle connections kept for reuse; more are opened on demand under load.
const POOL_KEEP: usize = 8;
/// A health probe that takes longer than this counts as "database away".
const HEALTH_TIMEOUT: Duration = Duration::from_secs(2);

pub struct PgReads {
    config: tokio_postgres::Config,
    idle: Mutex<Vec<Client>>,
}

impl PgReads {
    pub fn new(config: tokio_postgres::Config) -> Self {
        PgReads {
            config,
            idle: Mutex::new(Vec::new()),
        }
    }

    /// Connections idle in the pool now (for `/metrics`).
    pub fn idle(&self) -> usize {
        self.idle.lock().map_or(0, |idle| idle.len())
    }

    pub(super) async fn client(&self) -> Result<Client, StoreError> {
        loop {
            let pooled = self.idle.lock().ok().and_then(|mut idle| idle.pop());
            match pooled {
                Some(c) if !c.is_closed() => return Ok(c),
                Some(_) => continue,
                None => break,
            }
        }
        let (client, connection) = self.config.connect(NoTls).await?;
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::debug!("store: read connection ended: {e}");
            }
        });
        Ok(client)
    }

    pub(super) fn give_back(&self, client: Client) {
        if let Ok(mut idle) = self.idle.lock()
            && idle.len() < POOL_KEEP
            && !client.is_closed()
        {
            idle.push(client);
        }
    }

    /// Every lease (optionally of one license), live or lapsed-unreaped.
    pub async fn seats(&self, license_id: Option<&str>) -> Result<Vec<LeaseRow>, StoreError> {
        let client = self.client().await?;
        let rows = client
            .query(
                "SELECT seat_id, license_id, holder, fingerprint, checked_out_at, issued_at,
                        expires_at
                 FROM leases WHERE ($1::text IS NULL OR license_id = $1)
                 ORDER BY license_id, checked_out_at, seat_id",
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
                "SELECT seat_id, license_id, holder, fingerprint, checked_out_at, issued_at,
                        expires_at
                 FROM leases WHERE seat_id = $1",
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
            let client = self.client().await?;
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
