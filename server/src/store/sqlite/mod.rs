//! The SQLite store: one file in WAL mode with `synchronous=FULL`.
//!
//! - The writer ([`writer::SqliteBatches`] under the shared batch loop)
//!   owns the only connection that changes leases; checkouts are therefore
//!   serialized, and two racers for the last seat can never both see it
//!   free. Counting comes from its in-memory [`live_index`].
//! - Reads ([`SqliteBackend`]) use read-only connections from a small pool,
//!   so admin views never wait for the writer.
//! - A checkpoint thread ([`checkpoint`]) copies the WAL back outside the
//!   writer's commits.
//! - Dashboard sign-ins are written on a connection of their own:
//!   they are not lease rules, and a sign-in is rare next to checkouts.

mod bulk;
pub mod checkpoint;
pub(crate) mod denials;
mod entitlement_ids;
mod history;
mod live_index;
mod outbox;
mod read;
mod rows;
pub mod schema;
mod seat_query;
mod sign_ins;
mod tx;
mod what_if;
pub mod writer;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::future::BoxFuture;
use leasehold_common::Timestamp;
use leasehold_common::api::{DenialView, Event, SessionView};
use rusqlite::{Connection, OpenFlags};
use tokio::sync::broadcast;

use super::backend::{Answer, StoreBackend};
use super::batch::{Writer, WriterStats};
use super::denials::DenialsQuery;
use super::entitlement_ids::EntitlementId;
use super::history::{SessionsQuery, UsageQuery};
use super::outbox::{AlertState, DeliveriesQuery, DeliveryRow, WebhookStats};
use super::repeats::RepeatedDenials;
use super::seat_query::{SeatQuery, SeatsPage};
use super::sign_ins::{SignInOp, SignInRow};
use super::{LeaseRow, Store, StoreError, StoreKind, StoreOptions};
use crate::clock::SharedClock;
use crate::licenses::LicensesHandle;
use crate::usage::Usage;
use crate::usage::what_if::{Demand, WhatIfQuery};
use checkpoint::{Checkpointer, WalHousekeeping};
use read::ReadPool;
use writer::SqliteBatches;

/// Open (creating if needed) `path`, migrate it, and start the writer (its
/// first batch applies the outage rule to the time the server was down).
pub fn open(
    path: &Path,
    licenses: LicensesHandle,
    clock: SharedClock,
    options: StoreOptions,
) -> Result<Store, StoreError> {
    let mut conn = open_connection(path, false)?;
    schema::migrate(&mut conn)?;
    // One owner process: claims left by one that died are nobody's now.
    outbox::release_claims(&conn)?;
    // Checkpoints run on their own thread, not inside the writer's
    // COMMIT, so group commit never stalls behind copying the WAL back.
    conn.pragma_update(None, "wal_autocheckpoint", 0)?;
    let wal = Arc::new(WalHousekeeping::new(options.wal_restart_frames));
    let checkpoint_path = path.to_path_buf();
    let checkpointer = checkpoint::spawn_checkpointer(
        move || open_connection(&checkpoint_path, false),
        wal.clone(),
        options.checkpoint_every,
    )?;
    let stats = Arc::new(WriterStats::default());
    let (events, _) = broadcast::channel(4096);
    // One writer owns every seat, so it can let denials be repeated
    // beside it (`store/repeats.rs`).
    let repeats = Arc::new(RepeatedDenials::new(clock.clone(), licenses.clone()));
    let batches = SqliteBatches::new(conn, licenses, clock, stats.clone(), wal)?;
    let mut writer = Writer::new(
        batches,
        options.clone(),
        stats.clone(),
        Some(events.clone()),
    )
    .repeating(repeats.clone());
    writer.process(Vec::new());
    let reads = SqliteBackend {
        pool: Arc::new(ReadPool::new(path.to_path_buf())),
        sign_ins: Arc::new(Mutex::new(open_connection(path, false)?)),
        checkpointer: Mutex::new(Some(checkpointer)),
    };
    let mut store = Store::start(writer, Arc::new(reads), events, stats, &options)?;
    store.repeats = Some(repeats);
    Ok(store)
}

/// SQLite's read side: the read pool, the sign-ins' connection and
/// the checkpoint thread.
pub struct SqliteBackend {
    pool: Arc<ReadPool>,
    sign_ins: Arc<Mutex<Connection>>,
    /// Dropping the sender stops the checkpointer thread.
    checkpointer: Mutex<Option<Checkpointer>>,
}

impl SqliteBackend {
    /// Run `f` on a pooled read-only connection, off the runtime.
    fn read<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Connection) -> Result<T, StoreError> + Send + 'static,
    ) -> Answer<T> {
        let pool = self.pool.clone();
        Box::pin(async move {
            tokio::task::spawn_blocking(move || pool.with(f))
                .await
                .map_err(|_| StoreError::Closed)?
        })
    }
}

impl StoreBackend for SqliteBackend {
    fn kind(&self) -> StoreKind {
        StoreKind::Sqlite
    }

    /// An open file takes writes.
    fn health(&self) -> Answer<()> {
        Box::pin(async { Ok(()) })
    }

    fn seats(&self, license_id: Option<String>) -> Answer<Vec<LeaseRow>> {
        self.read(move |c| Ok(read::seats(c, license_id.as_deref())?))
    }

    fn seats_page(&self, query: SeatQuery) -> Answer<SeatsPage> {
        self.read(move |c| Ok(seat_query::page(c, &query)?))
    }

    fn find_seat(&self, seat_id: String) -> Answer<Option<LeaseRow>> {
        self.read(move |c| Ok(read::find_seat(c, &seat_id)?))
    }

