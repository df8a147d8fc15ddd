//! A replica's writer on PostgreSQL: the same batches, rules and held-back
//! answers as on SQLite, with the cross-replica rules around them.
//!
//! One batch is one transaction:
//! 1. take each touched license's advisory lock, in key order (exclusive for
//!    a checkout, shared for the rest), so checkouts of one license are
//!    serialized across every replica and a heartbeat never revives a lease
//!    a concurrent checkout already counted as lapsed; then the
//!    `lease_rows` rows (the pool counts, see `schema.rs` v11) its inserts
//!    and deletes will update, in license order (every license's for a
//!    revoke or a reap, which may touch any);
//! 2. read the database clock *after* the locks, kept monotonic by the
//!    cluster's high-water mark, and the cluster's policy version;
//! 3. apply the cluster-wide outage rule if the cluster made no progress
//!    for longer than the stall threshold (once: under the cluster row lock);
//! 4. apply each command by the rules, in its own savepoint, opened only
//!    before its first statement: the leases the batch's heartbeats name
//!    and the blocks on the licenses its checkouts ask for are read in one
//!    statement each up front, each live count once per batch, and new
//!    leases and renewals written in one statement each (`batch_state.rs`,
//!    `pending.rs`),
//!    so a heartbeat, and a plain checkout after its batch's first count,
//!    sends no statement of its own;
//! 5. number and write the batch's events (kept until now, so the cluster
//!    row is locked only for the commit), move the high-water mark and
//!    "alive" time, wake the other replicas' event followers (`NOTIFY`),
//!    and commit.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use leasehold_common::policy::Entitled;
use leasehold_common::{Licenses, Timestamp};
use postgres::Client;

use super::batch_state::BatchState;
use super::statements::Statements;
use super::tx::PgTx;
use super::{EVENTS_CHANNEL, advisory_key, connect_sync};
use crate::clock::SharedClock;
use crate::licenses::LicensesHandle;
use crate::store::StoreError;
use crate::store::batch::{BatchStore, Begun, WriterStats, micros};
use crate::store::command::{Command, LeaseWrites, RuleCommand};
use crate::store::entitlement_ids::EntitlementId;
use crate::store::entitlement_set::JudgedSet;

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

/// PostgreSQL's side of a replica's writer batches.
pub struct PgBatches {
    config: postgres::Config,
    /// Tests move time by hand; production decides on the database clock.
    clock: DecisionClock,
    conn: Option<Connection>,
    licenses: LicensesHandle,
    /// The cluster's policy version the handle holds.
    licenses_version: i64,
    /// The cluster's entitlements version the handle holds (0: none yet).
    entitlements_version: i64,
    /// The cluster's "alive" time as this batch found it.
    cluster_last_alive: i64,
    /// What the open batch keeps between its statements.
    state: BatchState,
    stats: Arc<WriterStats>,
}

/// What the cluster row says at the start of a batch.
struct ClusterNow {
    now: Timestamp,
    last_alive: i64,
    licenses_version: i64,
    someone_waits: bool,
    entitlements_version: i64,
}

impl PgBatches {
    pub fn new(
        config: postgres::Config,
        clock: DecisionClock,
        licenses: LicensesHandle,
        licenses_version: i64,
        stats: Arc<WriterStats>,
    ) -> PgBatches {
        PgBatches {
            config,
            clock,
            conn: None,
            licenses,
            licenses_version,
            entitlements_version: 0,
            cluster_last_alive: 0,
            state: BatchState::default(),
            stats,
        }
    }

    /// The open batch's connection. `begin` made it; a batch never runs
    /// without one.
    fn open(&mut self) -> &mut Connection {
        self.conn
            .as_mut()
            .expect("a batch runs only after begin connected")
    }

