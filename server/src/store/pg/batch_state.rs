//! What a PostgreSQL writer batch keeps on its own side between commands,
//! so that its common commands cost no round trip of their own:
//!
//! - its events, numbered and written at the commit ([`PendingEvents`],
//!   `pg/pending.rs`);
//! - the leases its heartbeats will ask for, read in one statement when the
//!   batch begins;
//! - its new leases, renewals and ended idle periods, written in one
//!   statement each when something next reads the table or the batch
//!   commits ([`PendingWrites`], `pg/pending.rs`: why a failing kept write
//!   fails the commit);
//! - the live counts it read of the licenses it checks out from, kept
//!   exact by its own writes ([`LiveCounts`], `pg/live_counts.rs`: why
//!   they stay exact), so each is read once per batch, not once per
//!   checkout;
//! - the blocks in force on the licenses its checkouts ask for, read in one
//!   statement when the batch begins;
//! - its counted denials, written at the commit, one upsert per row
//!   ([`DenialBatch`], `pg/denial_batch.rs`);
//! - its webhook deliveries, rendered and inserted at the commit, once
//!   their events are numbered ([`Outbox`], `pg/outbox/mod.rs`);
//! - its savepoint, opened only before a command's first statement: a
//!   heartbeat served from what was read up front sends none.
//!
//! A command that fails loses what it kept here, as its savepoint loses
//! what it wrote.
//!
//! Leases read up front stay true for the batch: it holds the license's
//! advisory lock (shared), so no checkout anywhere re-claims, borrows or
//! counts them meanwhile, and another replica's heartbeat writes the same
//! kind of renewal. A release or revoke on another replica may delete one;
//! the renewal then updates no row and the seat's next heartbeat is told it
//! is gone, as when the delete came between a read and an update before.

use std::collections::HashMap;

use leasehold_common::Timestamp;
use leasehold_common::api::DenialReason;
use postgres::Client;

use super::denial_batch::DenialBatch;
use super::live_counts::LiveCounts;
use super::outbox_batch::Outbox;
use super::pending::{PendingEvents, PendingWrites, WritesMark};
use super::rows::lease_from_row;
use super::statements::Statements;
use crate::store::outbox::Content;
use crate::store::rules::{Denial, IdlePeriod, NewEvent};
use crate::store::{LeaseRow, Scope};

/// Everything a batch keeps between its statements.
#[derive(Default)]
pub struct BatchState {
    events: PendingEvents,
    writes: PendingWrites,
    counts: LiveCounts,
    /// Leases as this batch last knew them (`None`: not in the table), read
    /// up front for its heartbeats; only what this batch itself changed
    /// since then is applied to them, and they are forgotten when a
    /// command changes leases in ways they do not track.
    known: HashMap<String, Option<LeaseRow>>,
    /// Blocks in force at the batch's time, per license it checks out from,
    /// by holder and fingerprint (`""` for none): read up front. Only a
    /// revoke writes blocks, and a revoke's batch holds every license's
    /// `lease_rows` row, which a checkout batch also holds for its licenses:
    /// no other replica blocks anyone of them meanwhile.
    blocks: HashMap<String, HashMap<(String, String), i64>>,
    savepoint: Savepoint,
    /// The current command has not sent a statement yet.
    savepoint_due: bool,
    /// The current command opened the savepoint (so a failure rolls back to it).
    command_opened_savepoint: bool,
    /// Events and writes of the commands before the current one.
    events_before: usize,
    writes_before: WritesMark,
    /// Denials counted, kept for the commit; those of the commands before
    /// the current one.
    denials: DenialBatch,
    denials_before: usize,
    /// Deliveries queued, kept for the commit; those of the commands
    /// before the current one.
    deliveries: Outbox,
    deliveries_before: usize,
    /// Whether any live waiter stood in the shared line when the batch
    /// began: if not, nobody is ahead of any checkout in it.
    someone_waits: bool,
}

/// The state of the savepoint `cmd`.
#[derive(Clone, Copy, Default)]
enum Savepoint {
    /// Not open.
    #[default]
    None,
    /// Open, holding earlier statements: release it, open anew.
    Used,
    /// Open and rolled back to: nothing in it yet.
    Clean,
}

impl BatchState {
    /// A new batch (after `BEGIN`).
    pub fn begin(&mut self, someone_waits: bool) {
        *self = BatchState {
            someone_waits,
            ..BatchState::default()
        };
    }

    /// Whether any live waiter stood in the shared line when the batch
    /// began.
    pub fn someone_waits(&self) -> bool {
        self.someone_waits
    }

    /// The batch holds these licenses' exclusive locks: their live counts
    /// may be kept.
    pub fn lock_held(&mut self, license_ids: &[&str]) {
        self.counts.lock_held(license_ids);
    }

