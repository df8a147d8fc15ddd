//! What a PostgreSQL writer batch keeps to write later, so that its common
//! commands cost no round trip of their own:
//!
//! - its new leases, renewals and ended idle periods, written in one
//!   statement each when something next reads the table or the batch
//!   commits ([`PendingWrites`]);
//! - its events, numbered and written at the commit ([`PendingEvents`]).
//!
//! A write kept here that fails when it is sent fails the batch's commit,
//! so every command of the batch is answered with the error: nothing is
//! acknowledged that was not written. (A new lease can fail only on its
//! Idempotency-Key, and the rules look that key up, a statement that
//! writes what is kept first, before they insert.)

use std::collections::HashMap;

use leasehold_common::Timestamp;
use postgres::Client;

use super::statements::Statements;
use crate::store::LeaseRow;
use crate::store::rules::{IdlePeriod, NewEvent};

/// How many of each kind of write a batch kept: where a command's begin.
#[derive(Clone, Copy, Default)]
pub struct WritesMark {
    inserts: usize,
    renewals: usize,
    idle_periods: usize,
}

/// New leases, renewals and idle periods not yet written, in the order
/// decided. New leases go first: a renewal never names a lease kept here
/// (reading a lease it did not read up front is a statement, which writes
/// them). Idle periods are history no batch statement reads.
#[derive(Default)]
pub struct PendingWrites {
    inserts: Inserts,
    renewals: Renewals,
    idle_periods: IdlePeriods,
}

impl PendingWrites {
    /// Where the writes kept from now on begin.
    pub fn mark(&self) -> WritesMark {
        WritesMark {
            inserts: self.inserts.len(),
            renewals: self.renewals.len(),
            idle_periods: self.idle_periods.len(),
        }
    }

    /// Forget the writes kept after `to` (a command rolled back).
    pub fn truncate(&mut self, to: WritesMark) {
        self.inserts.truncate(to.inserts);
        self.renewals.truncate(to.renewals);
        self.idle_periods.truncate(to.idle_periods);
    }

    /// Keep a new lease (with its Idempotency-Key) for the next write.
    pub fn insert(&mut self, lease: &LeaseRow, idempotency_key: Option<&str>) {
        self.inserts.push(lease, idempotency_key);
    }

    /// Keep a renewal for the next write.
    pub fn renew(&mut self, renewed: &LeaseRow) {
        self.renewals.push(renewed);
    }

    /// Keep ended idle periods for the next write.
    pub fn idle_periods(&mut self, periods: &[IdlePeriod<'_>]) {
        self.idle_periods.extend(periods);
    }

    /// Write what was kept up to `upto` (one statement per kind) and forget
    /// it; true if anything was written.
    pub fn write(
        &mut self,
        client: &mut Client,
        statements: &Statements,
        upto: WritesMark,
    ) -> Result<bool, postgres::Error> {
        let inserted = self.inserts.write(client, statements, upto.inserts)?;
        let renewed = self.renewals.write(client, statements, upto.renewals)?;
        let idled = self
            .idle_periods
            .write(client, statements, upto.idle_periods)?;
        Ok(inserted || renewed || idled)
    }
}

/// New leases not yet written (with their Idempotency-Keys), in order.
#[derive(Default)]
struct Inserts(Vec<(LeaseRow, Option<String>)>);

impl Inserts {
    fn len(&self) -> usize {
        self.0.len()
    }

    fn push(&mut self, lease: &LeaseRow, idempotency_key: Option<&str>) {
        self.0
            .push((lease.clone(), idempotency_key.map(str::to_string)));
    }

    fn truncate(&mut self, len: usize) {
        self.0.truncate(len);
    }

