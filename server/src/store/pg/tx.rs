//! The PostgreSQL answers to the lease rules' queries ([`LeaseTx`]), run by
//! a replica's writer inside its open transaction (after it took the
//! license locks and read the cluster's clock). The writer opens and ends
//! that transaction and its savepoints itself, on the bare client.

use std::collections::HashMap;

use leasehold_common::Timestamp;
use postgres::{Client, Row, Statement};

use super::super::rules::{EndedSession, LeaseTx, NewEvent, Result};
use super::batch_state::BatchState;
use super::line::{DB_NOW, STALE_MS, waiters, waiters_ahead_sql};
use crate::store::{LeaseRow, Scope, SeatMode, Waiter, lease_columns};

const LEASE_COLUMNS: &str = lease_columns!();

/// The live leases of one scope: `$1` license, `$2` threshold, then the
/// group, holder or mode (the others NULL).
const SCOPED: &str = "license_id = $1 AND expires_at >= $2
    AND ($3::text IS NULL OR grp = $3) AND ($4::text IS NULL OR holder = $4)
    AND ($5::integer IS NULL OR mode = $5)";

/// Every statement the writer runs, prepared once per connection.
pub struct Statements {
    /// The batch's clock, the cluster's state and whether anyone waits in
    /// line (`pg/writer.rs`: `read_cluster`).
    pub read_cluster: Statement,
    history: HistoryStatements,
    block_until: Statement,
    set_block: Statement,
    by_idempotency_key: Statement,
    forget_idempotency_key: Statement,
    live_by_fingerprint: Statement,
    live_count: Statement,
    earliest_live: Statement,
    live_count_scoped: Statement,
    earliest_live_scoped: Statement,
    lease: Statement,
    pub(super) insert_leases: Statement,
    delete_lease: Statement,
    reap_leases: Statement,
    pub(super) number_events: Statement,
    pub(super) leases_by_seat: Statement,
    pub(super) blocks_of_licenses: Statement,
    pub(super) renew_leases: Statement,
    waiting_line: Statement,
    prune_blocks: Statement,
    prune_events: Statement,
    extend_live: Statement,
}

