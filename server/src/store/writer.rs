//! The writer thread: the only connection that writes, and the place where
//! every state change is decided.
//!
//! Commands queue on a channel. The thread takes the first, then whatever else
//! is already waiting (up to `max_batch`), applies each inside its own
//! savepoint of one `BEGIN IMMEDIATE` transaction, commits once, and only then
//! answers the callers and publishes the batch's events. One fsync pays for
//! the whole batch (group commit), and nobody hears "done" before it is durable.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use leasehold_common::api::Event;
use leasehold_common::{Licenses, Timestamp};
use rusqlite::{Connection, OptionalExtension, params};
use tokio::sync::{broadcast, mpsc, watch};

use super::checkpoint::WalHousekeeping;
use super::command::{Command, Finish, apply, error_finish, run_batches};
use super::live_index::LiveIndex;
use super::rules::{EventThrottle, Rules};
use super::sqlite_tx::{SqliteTx, register_functions};
use super::{StoreError, StoreOptions};
use crate::clock::SharedClock;
use crate::licenses::LicensesHandle;

/// How often "the server is alive" is persisted, for the outage rule.
const ALIVE_PERSIST_MS: i64 = 1_000;

const META_LAST_ALIVE: &str = "last_alive_ms";

pub struct Writer {
    conn: Connection,
    licenses: LicensesHandle,
    clock: SharedClock,
    events: broadcast::Sender<Event>,
    options: StoreOptions,
    /// The last instant the writer was known to be running.
    last_alive: Timestamp,
    last_alive_persisted: Timestamp,
    throttle: EventThrottle,
    /// The policy whose pool sizes the history has recorded.
    recorded_policy: Option<Arc<Licenses>>,
    index: LiveIndex,
    stats: Arc<WriterStats>,
    wal: Arc<WalHousekeeping>,
}

/// How the writer spends its time, for `/metrics` and the benchmarks.
#[derive(Default, Debug)]
pub struct WriterStats {
    pub batches: AtomicU64,
    pub commands: AtomicU64,
    /// Microseconds spent applying commands (SQL, index) and in COMMIT.
    pub apply_us: AtomicU64,
    pub commit_us: AtomicU64,
    /// Microseconds spent waiting for license locks (PostgreSQL: other
    /// replicas' batches on the same licenses).
    pub lock_wait_us: AtomicU64,
    /// Checkpoints the writer finished so the WAL could start over, and the
    /// time they took (the writer applies nothing meanwhile).
    pub wal_catch_ups: AtomicU64,
    pub wal_catch_up_us: AtomicU64,
}

impl Writer {
    /// Prepare the writer and apply the outage rule to the time since the
    /// server was last alive (it was down, so leases could not be renewed).
    pub fn start(
        conn: Connection,
        licenses: LicensesHandle,
        clock: SharedClock,
        events: broadcast::Sender<Event>,
        options: StoreOptions,
        stats: Arc<WriterStats>,
        wal: Arc<WalHousekeeping>,
    ) -> Result<Writer, StoreError> {
        let now = clock.now();
        let last_alive: Option<i64> = conn
            .query_row(
                "SELECT value FROM meta WHERE key = ?1",
                [META_LAST_ALIVE],
                |r| r.get(0),
            )
            .optional()?;
        register_functions(&conn)?;
        let index = LiveIndex::load(&conn)?;
        let mut writer = Writer {
            conn,
            licenses,
            clock,
            events,
            options,
            last_alive: last_alive.map(Timestamp::from_millis).unwrap_or(now),
            last_alive_persisted: Timestamp::from_millis(i64::MIN),
            throttle: EventThrottle::default(),
            recorded_policy: None,
            index,
            stats,
            wal,
        };
        writer.process(Vec::new());
        Ok(writer)
    }

    /// Serve commands until every sender is gone.
    pub fn run(mut self, rx: mpsc::Receiver<Command>) {
        let max_batch = self.options.max_batch;
        let stop_reply = run_batches(rx, max_batch, |batch| self.process(batch));
        // Clean stop: record when we were last alive so the next start does
        // not mistake this shutdown's downtime for time the leases had.
        self.last_alive_persisted = Timestamp::from_millis(i64::MIN);
        self.process(Vec::new());
        if let Some(reply) = stop_reply {
            let _ = reply.send(Ok(()));
        }
    }

