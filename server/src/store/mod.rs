//! The lease store: one SQLite file in WAL mode with `synchronous=FULL`.
//!
//! - One **writer thread** ([`writer`]) owns the only write connection. Every
//!   state change is a [`writer::Command`] queued to it; it takes whatever is
//!   queued, applies it in one transaction and commits once (group commit),
//!   then answers each caller. A reply therefore means "durable". Because the
//!   writer is alone, checkouts are serialized: two racers for the last seat
//!   can never both see it free.
//! - **Readers** ([`read`]) use their own read-only connections from a small
//!   pool, so admin views never wait for the writer.
//! - Times are integer milliseconds; liveness in SQL is always
//!   `expires_at >= live_threshold(now, skew)` from `leasehold_common`.

pub mod checkpoint;
mod command;
mod error;
pub mod history;
mod live_index;
pub mod pg;
mod read;
pub mod rules;
mod schema;
pub mod seat_query;
mod sqlite_tx;
pub mod ui_sessions;
pub mod writer;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use leasehold_common::Timestamp;
use leasehold_common::api::{Event, EventKind};
use rusqlite::{Connection, OpenFlags};
use tokio::sync::{broadcast, mpsc, oneshot, watch};

use crate::clock::SharedClock;
use crate::licenses::LicensesHandle;
use crate::usage::Usage;

use checkpoint::{Checkpointer, WalHousekeeping};
use command::Command;
pub use error::StoreError;
pub use read::ReadPool;
pub use schema::CURRENT_VERSION as SCHEMA_VERSION;
#[doc(hidden)]
pub use schema::migrate_to as sqlite_migrate_to;
pub use seat_query::{SeatQuery, SeatSort, SeatsPage};
pub use ui_sessions::{UiSessionOp, UiSessionRow};
use writer::Writer;
pub use writer::WriterStats;

/// One row of the `leases` table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseRow {
    pub seat_id: String,
    pub license_id: String,
    pub holder: String,
    pub fingerprint: Option<String>,
    pub checked_out_at: Timestamp,
    pub issued_at: Timestamp,
    pub expires_at: Timestamp,
}

/// What a checkout did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CheckoutOutcome {
    /// A seat: freshly taken (`reused == false`), or the one this caller
    /// already holds, found by Idempotency-Key or fingerprint and renewed.
    Granted {
        lease: LeaseRow,
        reused: bool,
    },
    /// Every seat is live. `retry_after` is when the earliest live lease
    /// could lapse.
    Full {
        seats: u32,
        live: u32,
        retry_after: Duration,
    },
    /// An admin revoked this holder + fingerprint and blocked re-checkout.
    Blocked {
        until: Timestamp,
    },
    UnknownLicense,
}

/// What a heartbeat did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HeartbeatOutcome {
    Renewed(LeaseRow),
    /// Released, revoked, reaped or lapsed: the client must check out again.
    Lost,
}

/// Who may check out what: the parts of a checkout request the store needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckoutRequest {
    pub license_id: String,
    pub holder: String,
    pub fingerprint: Option<String>,
    pub idempotency_key: Option<String>,
}

/// What the writer decided for a command whose batch is not yet durable.
///
/// Prepare the answer from `value` (sign the token, build the body) while the
/// batch commits, and tell nobody anything before [`Applied::committed`]
/// says the batch is durable: the expensive part of a reply then overlaps
/// the fsync instead of following it.
#[derive(Debug)]
pub struct Applied<T> {
    pub value: T,
    commit: command::CommitSignal,
}

impl<T> Applied<T> {
    /// `value`, once the batch that decided it is committed.
    pub async fn committed(self) -> Result<T, StoreError> {
        let Applied { value, mut commit } = self;
        let outcome = commit
            .wait_for(Option::is_some)
            .await
            .map_err(|_| StoreError::Closed)?
            .clone();
        match outcome {
            Some(Ok(())) => Ok(value),
            Some(Err(msg)) => Err(StoreError::CommitFailed(msg)),
            None => Err(StoreError::Closed),
        }
    }
}