impl Statements {
    pub fn prepare(client: &mut postgres::Client) -> std::result::Result<Self, postgres::Error> {
        let history = HistoryStatements::prepare(client)?;
        let mut p = |sql: &str| client.prepare(sql);
        Ok(Statements {
            read_cluster: p(&format!(
                "SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint, clock_ms,
                        last_alive_ms, licenses_version,
                        EXISTS (SELECT 1 FROM waiters WHERE seen_ms >= {DB_NOW} - {STALE_MS})
                 FROM cluster WHERE id = 1"
            ))?,
            history,
            block_until: p("SELECT until_ms FROM blocks
                WHERE license_id = $1 AND holder = $2 AND fingerprint = $3 AND until_ms > $4")?,
            set_block: p(
                "INSERT INTO blocks (license_id, holder, fingerprint, until_ms) VALUES ($1, $2, $3, $4)
                 ON CONFLICT (license_id, holder, fingerprint) DO UPDATE SET until_ms = excluded.until_ms",
            )?,
            by_idempotency_key: p(&format!(
                "SELECT {LEASE_COLUMNS} FROM leases WHERE license_id = $1 AND idempotency_key = $2"
            ))?,
            forget_idempotency_key: p(
                "UPDATE leases SET idempotency_key = NULL WHERE seat_id = $1",
            )?,
            live_by_fingerprint: p(&format!(
                "SELECT {LEASE_COLUMNS} FROM leases
                 WHERE license_id = $1 AND fingerprint = $2 AND expires_at >= $3
                 ORDER BY (mode = 1 AND holder <> $4), expires_at DESC,
                          seat_id COLLATE \"C\" DESC
                 LIMIT 1"
            ))?,
            // The license's rows (`lease_rows`, kept by the triggers) less
            // its lapsed ones: the complement of the live predicate
            // (`expires_at >= $2`), so exactly the live count, without
            // visiting the live leases. One statement reads both terms in
            // one snapshot, and a trigger's update commits with the rows it
            // counts, so they agree.
            live_count: p(
                "SELECT coalesce((SELECT rows FROM lease_rows WHERE license_id = $1), 0)
                      - (SELECT count(*) FROM leases WHERE license_id = $1 AND expires_at < $2)",
            )?,
            earliest_live: p(
                "SELECT min(expires_at) FROM leases WHERE license_id = $1 AND expires_at >= $2",
            )?,
            // A group's, a holder's or a mode's seats: asked only of
            // licenses with seat policies, under the license's lock.
            live_count_scoped: p(&format!(
                "SELECT count(*) FROM leases WHERE {SCOPED}"
            ))?,
            earliest_live_scoped: p(&format!(
                "SELECT min(expires_at) FROM leases WHERE {SCOPED}"
            ))?,
            lease: p(&format!(
                "SELECT {LEASE_COLUMNS} FROM leases
                 WHERE seat_id = $1 AND ($2::text IS NULL OR license_id = $2)"
            ))?,
            insert_leases: p(
                "INSERT INTO leases (seat_id, license_id, holder, fingerprint, idempotency_key,
                                     checked_out_at, issued_at, expires_at, grp, mode)
                 SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[],
                                      $5::text[], $6::bigint[], $7::bigint[], $8::bigint[],
                                      $9::text[], $10::int[])",
            )?,
            delete_lease: p(&format!(
                "DELETE FROM leases WHERE seat_id = $1 AND ($2::text IS NULL OR license_id = $2)
                 RETURNING {LEASE_COLUMNS}"
            ))?,
            // SKIP LOCKED: two replicas reaping at once split the work; a
            // lease is deleted, and its event written, exactly once.
            reap_leases: p(
                "WITH victims AS (
                     SELECT seat_id FROM leases
                     WHERE license_id = $1 AND expires_at < $2
                     ORDER BY expires_at, seat_id LIMIT $3
                     FOR UPDATE SKIP LOCKED)
                 DELETE FROM leases l USING victims v WHERE l.seat_id = v.seat_id
                 RETURNING l.seat_id, l.license_id, l.holder, l.fingerprint, l.checked_out_at,
                           l.issued_at, l.expires_at, l.grp, l.mode",
            )?,
            // At the commit, under the cluster row's lock: the batch's
            // events get the next ids (gap-free, visible in id order), and
            // the high-water mark and "alive" time move, in one statement.
            number_events: p(
                "WITH numbered AS (
                     UPDATE cluster
                     SET last_event_id = last_event_id + cardinality($1::bigint[]),
                         clock_ms = greatest(clock_ms, $7),
                         last_alive_ms = greatest(last_alive_ms, $7)
                     WHERE id = 1
                     RETURNING last_event_id - cardinality($1::bigint[]) AS before)
                 INSERT INTO events (id, at, kind, license_id, seat_id, holder, detail)
                 SELECT numbered.before + e.n, e.at, e.kind, e.license_id, e.seat_id,
                        e.holder, e.detail
                 FROM numbered, unnest($1::bigint[], $2::text[], $3::text[], $4::text[],
                                       $5::text[], $6::text[])
                     WITH ORDINALITY AS e(at, kind, license_id, seat_id, holder, detail, n)",
            )?,
            blocks_of_licenses: p("SELECT license_id, holder, fingerprint, until_ms FROM blocks
                 WHERE license_id = ANY($1::text[]) AND until_ms > $2")?,
            leases_by_seat: p(&format!(
                "SELECT {LEASE_COLUMNS} FROM leases WHERE seat_id = ANY($1::text[])"
            ))?,
            renew_leases: p(
                "UPDATE leases l SET issued_at = u.issued_at, expires_at = u.expires_at,
                                     mode = u.mode
                 FROM unnest($1::text[], $2::bigint[], $3::bigint[], $4::int[])
                     AS u(seat_id, issued_at, expires_at, mode)
                 WHERE l.seat_id = u.seat_id",
            )?,
            // The shared line as `pg/line.rs` reads it, in the batch.
            waiting_line: p(&waiters_ahead_sql())?,
            prune_blocks: p("DELETE FROM blocks WHERE until_ms <= $1")?,
            prune_events: p(
                "DELETE FROM events WHERE id <= (SELECT last_event_id FROM cluster WHERE id = 1) - $1",
            )?,
            extend_live: p(
                "UPDATE leases SET expires_at = $1
                 WHERE license_id = $2 AND expires_at >= $3 AND expires_at < $1 AND mode = 0",
            )?,
            // A size in force at the cutoff stays: it judges what comes after.
        })
    }
}