    /// Write the first `n` in one statement (`INSERT … unnest` of their
    /// columns) and forget them; true if there were any.
    fn write(
        &mut self,
        client: &mut Client,
        statements: &Statements,
        n: usize,
    ) -> Result<bool, postgres::Error> {
        let n = n.min(self.len());
        if n == 0 {
            return Ok(false);
        }
        let rows = &self.0[..n];
        let text = |f: fn(&LeaseRow) -> &str| rows.iter().map(|(l, _)| f(l)).collect::<Vec<_>>();
        let time = |f: fn(&LeaseRow) -> Timestamp| {
            rows.iter()
                .map(|(l, _)| f(l).as_millis())
                .collect::<Vec<_>>()
        };
        let fingerprints: Vec<Option<&str>> =
            rows.iter().map(|(l, _)| l.fingerprint.as_deref()).collect();
        let keys: Vec<Option<&str>> = rows.iter().map(|(_, k)| k.as_deref()).collect();
        let groups: Vec<Option<&str>> = rows.iter().map(|(l, _)| l.group.as_deref()).collect();
        let modes: Vec<i32> = rows.iter().map(|(l, _)| l.mode.code()).collect();
        let idle_since: Vec<Option<i64>> = rows
            .iter()
            .map(|(l, _)| l.idle_since.map(Timestamp::as_millis))
            .collect();
        client.execute(
            &statements.leases.insert_leases,
            &[
                &text(|l| &l.seat_id),
                &text(|l| &l.license_id),
                &text(|l| &l.holder),
                &fingerprints,
                &keys,
                &time(|l| l.checked_out_at),
                &time(|l| l.issued_at),
                &time(|l| l.expires_at),
                &groups,
                &modes,
                &idle_since,
            ],
        )?;
        self.0.drain(..n);
        Ok(true)
    }
}

/// Heartbeat renewals not yet written: new issue and expiry times, mode
/// and idle start (`None`: active) per seat, in the order they were
/// decided.
#[derive(Default)]
struct Renewals {
    seat_id: Vec<String>,
    issued_at: Vec<i64>,
    expires_at: Vec<i64>,
    mode: Vec<i32>,
    idle_since: Vec<Option<i64>>,
}

impl Renewals {
    fn len(&self) -> usize {
        self.seat_id.len()
    }

    fn truncate(&mut self, len: usize) {
        self.seat_id.truncate(len);
        self.issued_at.truncate(len);
        self.expires_at.truncate(len);
        self.mode.truncate(len);
        self.idle_since.truncate(len);
    }

    fn push(&mut self, renewed: &LeaseRow) {
        self.seat_id.push(renewed.seat_id.clone());
        self.issued_at.push(renewed.issued_at.as_millis());
        self.expires_at.push(renewed.expires_at.as_millis());
        self.mode.push(renewed.mode.code());
        self.idle_since
            .push(renewed.idle_since.map(Timestamp::as_millis));
    }

    /// Write the first `n` renewals in one statement and forget them; true
    /// if there were any. A seat renewed twice keeps its last renewal (an
    /// `UPDATE … FROM` would apply just one of two matches, either one).
    fn write(
        &mut self,
        client: &mut Client,
        statements: &Statements,
        n: usize,
    ) -> Result<bool, postgres::Error> {
        let n = n.min(self.len());
        if n == 0 {
            return Ok(false);
        }
        let mut last: HashMap<&str, usize> = HashMap::with_capacity(n);
        for (i, seat) in self.seat_id[..n].iter().enumerate() {
            last.insert(seat, i);
        }
        let mut keep: Vec<usize> = last.into_values().collect();
        keep.sort_unstable();
        let pick = |column: &[i64]| keep.iter().map(|&i| column[i]).collect::<Vec<_>>();
        let seats: Vec<&str> = keep.iter().map(|&i| self.seat_id[i].as_str()).collect();
        let modes: Vec<i32> = keep.iter().map(|&i| self.mode[i]).collect();
        let idle_since: Vec<Option<i64>> = keep.iter().map(|&i| self.idle_since[i]).collect();
        client.execute(
            &statements.batch.renew_leases,
            &[
                &seats,
                &pick(&self.issued_at),
                &pick(&self.expires_at),
                &modes,
                &idle_since,
            ],
        )?;
        self.seat_id.drain(..n);
        self.issued_at.drain(..n);
        self.expires_at.drain(..n);
        self.mode.drain(..n);
        self.idle_since.drain(..n);
        Ok(true)
    }
}

/// Ended idle periods not yet written (`idle_periods`), in order.
#[derive(Default)]
struct IdlePeriods {
    license_id: Vec<String>,
    seat_id: Vec<String>,
    from: Vec<i64>,
    to: Vec<i64>,
}

impl IdlePeriods {
    fn len(&self) -> usize {
        self.from.len()
    }