    /// The live count as this batch keeps it, if it does.
    pub fn known_count(&self, scope: Scope<'_>, threshold: Timestamp) -> Option<u32> {
        self.counts.known(scope, threshold)
    }

    /// A live count the database answered.
    pub fn count_read(&mut self, scope: Scope<'_>, threshold: Timestamp, live: u32) {
        self.counts.read(scope, threshold, live);
    }

    /// Keep an event for the commit.
    pub fn event(&mut self, e: &NewEvent<'_>) {
        self.events.push(e);
    }

    /// Whether the batch keeps any event to write at its commit.
    pub fn has_events(&self) -> bool {
        !self.events.is_empty()
    }

    /// Number and write the batch's events at its commit
    /// ([`PendingEvents::write`]), then the deliveries that waited for
    /// their ids.
    pub fn write_events(
        &mut self,
        client: &mut Client,
        statements: &Statements,
        now: Timestamp,
    ) -> Result<(), postgres::Error> {
        let before = self.events.write(client, statements, now)?;
        self.deliveries.write(client, statements, Some(before))
    }

    /// Keep deliveries for the commit ([`Outbox`]).
    pub fn queue_deliveries(&mut self, deliveries: Vec<Content>) {
        self.deliveries.push(deliveries, self.events.len());
    }

    /// Read up front the leases the batch's heartbeats will ask for.
    pub fn read_ahead(
        &mut self,
        client: &mut Client,
        statements: &Statements,
        seat_ids: &[&str],
    ) -> Result<(), postgres::Error> {
        if seat_ids.is_empty() {
            return Ok(());
        }
        let rows = client.query(&statements.batch.leases_by_seat, &[&seat_ids])?;
        for id in seat_ids {
            self.known.insert((*id).to_string(), None);
        }
        for row in &rows {
            let lease = lease_from_row(row);
            self.known.insert(lease.seat_id.clone(), Some(lease));
        }
        Ok(())
    }

    /// Read up front the blocks in force at `now` on the licenses the batch
    /// checks out from.
    pub fn read_blocks(
        &mut self,
        client: &mut Client,
        statements: &Statements,
        license_ids: &[&str],
        now: Timestamp,
    ) -> Result<(), postgres::Error> {
        if license_ids.is_empty() {
            return Ok(());
        }
        let rows = client.query(
            &statements.batch.blocks_of_licenses,
            &[&license_ids, &now.as_millis()],
        )?;
        for id in license_ids {
            self.blocks.insert((*id).to_string(), HashMap::new());
        }
        for row in &rows {
            let license: String = row.get(0);
            if let Some(blocks) = self.blocks.get_mut(&license) {
                blocks.insert((row.get(1), row.get(2)), row.get(3));
            }
        }
        Ok(())
    }

    /// When the block on this holder and fingerprint ends, if it is in
    /// force at `now`; `None` if the batch did not read the license's blocks.
    pub fn known_block(
        &self,
        license_id: &str,
        holder: &str,
        fingerprint: &str,
        now: Timestamp,
    ) -> Option<Option<Timestamp>> {
        let blocks = self.blocks.get(license_id)?;
        Some(
            blocks
                .get(&(holder.to_string(), fingerprint.to_string()))
                .filter(|until| **until > now.as_millis())
                .map(|until| Timestamp::from_millis(*until)),
        )
    }

    /// A block was written: what is known follows it.
    pub fn blocked(&mut self, license_id: &str, holder: &str, fingerprint: &str, until: Timestamp) {
        if let Some(blocks) = self.blocks.get_mut(license_id) {
            blocks.insert(
                (holder.to_string(), fingerprint.to_string()),
                until.as_millis(),
            );
        }
    }

    /// The next command starts: its savepoint is due before its first
    /// statement.
    pub fn command_starts(&mut self) {
        self.savepoint_due = true;
        self.command_opened_savepoint = false;
        self.events_before = self.events.len();
        self.writes_before = self.writes.mark();
        self.denials_before = self.denials.len();
        self.deliveries_before = self.deliveries.len();
    }

    /// The command ended; keep what it did, or undo it (here and, if it sent
    /// any statement, in the database).
    pub fn command_ends(&mut self, client: &mut Client, keep: bool) {
        self.savepoint_due = false;
        if keep {
            if self.command_opened_savepoint {
                self.savepoint = Savepoint::Used;
            }
            return;
        }
        self.events.truncate(self.events_before);
        self.writes.truncate(self.writes_before);
        self.denials.truncate(self.denials_before);
        self.deliveries.truncate(self.deliveries_before);
        // It may have changed what is known or counted; read it again if asked.
        self.known.clear();
        self.blocks.clear();
        self.counts.forget();
        if !self.command_opened_savepoint {
            return;
        }
        match client.batch_execute("ROLLBACK TO SAVEPOINT cmd") {
            // The savepoint stays, as it was before the command.
            Ok(()) => self.savepoint = Savepoint::Clean,
            Err(e) => {
                tracing::error!("store: savepoint: {e}");
                self.savepoint = Savepoint::None;
            }
        }
    }

