//! What a PostgreSQL writer batch keeps on its own side between commands,
//! so that its common commands cost no round trip of their own:
//!
//! - its events, numbered and written at the commit ([`PendingEvents`]);
//! - the leases its heartbeats will ask for, read in one statement when the
//!   batch begins;
//! - its new leases and renewals, written in one statement each when
//!   something next reads the table or the batch commits ([`PendingWrites`]);
//! - the live counts it read of the licenses it checks out from, kept
//!   exact by its own writes ([`LiveCounts`]), so each is read once per
//!   batch, not once per checkout;
//! - the blocks in force on the licenses its checkouts ask for, read in one
//!   statement when the batch begins;
//! - its savepoint, opened only before a command's first statement: a
//!   heartbeat served from what was read up front sends none.
//!
//! A command that fails loses what it kept here, as its savepoint loses
//! what it wrote.
//!
//! A write kept here that fails when it is sent fails the batch's commit,
//! so every command of the batch is answered with the error: nothing is
//! acknowledged that was not written. (A new lease can fail only on its
//! Idempotency-Key, and the rules look that key up, a statement that
//! writes what is kept first, before they insert.)
//!
//! Leases read up front stay true for the batch: it holds the license's
//! advisory lock (shared), so no checkout anywhere re-claims, borrows or
//! counts them meanwhile, and another replica's heartbeat writes the same
//! kind of renewal. A release or revoke on another replica may delete one;
//! the renewal then updates no row and the seat's next heartbeat is told it
//! is gone, as when the delete came between a read and an update before.

use std::collections::{HashMap, HashSet};

use leasehold_common::Timestamp;
use postgres::Client;

use super::tx::{Statements, lease_from_row};
use crate::store::lease_tx::NewEvent;
use crate::store::{LeaseRow, Scope, SeatMode};

/// Everything a batch keeps between its statements.
#[derive(Default)]
pub struct BatchState {
    pub events: PendingEvents,
    writes: PendingWrites,
    pub counts: LiveCounts,
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
    /// Whether any live waiter stood in the shared line when the batch
    /// began: if not, nobody is ahead of any checkout in it.
    pub someone_waits: bool,
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
        let rows = client.query(&statements.leases_by_seat, &[&seat_ids])?;
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
            &statements.blocks_of_licenses,
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
        self.write_pending(client, statements)
    }

    /// The lease as this batch knows it, if it read it up front: `Some(None)`
    /// for "not in the table".
    pub fn known_lease(&self, seat_id: &str) -> Option<Option<&LeaseRow>> {
        self.known.get(seat_id).map(Option::as_ref)
    }

    /// Keep a new lease for the next write; the counts follow it.
    pub fn insert(&mut self, lease: &LeaseRow, idempotency_key: Option<&str>) {
        self.writes.inserts.push(lease, idempotency_key);
        self.counts.changed(None, Some(lease));
    }

    /// Keep a renewal for the next write; what is known and counted
    /// follows it.
    pub fn renew(&mut self, old: &LeaseRow, renewed: &LeaseRow) {
        self.writes.renewals.push(renewed);
        self.counts.changed(Some(old), Some(renewed));
        if let Some(Some(known)) = self.known.get_mut(&renewed.seat_id) {
            *known = renewed.clone();
        }
    }

    /// A seat left the table.
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

    /// Write everything still kept (before a statement, and at the commit).
    pub fn write_pending(
        &mut self,
        client: &mut Client,
        statements: &Statements,
    ) -> Result<(), postgres::Error> {
        let all = self.writes.mark();
        self.writes.write(client, statements, all).map(|_| ())
    }

    /// The batch ended (committed or not): nothing kept survives it.
    pub fn clear(&mut self) {
        let someone_waits = self.someone_waits;
        self.begin(someone_waits);
    }
}

/// Live counts the batch read, per scope and threshold, of the licenses
/// whose exclusive advisory lock it holds (those it checks out from). No
/// other batch changes those licenses' leases until it commits: every
/// heartbeat, release and checkout of them takes the lock, and a revoke or
/// reap waits for their `lease_rows` rows, which the batch holds too. So a
/// count read once, then moved by each of the batch's own inserts,
/// renewals and deletes (`Scope::counts`, the test the SQL makes), is what
/// the database would answer again. Changes not followed one by one (a
/// reap, the outage rule, a failed command) forget them.
#[derive(Default)]
pub struct LiveCounts {
    locked: HashSet<String>,
    known: Vec<KnownCount>,
}

struct KnownCount {
    license_id: String,
    of: CountOf,
    threshold: Timestamp,
    live: u32,
}

enum CountOf {
    License,
    Group(String),
    Holder(String),
    Mode(SeatMode),
}

