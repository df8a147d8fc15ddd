//! The SQLite answers to the lease rules' queries ([`LeaseTx`]), run by the
//! writer inside its open transaction. Counting and "earliest live expiry"
//! come from the writer's [`LiveIndex`], which every write here keeps in
//! step with the `leases` table.

use std::collections::HashMap;

use leasehold_common::Timestamp;
use leasehold_common::api::{DenialReason, SessionEnd};
use rusqlite::{Connection, OptionalExtension, params};

use super::bulk;
use super::live_index::LiveIndex;
use super::outbox;
use super::rows::{lease_columns, lease_from_row};
use crate::store::denials::{offset_bytes, second_of};
use crate::store::outbox::{AlertState, AttemptRecord, Content, DueDelivery};
use crate::store::rules::{Denial, EndedSession, IdlePeriod, LeaseTx, NewEvent, Result};
use crate::store::{LeaseRow, Scope, SeatMode, StoreError, Waiter};

/// The writer's connection and live index, for one batch.
pub struct SqliteTx<'a> {
    pub conn: &'a Connection,
    pub index: &'a mut LiveIndex,
    /// Rows written by [`LeaseTx::count_denial`] (the writer holds a batch
    /// that wrote nothing else uncommitted: `writer.rs`).
    pub denial_rows: &'a mut u64,
}