/// Tuning that tests change; production uses the defaults.
#[derive(Debug, Clone)]
pub struct StoreOptions {
    /// A gap this long between two writer wake-ups (process paused, VM frozen,
    /// clock jump, or the server being down) is treated as an outage: leases
    /// that were live when it began get one TTL from its end to be renewed.
    pub stall_threshold: Duration,
    /// Most commands committed in one transaction.
    pub max_batch: usize,
    /// Commands that may wait for the writer before callers are held back.
    pub queue_capacity: usize,
    /// Events kept in the log; older ones are pruned by the reaper.
    pub event_retention: i64,
    /// Usage history (sessions, denials, pool sizes) older than this is
    /// pruned, in bounded batches.
    pub history_retention: Duration,
    /// A WAL with more frames than this is started over, even under writes
    /// without a pause (see [`checkpoint`]).
    pub wal_restart_frames: i64,
    /// How often the checkpoint thread copies the WAL into the database when
    /// it is not far behind.
    pub checkpoint_every: Duration,
}

impl Default for StoreOptions {
    fn default() -> Self {
        StoreOptions {
            stall_threshold: Duration::from_secs(3),
            max_batch: 1024,
            queue_capacity: 8192,
            event_retention: 100_000,
            history_retention: Duration::from_secs(400 * 24 * 3600),
            wal_restart_frames: checkpoint::RESTART_FRAMES,
            checkpoint_every: checkpoint::CHECKPOINT_EVERY,
        }
    }
}

/// A cheap, cloneable handle on the store.
#[derive(Clone)]
pub struct Store {
    commands: mpsc::Sender<Command>,
    backend: Arc<Backend>,
    events: broadcast::Sender<Event>,
    stats: Arc<WriterStats>,
    writer_thread: Arc<Mutex<Option<JoinHandle<()>>>>,
}

/// What differs between the two stores behind the one handle: where reads
/// go and what runs beside the writer.
enum Backend {
    Sqlite {
        reads: ReadPool,
        /// Dropping the sender stops the checkpointer thread.
        checkpointer: Mutex<Option<Checkpointer>>,
    },
    Postgres {
        reads: Arc<pg::reads::PgReads>,
        /// Flipping it stops the event follower.
        stop_follower: watch::Sender<bool>,
        follower: Mutex<Option<tokio::task::JoinHandle<()>>>,
        config: tokio_postgres::Config,
    },
}

/// Which store a server runs on (for `/metrics` and the logs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreKind {
    Sqlite,
    Postgres,
}

impl StoreKind {
    pub fn as_str(self) -> &'static str {
        match self {
            StoreKind::Sqlite => "sqlite",
            StoreKind::Postgres => "postgres",
        }
    }
}

impl Store {
    /// Open (creating if needed) `<path>`, migrate it, apply the outage rule
    /// for the time the server was down, and start the writer thread.
    pub fn open(
        path: &Path,
        licenses: LicensesHandle,
        clock: SharedClock,
        options: StoreOptions,
    ) -> Result<Store, StoreError> {
        let mut conn = open_connection(path, false)?;
        schema::migrate(&mut conn)?;
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
        let (events, _) = broadcast::channel(4096);
        let (commands, rx) = mpsc::channel(options.queue_capacity);
        let stats = Arc::new(WriterStats::default());
        let writer = Writer::start(
            conn,
            licenses,
            clock,
            events.clone(),
            options,
            stats.clone(),
            wal,
        )?;
        let thread = std::thread::Builder::new()
            .name("store-writer".into())
            .spawn(move || writer.run(rx))
            .map_err(|source| StoreError::ThreadSpawn {
                thread: "writer",
                source,
            })?;
        Ok(Store {
            commands,
            backend: Arc::new(Backend::Sqlite {
                reads: ReadPool::new(path.to_path_buf()),
                checkpointer: Mutex::new(Some(checkpointer)),
            }),
            events,
            stats,
            writer_thread: Arc::new(Mutex::new(Some(thread))),
        })
    }

