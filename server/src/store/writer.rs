//! The writer thread: the only connection that writes, and the place where
//! every state change is decided.
//!
//! Commands queue on a channel. The thread takes the first, then whatever else
//! is already waiting (up to `max_batch`), applies each inside its own
//! savepoint of one `BEGIN IMMEDIATE` transaction, commits once, and only then
//! answers the callers and publishes the batch's events. One fsync pays for
//! the whole batch (group commit), and nobody hears "done" before it is durable.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use leasehold_common::api::{Event, EventKind};
use leasehold_common::liveness::lapses_at;
use leasehold_common::{Licenses, Timestamp, is_live, live_threshold, reap_cutoff};
use rusqlite::functions::FunctionFlags;
use rusqlite::{Connection, OptionalExtension, params};
use tokio::sync::{broadcast, mpsc, oneshot, watch};

use super::checkpoint::WalHousekeeping;
use super::live_index::LiveIndex;
use super::read::{lease_columns, lease_from_row};
use super::{
    Applied, CheckoutOutcome, CheckoutRequest, HeartbeatOutcome, LeaseRow, StoreError, StoreOptions,
};
use crate::clock::SharedClock;
use crate::licenses::LicensesHandle;

type Reply<T> = oneshot::Sender<Result<T, StoreError>>;

/// How a batch ended: `None` while it commits, then `Ok` or the error.
pub type CommitSignal = watch::Receiver<Option<Result<(), String>>>;

/// One queued state change and where to send its answer.
pub enum Command {
    /// Answered before the commit (see [`Applied`]).
    Checkout {
        req: CheckoutRequest,
        /// Waiters in line ahead of this checkout: their seats are spoken for.
        ahead: u32,
        reply: Reply<Applied<CheckoutOutcome>>,
    },
    /// Answered before the commit (see [`Applied`]).
    Heartbeat {
        license_id: String,
        seat_id: String,
        reply: Reply<Applied<HeartbeatOutcome>>,
    },
    Release {
        license_id: String,
        seat_id: String,
        reply: Reply<bool>,
    },
    Revoke {
        seat_id: String,
        reason: Option<String>,
        block: Option<Duration>,
        reply: Reply<Option<LeaseRow>>,
    },
    Reap {
        limit: usize,
        reply: Reply<usize>,
    },
    Tick {
        reply: Reply<()>,
    },
    /// Live seats per license, by the one predicate, from the live index.
    LiveCounts {
        reply: Reply<Vec<(String, u32)>>,
    },
    RecordEvent {
        kind: EventKind,
        license_id: Option<String>,
        detail: String,
        reply: Reply<Event>,
    },
    /// Finish what is queued before it, record a clean stop, and exit, even
    /// if request tasks still hold senders.
    Shutdown {
        reply: Reply<()>,
    },
}

/// Denied checkouts and heartbeats on lapsed seats can arrive thousands of
/// times a second from a misbehaving client; the log keeps one per key per
/// this window (the metrics count them all).
const EVENT_THROTTLE_MS: i64 = 10_000;

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
    throttle: HashMap<String, i64>,
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
    /// Checkpoints the writer finished so the WAL could start over, and the
    /// time they took (the writer applies nothing meanwhile).
    pub wal_catch_ups: AtomicU64,
    pub wal_catch_up_us: AtomicU64,
}

/// An answer held back until the batch commits.
type Finish = Box<dyn FnOnce(Result<(), &str>) + Send>;