    /// BEGIN and the locks, then the cluster's clock and policy.
    fn begin_on(&mut self, batch: &[Command]) -> Result<Begun, StoreError> {
        let locks = BatchLocks::of(batch, &self.licenses.current());
        let Connection { client, statements } = connection(&mut self.conn, &self.config)?;
        // The transaction is opened, savepointed and ended by hand (simple
        // queries that carry several statements), so that a batch costs
        // fewer round trips.
        let lock_started = Instant::now();
        begin_and_lock(client, &locks)?;
        self.stats
            .lock_wait_us
            .fetch_add(micros(lock_started.elapsed()), Ordering::Relaxed);
        let floor_ms = self.licenses.current().entitled().clock_floor_ms();
        let cluster = read_cluster(client, statements, &self.clock, floor_ms)?;
        if cluster.licenses_version != self.licenses_version {
            if let Some(licenses) = load_cluster_licenses(client)? {
                self.licenses.replace(licenses);
            }
            self.licenses_version = cluster.licenses_version;
        }
        if cluster.entitlements_version != self.entitlements_version {
            if let Some(entitled) = load_cluster_entitlements(client, &self.licenses.current())? {
                self.licenses.set_entitled(entitled);
            }
            self.entitlements_version = cluster.entitlements_version;
        }
        self.cluster_last_alive = cluster.last_alive;
        self.state.begin(cluster.someone_waits);
        self.state
            .read_ahead(client, statements, &heartbeat_seats(batch))?;
        let checkouts: Vec<&str> = locks.checkouts.iter().map(String::as_str).collect();
        self.state.lock_held(&checkouts);
        self.state
            .read_blocks(client, statements, &checkouts, cluster.now)?;
        Ok(Begun {
            now: cluster.now,
            licenses: self.licenses.current(),
        })
    }
}

impl BatchStore for PgBatches {
    type Tx<'t> = PgTx<'t>;

    const OUTAGE_WHAT: &'static str = "the cluster made no progress";
    const OUTAGE_WHY: &'static str = "every replica down or the database away";

    fn begin(&mut self, batch: &[Command]) -> Result<Begun, String> {
        match self.begin_on(batch) {
            Ok(begun) => Ok(begun),
            Err(e) => {
                self.rollback();
                Err(e.to_string())
            }
        }
    }

    fn begin_failed(msg: String) -> StoreError {
        StoreError::Unavailable(msg)
    }

    /// Cluster-wide: the cluster made no progress (every replica down, or
    /// the database away) for longer than the stall threshold. The cluster
    /// row's lock makes the rule apply once: a replica that waited for it
    /// finds `last_alive` already moved on by the commit that applied it.
    fn outage_began(
        &mut self,
        now: Timestamp,
        stall: Duration,
    ) -> Result<Option<Timestamp>, String> {
        let stall_ms = leasehold_common::time::duration_millis(stall);
        let is_outage =
            |last_alive: i64| last_alive != 0 && now.as_millis() - last_alive > stall_ms;
        if !is_outage(self.cluster_last_alive) {
            return Ok(None);
        }
        let last_alive: i64 = self
            .open()
            .client
            .query_one(
                "SELECT last_alive_ms FROM cluster WHERE id = 1 FOR UPDATE",
                &[],
            )
            .map_err(|e| StoreError::from(e).to_string())?
            .get(0);
        Ok(is_outage(last_alive).then(|| Timestamp::from_millis(last_alive)))
    }

    fn tx(&mut self) -> PgTx<'_> {
        let conn = self
            .conn
            .as_mut()
            .expect("a batch runs only after begin connected");
        PgTx {
            client: &mut conn.client,
            statements: &conn.statements,
            state: &mut self.state,
        }
    }

    /// Opened before the command's first statement, if it sends any
    /// (`BatchState::before_statement`): one round trip that also releases
    /// the previous command's.
    fn open_savepoint(&mut self) -> Result<(), StoreError> {
        self.state.command_starts();
        Ok(())
    }

    fn close_savepoint(&mut self, keep: bool) {
        let conn = self
            .conn
            .as_mut()
            .expect("a batch runs only after begin connected");
        self.state.command_ends(&mut conn.client, keep);
    }

    /// The events' commands succeeded (the batch forgot the others'), so
    /// `wrote_events` is whether any are pending.
    fn commit(&mut self, now: Timestamp, _wrote_events: bool) -> Result<(), String> {
        let conn = self
            .conn
            .as_mut()
            .expect("a batch runs only after begin connected");
        finish_batch(conn, &mut self.state, now).map_err(|e| StoreError::from(e).to_string())
    }

    fn rollback(&mut self) {
        self.state.clear();
        if let Some(conn) = &mut self.conn {
            rollback(&mut conn.client);
        }
    }
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

