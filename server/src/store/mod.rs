//! The lease store: the rules written once ([`rules`]), run over one of two
//! stores: [`sqlite`] (one file, the default) or [`pg`] (any number of
//! replicas on one PostgreSQL database).
//!
//! - Every state change is a [`command::Command`] queued to the store's one
//!   **writer thread**, which applies whatever is queued in one transaction
//!   and commits once (group commit, [`batch`]), then answers each caller.
//!   A reply therefore means "durable".
//! - **Reads** ([`backend::StoreBackend`]) run beside the writer, so admin
//!   views never wait for it.
//! - Times are integer milliseconds; liveness in SQL is always
//!   `expires_at >= live_threshold(now, skew)` from `leasehold_common`.

pub mod backend;
pub mod batch;
mod command;
mod error;
pub mod history;
mod lease_tx;
#[cfg(test)]
mod memory;
pub mod pg;
pub mod rules;
#[cfg(test)]
mod rules_props;
pub mod seat_query;
pub mod sqlite;
pub mod ui_sessions;

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use leasehold_common::Timestamp;
use leasehold_common::api::{Event, EventKind};
use tokio::sync::{broadcast, mpsc, oneshot};

use crate::clock::SharedClock;
use crate::licenses::LicensesHandle;
use crate::usage::Usage;

use backend::StoreBackend;
pub use batch::WriterStats;
use batch::{BatchStore, Writer};
use command::{Command, RuleCommand};
pub use error::StoreError;
pub use lease_tx::Scope;
pub use seat_query::{SeatQuery, SeatSort, SeatsPage};
pub use sqlite::database_path;
pub use sqlite::schema::CURRENT_VERSION as SCHEMA_VERSION;
#[doc(hidden)]
pub use sqlite::schema::migrate_to as sqlite_migrate_to;
pub use ui_sessions::{UiSessionOp, UiSessionRow};

/// The columns of a [`LeaseRow`], in its fields' order, as both stores
/// name them. A macro, so queries can be `concat!`-ed at compile time (no
/// `format!` on the writer's hot path).
macro_rules! lease_columns {
    () => {
        "seat_id, license_id, holder, fingerprint, checked_out_at, issued_at, expires_at, grp, mode"
    };
}
pub(crate) use lease_columns;

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
    /// The group the seat counts for, fixed when it was granted (`None`:
    /// ungrouped). A group the policy no longer has counts for nobody.
    pub group: Option<String>,
    pub mode: SeatMode,
}

/// How a seat is kept until `expires_at`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SeatMode {
    /// Renewed by its client's heartbeats.
    #[default]
    Heartbeat,
    /// Released by its client on a license with `linger`: it counts until
    /// `expires_at`, and its machine may re-claim it meanwhile.
    Linger,
    /// Borrowed for offline use: no heartbeats until `expires_at`.
    Borrow,
}

impl SeatMode {
    /// As stored (`leases.mode`).
    pub fn code(self) -> i32 {
        match self {
            SeatMode::Heartbeat => 0,
            SeatMode::Linger => 1,
            SeatMode::Borrow => 2,
        }
    }

    pub fn from_code(code: i32) -> Option<SeatMode> {
        match code {
            0 => Some(SeatMode::Heartbeat),
            1 => Some(SeatMode::Linger),
            2 => Some(SeatMode::Borrow),
            _ => None,
        }
    }
}

/// What a checkout did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CheckoutOutcome {
    /// A seat: freshly taken (`reused == false`), or the one this caller
    /// already holds, found by Idempotency-Key or fingerprint and renewed.
    /// `overage`: a fresh seat that left more seats live than sold.
    Granted {
        lease: LeaseRow,
        reused: bool,
        overage: bool,
    },
    /// No seat for this request: every seat live (with the overage), or
    /// held back for other groups (`reserved`: their unused reservations).
    /// `retry_after` is when the earliest live lease could lapse.
    Full {
        seats: u32,
        live: u32,
        reserved: u32,
        retry_after: Duration,
    },
    /// A cap the requester is at: its holder's or its group's live seats.
    LimitReached {
        limit: Limit,
        max: u32,
        group: Option<String>,
        retry_after: Duration,
    },
    /// The requester may not have this seat, and why.
    NotAllowed(NotAllowedBecause),
    /// An admin revoked this holder + fingerprint and blocked re-checkout.
    Blocked {
        until: Timestamp,
    },
    /// A borrow longer than the license's `borrow.max` (a 400: bad input,
    /// not a refusal).
    BorrowTooLong {
        max: Duration,
    },
    UnknownLicense,
}