    fn process(&mut self, batch: Vec<Command>) {
        // Outside any transaction, so the next one can restart the WAL.
        let catch_up = Instant::now();
        if self.wal.writer_catch_up(&self.conn) {
            self.stats.wal_catch_ups.fetch_add(1, Ordering::Relaxed);
            self.stats
                .wal_catch_up_us
                .fetch_add(micros(catch_up.elapsed()), Ordering::Relaxed);
        }
        let started = Instant::now();
        self.stats.batches.fetch_add(1, Ordering::Relaxed);
        self.stats
            .commands
            .fetch_add(batch.len() as u64, Ordering::Relaxed);
        // The writer's time never goes backwards: if the wall clock steps
        // back (an NTP step), a lease that lapsed must not come back to life
        // beside the seat that replaced it. Time stands still until the clock
        // catches up instead.
        let now = self.clock.now().max(self.last_alive);
        let licenses = self.licenses.current();
        let mut published = Vec::new();
        let mut finishes: Vec<Finish> = Vec::with_capacity(batch.len());

        if let Err(e) = exec_cached(&self.conn, "BEGIN IMMEDIATE") {
            tracing::error!("store: cannot begin a transaction: {e}");
            let msg = e.to_string();
            for cmd in batch {
                // Nothing ran, so nothing waits for a commit: answer now.
                error_finish(cmd, StoreError::BeginFailed(msg.clone()))(Ok(()));
            }
            return;
        }

        let (commit_tx, commit) = watch::channel(None);
        let outage = self.detect_outage(now, &licenses);
        // The index must be reloaded if anything may have set it apart from
        // the database: the outage rule's bulk update, or a rollback.
        let mut index_stale = outage.is_some();
        let policy_recorded = self.record_pool_sizes(now, &licenses);

        for cmd in batch {
            if let Err(e) = exec_cached(&self.conn, "SAVEPOINT cmd") {
                finishes.push(error_finish(cmd, e.into()));
                continue;
            }
            let mut tx = SqliteTx {
                conn: &self.conn,
                index: &mut self.index,
            };
            let rules = Rules {
                tx: &mut tx,
                now,
                licenses: &licenses,
                throttle: &mut self.throttle,
                events: Vec::new(),
            };
            let (done, ok, events) = apply(rules, cmd, &self.options, &commit);
            let end = if ok {
                exec_cached(&self.conn, "RELEASE cmd")
            } else {
                self.conn.execute_batch("ROLLBACK TO cmd; RELEASE cmd")
            };
            if let Err(e) = end {
                tracing::error!("store: savepoint: {e}");
            }
            if ok {
                published.extend(events);
            } else {
                index_stale = true;
            }
            finishes.push(done);
        }

        let applied = Instant::now();
        self.stats
            .apply_us
            .fetch_add(micros(applied - started), Ordering::Relaxed);
        let persist_alive = now.millis_since(self.last_alive_persisted) >= ALIVE_PERSIST_MS;
        let committed = (|| -> rusqlite::Result<()> {
            if persist_alive {
                self.conn.execute(
                    "INSERT INTO meta (key, value) VALUES (?1, ?2)
                     ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                    params![META_LAST_ALIVE, now.as_millis()],
                )?;
            }
            exec_cached(&self.conn, "COMMIT")
        })();
        self.stats
            .commit_us
            .fetch_add(micros(applied.elapsed()), Ordering::Relaxed);

        match committed {
            Ok(()) => {
                self.last_alive = now;
                if persist_alive {
                    self.last_alive_persisted = now;
                }
                if policy_recorded {
                    self.recorded_policy = Some(licenses.clone());
                }
                if let Some((gap, extended)) = outage {
                    tracing::warn!(
                        "server was not running for {:.1}s (down, paused or clock jump); \
                         gave {extended} lease(s) that were live when it stopped one TTL to renew",
                        gap as f64 / 1000.0
                    );
                }
                let _ = commit_tx.send(Some(Ok(())));
                for f in finishes {
                    f(Ok(()));
                }
                for e in published {
                    let _ = self.events.send(e);
                }
            }
            Err(e) => {
                tracing::error!(
                    "store: commit failed, batch of {} rolled back: {e}",
                    finishes.len()
                );
                let _ = self.conn.execute_batch("ROLLBACK");
                index_stale = true;
                let msg = e.to_string();
                let _ = commit_tx.send(Some(Err(msg.clone())));
                for f in finishes {
                    f(Err(&msg));
                }
            }
        }
        if index_stale {
            match LiveIndex::load(&self.conn) {
                Ok(index) => self.index = index,
                // Keep the old one; the next stale batch tries again.
                Err(e) => tracing::error!("store: cannot reload the live index: {e}"),
            }
        }
    }

    /// Record the pool sizes of a policy the history has not seen yet (at
    /// start and after each reload), inside the batch's transaction; true
    /// once recorded.
    fn record_pool_sizes(&mut self, now: Timestamp, licenses: &Arc<Licenses>) -> bool {
        if self
            .recorded_policy
            .as_ref()
            .is_some_and(|p| Arc::ptr_eq(p, licenses))
        {
            return false;
        }
        let mut tx = SqliteTx {
            conn: &self.conn,
            index: &mut self.index,
        };
        let recorded = Rules {
            tx: &mut tx,
            now,
            licenses,
            throttle: &mut self.throttle,
            events: Vec::new(),
        }
        .record_pool_sizes();
        if let Err(e) = &recorded {
            tracing::error!("store: cannot record pool sizes: {e}");
        }
        recorded.is_ok()
    }

    /// The outage rule. If the writer has not run for longer than the stall
    /// threshold, every lease that was live when the gap began gets at least
    /// one TTL from now, so clients that were healthy can renew before the
    /// reaper or the counter treats them as gone. Returns (gap ms, leases).
    fn detect_outage(&mut self, now: Timestamp, licenses: &Licenses) -> Option<(i64, usize)> {
        let gap = now.millis_since(self.last_alive);
        if gap <= leasehold_common::time::duration_millis(self.options.stall_threshold) {
            return None;
        }
        let mut tx = SqliteTx {
            conn: &self.conn,
            index: &mut self.index,
        };
        let extended = Rules {
            tx: &mut tx,
            now,
            licenses,
            throttle: &mut self.throttle,
            events: Vec::new(),
        }
        .outage(self.last_alive);
        Some((gap, extended))
    }
}

/// Run a parameterless statement from the statement cache (the writer runs
/// BEGIN/SAVEPOINT/RELEASE/COMMIT thousands of times a second).
fn exec_cached(conn: &Connection, sql: &str) -> rusqlite::Result<()> {
    conn.prepare_cached(sql)?.execute([]).map(|_| ())
}

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}
