//! SQLite's side of a writer batch ([`BatchStore`]): the only connection
//! that writes, one `BEGIN IMMEDIATE` transaction per batch with a
//! savepoint per command, the live index kept in step, and the server's
//! "alive" time persisted for the outage rule.
//!
//! A batch of checkouts whose only writes are denial counts is not
//! committed at once: its transaction stays open for the next batch, which
//! commits it with its own writes. A client refused 1,000 times a second
//! (a retry storm) would otherwise cost an `fdatasync` per batch, slowing
//! every other client's commit behind it. The denial is answered at once
//! (it promises the client nothing), and the counts are committed by the
//! first batch with anything else in it: the alive tick sends one every
//! second, and a read of the history first asks for one (`Flush`). A crash
//! loses at most that second of denial counts; no lease, event or
//! delivery is ever held.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use leasehold_common::Timestamp;
use rusqlite::{Connection, OptionalExtension, params};

use super::checkpoint::WalHousekeeping;
use super::live_index::LiveIndex;
use super::tx::SqliteTx;
use crate::clock::{DecisionClock, SharedClock};
use crate::licenses::LicensesHandle;
use crate::store::StoreError;
use crate::store::batch::{BatchStore, Begun, WriterStats, micros};
use crate::store::command::{Command, RuleCommand};

/// How often "the server is alive" is persisted, for the outage rule.
const ALIVE_PERSIST_MS: i64 = 1_000;

/// The longest denial counts are held uncommitted, whatever the batches.
const HOLD_DENIALS_MS: i64 = 1_000;

const META_LAST_ALIVE: &str = "last_alive_ms";

pub struct SqliteBatches {
    conn: Connection,
    licenses: LicensesHandle,
    clock: SharedClock,
    /// The last instant the writer was known to be running.
    last_alive: Timestamp,
    /// Decides each batch's time from the wall clock (`clock`).
    decision: DecisionClock,
    last_alive_persisted: Timestamp,
    index: LiveIndex,
    /// The index must be reloaded: something may have set it apart from
    /// the database (the outage rule's bulk update, or a rollback).
    index_stale: bool,
    stats: Arc<WriterStats>,
    wal: Arc<WalHousekeeping>,
    /// The open transaction's denial counts, held since then (see the
    /// module's doc); `None`: no transaction outlives its batch.
    held_since: Option<Timestamp>,
    /// The connection's `total_changes` when the transaction began, and
    /// the rows of it that were denial counts: equal, nothing else changed.
    changes_at_begin: u64,
    denial_rows: u64,
    /// The batch has a command other than a checkout: it commits.
    commit_due: bool,
}

impl SqliteBatches {
    /// The writer's side of `conn`, with the live index loaded and the time
    /// the server was last alive (the first batch applies the outage rule
    /// to the time it was down).
    pub fn new(
        conn: Connection,
        licenses: LicensesHandle,
        clock: SharedClock,
        stats: Arc<WriterStats>,
        wal: Arc<WalHousekeeping>,
    ) -> Result<Self, StoreError> {
        let now = clock.now();
        let last_alive: Option<i64> = conn
            .query_row(
                "SELECT value FROM meta WHERE key = ?1",
                [META_LAST_ALIVE],
                |r| r.get(0),
            )
            .optional()?;
        // "Alive" is persisted once a second, events at every commit: the
        // newest event is the later sign of life. Without it a lapse a
        // heartbeat reported (its `lost` event) in that second would be
        // given back by the outage rule after a crash.
        let newest_event: Option<i64> = conn
            .query_row("SELECT at FROM events ORDER BY id DESC LIMIT 1", [], |r| {
                r.get(0)
            })
            .optional()?;
        let index = LiveIndex::load(&conn)?;
        let last_alive = last_alive
            .max(newest_event)
            .map(Timestamp::from_millis)
            .unwrap_or(now);
        Ok(SqliteBatches {
            conn,
            licenses,
            clock,
            last_alive,
            decision: DecisionClock::new(last_alive),
            last_alive_persisted: Timestamp::from_millis(i64::MIN),
            index,
            index_stale: false,
            stats,
            wal,
            held_since: None,
            changes_at_begin: 0,
            denial_rows: 0,
            commit_due: true,
        })
    }

    /// Whether the batch ending now may leave its transaction open: it
    /// wrote only denial counts (and the transaction nothing else), it is
    /// only checkouts, and no count has been held for a second yet.
    fn may_hold(&self, now: Timestamp) -> bool {
        let only_denials = self.conn.total_changes() - self.changes_at_begin == self.denial_rows;
        !self.commit_due
            && self.denial_rows > 0
            && only_denials
            && self
                .held_since
                .is_none_or(|since| now.millis_since(since) < HOLD_DENIALS_MS)
    }

    fn release_hold(&mut self) {
        self.held_since = None;
        self.stats.denials_held.store(false, Ordering::Release);
    }