impl LeaseTx for SqliteTx<'_> {
    fn record_idle_periods(&mut self, periods: &[IdlePeriod<'_>]) -> Result<()> {
        let mut insert = self.conn.prepare_cached(
            "INSERT INTO idle_periods (license_id, seat_id, from_ms, to_ms)
             VALUES (?1, ?2, ?3, ?4)",
        )?;
        for p in periods {
            insert.execute(params![
                p.license_id,
                p.seat_id,
                p.from.as_millis(),
                p.to.as_millis()
            ])?;
        }
        Ok(())
    }

    fn idle_seats(
        &mut self,
        license_id: &str,
        kept: SeatMode,
        idle_before: Timestamp,
        threshold: Timestamp,
        limit: usize,
    ) -> Result<Vec<LeaseRow>> {
        // The partial index holds only seats that report idleness, in the
        // order asked: the sweep reads the longest idle and stops.
        const SQL: &str = concat!(
            "SELECT ",
            lease_columns!(),
            " FROM leases INDEXED BY leases_idle
             WHERE license_id = ?1 AND idle_since IS NOT NULL AND idle_since <= ?2
               AND mode = ?3 AND expires_at >= ?4
             ORDER BY idle_since, seat_id LIMIT ?5"
        );
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        Ok(self
            .conn
            .prepare_cached(SQL)?
            .query_map(
                params![
                    license_id,
                    idle_before.as_millis(),
                    kept.code(),
                    threshold.as_millis(),
                    limit
                ],
                lease_from_row,
            )?
            .collect::<rusqlite::Result<_>>()?)
    }

    fn ended_session(
        &mut self,
        license_id: &str,
        seat_id: &str,
        ended_since: Timestamp,
    ) -> Result<Option<SessionEnd>> {
        // Sessions have no index by seat: this reads the license's sessions
        // that ended since `ended_since` (a ttl or so), not its history.
        let kind: Option<String> = self
            .conn
            .prepare_cached(
                "SELECT end_kind FROM sessions INDEXED BY sessions_by_license_end
                 WHERE license_id = ?1 AND ended_at >= ?3 AND seat_id = ?2
                 ORDER BY ended_at DESC LIMIT 1",
            )?
            .query_row(params![license_id, seat_id, ended_since.as_millis()], |r| {
                r.get(0)
            })
            .optional()?;
        kind.map(|k| SessionEnd::parse(&k).ok_or(StoreError::UnknownSessionEnd(k)))
            .transpose()
    }

    fn block_until(
        &mut self,
        license_id: &str,
        holder: &str,
        fingerprint: &str,
        now: Timestamp,
    ) -> Result<Option<Timestamp>> {
        let until: Option<i64> = self
            .conn
            .prepare_cached(
                "SELECT until_ms FROM blocks
                 WHERE license_id = ?1 AND holder = ?2 AND fingerprint = ?3 AND until_ms > ?4",
            )?
            .query_row(
                params![license_id, holder, fingerprint, now.as_millis()],
                |r| r.get(0),
            )
            .optional()?;
        Ok(until.map(Timestamp::from_millis))
    }

    fn set_block(
        &mut self,
        license_id: &str,
        holder: &str,
        fingerprint: &str,
        until: Timestamp,
    ) -> Result<()> {
        self.conn
            .prepare_cached(
                "INSERT INTO blocks (license_id, holder, fingerprint, until_ms) VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT (license_id, holder, fingerprint) DO UPDATE SET until_ms = excluded.until_ms",
            )?
            .execute(params![license_id, holder, fingerprint, until.as_millis()])?;
        Ok(())
    }

    fn lease_by_idempotency_key(
        &mut self,
        license_id: &str,
        key: &str,
    ) -> Result<Option<LeaseRow>> {
        const SQL: &str = concat!(
            "SELECT ",
            lease_columns!(),
            " FROM leases WHERE license_id = ?1 AND idempotency_key = ?2"
        );
        Ok(self
            .conn
            .prepare_cached(SQL)?
            .query_row(params![license_id, key], lease_from_row)
            .optional()?)
    }

    fn forget_idempotency_key(&mut self, seat_id: &str) -> Result<()> {
        self.conn
            .prepare_cached("UPDATE leases SET idempotency_key = NULL WHERE seat_id = ?1")?
            .execute([seat_id])?;
        Ok(())
    }

    fn live_lease_by_fingerprint(
        &mut self,
        license_id: &str,
        fingerprint: &str,
        holder: &str,
        threshold: Timestamp,
        others_last: SeatMode,
    ) -> Result<Option<LeaseRow>> {
        const SQL: &str = concat!(
            "SELECT ",
            lease_columns!(),
            // SQLite's planner prefers the expiry index here, which scans
            // every live lease of the license (measured: checkouts with a
            // fingerprint fell to ~30/s at 15,000 leases); one machine
            // holds a handful of leases at most.
            " FROM leases INDEXED BY leases_by_fingerprint
             WHERE license_id = ?1 AND fingerprint = ?2 AND expires_at >= ?3
             ORDER BY (mode = ?5 AND holder <> ?4), expires_at DESC, seat_id DESC LIMIT 1"
        );
        Ok(self
            .conn
            .prepare_cached(SQL)?
            .query_row(
                params![
                    license_id,
                    fingerprint,
                    threshold.as_millis(),
                    holder,
                    others_last.code()
                ],
                lease_from_row,
            )
            .optional()?)
    }

    fn live_count(&mut self, scope: Scope<'_>, threshold: Timestamp) -> Result<u32> {
        let n = self.index.count_from(scope, threshold.as_millis());
        Ok(u32::try_from(n).unwrap_or(u32::MAX))
    }

    fn live_newer_than(&mut self, lease: &LeaseRow, threshold: Timestamp) -> Result<u32> {
        const SQL: &str = "SELECT COUNT(*) FROM leases
             WHERE license_id = ?1 AND expires_at >= ?2
               AND (checked_out_at > ?3 OR (checked_out_at = ?3 AND seat_id > ?4))";
        let n: i64 = self.conn.prepare_cached(SQL)?.query_row(
            params![
                lease.license_id,
                threshold.as_millis(),
                lease.checked_out_at.as_millis(),
                lease.seat_id
            ],
            |r| r.get(0),
        )?;
        Ok(u32::try_from(n).unwrap_or(u32::MAX))
    }

    fn earliest_live_expiry(
        &mut self,
        scope: Scope<'_>,
        threshold: Timestamp,
    ) -> Result<Option<Timestamp>> {
        Ok(self
            .index
            .earliest_from(scope, threshold.as_millis())
            .map(Timestamp::from_millis))
    }

    fn lease(&mut self, license_id: Option<&str>, seat_id: &str) -> Result<Option<LeaseRow>> {
        const SQL: &str = concat!(
            "SELECT ",
            lease_columns!(),
            " FROM leases WHERE seat_id = ?1 AND (?2 IS NULL OR license_id = ?2)"
        );
        Ok(self
            .conn
            .prepare_cached(SQL)?
            .query_row(params![seat_id, license_id], lease_from_row)
            .optional()?)
    }

    fn insert_lease(&mut self, lease: &LeaseRow, idempotency_key: Option<&str>) -> Result<()> {
        self.conn
            .prepare_cached(
                "INSERT INTO leases (seat_id, license_id, holder, fingerprint, idempotency_key,
                                     checked_out_at, issued_at, expires_at, grp, mode, idle_since)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
            )?
            .execute(params![
                lease.seat_id,
                lease.license_id,
                lease.holder,
                lease.fingerprint,
                idempotency_key,
                lease.checked_out_at.as_millis(),
                lease.issued_at.as_millis(),
                lease.expires_at.as_millis(),
                lease.group,
                lease.mode.code(),
                lease.idle_since.map(Timestamp::as_millis),
            ])?;
        self.index.insert(lease);
        Ok(())
    }

    fn renew_lease(&mut self, old: &LeaseRow, renewed: &LeaseRow) -> Result<()> {
        let times = (
            renewed.issued_at.as_millis(),
            renewed.expires_at.as_millis(),
            renewed.mode.code(),
        );
        // SQLite rewrites the entry of every index over a column the
        // UPDATE sets, changed or not: setting an unchanged idle start
        // would cost each reporting heartbeat a delete and insert in
        // `leases_idle` and one more page in the WAL.
        if renewed.idle_since == old.idle_since {
            self.conn
                .prepare_cached(
                    "UPDATE leases SET issued_at = ?2, expires_at = ?3, mode = ?4
                     WHERE seat_id = ?1",
                )?
                .execute(params![old.seat_id, times.0, times.1, times.2])?;
        } else {
            self.conn
                .prepare_cached(
                    "UPDATE leases SET issued_at = ?2, expires_at = ?3, mode = ?4,
                                       idle_since = ?5
                     WHERE seat_id = ?1",
                )?
                .execute(params![
                    old.seat_id,
                    times.0,
                    times.1,
                    times.2,
                    renewed.idle_since.map(Timestamp::as_millis)
                ])?;
        }
        self.index.replace(old, renewed);
        Ok(())
    }

    fn delete_lease(
        &mut self,
        seat_id: &str,
        license_id: Option<&str>,
    ) -> Result<Option<LeaseRow>> {
        const SQL: &str = concat!(
            "DELETE FROM leases WHERE seat_id = ?1 AND (?2 IS NULL OR license_id = ?2) RETURNING ",
            lease_columns!()
        );
        let deleted = self
            .conn
            .prepare_cached(SQL)?
            .query_row(params![seat_id, license_id], lease_from_row)
            .optional()?;
        if let Some(d) = &deleted {
            self.index.remove(d);
        }
        Ok(deleted)
    }

    fn reap_expired(
        &mut self,
        license_id: &str,
        cutoff: Timestamp,
        limit: usize,
    ) -> Result<Vec<LeaseRow>> {
        const SQL: &str = concat!(
            "DELETE FROM leases WHERE seat_id IN (
                 SELECT seat_id FROM leases
                 WHERE license_id = ?1 AND expires_at < ?2
                 ORDER BY expires_at, seat_id LIMIT ?3)
             RETURNING ",
            lease_columns!()
        );
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let mut gone: Vec<LeaseRow> = self
            .conn
            .prepare_cached(SQL)?
            .query_map(
                params![license_id, cutoff.as_millis(), limit],
                lease_from_row,
            )?
            .collect::<rusqlite::Result<_>>()?;
        // RETURNING has no order of its own; the rules expect the index's.
        gone.sort_by(|a, b| (a.expires_at, &a.seat_id).cmp(&(b.expires_at, &b.seat_id)));
        for lease in &gone {
            self.index.remove(lease);
        }
        Ok(gone)
    }

    fn prune(&mut self, now: Timestamp, event_retention: i64) -> Result<()> {
        self.conn
            .prepare_cached("DELETE FROM blocks WHERE until_ms <= ?1")?
            .execute([now.as_millis()])?;
        self.conn
            .prepare_cached("DELETE FROM events WHERE id <= (SELECT max(id) FROM events) - ?1")?
            .execute([event_retention])?;
        Ok(())
    }

    fn record_sessions(&mut self, sessions: &[EndedSession<'_>]) -> Result<()> {
        if sessions.len() >= bulk::MIN_ROWS {
            return Ok(bulk::insert_sessions(self.conn, sessions)?);
        }
        let mut insert = self.conn.prepare_cached(
            "INSERT INTO sessions (seat_id, license_id, holder, fingerprint, started_at,
                                   ended_at, end_kind, grp, mode)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
        )?;
        for s in sessions {
            insert.execute(params![
                s.lease.seat_id,
                s.lease.license_id,
                s.lease.holder,
                s.lease.fingerprint,
                s.lease.checked_out_at.as_millis(),
                s.at.as_millis(),
                s.end.as_str(),
                s.lease.group,
                s.lease.mode.code()
            ])?;
        }
        Ok(())
    }

    fn count_denial(&mut self, denial: &Denial<'_>) -> Result<()> {
        // Appends 2 bytes to the row of its second (`store/denials.rs`);
        // `||` makes text of blobs, so the result is cast back.
        self.conn
            .prepare_cached(
                "INSERT INTO denials
                     (license_id, second_ms, holder, fingerprint, reason, count, offsets)
                 VALUES (?1, ?2, ?3, ?4, ?5, 1, ?6)
                 ON CONFLICT (license_id, second_ms, holder, fingerprint, reason) DO UPDATE
                 SET count = count + 1, offsets = CAST(offsets || excluded.offsets AS BLOB)",
            )?
            .execute(params![
                denial.license_id,
                second_of(denial.at).as_millis(),
                denial.holder,
                denial.fingerprint.unwrap_or(""),
                denial.reason.as_str(),
                offset_bytes(denial.at).as_slice(),
            ])?;
        *self.denial_rows += 1;
        Ok(())
    }

    fn current_pool_sizes(&mut self) -> Result<HashMap<String, u32>> {
        let mut stmt = self.conn.prepare_cached(
            "SELECT p.license_id, p.seats FROM pool_sizes p
             WHERE p.at = (SELECT max(at) FROM pool_sizes q WHERE q.license_id = p.license_id)",
        )?;
        let rows = stmt.query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, u32>(1)?)))?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    fn record_pool_size(&mut self, license_id: &str, at: Timestamp, seats: u32) -> Result<()> {
        self.conn
            .prepare_cached(
                "INSERT INTO pool_sizes (license_id, at, seats) VALUES (?1, ?2, ?3)
                 ON CONFLICT (license_id, at) DO UPDATE SET seats = excluded.seats",
            )?
            .execute(params![license_id, at.as_millis(), seats])?;
        Ok(())
    }

    fn prune_history(&mut self, cutoff: Timestamp, limit: usize) -> Result<usize> {
        let (cutoff, limit) = (cutoff.as_millis(), i64::try_from(limit).unwrap_or(i64::MAX));
        let mut pruned = self
            .conn
            .prepare_cached(
                "DELETE FROM sessions WHERE id IN (
                     SELECT id FROM sessions WHERE ended_at < ?1 LIMIT ?2)",
            )?
            .execute(params![cutoff, limit])?;
        pruned += self
            .conn
            .prepare_cached(
                "DELETE FROM denials
                 WHERE (license_id, second_ms, holder, fingerprint, reason) IN (
                     SELECT license_id, second_ms, holder, fingerprint, reason
                     FROM denials INDEXED BY denials_by_second WHERE second_ms < ?1 LIMIT ?2)",
            )?
            .execute(params![cutoff, limit])?;
        pruned += self
            .conn
            .prepare_cached(
                "DELETE FROM idle_periods WHERE id IN (
                     SELECT id FROM idle_periods INDEXED BY idle_periods_by_end
                     WHERE to_ms < ?1 LIMIT ?2)",
            )?
            .execute(params![cutoff, limit])?;
        // A size in force at the cutoff stays: it judges what comes after.
        pruned += self
            .conn
            .prepare_cached(
                "DELETE FROM pool_sizes WHERE (license_id, at) IN (
                     SELECT p.license_id, p.at FROM pool_sizes p
                     WHERE p.at < ?1 AND EXISTS (
                         SELECT 1 FROM pool_sizes q
                         WHERE q.license_id = p.license_id AND q.at > p.at AND q.at <= ?1)
                     LIMIT ?2)",
            )?
            .execute(params![cutoff, limit])?;
        Ok(pruned)
    }

    fn extend_live(
        &mut self,
        license_id: &str,
        was_live: Timestamp,
        until: Timestamp,
        kept: SeatMode,
    ) -> Result<usize> {
        // The index is reloaded after an outage batch (the writer marks it
        // stale), so it is not adjusted row by row here.
        Ok(self.conn.execute(
            "UPDATE leases SET expires_at = ?1
             WHERE license_id = ?2 AND expires_at >= ?3 AND expires_at < ?1 AND mode = ?4",
            params![
                until.as_millis(),
                license_id,
                was_live.as_millis(),
                kept.code()
            ],
        )?)
    }

    /// This server's line is in `line.rs`; its checkouts bring it along.
    fn waiting_line(&mut self, _license_id: &str, _before: Option<i64>) -> Result<Vec<Waiter>> {
        Ok(Vec::new())
    }

    fn append_events(&mut self, events: &[NewEvent<'_>]) -> Result<Vec<i64>> {
        if events.len() >= bulk::MIN_ROWS {
            return Ok(bulk::insert_events(self.conn, events)?);
        }
        let mut insert = self.conn.prepare_cached(
            "INSERT INTO events (at, kind, license_id, seat_id, holder, detail)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6) RETURNING id",
        )?;
        let mut ids = Vec::with_capacity(events.len());
        for e in events {
            ids.push(insert.query_row(
                params![
                    e.at.as_millis(),
                    e.kind.as_str(),
                    e.license_id,
                    e.seat_id,
                    e.holder,
                    e.detail
                ],
                |r| r.get(0),
            )?);
        }
        Ok(ids)
    }

    fn queue_deliveries(&mut self, deliveries: Vec<Content>) -> Result<()> {
        outbox::queue_deliveries(self.conn, deliveries)
    }

    fn claim_deliveries(
        &mut self,
        now: Timestamp,
        claim_until: Timestamp,
        limit: usize,
    ) -> Result<Vec<DueDelivery>> {
        outbox::claim_deliveries(self.conn, now, claim_until, limit)
    }

    fn record_attempt(&mut self, attempt: &AttemptRecord) -> Result<bool> {
        outbox::record_attempt(self.conn, attempt)
    }

    fn prune_deliveries(&mut self, before: Timestamp, limit: usize) -> Result<usize> {
        outbox::prune_deliveries(self.conn, before, limit)
    }

    fn alert_states(&mut self) -> Result<Vec<AlertState>> {
        outbox::alert_states(self.conn)
    }

    fn set_alert_state(&mut self, state: &AlertState) -> Result<()> {
        outbox::set_alert_state(self.conn, state)
    }

    fn delete_alert_state(&mut self, alert: &str) -> Result<()> {
        outbox::delete_alert_state(self.conn, alert)
    }

    fn denials_since(
        &mut self,
        license_id: &str,
        reason: DenialReason,
        since: Timestamp,
    ) -> Result<u64> {
        outbox::denials_since(self.conn, license_id, reason, since)
    }
}