fn finish<T: Send + 'static>(reply: Reply<T>, result: Result<T, StoreError>) -> Finish {
    Box::new(move |commit| {
        let answer = match commit {
            Ok(()) => result,
            Err(msg) => Err(StoreError::CommitFailed(msg.to_string())),
        };
        let _ = reply.send(answer);
    })
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
            throttle: HashMap::new(),
            index,
            stats,
            wal,
        };
        writer.process(Vec::new());
        Ok(writer)
    }

    /// Serve commands until every sender is gone.
    pub fn run(mut self, mut rx: mpsc::Receiver<Command>) {
        let mut stop_reply = None;
        while let Some(first) = rx.blocking_recv() {
            let mut batch = vec![first];
            while batch.len() < self.options.max_batch {
                match rx.try_recv() {
                    Ok(cmd) => batch.push(cmd),
                    Err(_) => break,
                }
            }
            if let Some(i) = batch
                .iter()
                .position(|c| matches!(c, Command::Shutdown { .. }))
            {
                let rest = batch.split_off(i);
                self.process(batch);
                if let Some(Command::Shutdown { reply }) = rest.into_iter().next() {
                    stop_reply = Some(reply);
                }
                break;
            }
            self.process(batch);
        }
        // Refuse whatever comes after the stop (callers get Closed → 503).
        drop(rx);
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
                fail(cmd, &msg);
            }
            return;
        }

        let (commit_tx, commit) = watch::channel(None);
        let outage = self.detect_outage(now, &licenses);
        // The index must be reloaded if anything may have set it apart from
        // the database: the outage rule's bulk update, or a rollback.
        let mut index_stale = outage.is_some();

        for cmd in batch {
            let mut ctx = Ctx {
                conn: &self.conn,
                now,
                licenses: &licenses,
                events: Vec::new(),
                throttle: &mut self.throttle,
                options: &self.options,
                index: &mut self.index,
                commit: &commit,
            };
            if let Err(e) = exec_cached(ctx.conn, "SAVEPOINT cmd") {
                finishes.push(error_finish(cmd, e.into()));
                continue;
            }
            let (done, ok) = ctx.apply(cmd);
            let events = std::mem::take(&mut ctx.events);
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

    /// The outage rule. If the writer has not run for longer than the stall
    /// threshold, every lease that was live when the gap began gets at least
    /// one TTL from now, so clients that were healthy can renew before the
    /// reaper or the counter treats them as gone. Returns (gap ms, leases).
    fn detect_outage(&mut self, now: Timestamp, licenses: &Licenses) -> Option<(i64, usize)> {
        let gap = now.millis_since(self.last_alive);
        if gap <= leasehold_common::time::duration_millis(self.options.stall_threshold) {
            return None;
        }
        let mut extended = 0;
        for lic in licenses.iter() {
            let renewed_until = now.saturating_add(lic.policy.ttl);
            let was_live = live_threshold(self.last_alive, lic.policy.skew);
            match self.conn.execute(
                "UPDATE leases SET expires_at = ?1
                 WHERE license_id = ?2 AND expires_at >= ?3 AND expires_at < ?1",
                params![renewed_until.as_millis(), lic.id, was_live.as_millis()],
            ) {
                Ok(n) => extended += n,
                Err(e) => tracing::error!("store: outage extension for {}: {e}", lic.id),
            }
        }
        Some((gap, extended))
    }
}

/// Answer a command of a batch that never began.
fn fail(cmd: Command, msg: &str) {
    error_finish(cmd, StoreError::BeginFailed(msg.to_string()))(Ok(()));
}

fn error_finish(cmd: Command, e: StoreError) -> Finish {
    match cmd {
        Command::Checkout { reply, .. } => finish(reply, Err(e)),
        Command::Heartbeat { reply, .. } => finish(reply, Err(e)),
        Command::Release { reply, .. } => finish(reply, Err(e)),
        Command::Revoke { reply, .. } => finish(reply, Err(e)),
        Command::Reap { reply, .. } => finish(reply, Err(e)),
        Command::Tick { reply } => finish(reply, Err(e)),
        Command::LiveCounts { reply } => finish(reply, Err(e)),
        Command::RecordEvent { reply, .. } => finish(reply, Err(e)),
        Command::Shutdown { reply } => finish(reply, Err(e)),
    }
}

/// Everything one command may touch while it is applied.
struct Ctx<'a> {
    conn: &'a Connection,
    now: Timestamp,
    licenses: &'a Licenses,
    events: Vec<Event>,
    throttle: &'a mut HashMap<String, i64>,
    options: &'a StoreOptions,
    index: &'a mut LiveIndex,
    /// The batch's commit, for answers given before it.
    commit: &'a CommitSignal,
}