    /// Start this replica on PostgreSQL, after [`pg::prepare`]: the writer
    /// thread, the read pool and the event follower (which feeds
    /// [`Store::subscribe`] with every replica's events).
    pub fn open_postgres(
        config: tokio_postgres::Config,
        clock: pg::writer::DecisionClock,
        start: pg::StartPoint,
        licenses: LicensesHandle,
        options: StoreOptions,
    ) -> Result<Store, StoreError> {
        let (events, _) = broadcast::channel(4096);
        let (commands, rx) = mpsc::channel(options.queue_capacity);
        let stats = Arc::new(WriterStats::default());
        let writer = pg::writer::PgWriter::new(
            postgres::Config::from(config.clone()),
            clock,
            licenses,
            start.licenses_version,
            options,
            stats.clone(),
        );
        let thread = std::thread::Builder::new()
            .name("store-writer".into())
            .spawn(move || writer.run(rx))
            .map_err(|source| StoreError::ThreadSpawn {
                thread: "store-writer",
                source,
            })?;
        let (stop_follower, stop) = watch::channel(false);
        let follower = tokio::spawn(pg::follower::follow(
            config.clone(),
            events.clone(),
            start.last_event_id,
            stop,
        ));
        Ok(Store {
            commands,
            backend: Arc::new(Backend::Postgres {
                reads: Arc::new(pg::reads::PgReads::new(config.clone())),
                stop_follower,
                follower: Mutex::new(Some(follower)),
                config,
            }),
            events,
            stats,
            writer_thread: Arc::new(Mutex::new(Some(thread))),
        })
    }

    pub fn kind(&self) -> StoreKind {
        match *self.backend {
            Backend::Sqlite { .. } => StoreKind::Sqlite,
            Backend::Postgres { .. } => StoreKind::Postgres,
        }
    }

    /// Can the store take writes right now? (SQLite: always, while open;
    /// PostgreSQL: the database answers.)
    pub async fn health(&self) -> Result<(), StoreError> {
        match &*self.backend {
            Backend::Sqlite { .. } => Ok(()),
            Backend::Postgres { reads, .. } => {
                let reads = reads.clone();
                detached(async move { reads.health().await }).await
            }
        }
    }

    /// PostgreSQL's shared waiting line (`None` on SQLite, where the line
    /// is the server's own, in memory).
    pub fn shared_line(&self) -> Option<Arc<pg::reads::PgReads>> {
        match &*self.backend {
            Backend::Sqlite { .. } => None,
            Backend::Postgres { reads, .. } => Some(reads.clone()),
        }
    }

    /// Idle connections in the PostgreSQL read pool (`None` on SQLite).
    pub fn read_pool_idle(&self) -> Option<usize> {
        match &*self.backend {
            Backend::Sqlite { .. } => None,
            Backend::Postgres { reads, .. } => Some(reads.idle()),
        }
    }

    /// PostgreSQL: make `licenses` (the text of a licenses file) the
    /// cluster's policy, with one `config` event if it changed anything.
    /// `None` on SQLite, where the file is the policy.
    pub async fn publish_licenses(
        &self,
        text: String,
        licenses: leasehold_common::Licenses,
        why: &'static str,
    ) -> Option<Result<pg::Published, StoreError>> {
        let Backend::Postgres { config, .. } = &*self.backend else {
            return None;
        };
        let config = postgres::Config::from(config.clone());
        let published = tokio::task::spawn_blocking(move || {
            let mut client = pg::connect_sync(&config)?;
            pg::publish_licenses_sync(&mut client, &text, &licenses, why).map_err(StoreError::from)
        })
        .await
        .map_err(|_| StoreError::Closed)
        .and_then(|r| r);
        Some(published)
    }

    async fn call<T>(
        &self,
        make: impl FnOnce(oneshot::Sender<Result<T, StoreError>>) -> Command,
    ) -> Result<T, StoreError> {
        let (tx, rx) = oneshot::channel();
        self.commands
            .send(make(tx))
            .await
            .map_err(|_| StoreError::Closed)?;
        rx.await.map_err(|_| StoreError::Closed)?
    }

    pub async fn checkout(&self, req: CheckoutRequest) -> Result<CheckoutOutcome, StoreError> {
        self.checkout_applied(req, 0, true).await?.committed().await
    }