/// The usage history's statements: sessions, denials, pool sizes.
struct HistoryStatements {
    record_sessions: Statement,
    count_denial: Statement,
    current_pool_sizes: Statement,
    record_pool_size: Statement,
    prune_sessions: Statement,
    prune_denials: Statement,
    prune_pool_sizes: Statement,
}

impl HistoryStatements {
    fn prepare(client: &mut postgres::Client) -> std::result::Result<Self, postgres::Error> {
        let mut p = |sql: &str| client.prepare(sql);
        Ok(HistoryStatements {
            record_sessions: p(
                "INSERT INTO sessions (seat_id, license_id, holder, fingerprint, started_at,
                                       ended_at, end_kind, grp, mode)
                 SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[],
                                      $5::bigint[], $6::bigint[], $7::text[], $8::text[],
                                      $9::int[])",
            )?,
            count_denial: p(
                "INSERT INTO denials (license_id, second_ms, count) VALUES ($1, $2, 1)
                 ON CONFLICT (license_id, second_ms) DO UPDATE SET count = denials.count + 1",
            )?,
            current_pool_sizes: p(
                "SELECT DISTINCT ON (license_id) license_id, seats FROM pool_sizes
                 ORDER BY license_id, at DESC",
            )?,
            record_pool_size: p(
                "INSERT INTO pool_sizes (license_id, at, seats) VALUES ($1, $2, $3)
                 ON CONFLICT (license_id, at) DO UPDATE SET seats = excluded.seats",
            )?,
            prune_sessions: p("DELETE FROM sessions WHERE id IN (
                     SELECT id FROM sessions WHERE ended_at < $1 LIMIT $2)")?,
            prune_denials: p("DELETE FROM denials WHERE (license_id, second_ms) IN (
                     SELECT license_id, second_ms FROM denials WHERE second_ms < $1 LIMIT $2)")?,
            prune_pool_sizes: p("DELETE FROM pool_sizes WHERE (license_id, at) IN (
                     SELECT p.license_id, p.at FROM pool_sizes p
                     WHERE p.at < $1 AND EXISTS (
                         SELECT 1 FROM pool_sizes q
                         WHERE q.license_id = p.license_id AND q.at > p.at AND q.at <= $1)
                     LIMIT $2)")?,
        })
    }
}

/// One command's view of the writer's transaction: the client, inside the
/// transaction the writer opened on it, and what the batch keeps on this
/// side (its events, heartbeat renewals, leases read up front, savepoint).
pub struct PgTx<'t> {
    pub client: &'t mut Client,
    pub statements: &'t Statements,
    pub state: &'t mut BatchState,
}

pub fn lease_from_row(r: &Row) -> LeaseRow {
    LeaseRow {
        seat_id: r.get(0),
        license_id: r.get(1),
        holder: r.get(2),
        fingerprint: r.get(3),
        checked_out_at: Timestamp::from_millis(r.get(4)),
        issued_at: Timestamp::from_millis(r.get(5)),
        expires_at: Timestamp::from_millis(r.get(6)),
        group: r.get(7),
        // The schema check refuses a database newer than this build, so
        // every stored mode is one it knows.
        mode: SeatMode::from_code(r.get(8)).unwrap_or_default(),
    }
}