/// The locks a batch takes before its first command, so that two batches
/// never wait on each other in a cycle.
struct BatchLocks {
    /// License advisory locks by key, in key order: exclusive where the
    /// batch checks out, shared where it only renews or releases; and the
    /// alerts' lock (exclusive) where it evaluates alerts.
    advisory: BTreeMap<i64, bool>,
    /// The `lease_rows` rows the batch's inserts and deletes will update
    /// (their statement triggers do), in license id order.
    rows: RowLocks,
    /// The licenses the batch checks out from (all among `rows`).
    checkouts: BTreeSet<String>,
}

enum RowLocks {
    /// Every license's: a revoke or a reap may delete any license's leases.
    All,
    /// The named licenses' (checkouts and releases name theirs).
    Licenses(BTreeSet<String>),
}

impl BatchLocks {
    /// Only licenses of the policy get row locks: their ids are plain ASCII
    /// (safe to inline in SQL), and a command for an unknown license
    /// inserts and deletes nothing.
    fn of(batch: &[Command], licenses: &Licenses) -> BatchLocks {
        let mut advisory = BTreeMap::new();
        let mut rows = BTreeSet::new();
        let mut checkouts = BTreeSet::new();
        let mut all_rows = false;
        for cmd in batch {
            let Command::Rule(rule) = cmd else { continue };
            if matches!(rule, RuleCommand::Tick { .. }) && licenses.alerts().next().is_some() {
                // Alert evaluation, serialized across replicas (`pg/outbox/mod.rs`).
                advisory.insert(super::outbox::ALERTS_LOCK, true);
            }
            let (license_id, exclusive) = match rule.lease_writes(licenses) {
                LeaseWrites::Checkout(license_id) => (license_id, true),
                LeaseWrites::Delete(license_id) => {
                    if let Some(lic) = licenses.get(license_id) {
                        rows.insert(lic.id.clone());
                    }
                    (license_id, false)
                }
                LeaseWrites::Renew(license_id) => (license_id, false),
                LeaseWrites::DeleteAny => {
                    all_rows = true;
                    continue;
                }
                LeaseWrites::Nothing => continue,
            };
            if exclusive && let Some(lic) = licenses.get(license_id) {
                rows.insert(lic.id.clone());
                checkouts.insert(lic.id.clone());
            }
            *advisory.entry(advisory_key(license_id)).or_insert(false) |= exclusive;
        }
        let rows = if all_rows {
            RowLocks::All
        } else {
            RowLocks::Licenses(rows)
        };
        BatchLocks {
            advisory,
            rows,
            checkouts,
        }
    }
}

/// `BEGIN`, every license lock in key order, then the `lease_rows` rows in
/// license order, in one simple query (its statements run in order; the
/// keys are our own integers, the license ids the policy's plain ones).
fn begin_and_lock(client: &mut Client, locks: &BatchLocks) -> Result<(), postgres::Error> {
    let mut sql = String::from("BEGIN;");
    for (key, exclusive) in &locks.advisory {
        let f = if *exclusive {
            "pg_advisory_xact_lock"
        } else {
            "pg_advisory_xact_lock_shared"
        };
        sql.push_str(&format!(" SELECT {f}('{key}'::bigint);"));
    }
    let rows = "SELECT 1 FROM lease_rows";
    let in_order = "ORDER BY license_id COLLATE \"C\" FOR NO KEY UPDATE;";
    match &locks.rows {
        RowLocks::All => sql.push_str(&format!(" {rows} {in_order}")),
        RowLocks::Licenses(ids) if ids.is_empty() => {}
        RowLocks::Licenses(ids) => {
            let ids: Vec<String> = ids.iter().map(|id| format!("'{id}'")).collect();
            sql.push_str(&format!(
                " {rows} WHERE license_id IN ({}) {in_order}",
                ids.join(", ")
            ));
        }
    }
    client.batch_execute(&sql)
}