    /// Before any statement of a command: write the new leases and renewals
    /// kept so far (the earlier commands' before this one's savepoint, so
    /// undoing this command keeps them), open the savepoint if due.
    pub fn before_statement(
        &mut self,
        client: &mut Client,
        statements: &Statements,
    ) -> Result<(), postgres::Error> {
        if self.savepoint_due {
            let wrote = self.writes.write(client, statements, self.writes_before)?;
            if wrote && matches!(self.savepoint, Savepoint::Clean) {
                // A statement since it was rolled back to: open it anew.
                self.savepoint = Savepoint::Used;
            }
            let sql = match self.savepoint {
                Savepoint::None => Some("SAVEPOINT cmd"),
                Savepoint::Used => Some("RELEASE SAVEPOINT cmd; SAVEPOINT cmd"),
                Savepoint::Clean => None,
            };
            if let Some(sql) = sql
                && let Err(e) = client.batch_execute(sql)
            {
                self.savepoint = Savepoint::None;
                return Err(e);
            }
            self.savepoint_due = false;
            self.command_opened_savepoint = true;
            self.writes_before = WritesMark::default();
        }
        self.write_kept(client, statements)
    }

    /// The lease as this batch knows it, if it read it up front: `Some(None)`
    /// for "not in the table".
    pub fn known_lease(&self, seat_id: &str) -> Option<Option<&LeaseRow>> {
        self.known.get(seat_id).map(Option::as_ref)
    }

    /// Keep a new lease for the next write; the counts follow it.
    pub fn insert(&mut self, lease: &LeaseRow, idempotency_key: Option<&str>) {
        self.writes.insert(lease, idempotency_key);
        self.counts.changed(None, Some(lease));
    }

    /// Keep a renewal for the next write; what is known and counted
    /// follows it.
    pub fn renew(&mut self, old: &LeaseRow, renewed: &LeaseRow) {
        self.writes.renew(renewed);
        self.counts.changed(Some(old), Some(renewed));
        if let Some(Some(known)) = self.known.get_mut(&renewed.seat_id) {
            *known = renewed.clone();
        }
    }

    /// Keep ended idle periods for the next write.
    pub fn idle_periods(&mut self, periods: &[IdlePeriod<'_>]) {
        self.writes.idle_periods(periods);
    }

    /// A seat left the table: what is known and counted follows it (a
    /// later heartbeat of the batch finds it gone, not its read-ahead row).
    pub fn deleted(&mut self, lease: &LeaseRow) {
        self.counts.changed(Some(lease), None);
        if let Some(known) = self.known.get_mut(&lease.seat_id) {
            *known = None;
        }
    }

    /// Leases changed in ways not tracked here (a reap, the outage rule).
    pub fn forget_known(&mut self) {
        self.known.clear();
        self.counts.forget();
    }

    /// Keep a counted denial for the commit.
    pub fn denial(&mut self, denial: &Denial<'_>) {
        self.denials.push(denial);
    }

    /// Denials of `reason` on the license at `since` or later that the
    /// batch counted and keeps for its commit.
    pub fn denials_since(&self, license_id: &str, reason: DenialReason, since: Timestamp) -> u64 {
        self.denials.count_since(license_id, reason, since)
    }

    /// Write the kept lease writes (before a statement).
    fn write_kept(
        &mut self,
        client: &mut Client,
        statements: &Statements,
    ) -> Result<(), postgres::Error> {
        let all = self.writes.mark();
        self.writes.write(client, statements, all).map(|_| ())
    }

    /// Write everything still kept, the denials too (at the commit), and
    /// the deliveries unless one waits for its event's id
    /// ([`BatchState::write_events`]).
    pub fn write_pending(
        &mut self,
        client: &mut Client,
        statements: &Statements,
    ) -> Result<(), postgres::Error> {
        self.write_kept(client, statements)?;
        self.denials.write(client, statements)?;
        if !self.deliveries.needs_event_ids() || self.events.is_empty() {
            self.deliveries.write(client, statements, None)?;
        }
        Ok(())
    }

    /// The batch ended (committed or not): nothing kept survives it.
    pub fn clear(&mut self) {
        let someone_waits = self.someone_waits;
        self.begin(someone_waits);
    }
}