    fn events_after(&self, after: i64, limit: usize) -> Answer<Vec<Event>> {
        self.read(move |c| Ok(read::events_after(c, after, limit)?))
    }

    fn sessions_page(&self, query: SessionsQuery) -> Answer<Vec<SessionView>> {
        self.read(move |c| history::sessions_page(c, &query))
    }

    fn usage(&self, query: UsageQuery) -> Answer<Usage> {
        self.read(move |c| history::usage(c, &query))
    }

    fn what_if_demand(&self, query: WhatIfQuery) -> Answer<Demand> {
        self.read(move |c| what_if::what_if_demand(c, &query))
    }

    fn denials_page(&self, query: DenialsQuery) -> Answer<Vec<DenialView>> {
        self.read(move |c| denials::denials_page(c, &query))
    }

    fn webhook_stats(&self) -> Answer<Vec<WebhookStats>> {
        self.read(outbox::webhook_stats)
    }

    fn deliveries_page(&self, query: DeliveriesQuery) -> Answer<Vec<DeliveryRow>> {
        self.read(move |c| outbox::deliveries_page(c, &query))
    }

    fn alert_states(&self) -> Answer<Vec<AlertState>> {
        self.read(outbox::read_alert_states)
    }

    fn deliveries_due(&self, now: Timestamp) -> Answer<bool> {
        self.read(move |c| outbox::deliveries_due(c, now))
    }

    fn sign_in(&self, id_sha256: String) -> Answer<Option<SignInRow>> {
        self.read(move |c| Ok(sign_ins::get(c, &id_sha256)?))
    }

    fn sign_in_write(&self, op: SignInOp) -> Answer<usize> {
        let sign_ins = self.sign_ins.clone();
        Box::pin(async move {
            tokio::task::spawn_blocking(move || {
                let conn = sign_ins.lock().map_err(|_| StoreError::Closed)?;
                sign_ins::apply(&conn, &op)
            })
            .await
            .map_err(|_| StoreError::Closed)?
        })
    }

    fn entitlement_ids(&self) -> Answer<Vec<EntitlementId>> {
        self.read(|c| Ok(entitlement_ids::read(c)?))
    }

    fn remember_entitlement_ids(&self, ids: Vec<EntitlementId>) -> Answer<usize> {
        // The sign-ins' connection: a write beside the lease writer.
        let conn = self.sign_ins.clone();
        Box::pin(async move {
            tokio::task::spawn_blocking(move || {
                let conn = conn.lock().map_err(|_| StoreError::Closed)?;
                Ok(entitlement_ids::remember(&conn, &ids)?)
            })
            .await
            .map_err(|_| StoreError::Closed)?
        })
    }

    fn close(&self) -> BoxFuture<'static, ()> {
        let checkpointer = self
            .checkpointer
            .lock()
            .map(|mut g| g.take())
            .unwrap_or(None);
        Box::pin(async move {
            if let Some((stop, handle)) = checkpointer {
                drop(stop);
                let _ = tokio::task::spawn_blocking(move || handle.join()).await;
            }
        })
    }
}

/// Open a connection with the pragmas every connection needs.
fn open_connection(path: &Path, read_only: bool) -> Result<Connection, StoreError> {
    let flags = if read_only {
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX
    } else {
        OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_CREATE
            | OpenFlags::SQLITE_OPEN_NO_MUTEX
    };
    let conn = Connection::open_with_flags(path, flags)?;
    conn.busy_timeout(Duration::from_secs(5))?;
    if !read_only {
        // Small pages for a new database (a no-op on an existing one): leases
        // are keyed by random seat ids, so every write dirties a page of its
        // own, and each dirty page is copied whole into the WAL.
        conn.pragma_update(None, "page_size", 1024)?;
        // WAL lets readers run beside the writer; FULL makes a commit survive
        // power loss, which is what "acknowledged" promises.
        let mode: String = conn.query_row("PRAGMA journal_mode=WAL", [], |r| r.get(0))?;
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(StoreError::NotWal {
                path: path.to_path_buf(),
                mode,
            });
        }
        conn.pragma_update(None, "synchronous", "FULL")?;
        // The writer's own page cache, small on purpose: a COMMIT after a
        // B-tree rebalance scans the cache's whole hash table (an SQLite
        // quirk, BENCHMARKS "What limits throughput"), and a page it does not
        // hold is read through the memory map below. 8 MiB against 64 MiB:
        // the same at 1,000 leases, faster and 70 MiB less RSS at 1,000,000.
        conn.pragma_update(None, "cache_size", -8_192)?;
        // A command's savepoint keeps the first copy of each page it
        // changes. Past 64 KiB SQLite spilled that copy to a temporary file,
        // created and deleted per command: a fifth of the writer's time in a
        // bulk reap (perf). In memory it is at most a few MiB.
        conn.pragma_update(None, "temp_store", "MEMORY")?;
    }
    // Reads through a memory map skip a read() system call per page. Mapped
    // pages count in the server's RSS, so the map is kept to 128 MiB: with
    // 256 MiB and a million leases, RSS reached 290 MiB, 185 MiB of it the
    // map; with 64 MiB, checkout p99 at a million leases rose by a third.
    conn.pragma_update(None, "mmap_size", 128 * 1024 * 1024)?;
    // Check it is a database at all, so a corrupt file fails at start-up with
    // SQLite's own words ("file is not a database") and not on first use.
    conn.query_row("SELECT count(*) FROM sqlite_master", [], |_| Ok(()))?;
    Ok(conn)
}

/// Where the database lives inside a data dir.
pub fn database_path(data_dir: &Path) -> PathBuf {
    data_dir.join("leasehold.db")
}