impl KnownCount {
    fn new(scope: Scope<'_>, threshold: Timestamp, live: u32) -> KnownCount {
        let of = match scope {
            Scope::License(_) => CountOf::License,
            Scope::Group { group, .. } => CountOf::Group(group.to_string()),
            Scope::Holder { holder, .. } => CountOf::Holder(holder.to_string()),
            Scope::Mode { mode, .. } => CountOf::Mode(mode),
        };
        KnownCount {
            license_id: scope.license_id().to_string(),
            of,
            threshold,
            live,
        }
    }

    fn scope(&self) -> Scope<'_> {
        let license_id = &self.license_id;
        match &self.of {
            CountOf::License => Scope::License(license_id),
            CountOf::Group(group) => Scope::Group { license_id, group },
            CountOf::Holder(holder) => Scope::Holder { license_id, holder },
            CountOf::Mode(mode) => Scope::Mode {
                license_id,
                mode: *mode,
            },
        }
    }
}

impl LiveCounts {
    /// The batch holds these licenses' exclusive locks.
    pub fn lock_held(&mut self, license_ids: &[&str]) {
        self.locked = license_ids.iter().map(|id| (*id).to_string()).collect();
    }

    pub fn known(&self, scope: Scope<'_>, threshold: Timestamp) -> Option<u32> {
        self.known
            .iter()
            .find(|k| k.threshold == threshold && k.scope() == scope)
            .map(|k| k.live)
    }

    /// A count the database answered (with the batch's writes sent): kept
    /// if no other batch can change it meanwhile.
    pub fn read(&mut self, scope: Scope<'_>, threshold: Timestamp, live: u32) {
        if self.locked.contains(scope.license_id()) {
            self.known.push(KnownCount::new(scope, threshold, live));
        }
    }

    /// The batch changed a lease from `old` to `new` (`None`: not in the
    /// table).
    fn changed(&mut self, old: Option<&LeaseRow>, new: Option<&LeaseRow>) {
        for k in &mut self.known {
            let counts =
                |lease: Option<&LeaseRow>| lease.is_some_and(|l| k.scope().counts(l, k.threshold));
            let (was, is) = (counts(old), counts(new));
            if was && !is {
                k.live = k.live.saturating_sub(1);
            } else if is && !was {
                k.live = k.live.saturating_add(1);
            }
        }
    }

    fn forget(&mut self) {
        self.known.clear();
    }
}

/// How many of each kind of write a batch kept: where a command's begin.
#[derive(Clone, Copy, Default)]
struct WritesMark {
    inserts: usize,
    renewals: usize,
}

/// New leases and renewals not yet written, in the order decided. New
/// leases go first: a renewal never names a lease kept here (reading a
/// lease it did not read up front is a statement, which writes them).
#[derive(Default)]
struct PendingWrites {
    inserts: Inserts,
    renewals: Renewals,
}

impl PendingWrites {
    fn mark(&self) -> WritesMark {
        WritesMark {
            inserts: self.inserts.len(),
            renewals: self.renewals.len(),
        }
    }

    fn truncate(&mut self, to: WritesMark) {
        self.inserts.truncate(to.inserts);
        self.renewals.truncate(to.renewals);
    }

    /// Write what was kept up to `upto` (one statement per kind) and forget
    /// it; true if anything was written.
    fn write(
        &mut self,
        client: &mut Client,
        statements: &Statements,
        upto: WritesMark,
    ) -> Result<bool, postgres::Error> {
        let inserted = self.inserts.write(client, statements, upto.inserts)?;
        let renewed = self.renewals.write(client, statements, upto.renewals)?;
        Ok(inserted || renewed)
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
        client.execute(
            &statements.insert_leases,
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
            ],
        )?;
        self.0.drain(..n);
        Ok(true)
    }
}

/// Heartbeat renewals not yet written: new issue and expiry times and mode
/// per seat, in the order they were decided.
#[derive(Default)]
struct Renewals {
    seat_id: Vec<String>,
    issued_at: Vec<i64>,
    expires_at: Vec<i64>,
    mode: Vec<i32>,
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
    }

    fn push(&mut self, renewed: &LeaseRow) {
        self.seat_id.push(renewed.seat_id.clone());
        self.issued_at.push(renewed.issued_at.as_millis());
        self.expires_at.push(renewed.expires_at.as_millis());
        self.mode.push(renewed.mode.code());
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
        client.execute(
            &statements.renew_leases,
            &[
                &seats,
                &pick(&self.issued_at),
                &pick(&self.expires_at),
                &modes,
            ],
        )?;
        self.seat_id.drain(..n);
        self.issued_at.drain(..n);
        self.expires_at.drain(..n);
        self.mode.drain(..n);
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

    pub(super) fn push(&mut self, e: &NewEvent<'_>) {
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
    pub fn write(
        &mut self,
        client: &mut Client,
        statements: &Statements,
        now: Timestamp,
    ) -> std::result::Result<(), postgres::Error> {
        client.execute(
            &statements.number_events,
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
        Ok(())
    }
}