fn count(n: i64) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

impl PgTx<'_> {
    /// Before each statement: the batch's kept renewals written, the
    /// command's savepoint open.
    fn ready(&mut self) -> Result<()> {
        self.state.before_statement(self.client, self.statements)?;
        Ok(())
    }

    /// One row of `whole` (a license's live leases) or of `scoped` (a
    /// group's, holder's or mode's).
    fn scoped(
        &mut self,
        whole: &Statement,
        scoped: &Statement,
        scope: Scope<'_>,
        threshold: Timestamp,
    ) -> std::result::Result<Row, postgres::Error> {
        let threshold = threshold.as_millis();
        let (mut group, mut holder, mut mode) = (None::<&str>, None::<&str>, None::<i32>);
        let license_id = match scope {
            Scope::License(license_id) => {
                return self.client.query_one(whole, &[&license_id, &threshold]);
            }
            Scope::Group {
                license_id,
                group: g,
            } => {
                group = Some(g);
                license_id
            }
            Scope::Holder {
                license_id,
                holder: h,
            } => {
                holder = Some(h);
                license_id
            }
            Scope::Mode {
                license_id,
                mode: m,
            } => {
                mode = Some(m.code());
                license_id
            }
        };
        self.client
            .query_one(scoped, &[&license_id, &threshold, &group, &holder, &mode])
    }
}