/// Which cap refused a checkout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    /// `max_per_holder`.
    Holder,
    /// The group's `max`.
    Group,
    /// `borrow.seats`: seats of the license borrowed at once.
    Borrow,
}

impl Limit {
    pub fn as_str(self) -> &'static str {
        match self {
            Limit::Holder => "holder",
            Limit::Group => "group",
            Limit::Borrow => "borrow",
        }
    }
}

/// What counts against one license's pool now, by the one predicate.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PoolCounts {
    /// Every seat that counts: live, lingering and borrowed.
    pub live: u32,
    pub lingering: u32,
    pub borrowed: u32,
    /// Live seats per group of the policy, in file order.
    pub groups: Vec<(String, u32)>,
}

/// What a heartbeat did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HeartbeatOutcome {
    Renewed(LeaseRow),
    /// Released, revoked, reaped or lapsed: the client must check out again.
    Lost,
    /// A borrowed seat is not renewed: its client returns it or lets it
    /// expire (at `expires_at`).
    Borrowed {
        expires_at: Timestamp,
    },
}

/// What an admin revoke did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RevokeOutcome {
    Revoked(LeaseRow),
    /// A live borrowed seat, kept: freeing it needs `force` (its token
    /// stays valid offline until it expires).
    Borrowed(LeaseRow),
    /// No such seat.
    Unknown,
}

impl RevokeOutcome {
    /// The seat, if it was freed.
    pub fn revoked(self) -> Option<LeaseRow> {
        match self {
            RevokeOutcome::Revoked(row) => Some(row),
            RevokeOutcome::Borrowed(_) | RevokeOutcome::Unknown => None,
        }
    }
}

/// Who may check out what: the parts of a checkout request the store needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckoutRequest {
    pub license_id: String,
    pub holder: String,
    pub fingerprint: Option<String>,
    pub idempotency_key: Option<String>,
    /// Borrow the seat for this long (no heartbeats until then).
    pub borrow: Option<Duration>,
}

/// Who stands in a license's waiting line: what the rules need to tell
/// whether a freed seat would go to them (their holder cap, their group's
/// reservation and max).
/// Why a checkout is refused with `403 not_allowed`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotAllowedBecause {
    /// The license's `deny` matches the requester, or its `allow` does not.
    Lists,
    /// A borrow, and the license lends no seats (no `[license.borrow]`).
    LendsNothing,
    /// A borrow by a requester outside the license's `borrow.allow`.
    BorrowAllow,
}

/// Who stands in line ahead of a checkout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ahead {
    /// Known when the command was queued (a server's own line).
    Waiters(Vec<Waiter>),
    /// The shared line (PostgreSQL), read by the writer inside the batch's
    /// transaction ([`rules::LeaseTx::waiting_line`]): every waiter, or
    /// those before this checkout's own row.
    SharedLine { before: Option<i64> },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Waiter {
    pub holder: String,
    pub fingerprint: Option<String>,
}

impl From<&CheckoutRequest> for Waiter {
    fn from(req: &CheckoutRequest) -> Self {
        Waiter {
            holder: req.holder.clone(),
            fingerprint: req.fingerprint.clone(),
        }
    }
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
            wal_restart_frames: sqlite::checkpoint::RESTART_FRAMES,
            checkpoint_every: sqlite::checkpoint::CHECKPOINT_EVERY,
        }
    }
}

/// A cheap, cloneable handle on the store: the writer's queue and the
/// read side.
#[derive(Clone)]
pub struct Store {
    commands: mpsc::Sender<Command>,
    reads: Arc<dyn StoreBackend>,
    events: broadcast::Sender<Event>,
    stats: Arc<WriterStats>,
    writer_thread: Arc<Mutex<Option<JoinHandle<()>>>>,
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
    /// The SQLite store in the file `path` (see [`sqlite::open`]).
    pub fn open(
        path: &Path,
        licenses: LicensesHandle,
        clock: SharedClock,
        options: StoreOptions,
    ) -> Result<Store, StoreError> {
        sqlite::open(path, licenses, clock, options)
    }

