//! One writer batch, the same on every store.
//!
//! A writer thread takes the first queued command and whatever else is
//! already waiting (see [`run_batches`]), and [`Writer::process`] applies
//! them in one transaction: the store opens it ([`BatchStore::begin`]) and
//! decides its time; the outage rule runs if the store was away; each
//! command runs by the rules in a savepoint of its own; one commit (one
//! fsync) pays for the whole batch; only then are callers answered and
//! events published, so nobody hears "done" before it is durable.
//!
//! What differs between SQLite and PostgreSQL (locks, clock, savepoint
//! round trips, caches) is behind [`BatchStore`]; what a command means is
//! in [`super::rules`].

use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use leasehold_common::api::{Event, EventKind};
use leasehold_common::{Licenses, Timestamp};
use tokio::sync::{broadcast, mpsc, watch};

use super::command::{Command, Done, Finish, apply, error_finish, finish, run_batches};
use super::repeats::{Remembered, Repeated, RepeatedDenials, Touch};
use super::rules::{EventThrottle, LeaseTx, Rules};
use super::{StoreError, StoreOptions};

/// The decision time and policy of a batch, fixed when it begins.
pub struct Begun {
    pub now: Timestamp,
    pub licenses: Arc<Licenses>,
}

/// One store's side of a writer batch: the transaction around the rules.
pub trait BatchStore {
    /// The open transaction, as the rules query it.
    type Tx<'t>: LeaseTx
    where
        Self: 't;

    /// Open the batch's transaction (with the locks `batch` needs) and
    /// decide its time and policy. On error nothing ran and no transaction
    /// is left open; the message answers every command.
    fn begin(&mut self, batch: &[Command]) -> Result<Begun, String>;
    /// The error a command gets when its batch could not begin.
    fn begin_failed(msg: String) -> StoreError;
    /// How an outage reads in the log: what stopped ("server was not
    /// running") and what may have caused it.
    const OUTAGE_WHAT: &'static str;
    const OUTAGE_WHY: &'static str;
    /// When the store was last alive, if the time since then (to `now`) is
    /// an outage: longer than `stall` with nobody able to renew. Asked once
    /// per batch; a `Some` is answered by the outage rule in this batch.
    fn outage_began(
        &mut self,
        now: Timestamp,
        stall: Duration,
    ) -> Result<Option<Timestamp>, String>;
    /// The open transaction, for the rules.
    fn tx(&mut self) -> Self::Tx<'_>;
    /// Isolate what comes next (a savepoint).
    fn open_savepoint(&mut self) -> Result<(), StoreError>;
    /// Keep what the savepoint isolated, or undo it.
    fn close_savepoint(&mut self, keep: bool);
    /// Record `now` as the store's progress and commit. On error the
    /// transaction is rolled back.
    fn commit(&mut self, now: Timestamp, wrote_events: bool) -> Result<(), String>;
    /// End a transaction that must not commit.
    fn rollback(&mut self);
    /// After the commit (`true`) or rollback of a batch.
    fn after_batch(&mut self, _committed: bool) {}
    /// Run one more, empty batch at a clean stop (to record it).
    fn record_stop(&mut self) -> bool {
        false
    }
}

/// How the writer spends its time, for `/metrics` and the benchmarks.
#[derive(Default, Debug)]
pub struct WriterStats {
    pub batches: AtomicU64,
    pub commands: AtomicU64,
    /// Microseconds spent applying commands (SQL, index) and in COMMIT.
    pub apply_us: AtomicU64,
    pub commit_us: AtomicU64,
    /// Microseconds spent waiting for license locks (PostgreSQL: other
    /// replicas' batches on the same licenses).
    pub lock_wait_us: AtomicU64,
    /// Checkpoints the writer finished so the WAL could start over, and the
    /// time they took (the writer applies nothing meanwhile).
    pub wal_catch_ups: AtomicU64,
    pub wal_catch_up_us: AtomicU64,
    /// Seats this writer reclaimed for idleness, per license (committed).
    pub idle_reclaims: Mutex<BTreeMap<String, u64>>,
    /// Denial counts are written but not yet committed (SQLite holds a
    /// batch that wrote nothing else: `sqlite/writer.rs`); a read of the
    /// history first has the writer commit them ([`RuleCommand::Flush`]).
    ///
    /// [`RuleCommand::Flush`]: super::command::RuleCommand::Flush
    pub denials_held: AtomicBool,
    /// Refusals repeated beside the writer (`store/repeats.rs`).
    pub denials_repeated: AtomicU64,
    /// How far the wall clock read behind the decision clock at the last
    /// batch, ms (0: not behind).
    pub clock_behind_ms: std::sync::atomic::AtomicI64,
    /// The last batch's decision time, ms (0 before the first).
    pub decided_at_ms: std::sync::atomic::AtomicI64,
}