    fn truncate(&mut self, len: usize) {
        self.license_id.truncate(len);
        self.seat_id.truncate(len);
        self.from.truncate(len);
        self.to.truncate(len);
    }

    fn extend(&mut self, periods: &[IdlePeriod<'_>]) {
        for p in periods {
            self.license_id.push(p.license_id.to_string());
            self.seat_id.push(p.seat_id.to_string());
            self.from.push(p.from.as_millis());
            self.to.push(p.to.as_millis());
        }
    }

    /// Write the first `n` in one statement (`INSERT … unnest`) and forget
    /// them; true if there were any.
    fn write(
        &mut self,
        client: &mut Client,
        statements: &Statements,
        n: usize,
    ) -> Result<bool, postgres::Error> {
        let n = n.min(self.len());
        if n == 0 {
            return Ok(false);
        }
        client.execute(
            &statements.batch.record_idle_periods,
            &[
                &&self.license_id[..n],
                &&self.seat_id[..n],
                &&self.from[..n],
                &&self.to[..n],
            ],
        )?;
        self.license_id.drain(..n);
        self.seat_id.drain(..n);
        self.from.drain(..n);
        self.to.drain(..n);
        Ok(true)
    }
}

/// A batch's events, numbered and written only at its commit
/// ([`PendingEvents::write`]), so the cluster row (whose lock makes ids
/// gap-free) is held for the commit alone, not from a batch's first event.
#[derive(Default)]
pub struct PendingEvents {
    at: Vec<i64>,
    kind: Vec<&'static str>,
    license_id: Vec<Option<String>>,
    seat_id: Vec<Option<String>>,
    holder: Vec<Option<String>>,
    detail: Vec<Option<String>>,
}

impl PendingEvents {
    pub fn len(&self) -> usize {
        self.at.len()
    }

    pub fn is_empty(&self) -> bool {
        self.at.is_empty()
    }

    /// Forget the events after the first `len` (a command rolled back).
    pub fn truncate(&mut self, len: usize) {
        self.at.truncate(len);
        self.kind.truncate(len);
        self.license_id.truncate(len);
        self.seat_id.truncate(len);
        self.holder.truncate(len);
        self.detail.truncate(len);
    }

    pub fn push(&mut self, e: &NewEvent<'_>) {
        let owned = |s: Option<&str>| s.map(str::to_string);
        self.at.push(e.at.as_millis());
        self.kind.push(e.kind.as_str());
        self.license_id.push(owned(e.license_id));
        self.seat_id.push(owned(e.seat_id));
        self.holder.push(owned(e.holder));
        self.detail.push(owned(e.detail));
    }

    /// Number and insert the events, and move the cluster's high-water mark
    /// and "alive" time to `now`: one statement, which takes the cluster
    /// row's lock until the commit that follows it. Empties the list.
    /// Answers the id before the first event (theirs are `before + 1`, …).
    pub fn write(
        &mut self,
        client: &mut Client,
        statements: &Statements,
        now: Timestamp,
    ) -> std::result::Result<i64, postgres::Error> {
        let row = client.query_one(
            &statements.batch.number_events,
            &[
                &self.at,
                &self.kind,
                &self.license_id,
                &self.seat_id,
                &self.holder,
                &self.detail,
                &now.as_millis(),
            ],
        )?;
        self.truncate(0);
        Ok(row.get(0))
    }
}