    /// This replica on PostgreSQL, after [`pg::prepare`] (see [`pg::open`]).
    pub fn open_postgres(
        config: tokio_postgres::Config,
        clock: pg::writer::DecisionClock,
        start: pg::StartPoint,
        licenses: LicensesHandle,
        options: StoreOptions,
    ) -> Result<Store, StoreError> {
        pg::open(config, clock, start, licenses, options)
    }

    /// Run `writer` on a thread of its own, beside `reads`.
    fn start<S: BatchStore + Send + 'static>(
        writer: Writer<S>,
        reads: Arc<dyn StoreBackend>,
        events: broadcast::Sender<Event>,
        stats: Arc<WriterStats>,
        options: &StoreOptions,
    ) -> Result<Store, StoreError> {
        let (commands, rx) = mpsc::channel(options.queue_capacity);
        let thread = std::thread::Builder::new()
            .name("store-writer".into())
            .spawn(move || writer.run(rx))
            .map_err(|source| StoreError::ThreadSpawn {
                thread: "store-writer",
                source,
            })?;
        Ok(Store {
            commands,
            reads,
            events,
            stats,
            writer_thread: Arc::new(Mutex::new(Some(thread))),
        })
    }

    pub fn kind(&self) -> StoreKind {
        self.reads.kind()
    }

    /// Can the store take writes right now? (SQLite: always, while open;
    /// PostgreSQL: the database answers.)
    pub async fn health(&self) -> Result<(), StoreError> {
        detached(self.reads.health()).await
    }

    /// PostgreSQL's waiting line, shared by every replica (`None` on
    /// SQLite, where the line is the server's own, in memory).
    pub fn shared_waiting_line(&self) -> Option<pg::line::SharedLine> {
        self.reads.shared_waiting_line()
    }

    /// Idle connections in the PostgreSQL read pool (`None` on SQLite).
    pub fn read_pool_idle(&self) -> Option<usize> {
        self.reads.read_pool_idle()
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
        let publish = self.reads.publish_licenses(text, licenses, why)?;
        Some(publish.await)
    }

    /// Ask the writer to finish what is queued and stop.
    async fn stop_writer(&self) {
        let (reply, stopped) = oneshot::channel();
        if self
            .commands
            .send(Command::Shutdown { reply })
            .await
            .is_ok()
        {
            let _ = stopped.await;
        }
    }

    async fn call<T>(
        &self,
        make: impl FnOnce(oneshot::Sender<Result<T, StoreError>>) -> RuleCommand,
    ) -> Result<T, StoreError> {
        let (tx, rx) = oneshot::channel();
        self.commands
            .send(Command::Rule(make(tx)))
            .await
            .map_err(|_| StoreError::Closed)?;
        rx.await.map_err(|_| StoreError::Closed)?
    }
    pub async fn checkout(&self, req: CheckoutRequest) -> Result<CheckoutOutcome, StoreError> {
        self.checkout_applied(req, Ahead::Waiters(Vec::new()), true)
            .await?
            .committed()
            .await
    }

    /// A checkout with the waiters `ahead` of it in line, in arrival order:
    /// it succeeds only if a seat is left for it once every waiter ahead
    /// that the rules would serve has one. Answers as soon as the writer has
    /// decided; see [`Applied`].
    ///
    /// `counted`: a refusal is the answer the client gets (it counts as a
    /// denial in the usage history); `false` for an attempt that will be
    /// retried while the client waits in line.
    pub async fn checkout_applied(
        &self,
        req: CheckoutRequest,
        ahead: Ahead,
        counted: bool,
    ) -> Result<Applied<CheckoutOutcome>, StoreError> {
        self.call(|reply| RuleCommand::Checkout {
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
        self.call(|reply| RuleCommand::Heartbeat {
            license_id,
            seat_id,
            reply,
        })
        .await
    }

    /// Release a seat of `license_id`. Idempotent: `false` if it was not there.
    pub async fn release(&self, license_id: &str, seat_id: &str) -> Result<bool, StoreError> {
        let (license_id, seat_id) = (license_id.to_string(), seat_id.to_string());
        self.call(|reply| RuleCommand::Release {
            license_id,
            seat_id,
            reply,
        })
        .await
    }

    /// Revoke a seat (admin); a live borrowed one only with `force`.
    pub async fn revoke(
        &self,
        seat_id: &str,
        reason: Option<String>,
        block: Option<Duration>,
        force: bool,
    ) -> Result<RevokeOutcome, StoreError> {
        let seat_id = seat_id.to_string();
        self.call(|reply| RuleCommand::Revoke {
            seat_id,
            reason,
            block,
            force,
            reply,
        })
        .await
    }

    /// Delete up to `limit` reapable leases; returns how many.
    pub async fn reap(&self, limit: usize) -> Result<usize, StoreError> {
        self.call(|reply| RuleCommand::Reap { limit, reply }).await
    }

    /// Delete usage history older than the retention, at most `limit` rows
    /// of each record; returns how many rows went.
    pub async fn prune_history(&self, limit: usize) -> Result<usize, StoreError> {
        self.call(|reply| RuleCommand::PruneHistory { limit, reply })
            .await
    }

    /// Wake the writer so it notices stalls and records that the server is
    /// alive, even when no client is talking to it.
    pub async fn tick(&self) -> Result<(), StoreError> {
        self.call(|reply| RuleCommand::Tick { reply }).await
    }

    /// Append an event that is not tied to a lease change (config reloads).
    pub async fn record_event(
        &self,
        kind: EventKind,
        license_id: Option<String>,
        detail: String,
    ) -> Result<(), StoreError> {
        self.call(|reply| RuleCommand::RecordEvent {
            kind,
            license_id,
            detail,
            reply,
        })
        .await
    }

    /// Every lease (optionally of one license), live or lapsed-unreaped.
    pub async fn seats(&self, license_id: Option<&str>) -> Result<Vec<LeaseRow>, StoreError> {
        detached(self.reads.seats(license_id.map(str::to_string))).await
    }

    /// One page of seats: filtered, sorted and cut in SQL (see
    /// [`seat_query`]).
    pub async fn seats_page(&self, query: SeatQuery) -> Result<SeatsPage, StoreError> {
        detached(self.reads.seats_page(query)).await
    }

    /// The dashboard session whose id hashes to `id_sha256`, expired or not.
    pub async fn ui_session(&self, id_sha256: &str) -> Result<Option<UiSessionRow>, StoreError> {
        detached(self.reads.ui_session(id_sha256.to_string())).await
    }

    /// Create, touch or delete dashboard sessions. Returns the rows changed.
    pub async fn ui_session_write(&self, op: UiSessionOp) -> Result<usize, StoreError> {
        detached(self.reads.ui_session_write(op)).await
    }

    /// What counts against each license's pool, by the one predicate (on
    /// SQLite from the writer's live index, so it costs no scan however
    /// many leases there are).
    pub async fn live_counts(&self) -> Result<Vec<(String, PoolCounts)>, StoreError> {
        self.call(|reply| RuleCommand::LiveCounts { reply }).await
    }

    pub async fn events_after(&self, after: i64, limit: usize) -> Result<Vec<Event>, StoreError> {
        detached(self.reads.events_after(after, limit)).await
    }

    pub async fn find_seat(&self, seat_id: &str) -> Result<Option<LeaseRow>, StoreError> {
        detached(self.reads.find_seat(seat_id.to_string())).await
    }

    /// One page of a license's sessions, newest first (see
    /// [`history::SessionsQuery`]). A read: it never waits for the writer.
    pub async fn sessions_page(
        &self,
        query: history::SessionsQuery,
    ) -> Result<Vec<leasehold_common::api::SessionView>, StoreError> {
        detached(self.reads.sessions_page(query)).await
    }

    /// A license's usage over a range (see [`crate::usage`]). A read: it
    /// never waits for the writer.
    pub async fn usage(&self, query: history::UsageQuery) -> Result<Usage, StoreError> {
        detached(self.reads.usage(query)).await
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

    /// Finish queued commands, record a clean stop and join the writer.
    /// Commands sent after this fail with [`StoreError::Closed`].
    pub async fn close(&self) {
        let _ = self.stop_writer().await;
        let handle = self
            .writer_thread
            .lock()
            .map(|mut g| g.take())
            .unwrap_or(None);
        if let Some(handle) = handle {
            let _ = tokio::task::spawn_blocking(move || handle.join()).await;
        }
        self.reads.close().await;
    }
}

/// Run a read as its own task: its future is `Send` but not `Sync`, and some
/// callers (SSE streams) must be both. It is spawned at once, so the
/// caller's future holds only the handle.
fn detached<T: Send + 'static>(
    read: impl Future<Output = Result<T, StoreError>> + Send + 'static,
) -> impl Future<Output = Result<T, StoreError>> + Send + Sync {
    let task = tokio::spawn(read);
    async move { task.await.map_err(|_| StoreError::Closed)? }
}