impl WriterStats {
    /// Record a batch's decision time and how far the wall clock read
    /// behind it.
    pub fn note_decision(&self, now: Timestamp, wall: Timestamp) {
        self.decided_at_ms.store(now.as_millis(), Ordering::Relaxed);
        let behind = now.millis_since(wall).max(0);
        self.clock_behind_ms.store(behind, Ordering::Relaxed);
    }

    /// Count the committed `reclaim` events of a batch, per license.
    pub fn count_reclaims(&self, events: &[Event]) {
        let mut reclaims = events
            .iter()
            .filter(|e| e.kind == EventKind::Reclaim)
            .filter_map(|e| e.license_id.as_deref())
            .peekable();
        if reclaims.peek().is_none() {
            return;
        }
        if let Ok(mut counts) = self.idle_reclaims.lock() {
            for license in reclaims {
                *counts.entry(license.to_string()).or_default() += 1;
            }
        }
    }
}

pub fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

/// A writer: one store's transactions, the rules' state that outlives a
/// batch, and where committed events go.
pub struct Writer<S: BatchStore> {
    store: S,
    options: StoreOptions,
    throttle: EventThrottle,
    /// The end of the last outage this writer saw: idle time before it does
    /// not count toward a reclaim.
    idle_counted_from: Timestamp,
    /// The policy whose pool sizes the history has recorded.
    recorded_policy: Option<Arc<Licenses>>,
    stats: Arc<WriterStats>,
    /// SQLite publishes its events here; PostgreSQL's reach every replica
    /// through the event follower instead.
    publish: Option<broadcast::Sender<Event>>,
    /// Refusals repeated beside the writer (SQLite: one writer owns every
    /// seat, so it sees every change that could end one).
    repeats: Option<Arc<RepeatedDenials>>,
}

impl<S: BatchStore> Writer<S> {
    pub fn new(
        store: S,
        options: StoreOptions,
        stats: Arc<WriterStats>,
        publish: Option<broadcast::Sender<Event>>,
    ) -> Self {
        Writer {
            store,
            options,
            throttle: EventThrottle::default(),
            idle_counted_from: Timestamp::from_millis(0),
            recorded_policy: None,
            stats,
            publish,
            repeats: None,
        }
    }

    /// Repeat the denials of plain checkouts beside the writer, through
    /// `repeats` (only right for a store with this one writer).
    pub fn repeating(mut self, repeats: Arc<RepeatedDenials>) -> Self {
        self.repeats = Some(repeats);
        self
    }

    /// Serve commands until the store stops.
    pub fn run(mut self, rx: mpsc::Receiver<Command>) {
        let max_batch = self.options.max_batch;
        let stop_reply = run_batches(rx, max_batch, |batch| self.process(batch));
        if self.store.record_stop() {
            self.process(Vec::new());
        }
        if let Some(reply) = stop_reply {
            let _ = reply.send(Ok(()));
        }
    }

