//! The PostgreSQL answers to the lease rules' queries ([`LeaseTx`]), run by
//! a replica's writer inside its open transaction (after it took the
//! license locks and read the cluster's clock). The writer opens and ends
//! that transaction and its savepoints itself, on the bare client.

use std::collections::HashMap;

use leasehold_common::Timestamp;
use leasehold_common::api::{DenialReason, SessionEnd};
use postgres::{Client, Row, Statement};

use super::super::rules::{Denial, EndedSession, IdlePeriod, LeaseTx, NewEvent, Result};
use super::batch_state::BatchState;
use super::outbox;
use super::rows::{lease_from_row, waiters};
use super::statements::{STALE_MS, Statements};
use crate::store::outbox::{AlertState, AttemptRecord, Content, DueDelivery};
use crate::store::{LeaseRow, Scope, SeatMode, Waiter};

/// One command's view of the writer's transaction: the client, inside the
/// transaction the writer opened on it, and what the batch keeps on this
/// side (its events, heartbeat renewals, leases read up front, savepoint).
pub struct PgTx<'t> {
    pub client: &'t mut Client,
    pub statements: &'t Statements,
    pub state: &'t mut BatchState,
}

fn count(n: i64) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

impl PgTx<'_> {
    /// The outbox's view of this transaction.
    fn outbox(&mut self) -> outbox::OutboxTx<'_> {
        outbox::OutboxTx {
            client: &mut *self.client,
            statements: self.statements,
            state: &mut *self.state,
        }
    }

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
    /// Kept and written with the batch's other ended periods, in one
    /// statement, before the next statement or at the commit: a heartbeat
    /// whose user came back sends none of its own.
    fn record_idle_periods(&mut self, periods: &[IdlePeriod<'_>]) -> Result<()> {
        self.state.idle_periods(periods);
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
        self.ready()?;
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows = self.client.query(
            &self.statements.leases.idle_seats,
            &[
                &license_id,
                &kept.code(),
                &idle_before.as_millis(),
                &threshold.as_millis(),
                &limit,
            ],
        )?;
        Ok(rows.iter().map(lease_from_row).collect())
    }

    fn ended_session(
        &mut self,
        license_id: &str,
        seat_id: &str,
        ended_since: Timestamp,
    ) -> Result<Option<SessionEnd>> {
        self.ready()?;
        let row = self.client.query_opt(
            &self.statements.history.ended_session,
            &[&license_id, &seat_id, &ended_since.as_millis()],
        )?;
        // A kind this build does not know reads as no answer (a lapse).
        Ok(row.and_then(|r| r.get::<_, Option<&str>>(0).and_then(SessionEnd::parse)))
    }

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
            &self.statements.checkout.block_until,
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
            &self.statements.checkout.set_block,
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
        let row = self.client.query_opt(
            &self.statements.checkout.by_idempotency_key,
            &[&license_id, &key],
        )?;
        Ok(row.as_ref().map(lease_from_row))
    }

    fn forget_idempotency_key(&mut self, seat_id: &str) -> Result<()> {
        self.ready()?;
        self.client.execute(
            &self.statements.checkout.forget_idempotency_key,
            &[&seat_id],
        )?;
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
        self.ready()?;
        let row = self.client.query_opt(
            &self.statements.checkout.live_by_fingerprint,
            &[
                &license_id,
                &fingerprint,
                &threshold.as_millis(),
                &holder,
                &others_last.code(),
            ],
        )?;
        Ok(row.as_ref().map(lease_from_row))
    }

    /// Read once per batch for a license it checks out from, then kept
    /// (`pg/live_counts.rs`: `LiveCounts`).
    fn live_count(&mut self, scope: Scope<'_>, threshold: Timestamp) -> Result<u32> {
        if let Some(live) = self.state.known_count(scope, threshold) {
            return Ok(live);
        }
        self.ready()?;
        let n: i64 = self
            .scoped(
                &self.statements.counts.live_count,
                &self.statements.counts.live_count_scoped,
                scope,
                threshold,
            )?
            .get(0);
        let live = count(n);
        self.state.count_read(scope, threshold, live);
        Ok(live)
    }

    fn live_newer_than(&mut self, lease: &LeaseRow, threshold: Timestamp) -> Result<u32> {
        self.ready()?;
        let n: i64 = self
            .client
            .query_one(
                "SELECT COUNT(*) FROM leases
                 WHERE license_id = $1 AND expires_at >= $2
                   AND (checked_out_at > $3 OR (checked_out_at = $3 AND seat_id > $4))",
                &[
                    &lease.license_id,
                    &threshold.as_millis(),
                    &lease.checked_out_at.as_millis(),
                    &lease.seat_id,
                ],
            )?
            .get(0);
        Ok(count(n))
    }

    fn earliest_live_expiry(
        &mut self,
        scope: Scope<'_>,
        threshold: Timestamp,
    ) -> Result<Option<Timestamp>> {
        self.ready()?;
        let earliest: Option<i64> = self
            .scoped(
                &self.statements.counts.earliest_live,
                &self.statements.counts.earliest_live_scoped,
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
            .query_opt(&self.statements.leases.lease, &[&seat_id, &license_id])?;
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
        let row = self.client.query_opt(
            &self.statements.leases.delete_lease,
            &[&seat_id, &license_id],
        )?;
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
                &self.statements.leases.reap_leases,
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

    /// Kept and written at the commit, one upsert per row for the whole
    /// batch (`pg/denial_batch.rs`): a retry storm's denials of one batch
    /// rewrite their row once.
    fn count_denial(&mut self, denial: &Denial<'_>) -> Result<()> {
        self.state.denial(denial);
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
            &self.statements.history.prune_idle_periods,
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
        kept: SeatMode,
    ) -> Result<usize> {
        self.ready()?;
        let n = self.client.execute(
            &self.statements.extend_live,
            &[
                &until.as_millis(),
                &license_id,
                &was_live.as_millis(),
                &kept.code(),
            ],
        )?;
        self.state.forget_known();
        Ok(usize::try_from(n).unwrap_or(usize::MAX))
    }

    /// No round trip while nobody waits (the usual case): the batch read
    /// that with its clock. A waiter who joined since then came after
    /// every checkout of this batch.
    fn waiting_line(&mut self, license_id: &str, before: Option<i64>) -> Result<Vec<Waiter>> {
        if !self.state.someone_waits() {
            return Ok(Vec::new());
        }
        self.ready()?;
        let rows = self.client.query(
            &self.statements.waiting_line,
            &[&license_id, &before, &STALE_MS],
        )?;
        Ok(waiters(&rows))
    }

    /// Kept for the commit (`PendingEvents::write`), which numbers them:
    /// the ids here are 0. Nothing reads them: a replica's subscribers get
    /// every replica's events, numbered, from the table (the follower).
    fn append_events(&mut self, events: &[NewEvent<'_>]) -> Result<Vec<i64>> {
        for e in events {
            self.state.event(e);
        }
        Ok(vec![0; events.len()])
    }

    fn queue_deliveries(&mut self, deliveries: Vec<Content>) -> Result<()> {
        outbox::queue_deliveries(&mut self.outbox(), deliveries)
    }

    fn claim_deliveries(
        &mut self,
        now: Timestamp,
        claim_until: Timestamp,
        limit: usize,
    ) -> Result<Vec<DueDelivery>> {
        outbox::claim_deliveries(&mut self.outbox(), now, claim_until, limit)
    }

    fn record_attempt(&mut self, attempt: &AttemptRecord) -> Result<bool> {
        outbox::record_attempt(&mut self.outbox(), attempt)
    }

    fn prune_deliveries(&mut self, before: Timestamp, limit: usize) -> Result<usize> {
        outbox::prune_deliveries(&mut self.outbox(), before, limit)
    }

    fn alert_states(&mut self) -> Result<Vec<AlertState>> {
        outbox::alert_states(&mut self.outbox())
    }

    fn set_alert_state(&mut self, state: &AlertState) -> Result<()> {
        outbox::set_alert_state(&mut self.outbox(), state)
    }

    fn delete_alert_state(&mut self, alert: &str) -> Result<()> {
        outbox::delete_alert_state(&mut self.outbox(), alert)
    }

    fn denials_since(
        &mut self,
        license_id: &str,
        reason: DenialReason,
        since: Timestamp,
    ) -> Result<u64> {
        outbox::denials_since(&mut self.outbox(), license_id, reason, since)
    }
}
