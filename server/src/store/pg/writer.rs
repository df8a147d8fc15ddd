//! A replica's writer on PostgreSQL: the same batches, rules and held-back
//! answers as on SQLite, with the cross-replica rules around them.
//!
//! One batch is one transaction:
//! 1. take each touched license's advisory lock, in key order (exclusive for
//!    a checkout, shared for the rest), so checkouts of one license are
//!    serialized across every replica and a heartbeat never revives a lease
//!    a concurrent checkout already counted as lapsed;
//! 2. read the database clock *after* the locks, kept monotonic by the
//!    cluster's high-water mark, and the cluster's policy version;
//! 3. apply the cluster-wide outage rule if the cluster made no progress
//!    for longer than the stall threshold (once: under the cluster row lock);
//! 4. apply each command by the rules, in its own savepoint;
//! 5. move the high-water mark and "alive" time, wake the other replicas'
//!    event followers (`NOTIFY`), and commit.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use leasehold_common::{Licenses, Timestamp};
use postgres::Client;
use tokio::sync::{mpsc, watch};

use super::super::command::{Command, Finish, apply, error_finish, run_batches};
use super::super::rules::{EventThrottle, Rules};
use super::super::writer::WriterStats;
use super::super::{StoreError, StoreOptions};
use super::tx::{PgTx, Statements};
use super::{EVENTS_CHANNEL, advisory_key, connect_sync};
use crate::clock::SharedClock;
use crate::licenses::LicensesHandle;

/// Where a replica's decision time comes from.
#[derive(Clone)]
pub enum DecisionClock {
    /// `clock_timestamp()`: one clock for every replica.
    Database,
    /// A clock the caller controls (store tests move it by hand).
    Injected(SharedClock),
}

/// The writer's connection and its prepared statements.
struct Connection {
    client: Client,
    statements: Statements,
}

pub struct PgWriter {
    config: postgres::Config,
    /// Tests move time by hand; production decides on the database clock.
    clock: DecisionClock,
    conn: Option<Connection>,
    licenses: LicensesHandle,
    /// The cluster's policy version the handle holds.
    licenses_version: i64,
    options: StoreOptions,
    throttle: EventThrottle,
    /// The policy whose pool sizes the history has recorded.
    recorded_policy: Option<Arc<Licenses>>,
    stats: Arc<WriterStats>,
}

/// What the cluster row says at the start of a batch.
struct ClusterNow {
    now: Timestamp,
    last_alive: i64,
    licenses_version: i64,
}

impl PgWriter {
    pub fn new(
        config: postgres::Config,
        clock: DecisionClock,
        licenses: LicensesHandle,
        licenses_version: i64,
        options: StoreOptions,
        stats: Arc<WriterStats>,
    ) -> PgWriter {
        PgWriter {
            config,
            clock,
            conn: None,
            licenses,
            licenses_version,
            options,
            throttle: EventThrottle::default(),
            recorded_policy: None,
            stats,
        }
    }

    /// Serve commands until the store stops.
    pub fn run(mut self, rx: mpsc::Receiver<Command>) {
        let max_batch = self.options.max_batch;
        let stop_reply = run_batches(rx, max_batch, |batch| self.process(batch));
        if let Some(reply) = stop_reply {
            let _ = reply.send(Ok(()));
        }
    }