    /// One batch: begin, outage rule, pool sizes, each command in its own
    /// savepoint, commit, then answers and events.
    pub fn process(&mut self, batch: Vec<Command>) {
        let started = Instant::now();
        self.stats.batches.fetch_add(1, Ordering::Relaxed);
        self.stats
            .commands
            .fetch_add(batch.len() as u64, Ordering::Relaxed);
        let Begun { now, licenses } = match self.store.begin(&batch) {
            Ok(begun) => begun,
            Err(msg) => return fail_batch::<S>(batch, &msg),
        };
        let outage = match self.outage_rule(now, &licenses) {
            Ok(outage) => outage,
            Err(msg) => {
                self.store.rollback();
                return fail_batch::<S>(batch, &msg);
            }
        };
        let policy_recorded = self.record_pool_sizes(now, &licenses);
        let repeats = self.count_repeats(now, &licenses);

        let (commit_tx, commit) = watch::channel(None);
        let mut finishes: Vec<Finish> = Vec::with_capacity(batch.len());
        let mut published = Vec::new();
        // Only this thread adds answers: with none kept, nothing before
        // this batch's first denial needs forgetting.
        let remembering = self.repeats.as_ref().is_some_and(|m| m.remembers_any());
        let mut changes = Changes::new(outage, remembering);
        for cmd in batch {
            if let Err(e) = self.store.open_savepoint() {
                finishes.push(error_finish(cmd, e));
                continue;
            }
            let touch = if changes.tracking {
                touch_of(&cmd, &licenses)
            } else {
                Touch::Nothing
            };
            let done = self.apply_one(cmd, now, &licenses, &commit);
            self.store.close_savepoint(done.ok);
            if done.ok {
                published.extend(done.events);
            }
            changes.note(touch, done.denial.filter(|_| done.ok));
            finishes.push(done.finish);
        }

        let applied = Instant::now();
        self.stats
            .apply_us
            .fetch_add(micros(applied - started), Ordering::Relaxed);
        // Forgotten before the commit, so nobody told of a change is then
        // answered from before it.
        if let Some(memo) = &self.repeats {
            changes.forget_in(memo);
        }
        let committed = self.store.commit(now, !published.is_empty());
        self.stats
            .commit_us
            .fetch_add(micros(applied.elapsed()), Ordering::Relaxed);
        let ok = committed.is_ok();
        if let Some(memo) = &self.repeats {
            if ok {
                memo.remember(&licenses, changes.still_holding());
            } else {
                memo.count_again(repeats);
            }
        }
        self.answer(committed, commit_tx, finishes, published);
        if ok && policy_recorded {
            self.recorded_policy = Some(licenses);
        }
        self.store.after_batch(ok);
    }

    /// Count the denials repeated beside the writer since its last batch,
    /// in a savepoint of their own; returns them, to count again if the
    /// batch does not commit.
    fn count_repeats(&mut self, now: Timestamp, licenses: &Licenses) -> Vec<Repeated> {
        let Some(memo) = &self.repeats else {
            return Vec::new();
        };
        let repeats = memo.take_uncounted();
        if repeats.is_empty() {
            return repeats;
        }
        if let Err(e) = self.store.open_savepoint() {
            tracing::error!("store: cannot count repeated denials: {e}");
            memo.count_again(repeats);
            return Vec::new();
        }
        let counted = {
            let mut tx = self.store.tx();
            Rules::new(&mut tx, now, licenses, &mut self.throttle).count_repeats(&repeats)
        };
        self.store.close_savepoint(counted.is_ok());
        if let Err(e) = counted {
            tracing::error!("store: cannot count repeated denials: {e}");
            memo.count_again(repeats);
            return Vec::new();
        }
        repeats
    }

    /// One command, decided by the rules.
    fn apply_one(
        &mut self,
        cmd: Command,
        now: Timestamp,
        licenses: &Licenses,
        commit: &super::command::CommitSignal,
    ) -> Done {
        let remember_denials = self.repeats.is_some();
        match cmd {
            Command::Rule(cmd) => {
                let mut tx = self.store.tx();
                let mut rules = Rules::new(&mut tx, now, licenses, &mut self.throttle);
                rules.idle_counted_from = self.idle_counted_from;
                apply(rules, cmd, &self.options, commit, remember_denials)
            }
            // `run_batches` never hands a stop to a batch.
            Command::Shutdown { reply } => Done {
                finish: finish(reply, Ok(())),
                ok: true,
                events: Vec::new(),
                denial: None,
            },
        }
    }

    /// Tell every caller how the commit went, then publish its events.
    fn answer(
        &mut self,
        committed: Result<(), String>,
        commit_tx: watch::Sender<Option<Result<(), String>>>,
        finishes: Vec<Finish>,
        published: Vec<Event>,
    ) {
        match committed {
            Ok(()) => {
                let _ = commit_tx.send(Some(Ok(())));
                for f in finishes {
                    f(Ok(()));
                }
                self.stats.count_reclaims(&published);
                if let Some(events) = &self.publish {
                    for e in published {
                        let _ = events.send(e);
                    }
                }
            }
            Err(msg) => {
                tracing::error!(
                    "store: commit failed, batch of {} rolled back: {msg}",
                    finishes.len()
                );
                let _ = commit_tx.send(Some(Err(msg.clone())));
                for f in finishes {
                    f(Err(&msg));
                }
            }
        }
    }