    /// Let the WAL start over if it grew long (outside any transaction).
    fn wal_catch_up(&mut self) {
        let started = Instant::now();
        if self.wal.writer_catch_up(&self.conn) {
            self.stats.wal_catch_ups.fetch_add(1, Ordering::Relaxed);
            self.stats
                .wal_catch_up_us
                .fetch_add(micros(started.elapsed()), Ordering::Relaxed);
        }
    }
}

impl BatchStore for SqliteBatches {
    type Tx<'t> = SqliteTx<'t>;

    const OUTAGE_WHAT: &'static str = "server was not running";
    const OUTAGE_WHY: &'static str = "down, paused or clock jump";

    fn begin(&mut self, batch: &[Command]) -> Result<Begun, String> {
        // An empty batch is the clean stop's: it commits.
        self.commit_due = batch.is_empty()
            || !batch
                .iter()
                .all(|c| matches!(c, Command::Rule(RuleCommand::Checkout { .. })));
        // The writer's time never goes backwards: if the wall clock steps
        // back (an NTP step), a lease that lapsed must not come back to life
        // beside the seat that replaced it. Nor does it stand still: a term
        // ends on time whatever the wall clock says.
        let licenses = self.licenses.current();
        let wall = self.clock.now();
        let floor = Timestamp::from_millis(licenses.entitled().clock_floor_ms());
        let now = self.decision.now(wall, floor);
        self.stats.note_decision(now, wall);
        if self.held_since.is_none() {
            self.wal_catch_up();
            exec_cached(&self.conn, "BEGIN IMMEDIATE").map_err(|e| e.to_string())?;
            self.changes_at_begin = self.conn.total_changes();
            self.denial_rows = 0;
        }
        Ok(Begun { now, licenses })
    }

    fn begin_failed(msg: String) -> StoreError {
        StoreError::BeginFailed(msg)
    }

    fn outage_began(
        &mut self,
        now: Timestamp,
        stall: Duration,
    ) -> Result<Option<Timestamp>, String> {
        let gap = now.millis_since(self.last_alive);
        if gap <= leasehold_common::time::duration_millis(stall) {
            return Ok(None);
        }
        // The rule's bulk update goes around the index.
        self.index_stale = true;
        Ok(Some(self.last_alive))
    }

    fn tx(&mut self) -> SqliteTx<'_> {
        SqliteTx {
            conn: &self.conn,
            index: &mut self.index,
            denial_rows: &mut self.denial_rows,
        }
    }

    fn open_savepoint(&mut self) -> Result<(), StoreError> {
        Ok(exec_cached(&self.conn, "SAVEPOINT cmd")?)
    }

    fn close_savepoint(&mut self, keep: bool) {
        let end = if keep {
            exec_cached(&self.conn, "RELEASE cmd")
        } else {
            self.index_stale = true;
            self.conn.execute_batch("ROLLBACK TO cmd; RELEASE cmd")
        };
        if let Err(e) = end {
            tracing::error!("store: savepoint: {e}");
        }
    }

    fn commit(&mut self, now: Timestamp, _wrote_events: bool) -> Result<(), String> {
        if self.may_hold(now) {
            self.held_since.get_or_insert(now);
            self.stats.denials_held.store(true, Ordering::Release);
            self.last_alive = now;
            return Ok(());
        }
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
        match committed {
            Ok(()) => {
                // Only now: a read that finds nothing held must find the
                // counts committed.
                self.release_hold();
                self.last_alive = now;
                if persist_alive {
                    self.last_alive_persisted = now;
                }
                Ok(())
            }
            Err(e) => {
                self.rollback();
                Err(e.to_string())
            }
        }
    }

    fn rollback(&mut self) {
        // Denial counts held from earlier batches go too: only on a failed
        // commit or outage rule, after which the database may be unusable.
        self.release_hold();
        self.index_stale = true;
        let _ = self.conn.execute_batch("ROLLBACK");
    }

    fn after_batch(&mut self, _committed: bool) {
        if !self.index_stale {
            return;
        }
        match LiveIndex::load(&self.conn) {
            Ok(index) => {
                self.index = index;
                self.index_stale = false;
            }
            // Keep the old one; the next batch tries again.
            Err(e) => tracing::error!("store: cannot reload the live index: {e}"),
        }
    }

    /// Clean stop: record when we were last alive so the next start does
    /// not mistake this shutdown's downtime for time the leases had.
    fn record_stop(&mut self) -> bool {
        self.last_alive_persisted = Timestamp::from_millis(i64::MIN);
        true
    }
}

/// Run a parameterless statement from the statement cache (the writer runs
/// BEGIN/SAVEPOINT/RELEASE/COMMIT thousands of times a second).
fn exec_cached(conn: &Connection, sql: &str) -> rusqlite::Result<()> {
    conn.prepare_cached(sql)?.execute([]).map(|_| ())
}