    fn process(&mut self, batch: Vec<Command>) {
        let started = Instant::now();
        self.stats.batches.fetch_add(1, Ordering::Relaxed);
        self.stats
            .commands
            .fetch_add(batch.len() as u64, Ordering::Relaxed);
        let locks = license_locks(&batch);
        let stall_ms = leasehold_common::time::duration_millis(self.options.stall_threshold);

        let conn = match connection(&mut self.conn, &self.config) {
            Ok(c) => c,
            Err(e) => return fail_batch(batch, &e.to_string()),
        };
        let Connection { client, statements } = conn;
        // The transaction is opened, savepointed and ended by hand (simple
        // queries that carry several statements), so that a batch costs
        // fewer round trips; every early return rolls it back.
        let lock_started = Instant::now();
        if let Err(e) = begin_and_lock(client, &locks) {
            return abort_batch(client, batch, &e.to_string());
        }
        self.stats
            .lock_wait_us
            .fetch_add(micros(lock_started.elapsed()), Ordering::Relaxed);
        let cluster = match read_cluster(client, &self.clock) {
            Ok(c) => c,
            Err(e) => return abort_batch(client, batch, &e.to_string()),
        };
        let now = cluster.now;
        if cluster.licenses_version != self.licenses_version {
            match load_cluster_licenses(client) {
                Ok(Some(licenses)) => self.licenses.replace(licenses),
                Ok(None) => {}
                Err(e) => return abort_batch(client, batch, &e.to_string()),
            }
            self.licenses_version = cluster.licenses_version;
        }
        let licenses = self.licenses.current();
        if cluster.last_alive != 0
            && now.as_millis() - cluster.last_alive > stall_ms
            && let Err(e) = outage(client, statements, now, stall_ms, &licenses)
        {
            return abort_batch(client, batch, &e.to_string());
        }

        let policy_recorded = !self
            .recorded_policy
            .as_ref()
            .is_some_and(|p| Arc::ptr_eq(p, &licenses))
            && record_pool_sizes(client, statements, now, &licenses);

        let (commit_tx, commit) = watch::channel(None);
        let mut finishes: Vec<Finish> = Vec::with_capacity(batch.len());
        let mut wrote_events = false;
        // The savepoint `cmd` isolates one command: its state before the
        // command runs.
        let mut savepoint = Savepoint::None;
        for cmd in batch {
            // One round trip: release the previous command's savepoint and
            // open this one's in the same simple query.
            let open = match savepoint {
                Savepoint::None => Some("SAVEPOINT cmd"),
                Savepoint::Used => Some("RELEASE SAVEPOINT cmd; SAVEPOINT cmd"),
                Savepoint::Clean => None,
            };
            if let Some(sql) = open
                && let Err(e) = client.batch_execute(sql)
            {
                savepoint = Savepoint::None;
                finishes.push(error_finish(cmd, e.into()));
                continue;
            }
            let mut pg = PgTx {
                tx: client,
                statements,
            };
            let rules = Rules {
                tx: &mut pg,
                now,
                licenses: &licenses,
                throttle: &mut self.throttle,
                events: Vec::new(),
            };
            let (done, ok, events) = apply(rules, cmd, &self.options, &commit);
            if ok {
                savepoint = Savepoint::Used;
            } else {
                // The savepoint stays, as it was before the command.
                savepoint = Savepoint::Clean;
                if let Err(e) = client.batch_execute("ROLLBACK TO SAVEPOINT cmd") {
                    tracing::error!("store: savepoint: {e}");
                    savepoint = Savepoint::None;
                }
            }
            wrote_events |= ok && !events.is_empty();
            finishes.push(done);
        }

        let applied = Instant::now();
        self.stats
            .apply_us
            .fetch_add(micros(applied - started), Ordering::Relaxed);
        let committed = finish_batch(client, now, wrote_events);
        self.stats
            .commit_us
            .fetch_add(micros(applied.elapsed()), Ordering::Relaxed);
        match committed {
            Ok(()) => {
                if policy_recorded {
                    self.recorded_policy = Some(licenses.clone());
                }
                let _ = commit_tx.send(Some(Ok(())));
                for f in finishes {
                    f(Ok(()));
                }
            }
            Err(e) => {
                tracing::error!(
                    "store: commit failed, batch of {} rolled back: {e}",
                    finishes.len()
                );
                let msg = e.to_string();
                let _ = commit_tx.send(Some(Err(msg.clone())));
                for f in finishes {
                    f(Err(&msg));
                }
            }
        }
    }
}