    /// The outage rule: after a gap in which nobody could renew, every lease
    /// that was live when it began gets one TTL from now.
    /// Returns whether it ran.
    fn outage_rule(&mut self, now: Timestamp, licenses: &Licenses) -> Result<bool, String> {
        let Some(last_alive) = self.store.outage_began(now, self.options.stall_threshold)? else {
            return Ok(false);
        };
        let mut tx = self.store.tx();
        let extended = Rules::new(&mut tx, now, licenses, &mut self.throttle).outage(last_alive);
        self.idle_counted_from = now;
        tracing::warn!(
            "{} for {:.1}s ({}); gave {extended} lease(s) that were live when it stopped one TTL \
             to renew",
            S::OUTAGE_WHAT,
            now.millis_since(last_alive) as f64 / 1000.0,
            S::OUTAGE_WHY,
        );
        Ok(true)
    }

    /// Record the pool sizes of a policy the history has not seen yet (at
    /// start and after each reload), in a savepoint of its own so a failure
    /// costs the batch nothing; true once recorded.
    fn record_pool_sizes(&mut self, now: Timestamp, licenses: &Arc<Licenses>) -> bool {
        if self
            .recorded_policy
            .as_ref()
            .is_some_and(|p| Arc::ptr_eq(p, licenses))
        {
            return false;
        }
        if let Err(e) = self.store.open_savepoint() {
            tracing::error!("store: cannot record pool sizes: {e}");
            return false;
        }
        let recorded = {
            let mut tx = self.store.tx();
            Rules::new(&mut tx, now, licenses, &mut self.throttle).record_pool_sizes()
        };
        if let Err(e) = &recorded {
            tracing::error!("store: cannot record pool sizes: {e}");
        }
        self.store.close_savepoint(recorded.is_ok());
        recorded.is_ok()
    }
}

/// Whose remembered denials `cmd` may change. A denial changes no seat
/// (unless a retried request's lapsed key was let go), so another client's
/// repeats of it still hold.
fn touch_of(cmd: &Command, licenses: &Licenses) -> Touch {
    match cmd {
        Command::Rule(rule) => rule.lease_writes(licenses).touch(),
        Command::Shutdown { .. } => Touch::Nothing,
    }
}

/// What a batch changed, in order, and the denials it decided: a denial
/// still holds at the commit if no later command in the batch touched its
/// license.
struct Changes {
    /// Whether touches matter: answers were kept before the batch, or it
    /// has decided a denial (a plain batch allocates nothing for this).
    tracking: bool,
    everything: bool,
    licenses: HashSet<String>,
    denials: Vec<Remembered>,
}

impl Changes {
    fn new(outage: bool, tracking: bool) -> Self {
        Changes {
            tracking,
            everything: outage,
            licenses: HashSet::new(),
            denials: Vec::new(),
        }
    }

    /// The next command touched `touch`, and decided `denial`.
    fn note(&mut self, touch: Touch, denial: Option<Remembered>) {
        let plain_denial = denial.as_ref().is_some_and(|r| r.idempotency_key.is_none());
        match touch {
            _ if plain_denial => {}
            Touch::Nothing => {}
            Touch::License(id) => {
                self.denials.retain(|r| r.license_id != id);
                self.licenses.insert(id);
            }
            Touch::Everything => {
                self.denials.clear();
                self.everything = true;
            }
        }
        self.tracking |= denial.is_some();
        self.denials.extend(denial);
    }

    fn forget_in(&self, memo: &RepeatedDenials) {
        if self.everything {
            memo.forget(&Touch::Everything);
            return;
        }
        for id in &self.licenses {
            memo.forget(&Touch::License(id.clone()));
        }
    }

    fn still_holding(self) -> Vec<Remembered> {
        self.denials
    }
}

/// Nothing in the batch ran: answer every command with the error now.
fn fail_batch<S: BatchStore>(batch: Vec<Command>, msg: &str) {
    tracing::error!("store: cannot begin a batch: {msg}");
    for cmd in batch {
        error_finish(cmd, S::begin_failed(msg.to_string()))(Ok(()));
    }
}