/// The decision time: the database clock read after the locks, never
/// behind the cluster's high-water mark nor the newest `iat` of the
/// entitlements in force (`floor_ms`).
fn read_cluster(
    tx: &mut Client,
    statements: &Statements,
    clock: &DecisionClock,
    floor_ms: i64,
) -> Result<ClusterNow, postgres::Error> {
    let row = tx.query_one(&statements.read_cluster, &[])?;
    let clock = match clock {
        DecisionClock::Database => row.get(0),
        DecisionClock::Injected(c) => c.now().as_millis(),
    };
    let high_water: i64 = row.get(1);
    Ok(ClusterNow {
        now: Timestamp::from_millis(clock.max(high_water).max(floor_ms)),
        last_alive: row.get(2),
        licenses_version: row.get(3),
        someone_waits: row.get(4),
        entitlements_version: row.get(5),
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

/// The cluster's entitlements, when a replica has published some: the
/// judged set, verified again with this licenses file's vendor keys.
fn load_cluster_entitlements(
    tx: &mut Client,
    licenses: &Licenses,
) -> Result<Option<Entitled>, StoreError> {
    let text: Option<String> = tx
        .query_one("SELECT entitlements_json FROM cluster WHERE id = 1", &[])?
        .get(0);
    let Some(text) = text else {
        return Ok(None);
    };
    let set = JudgedSet::from_json(&text).map_err(StoreError::ClusterPolicy)?;
    let remembered: Vec<EntitlementId> = tx
        .query(crate::store::entitlement_ids::SELECT_SQL, &[])?
        .iter()
        .map(|r| EntitlementId {
            vendor: r.get(0),
            id: r.get(1),
            iat: r.get(2),
            nbf: r.get(3),
            claims_hash: r.get(4),
        })
        .collect();
    Ok(Some(set.entitled(licenses.vendors(), &remembered)))
}

/// Number and write the batch's events, move the clock's high-water mark
/// and the cluster's "alive" time, wake the event followers, commit. The
/// cluster row's lock (which serializes every replica's commits and makes
/// event ids gap-free) is taken here, so it is held for this and the
/// commit's round trip only. A failed statement skips the rest (the
/// transaction is then rolled back); the `UPDATE` also fails in a
/// transaction an earlier error aborted, so `COMMIT` never silently ends
/// one as a rollback.
fn finish_batch(
    conn: &mut Connection,
    state: &mut BatchState,
    now: Timestamp,
) -> Result<(), postgres::Error> {
    let client = &mut conn.client;
    let result = state
        .write_pending(client, &conn.statements)
        .and_then(|()| {
            if !state.has_events() {
                let now = now.as_millis();
                client.batch_execute(&format!(
                    "UPDATE cluster SET clock_ms = greatest(clock_ms, {now}::bigint),
                                        last_alive_ms = greatest(last_alive_ms, {now}::bigint)
                     WHERE id = 1; COMMIT"
                ))
            } else {
                state.write_events(client, &conn.statements, now)?;
                client.batch_execute(&format!("NOTIFY {EVENTS_CHANNEL}; COMMIT"))
            }
        });
    state.clear();
    if result.is_err() {
        rollback(client);
    }
    result
}

/// The seats the batch's heartbeats name, read up front in one statement.
fn heartbeat_seats(batch: &[Command]) -> Vec<&str> {
    batch
        .iter()
        .filter_map(|cmd| match cmd {
            Command::Rule(RuleCommand::Heartbeat { seat_id, .. }) => Some(seat_id.as_str()),
            _ => None,
        })
        .collect()
}

/// End an open transaction after an error (a no-op warning if it already
/// ended; a broken connection is made anew by the next batch).
fn rollback(client: &mut Client) {
    if !client.is_closed() {
        let _ = client.batch_execute("ROLLBACK");
    }
}