    /// A checkout with `ahead` waiters in line before it: it succeeds only if
    /// a seat is free for each of them and one more. Answers as soon as the
    /// writer has decided; see [`Applied`].
    ///
    /// `counted`: a refusal is the answer the client gets (it counts as a
    /// denial in the usage history); `false` for an attempt that will be
    /// retried while the client waits in line.
    pub async fn checkout_applied(
        &self,
        req: CheckoutRequest,
        ahead: u32,
        counted: bool,
    ) -> Result<Applied<CheckoutOutcome>, StoreError> {
        self.call(|reply| Command::Checkout {
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
        self.heartbeat_applied(license_id, seat_id)
            .await?
            .committed()
            .await
    }

    /// A heartbeat, answered as soon as the writer has decided; see [`Applied`].
    pub async fn heartbeat_applied(
        &self,
        license_id: &str,
        seat_id: &str,
    ) -> Result<Applied<HeartbeatOutcome>, StoreError> {
        let (license_id, seat_id) = (license_id.to_string(), seat_id.to_string());
        self.call(|reply| Command::Heartbeat {
            license_id,
            seat_id,
            reply,
        })
        .await
    }

    /// Release a seat of `license_id`. Idempotent: `false` if it was not there.
    pub async fn release(&self, license_id: &str, seat_id: &str) -> Result<bool, StoreError> {
        let (license_id, seat_id) = (license_id.to_string(), seat_id.to_string());
        self.call(|reply| Command::Release {
            license_id,
            seat_id,
            reply,
        })
        .await
    }

    /// Revoke a seat (admin). `None` if no such seat.
    pub async fn revoke(
        &self,
        seat_id: &str,
        reason: Option<String>,
        block: Option<Duration>,
    ) -> Result<Option<LeaseRow>, StoreError> {
        let seat_id = seat_id.to_string();
        self.call(|reply| Command::Revoke {
            seat_id,
            reason,
            block,
            reply,
        })
        .await
    }

    /// Delete up to `limit` reapable leases; returns how many.
    pub async fn reap(&self, limit: usize) -> Result<usize, StoreError> {
        self.call(|reply| Command::Reap { limit, reply }).await
    }

    /// Delete usage history older than the retention, at most `limit` rows
    /// of each record; returns how many rows went.
    pub async fn prune_history(&self, limit: usize) -> Result<usize, StoreError> {
        self.call(|reply| Command::PruneHistory { limit, reply })
            .await
    }

    /// Wake the writer so it notices stalls and records that the server is
    /// alive, even when no client is talking to it.
    pub async fn tick(&self) -> Result<(), StoreError> {
        self.call(|reply| Command::Tick { reply }).await
    }

    /// Append an event that is not tied to a lease change (config reloads).
    pub async fn record_event(
        &self,
        kind: EventKind,
        license_id: Option<String>,
        detail: String,
    ) -> Result<Event, StoreError> {
        self.call(|reply| Command::RecordEvent {
            kind,
            license_id,
            detail,
            reply,
        })
        .await
    }

    /// Every lease (optionally of one license), live or lapsed-unreaped.
    pub async fn seats(&self, license_id: Option<&str>) -> Result<Vec<LeaseRow>, StoreError> {
        let license_id = license_id.map(str::to_string);
        if let Backend::Postgres { reads, .. } = &*self.backend {
            let reads = reads.clone();
            return detached(async move { reads.seats(license_id.as_deref()).await }).await;
        }
        self.read(move |c| read::seats(c, license_id.as_deref()))
            .await
    }

    /// One page of seats: filtered, sorted and cut in SQL (see
    /// [`seat_query`]).
    pub async fn seats_page(&self, query: SeatQuery) -> Result<SeatsPage, StoreError> {
        if let Backend::Postgres { reads, .. } = &*self.backend {
            let reads = reads.clone();
            return detached(async move { reads.seats_page(&query).await }).await;
        }
        self.read(move |c| seat_query::sqlite_page(c, &query)).await
    }

    /// The dashboard session whose id hashes to `id_sha256`, expired or not.
    pub async fn ui_session(&self, id_sha256: &str) -> Result<Option<UiSessionRow>, StoreError> {
        let id = id_sha256.to_string();
        if let Backend::Postgres { reads, .. } = &*self.backend {
            let reads = reads.clone();
            return detached(async move { reads.ui_session(&id).await }).await;
        }
        self.read(move |c| ui_sessions::get(c, &id)).await
    }

    /// Create, touch or delete dashboard sessions: through the writer on
    /// SQLite, on the read pool on PostgreSQL. Returns the rows changed.
    pub async fn ui_session_write(&self, op: UiSessionOp) -> Result<usize, StoreError> {
        if let Backend::Postgres { reads, .. } = &*self.backend {
            let reads = reads.clone();
            return detached(async move { reads.ui_session_write(&op).await }).await;
        }
        self.call(|reply| Command::UiSession { op, reply }).await
    }

    /// Live seats per license, by the one predicate (from the writer's live
    /// index, so it costs no scan however many leases there are).
    pub async fn live_counts(&self) -> Result<Vec<(String, u32)>, StoreError> {
        self.call(|reply| Command::LiveCounts { reply }).await
    }

    pub async fn events_after(&self, after: i64, limit: usize) -> Result<Vec<Event>, StoreError> {
        if let Backend::Postgres { reads, .. } = &*self.backend {
            let reads = reads.clone();
            return detached(async move { reads.events_after(after, limit).await }).await;
        }
        self.read(move |c| read::events_after(c, after, limit))
            .await
    }

    pub async fn find_seat(&self, seat_id: &str) -> Result<Option<LeaseRow>, StoreError> {
        let seat_id = seat_id.to_string();
        if let Backend::Postgres { reads, .. } = &*self.backend {
            let reads = reads.clone();
            return detached(async move { reads.find_seat(&seat_id).await }).await;
        }
        self.read(move |c| read::find_seat(c, &seat_id)).await
    }

    /// One page of a license's sessions, newest first (see
    /// [`history::SessionsQuery`]). A read: it never waits for the writer.
    pub async fn sessions_page(
        &self,
        query: history::SessionsQuery,
    ) -> Result<Vec<leasehold_common::api::SessionView>, StoreError> {
        if let Backend::Postgres { reads, .. } = &*self.backend {
            let reads = reads.clone();
            return detached(async move { pg::history::sessions_page(&reads, &query).await }).await;
        }
        self.read_store(move |c| history::sessions_page(c, &query))
            .await
    }

    /// A license's usage over a range (see [`crate::usage`]). A read: it
    /// never waits for the writer.
    pub async fn usage(&self, query: history::UsageQuery) -> Result<Usage, StoreError> {
        if let Backend::Postgres { reads, .. } = &*self.backend {
            let reads = reads.clone();
            return detached(async move { pg::history::usage(&reads, &query).await }).await;
        }
        self.read_store(move |c| history::usage(c, &query)).await
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

    async fn read<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Connection) -> rusqlite::Result<T> + Send + 'static,
    ) -> Result<T, StoreError> {
        let backend = self.backend.clone();
        tokio::task::spawn_blocking(move || match &*backend {
            Backend::Sqlite { reads, .. } => reads.with(f),
            // Every read method sends PostgreSQL reads to pg::reads first.
            Backend::Postgres { .. } => Err(StoreError::Unavailable(
                "an SQLite read was asked of the PostgreSQL store".into(),
            )),
        })
        .await
        .map_err(|_| StoreError::Closed)?
    }

    /// [`Store::read`] for reads that fail with any [`StoreError`].
    async fn read_store<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Connection) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        let backend = self.backend.clone();
        tokio::task::spawn_blocking(move || match &*backend {
            Backend::Sqlite { reads, .. } => reads.with_store(f),
            Backend::Postgres { .. } => Err(StoreError::Unavailable(
                "an SQLite read was asked of the PostgreSQL store".into(),
            )),
        })
        .await
        .map_err(|_| StoreError::Closed)?
    }

    /// Finish queued commands, record a clean stop and join the writer.
    /// Commands sent after this fail with [`StoreError::Closed`].
    pub async fn close(&self) {
        let _ = self.call(|reply| Command::Shutdown { reply }).await;
        let handle = self
            .writer_thread
            .lock()
            .map(|mut g| g.take())
            .unwrap_or(None);
        if let Some(handle) = handle {
            let _ = tokio::task::spawn_blocking(move || handle.join()).await;
        }
        match &*self.backend {
            Backend::Sqlite { checkpointer, .. } => {
                let checkpointer = checkpointer.lock().map(|mut g| g.take()).unwrap_or(None);
                if let Some((stop, handle)) = checkpointer {
                    drop(stop);
                    let _ = tokio::task::spawn_blocking(move || handle.join()).await;
                }
            }
            Backend::Postgres {
                stop_follower,
                follower,
                ..
            } => {
                let _ = stop_follower.send(true);
                let follower = follower.lock().map(|mut g| g.take()).unwrap_or(None);
                if let Some(follower) = follower {
                    let _ = follower.await;
                }
            }
        }
    }
}

/// Run a PostgreSQL read as its own task: tokio-postgres futures are `Send`
/// but not `Sync`, and some callers (SSE streams) must be both.
/// It is spawned at once, so the caller's future holds only the handle.
fn detached<T: Send + 'static>(
    read: impl Future<Output = Result<T, StoreError>> + Send + 'static,
) -> impl Future<Output = Result<T, StoreError>> + Send + Sync {
    let task = tokio::spawn(read);
    async move { task.await.map_err(|_| StoreError::Closed)? }
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