/// The state of the savepoint `cmd` before the next command.
#[derive(Clone, Copy)]
enum Savepoint {
    /// Not open (first command, or opening it failed).
    None,
    /// Open, holding the last command's changes: release it, open anew.
    Used,
    /// Open and rolled back to: as it was before the last command.
    Clean,
}

/// The writer's connection, made anew if the last one broke.
fn connection<'c>(
    conn: &'c mut Option<Connection>,
    config: &postgres::Config,
) -> Result<&'c mut Connection, StoreError> {
    if conn.as_ref().is_some_and(|c| c.client.is_closed()) {
        *conn = None;
    }
    if conn.is_none() {
        let mut client = connect_sync(config)?;
        let statements = Statements::prepare(&mut client)?;
        *conn = Some(Connection { client, statements });
    }
    Ok(conn.as_mut().expect("connected above"))
}

/// The advisory locks a batch needs: exclusive where it checks out, shared
/// where it only renews or releases, in key order (every replica takes
/// them in the same order, so two batches never wait on each other in a
/// cycle).
fn license_locks(batch: &[Command]) -> BTreeMap<i64, bool> {
    let mut locks = BTreeMap::new();
    for cmd in batch {
        let (license_id, exclusive) = match cmd {
            Command::Checkout { req, .. } => (req.license_id.as_str(), true),
            Command::Heartbeat { license_id, .. } | Command::Release { license_id, .. } => {
                (license_id.as_str(), false)
            }
            _ => continue,
        };
        *locks.entry(advisory_key(license_id)).or_insert(false) |= exclusive;
    }
    locks
}

/// `BEGIN` and every license lock, in key order, in one simple query (its
/// statements run in order; the keys are our own integers).
fn begin_and_lock(client: &mut Client, locks: &BTreeMap<i64, bool>) -> Result<(), postgres::Error> {
    let mut sql = String::from("BEGIN;");
    for (key, exclusive) in locks {
        let f = if *exclusive {
            "pg_advisory_xact_lock"
        } else {
            "pg_advisory_xact_lock_shared"
        };
        sql.push_str(&format!(" SELECT {f}('{key}'::bigint);"));
    }
    client.batch_execute(&sql)
}

/// The decision time: the database clock read after the locks, never
/// behind the cluster's high-water mark.
fn read_cluster(tx: &mut Client, clock: &DecisionClock) -> Result<ClusterNow, postgres::Error> {
    let row = tx.query_one(
        "SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint, clock_ms,
                last_alive_ms, licenses_version
         FROM cluster WHERE id = 1",
        &[],
    )?;
    let clock = match clock {
        DecisionClock::Database => row.get(0),
        DecisionClock::Injected(c) => c.now().as_millis(),
    };
    let high_water: i64 = row.get(1);
    Ok(ClusterNow {
        now: Timestamp::from_millis(clock.max(high_water)),
        last_alive: row.get(2),
        licenses_version: row.get(3),
    })
}

/// The cluster's policy, when a replica has published one.
pub(super) fn load_cluster_licenses(tx: &mut Client) -> Result<Option<Licenses>, StoreError> {
    let text: Option<String> = tx
        .query_one("SELECT licenses_toml FROM cluster WHERE id = 1", &[])?
        .get(0);
    match text {
        None => Ok(None),
        Some(text) => Licenses::parse(&text)
            .map(Some)
            .map_err(|e| StoreError::ClusterPolicy(e.to_string())),
    }
}