impl LeaseTx for PgTx<'_> {
    fn block_until(
        &mut self,
        license_id: &str,
        holder: &str,
        fingerprint: &str,
        now: Timestamp,
    ) -> Result<Option<Timestamp>> {
        if let Some(known) = self.state.known_block(license_id, holder, fingerprint, now) {
            return Ok(known);
        }
        self.ready()?;
        let row = self.client.query_opt(
            &self.statements.block_until,
            &[&license_id, &holder, &fingerprint, &now.as_millis()],
        )?;
        Ok(row.map(|r| Timestamp::from_millis(r.get(0))))
    }

    fn set_block(
        &mut self,
        license_id: &str,
        holder: &str,
        fingerprint: &str,
        until: Timestamp,
    ) -> Result<()> {
        self.ready()?;
        self.client.execute(
            &self.statements.set_block,
            &[&license_id, &holder, &fingerprint, &until.as_millis()],
        )?;
        self.state.blocked(license_id, holder, fingerprint, until);
        Ok(())
    }

    fn lease_by_idempotency_key(
        &mut self,
        license_id: &str,
        key: &str,
    ) -> Result<Option<LeaseRow>> {
        self.ready()?;
        let row = self
            .client
            .query_opt(&self.statements.by_idempotency_key, &[&license_id, &key])?;
        Ok(row.as_ref().map(lease_from_row))
    }

    fn forget_idempotency_key(&mut self, seat_id: &str) -> Result<()> {
        self.ready()?;
        self.client
            .execute(&self.statements.forget_idempotency_key, &[&seat_id])?;
        Ok(())
    }

    fn live_lease_by_fingerprint(
        &mut self,
        license_id: &str,
        fingerprint: &str,
        holder: &str,
        threshold: Timestamp,
    ) -> Result<Option<LeaseRow>> {
        self.ready()?;
        let row = self.client.query_opt(
            &self.statements.live_by_fingerprint,
            &[&license_id, &fingerprint, &threshold.as_millis(), &holder],
        )?;
        Ok(row.as_ref().map(lease_from_row))
    }

    /// Read once per batch for a license it checks out from, then kept
    /// (`LiveCounts`).
    fn live_count(&mut self, scope: Scope<'_>, threshold: Timestamp) -> Result<u32> {
        if let Some(live) = self.state.counts.known(scope, threshold) {
            return Ok(live);
        }
        self.ready()?;
        let n: i64 = self
            .scoped(
                &self.statements.live_count,
                &self.statements.live_count_scoped,
                scope,
                threshold,
            )?
            .get(0);
        let live = count(n);
        self.state.counts.read(scope, threshold, live);
        Ok(live)
    }

    fn earliest_live_expiry(
        &mut self,
        scope: Scope<'_>,
        threshold: Timestamp,
    ) -> Result<Option<Timestamp>> {
        self.ready()?;
        let earliest: Option<i64> = self
            .scoped(
                &self.statements.earliest_live,
                &self.statements.earliest_live_scoped,
                scope,
                threshold,
            )?
            .get(0);
        Ok(earliest.map(Timestamp::from_millis))
    }

    fn lease(&mut self, license_id: Option<&str>, seat_id: &str) -> Result<Option<LeaseRow>> {
        if let Some(known) = self.state.known_lease(seat_id) {
            return Ok(known
                .filter(|l| license_id.is_none_or(|id| l.license_id == id))
                .cloned());
        }
        self.ready()?;
        let row = self
            .client
            .query_opt(&self.statements.lease, &[&seat_id, &license_id])?;
        Ok(row.as_ref().map(lease_from_row))
    }

    /// Kept and written with the batch's other new leases, in one
    /// statement, before the next read of the table or at the commit.
    fn insert_lease(&mut self, lease: &LeaseRow, idempotency_key: Option<&str>) -> Result<()> {
        self.state.insert(lease, idempotency_key);
        Ok(())
    }

    /// Kept and written with the batch's other renewals, in one statement,
    /// before the next read of the table or at the commit.
    fn renew_lease(&mut self, old: &LeaseRow, renewed: &LeaseRow) -> Result<()> {
        debug_assert_eq!(old.seat_id, renewed.seat_id);
        self.state.renew(old, renewed);
        Ok(())
    }

    fn delete_lease(
        &mut self,
        seat_id: &str,
        license_id: Option<&str>,
    ) -> Result<Option<LeaseRow>> {
        self.ready()?;
        let row = self
            .client
            .query_opt(&self.statements.delete_lease, &[&seat_id, &license_id])?;
        let gone = row.as_ref().map(lease_from_row);
        if let Some(lease) = &gone {
            self.state.deleted(lease);
        }
        Ok(gone)
    }

    fn reap_expired(
        &mut self,
        license_id: &str,
        cutoff: Timestamp,
        limit: usize,
    ) -> Result<Vec<LeaseRow>> {
        self.ready()?;
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let mut gone: Vec<LeaseRow> = self
            .client
            .query(
                &self.statements.reap_leases,
                &[&license_id, &cutoff.as_millis(), &limit],
            )?
            .iter()
            .map(lease_from_row)
            .collect();
        // RETURNING has no order of its own; the rules expect the index's.
        gone.sort_by(|a, b| (a.expires_at, &a.seat_id).cmp(&(b.expires_at, &b.seat_id)));
        self.state.forget_known();
        Ok(gone)
    }

    fn prune(&mut self, now: Timestamp, event_retention: i64) -> Result<()> {
        self.ready()?;
        self.client
            .execute(&self.statements.prune_blocks, &[&now.as_millis()])?;
        self.client
            .execute(&self.statements.prune_events, &[&event_retention])?;
        Ok(())
    }

    /// One statement for the whole set (`unnest` of arrays): a reap of
    /// thousands of seats is one round trip.
    fn record_sessions(&mut self, sessions: &[EndedSession<'_>]) -> Result<()> {
        if sessions.is_empty() {
            return Ok(());
        }
        self.ready()?;
        let column = |f: for<'s> fn(&'s EndedSession<'_>) -> &'s str| {
            sessions.iter().map(f).collect::<Vec<_>>()
        };
        let seats = column(|s| &s.lease.seat_id);
        let licenses = column(|s| &s.lease.license_id);
        let holders = column(|s| &s.lease.holder);
        let fingerprints: Vec<Option<&str>> = sessions
            .iter()
            .map(|s| s.lease.fingerprint.as_deref())
            .collect();
        let started: Vec<i64> = sessions
            .iter()
            .map(|s| s.lease.checked_out_at.as_millis())
            .collect();
        let ended: Vec<i64> = sessions.iter().map(|s| s.at.as_millis()).collect();
        let ends = column(|s| s.end.as_str());
        let groups: Vec<Option<&str>> = sessions.iter().map(|s| s.lease.group.as_deref()).collect();
        let modes: Vec<i32> = sessions.iter().map(|s| s.lease.mode.code()).collect();
        self.client.execute(
            &self.statements.history.record_sessions,
            &[
                &seats,
                &licenses,
                &holders,
                &fingerprints,
                &started,
                &ended,
                &ends,
                &groups,
                &modes,
            ],
        )?;
        Ok(())
    }

    fn count_denial(&mut self, license_id: &str, at: Timestamp) -> Result<()> {
        self.ready()?;
        let second = at.as_millis().div_euclid(1000) * 1000;
        self.client.execute(
            &self.statements.history.count_denial,
            &[&license_id, &second],
        )?;
        Ok(())
    }

    fn current_pool_sizes(&mut self) -> Result<HashMap<String, u32>> {
        self.ready()?;
        let rows = self
            .client
            .query(&self.statements.history.current_pool_sizes, &[])?;
        Ok(rows
            .iter()
            .map(|r| {
                let seats: i32 = r.get(1);
                (r.get(0), u32::try_from(seats).unwrap_or(0))
            })
            .collect())
    }

    fn record_pool_size(&mut self, license_id: &str, at: Timestamp, seats: u32) -> Result<()> {
        self.ready()?;
        let seats = i32::try_from(seats).unwrap_or(i32::MAX);
        self.client.execute(
            &self.statements.history.record_pool_size,
            &[&license_id, &at.as_millis(), &seats],
        )?;
        Ok(())
    }

    fn prune_history(&mut self, cutoff: Timestamp, limit: usize) -> Result<usize> {
        self.ready()?;
        let (cutoff, limit) = (cutoff.as_millis(), i64::try_from(limit).unwrap_or(i64::MAX));
        let mut pruned = 0;
        for statement in [
            &self.statements.history.prune_sessions,
            &self.statements.history.prune_denials,
            &self.statements.history.prune_pool_sizes,
        ] {
            pruned += self.client.execute(statement, &[&cutoff, &limit])?;
        }
        Ok(usize::try_from(pruned).unwrap_or(usize::MAX))
    }

    fn extend_live(
        &mut self,
        license_id: &str,
        was_live: Timestamp,
        until: Timestamp,
    ) -> Result<usize> {
        self.ready()?;
        let n = self.client.execute(
            &self.statements.extend_live,
            &[&until.as_millis(), &license_id, &was_live.as_millis()],
        )?;
        self.state.forget_known();
        Ok(usize::try_from(n).unwrap_or(usize::MAX))
    }

    /// No round trip while nobody waits (the usual case): the batch read
    /// that with its clock. A waiter who joined since then came after
    /// every checkout of this batch.
    fn waiting_line(&mut self, license_id: &str, before: Option<i64>) -> Result<Vec<Waiter>> {
        if !self.state.someone_waits {
            return Ok(Vec::new());
        }
        self.ready()?;
        let rows = self.client.query(
            &self.statements.waiting_line,
            &[&license_id, &before, &STALE_MS],
        )?;
        Ok(waiters(&rows))
    }

    /// Kept for the commit ([`PendingEvents::write`]), which numbers them:
    /// the ids here are 0. Nothing reads them: a replica's subscribers get
    /// every replica's events, numbered, from the table (the follower).
    fn append_events(&mut self, events: &[NewEvent<'_>]) -> Result<Vec<i64>> {
        for e in events {
            self.state.events.push(e);
        }
        Ok(vec![0; events.len()])
    }
}