impl Ctx<'_> {
    /// Apply one command. Returns its held-back answer and whether it
    /// succeeded (a failed command's savepoint is rolled back).
    fn apply(&mut self, cmd: Command) -> (Finish, bool) {
        fn done<T: Send + 'static, E: Into<StoreError>>(
            reply: Reply<T>,
            r: Result<T, E>,
        ) -> (Finish, bool) {
            let ok = r.is_ok();
            (finish(reply, r.map_err(Into::into)), ok)
        }
        // The decision now, with the batch's commit signal: the caller builds
        // its answer during the fsync and releases it only after.
        fn early<T: Send + 'static>(
            reply: Reply<Applied<T>>,
            r: rusqlite::Result<T>,
            commit: &CommitSignal,
        ) -> (Finish, bool) {
            let ok = r.is_ok();
            let applied = r.map_err(StoreError::from).map(|value| Applied {
                value,
                commit: commit.clone(),
            });
            let _ = reply.send(applied);
            (Box::new(|_| {}), ok)
        }
        match cmd {
            Command::Checkout { req, ahead, reply } => {
                early(reply, self.checkout(&req, ahead), self.commit)
            }
            Command::Heartbeat {
                license_id,
                seat_id,
                reply,
            } => early(reply, self.heartbeat(&license_id, &seat_id), self.commit),
            Command::Release {
                license_id,
                seat_id,
                reply,
            } => done(reply, self.release(&license_id, &seat_id)),
            Command::Revoke {
                seat_id,
                reason,
                block,
                reply,
            } => done(reply, self.revoke(&seat_id, reason, block)),
            Command::Reap { limit, reply } => done(reply, self.reap(limit)),
            Command::Tick { reply } | Command::Shutdown { reply } => {
                done(reply, Ok::<_, StoreError>(()))
            }
            Command::LiveCounts { reply } => {
                let counts = self
                    .licenses
                    .iter()
                    .map(|l| {
                        let threshold = live_threshold(self.now, l.policy.skew);
                        (l.id.clone(), self.live(&l.id, threshold))
                    })
                    .collect();
                done(reply, Ok::<_, StoreError>(counts))
            }
            Command::RecordEvent {
                kind,
                license_id,
                detail,
                reply,
            } => {
                let r = self.event(kind, license_id.as_deref(), None, None, Some(&detail));
                let r = r.map(|()| self.events.last().cloned().expect("event just recorded"));
                done(reply, r)
            }
        }
    }

    fn checkout(&mut self, req: &CheckoutRequest, ahead: u32) -> rusqlite::Result<CheckoutOutcome> {
        let Some(lic) = self.licenses.get(&req.license_id) else {
            return Ok(CheckoutOutcome::UnknownLicense);
        };
        let policy = lic.policy;
        let fingerprint_key = req.fingerprint.as_deref().unwrap_or("");

        let blocked_until: Option<i64> = self
            .conn
            .prepare_cached(
                "SELECT until_ms FROM blocks
                 WHERE license_id = ?1 AND holder = ?2 AND fingerprint = ?3 AND until_ms > ?4",
            )?
            .query_row(
                params![lic.id, req.holder, fingerprint_key, self.now.as_millis()],
                |r| r.get(0),
            )
            .optional()?;
        if let Some(until) = blocked_until {
            let until = Timestamp::from_millis(until);
            self.denied(&lic.id, &req.holder, || {
                format!("blocked by an admin until {until}")
            })?;
            return Ok(CheckoutOutcome::Blocked { until });
        }

        // A retry of a checkout whose answer was lost: the same seat again.
        if let Some(key) = &req.idempotency_key {
            const SQL: &str = concat!(
                "SELECT ",
                lease_columns!(),
                " FROM leases WHERE license_id = ?1 AND idempotency_key = ?2"
            );
            let existing = self
                .conn
                .prepare_cached(SQL)?
                .query_row(params![lic.id, key], lease_from_row)
                .optional()?;
            if let Some(row) = existing {
                if is_live(row.expires_at, self.now, policy.skew) {
                    let lease = self.renew(&row, policy.ttl)?;
                    return Ok(CheckoutOutcome::Granted {
                        lease,
                        reused: true,
                    });
                }
                // That seat lapsed: the key is free for a new one.
                self.conn
                    .prepare_cached("UPDATE leases SET idempotency_key = NULL WHERE seat_id = ?1")?
                    .execute([&row.seat_id])?;
            }
        }

        // The same machine asking again (it lost its lease in a network blip):
        // give back its live seat rather than counting it twice.
        if let Some(fp) = &req.fingerprint {
            let threshold = live_threshold(self.now, policy.skew);
            const SQL: &str = concat!(
                "SELECT ",
                lease_columns!(),
                " FROM leases
                 WHERE license_id = ?1 AND fingerprint = ?2 AND expires_at >= ?3
                 ORDER BY expires_at DESC LIMIT 1"
            );
            let held = self
                .conn
                .prepare_cached(SQL)?
                .query_row(params![lic.id, fp, threshold.as_millis()], lease_from_row)
                .optional()?;
            if let Some(row) = held {
                let lease = self.renew(&row, policy.ttl)?;
                return Ok(CheckoutOutcome::Granted {
                    lease,
                    reused: true,
                });
            }
        }

        let threshold = live_threshold(self.now, policy.skew);
        let live = self.live(&lic.id, threshold);
        if live.saturating_add(ahead) >= policy.seats {
            let earliest = self.index.earliest_from(&lic.id, threshold.as_millis());
            let retry_after = earliest
                .map(|e| lapses_at(Timestamp::from_millis(e), policy.skew).millis_since(self.now))
                .unwrap_or(policy.ttl.as_millis() as i64)
                .max(0);
            let seats = policy.seats;
            self.denied(&lic.id, &req.holder, || {
                format!("pool full: {live} of {seats} seats live")
            })?;
            return Ok(CheckoutOutcome::Full {
                seats: policy.seats,
                live,
                retry_after: Duration::from_millis(retry_after as u64),
            });
        }

        let lease = LeaseRow {
            seat_id: new_seat_id(),
            license_id: lic.id.clone(),
            holder: req.holder.clone(),
            fingerprint: req.fingerprint.clone(),
            checked_out_at: self.now,
            issued_at: self.now,
            expires_at: self.now.saturating_add(policy.ttl),
        };
        self.conn
            .prepare_cached(
                "INSERT INTO leases (seat_id, license_id, holder, fingerprint, idempotency_key,
                                     checked_out_at, issued_at, expires_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?6, ?7)",
            )?
            .execute(params![
                lease.seat_id,
                lease.license_id,
                lease.holder,
                lease.fingerprint,
                req.idempotency_key,
                self.now.as_millis(),
                lease.expires_at.as_millis()
            ])?;
        self.index
            .insert(&lease.license_id, lease.expires_at.as_millis());
        self.event(
            EventKind::Checkout,
            Some(&lease.license_id),
            Some(&lease.seat_id),
            Some(&lease.holder),
            lease
                .fingerprint
                .as_deref()
                .map(|f| format!("fingerprint {f}"))
                .as_deref(),
        )?;
        Ok(CheckoutOutcome::Granted {
            lease,
            reused: false,
        })
    }

    /// New expiry for an existing seat, on the server's clock. Only the two
    /// times change, so the renewed row is built here rather than read back.
    fn renew(&mut self, row: &LeaseRow, ttl: Duration) -> rusqlite::Result<LeaseRow> {
        let renewed = LeaseRow {
            issued_at: self.now,
            expires_at: self.now.saturating_add(ttl),
            ..row.clone()
        };
        self.conn
            .prepare_cached("UPDATE leases SET issued_at = ?2, expires_at = ?3 WHERE seat_id = ?1")?
            .execute(params![
                row.seat_id,
                renewed.issued_at.as_millis(),
                renewed.expires_at.as_millis()
            ])?;
        self.index
            .remove(&row.license_id, row.expires_at.as_millis());
        self.index
            .insert(&renewed.license_id, renewed.expires_at.as_millis());
        Ok(renewed)
    }

    /// Live leases of a license at `threshold`, from the index.
    fn live(&mut self, license_id: &str, threshold: Timestamp) -> u32 {
        u32::try_from(self.index.count_from(license_id, threshold.as_millis())).unwrap_or(u32::MAX)
    }

    fn heartbeat(&mut self, license_id: &str, seat_id: &str) -> rusqlite::Result<HeartbeatOutcome> {
        let Some(lic) = self.licenses.get(license_id) else {
            return Ok(HeartbeatOutcome::Lost);
        };
        // Only a live seat of *this* license renews: a seat id is a
        // capability, but only together with its own license's key.
        const SQL: &str = concat!(
            "SELECT ",
            lease_columns!(),
            " FROM leases WHERE seat_id = ?1 AND license_id = ?2"
        );
        let Some(row) = self
            .conn
            .prepare_cached(SQL)?
            .query_row(params![seat_id, license_id], lease_from_row)
            .optional()?
        else {
            return Ok(HeartbeatOutcome::Lost);
        };
        if is_live(row.expires_at, self.now, lic.policy.skew) {
            return Ok(HeartbeatOutcome::Renewed(self.renew(&row, lic.policy.ttl)?));
        }
        // Still in the table but lapsed: its client just learned it lost the
        // seat. Worth telling the admins (once).
        if self.first_in_window(format!("lost\0{seat_id}")) {
            self.event(
                EventKind::Lost,
                Some(license_id),
                Some(seat_id),
                Some(&row.holder),
                Some("heartbeat after the lease lapsed"),
            )?;
        }
        Ok(HeartbeatOutcome::Lost)
    }

    fn release(&mut self, license_id: &str, seat_id: &str) -> rusqlite::Result<bool> {
        let deleted: Option<(String, i64)> = self
            .conn
            .prepare_cached(
                "DELETE FROM leases WHERE seat_id = ?1 AND license_id = ?2 RETURNING holder, expires_at",
            )?
            .query_row(params![seat_id, license_id], |r| Ok((r.get(0)?, r.get(1)?)))
            .optional()?;
        let holder = deleted.map(|(holder, expires_at)| {
            self.index.remove(license_id, expires_at);
            holder
        });
        if let Some(holder) = &holder {
            self.event(
                EventKind::Release,
                Some(license_id),
                Some(seat_id),
                Some(holder),
                None,
            )?;
        }
        Ok(holder.is_some())
    }

    fn revoke(
        &mut self,
        seat_id: &str,
        reason: Option<String>,
        block: Option<Duration>,
    ) -> rusqlite::Result<Option<LeaseRow>> {
        const SQL: &str = concat!(
            "DELETE FROM leases WHERE seat_id = ?1 RETURNING ",
            lease_columns!(),
            ""
        );
        let Some(row) = self
            .conn
            .prepare_cached(SQL)?
            .query_row([seat_id], lease_from_row)
            .optional()?
        else {
            return Ok(None);
        };
        self.index
            .remove(&row.license_id, row.expires_at.as_millis());
        let mut detail = reason.unwrap_or_default();
        if let Some(block) = block.filter(|b| !b.is_zero()) {
            let until = self.now.saturating_add(block);
            self.conn
                .prepare_cached(
                    "INSERT INTO blocks (license_id, holder, fingerprint, until_ms) VALUES (?1, ?2, ?3, ?4)
                     ON CONFLICT (license_id, holder, fingerprint) DO UPDATE SET until_ms = excluded.until_ms",
                )?
                .execute(params![
                    row.license_id,
                    row.holder,
                    row.fingerprint.as_deref().unwrap_or(""),
                    until.as_millis()
                ])?;
            let sep = if detail.is_empty() { "" } else { "; " };
            detail = format!("{detail}{sep}re-checkout blocked until {until}");
        }
        self.event(
            EventKind::Revoke,
            Some(&row.license_id),
            Some(&row.seat_id),
            Some(&row.holder),
            (!detail.is_empty()).then_some(detail.as_str()),
        )?;
        Ok(Some(row))
    }

    /// Delete up to `limit` leases that are reapable by the one predicate,
    /// with one `reap` event each. Leases of a license no longer in the
    /// licenses file are left alone: without its policy there is no grace to
    /// judge them by.
    ///
    /// Set-based: one statement writes a batch's events, the next deletes the
    /// same leases (both take the first by `(expires_at, seat_id)`, the
    /// index's own order, in one savepoint). An `INSERT` per seat cost as much
    /// as the delete itself (measured: 300,000 leases, 6.2 s vs 3.1 s).
    fn reap(&mut self, limit: usize) -> Result<usize, StoreError> {
        let mut reaped = 0;
        for lic in self.licenses.iter() {
            if reaped >= limit {
                break;
            }
            let cutoff = reap_cutoff(self.now, lic.policy.reap_grace).as_millis();
            let batch = (limit - reaped) as i64;
            let now = self.now;
            let events: Vec<Event> = self
                .conn
                .prepare_cached(
                    "INSERT INTO events (at, kind, license_id, seat_id, holder, detail)
                     SELECT ?1, ?2, license_id, seat_id, holder, reap_detail(expires_at)
                     FROM leases WHERE license_id = ?3 AND expires_at < ?4
                     ORDER BY expires_at, seat_id LIMIT ?5
                     RETURNING id, seat_id, holder, detail",
                )?
                .query_map(
                    params![
                        now.as_millis(),
                        EventKind::Reap.as_str(),
                        lic.id,
                        cutoff,
                        batch
                    ],
                    |r| {
                        Ok(Event {
                            id: r.get(0)?,
                            at: now,
                            kind: EventKind::Reap,
                            license_id: Some(lic.id.clone()),
                            seat_id: Some(r.get(1)?),
                            holder: Some(r.get(2)?),
                            detail: r.get(3)?,
                        })
                    },
                )?
                .collect::<rusqlite::Result<_>>()?;
            let expiries: Vec<i64> = self
                .conn
                .prepare_cached(
                    "DELETE FROM leases WHERE seat_id IN (
                         SELECT seat_id FROM leases
                         WHERE license_id = ?1 AND expires_at < ?2
                         ORDER BY expires_at, seat_id LIMIT ?3)
                     RETURNING expires_at",
                )?
                .query_map(params![lic.id, cutoff, batch], |r| r.get(0))?
                .collect::<rusqlite::Result<_>>()?;
            if expiries.len() != events.len() {
                // Cannot happen inside one savepoint; if it did, roll back
                // rather than log a reap that did not happen.
                return Err(StoreError::ReapMismatch {
                    license_id: lic.id.clone(),
                    logged: events.len(),
                    deleted: expiries.len(),
                });
            }
            for expires_at in &expiries {
                self.index.remove(&lic.id, *expires_at);
            }
            reaped += expiries.len();
            self.events.extend(events);
        }
        self.conn
            .prepare_cached("DELETE FROM blocks WHERE until_ms <= ?1")?
            .execute([self.now.as_millis()])?;
        self.conn
            .prepare_cached("DELETE FROM events WHERE id <= (SELECT max(id) FROM events) - ?1")?
            .execute([self.options.event_retention])?;
        Ok(reaped)
    }

    fn denied(
        &mut self,
        license_id: &str,
        holder: &str,
        detail: impl FnOnce() -> String,
    ) -> rusqlite::Result<()> {
        if self.first_in_window(format!("denied\0{license_id}\0{holder}")) {
            let detail = detail();
            self.event(
                EventKind::Denied,
                Some(license_id),
                None,
                Some(holder),
                Some(&detail),
            )?;
        }
        Ok(())
    }

    /// True once per key per [`EVENT_THROTTLE_MS`].
    fn first_in_window(&mut self, key: String) -> bool {
        let now = self.now.as_millis();
        if self.throttle.len() > 10_000 {
            self.throttle.retain(|_, at| now - *at < EVENT_THROTTLE_MS);
        }
        match self.throttle.get(&key) {
            Some(at) if now - *at < EVENT_THROTTLE_MS && now >= *at => false,
            _ => {
                self.throttle.insert(key, now);
                true
            }
        }
    }

    fn event(
        &mut self,
        kind: EventKind,
        license_id: Option<&str>,
        seat_id: Option<&str>,
        holder: Option<&str>,
        detail: Option<&str>,
    ) -> rusqlite::Result<()> {
        let id: i64 = self
            .conn
            .prepare_cached(
                "INSERT INTO events (at, kind, license_id, seat_id, holder, detail)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6) RETURNING id",
            )?
            .query_row(
                params![
                    self.now.as_millis(),
                    kind.as_str(),
                    license_id,
                    seat_id,
                    holder,
                    detail
                ],
                |r| r.get(0),
            )?;
        self.events.push(Event {
            id,
            at: self.now,
            kind,
            license_id: license_id.map(str::to_string),
            seat_id: seat_id.map(str::to_string),
            holder: holder.map(str::to_string),
            detail: detail.map(str::to_string),
        });
        Ok(())
    }
}

/// The text of a `reap` event.
fn reap_detail(expired: Timestamp) -> String {
    format!("expired {expired} unrenewed")
}

/// SQL functions the writer's statements use: `reap_detail(expires_at)`, so
/// the set-based reap writes the same words as [`reap_detail`].
fn register_functions(conn: &Connection) -> rusqlite::Result<()> {
    conn.create_scalar_function(
        "reap_detail",
        1,
        FunctionFlags::SQLITE_UTF8 | FunctionFlags::SQLITE_DETERMINISTIC,
        |ctx| Ok(reap_detail(Timestamp::from_millis(ctx.get(0)?))),
    )
}

/// Run a parameterless statement from the statement cache (the writer runs
/// BEGIN/SAVEPOINT/RELEASE/COMMIT thousands of times a second).
fn exec_cached(conn: &Connection, sql: &str) -> rusqlite::Result<()> {
    conn.prepare_cached(sql)?.execute([]).map(|_| ())
}

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

/// 128 random bits, lowercase hex. Seat ids are capabilities, so they come
/// from a CSPRNG (rand's thread RNG is ChaCha seeded from the OS).
fn new_seat_id() -> String {
    hex::encode(rand::random::<[u8; 16]>())
}