/// The outage rule, cluster-wide: the cluster made no progress (every
/// replica down, or the database away) for longer than the stall threshold.
/// The cluster row's lock makes it apply once: a replica that waited for it
/// finds `last_alive` already moved on.
fn outage(
    tx: &mut Client,
    statements: &Statements,
    now: Timestamp,
    stall_ms: i64,
    licenses: &Licenses,
) -> Result<(), StoreError> {
    let last_alive: i64 = tx
        .query_one(
            "SELECT last_alive_ms FROM cluster WHERE id = 1 FOR UPDATE",
            &[],
        )?
        .get(0);
    let gap = now.as_millis() - last_alive;
    if last_alive == 0 || gap <= stall_ms {
        return Ok(());
    }
    let mut pg = PgTx { tx, statements };
    let mut throttle = EventThrottle::default();
    let extended = Rules {
        tx: &mut pg,
        now,
        licenses,
        throttle: &mut throttle,
        events: Vec::new(),
    }
    .outage(Timestamp::from_millis(last_alive));
    tx.execute(
        "UPDATE cluster SET last_alive_ms = $1 WHERE id = 1",
        &[&now.as_millis()],
    )?;
    tracing::warn!(
        "the cluster made no progress for {:.1}s (every replica down or the database away); \
         gave {extended} lease(s) that were live when it stopped one TTL to renew",
        gap as f64 / 1000.0
    );
    Ok(())
}

/// Record the pool sizes of a policy the history has not seen yet; true
/// once recorded (in this batch's transaction, in a savepoint of its own so
/// a failure does not abort the batch).
fn record_pool_sizes(
    client: &mut Client,
    statements: &Statements,
    now: Timestamp,
    licenses: &Licenses,
) -> bool {
    if let Err(e) = client.batch_execute("SAVEPOINT policy") {
        tracing::error!("store: cannot record pool sizes: {e}");
        return false;
    }
    let mut pg = PgTx {
        tx: client,
        statements,
    };
    let mut throttle = EventThrottle::default();
    let recorded = Rules {
        tx: &mut pg,
        now,
        licenses,
        throttle: &mut throttle,
        events: Vec::new(),
    }
    .record_pool_sizes();
    let end = match &recorded {
        Ok(()) => "RELEASE SAVEPOINT policy",
        Err(e) => {
            tracing::error!("store: cannot record pool sizes: {e}");
            "ROLLBACK TO SAVEPOINT policy; RELEASE SAVEPOINT policy"
        }
    };
    let ended = client.batch_execute(end);
    recorded.is_ok() && ended.is_ok()
}

/// Move the clock's high-water mark and the cluster's "alive" time, wake
/// the event followers, commit: one simple query, so the cluster row's lock
/// (which serializes every replica's commits) is held for one round trip
/// less. A failed statement skips the rest (the transaction is then rolled
/// back); the `UPDATE` also fails in a transaction an earlier error aborted,
/// so `COMMIT` never silently ends one as a rollback.
fn finish_batch(
    client: &mut Client,
    now: Timestamp,
    wrote_events: bool,
) -> Result<(), postgres::Error> {
    let now = now.as_millis();
    let notify = if wrote_events {
        format!(" NOTIFY {EVENTS_CHANNEL};")
    } else {
        String::new()
    };
    let sql = format!(
        "UPDATE cluster SET clock_ms = greatest(clock_ms, {now}::bigint),
                            last_alive_ms = greatest(last_alive_ms, {now}::bigint)
         WHERE id = 1;{notify} COMMIT"
    );
    let result = client.batch_execute(&sql);
    if result.is_err() {
        rollback(client);
    }
    result
}

/// End an open transaction after an error (a no-op warning if it already
/// ended; a broken connection is made anew by the next batch).
fn rollback(client: &mut Client) {
    if !client.is_closed() {
        let _ = client.batch_execute("ROLLBACK");
    }
}

/// The batch's transaction failed before any command ran: roll it back and
/// answer every command with the error.
fn abort_batch(client: &mut Client, batch: Vec<Command>, msg: &str) {
    rollback(client);
    fail_batch(batch, msg);
}

/// Nothing in the batch ran: answer every command with the error now.
fn fail_batch(batch: Vec<Command>, msg: &str) {
    tracing::error!("store: database unavailable: {msg}");
    for cmd in batch {
        error_finish(cmd, StoreError::Unavailable(msg.to_string()))(Ok(()));
    }
}

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}
