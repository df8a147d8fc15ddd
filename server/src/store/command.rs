//! What a writer is asked to do: the queued [`Command`]s, their held-back
//! answers, and [`apply`], which runs one [`RuleCommand`] by the lease rules
//! over whichever store the writer owns.

use std::collections::HashMap;
use std::time::Duration;

use leasehold_common::Licenses;
use leasehold_common::api::{Event, EventKind};
use tokio::sync::{mpsc, oneshot, watch};

use super::outbox::{AttemptRecord, DueDelivery};
use super::repeats::{Remembered, Touch};
use super::rules::{LeaseTx, Rules};
use super::{
    Ahead, Applied, CheckoutOutcome, CheckoutRequest, HeartbeatOutcome, PoolCounts, RevokeOutcome,
    StoreError, StoreOptions, Waiter,
};

pub type Reply<T> = oneshot::Sender<Result<T, StoreError>>;

/// How a batch ended: `None` while it commits, then `Ok` or the error.
pub type CommitSignal = watch::Receiver<Option<Result<(), String>>>;

/// One queued state change and where to send its answer.
pub enum Command {
    /// Decided by the lease rules.
    Rule(RuleCommand),
    /// Finish what is queued before it, record a clean stop, and exit, even
    /// if request tasks still hold senders.
    Shutdown { reply: Reply<()> },
}

/// A state change the lease rules decide.
pub enum RuleCommand {
    /// Answered before the commit (see [`Applied`]).
    Checkout {
        req: CheckoutRequest,
        /// Waiters in line ahead of this checkout, first come first: the
        /// seats the rules would give them are spoken for.
        ahead: Ahead,
        /// A denial is an answer the client sees (counted in the usage
        /// history's denials); `false` for a `?wait=` attempt that will be
        /// retried (a denial the line never retries counts anyway:
        /// `rules::waits_in_line`).
        counted: bool,
        reply: Reply<Applied<CheckoutOutcome>>,
    },
    /// Answered before the commit (see [`Applied`]).
    Heartbeat {
        license_id: String,
        seat_id: String,
        /// How long its client reports its user idle (`None`: active).
        idle: Option<Duration>,
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
        force: bool,
        reply: Reply<RevokeOutcome>,
    },
    Reap {
        limit: usize,
        reply: Reply<usize>,
    },
    /// Delete usage history older than the retention, at most `limit` rows
    /// of each record.
    PruneHistory {
        limit: usize,
        reply: Reply<usize>,
    },
    /// Also evaluates the alerts; `waiting`: the server's own lines by
    /// license (SQLite), whose waiters a `full` alert counts.
    Tick {
        waiting: HashMap<String, Vec<Waiter>>,
        reply: Reply<()>,
    },
    /// Nothing, but its batch commits: whatever an earlier batch left
    /// uncommitted (held denial counts) is then in the database.
    Flush {
        reply: Reply<()>,
    },
    /// Live seats per license, by the one predicate, from the live index.
    LiveCounts {
        reply: Reply<Vec<(String, PoolCounts)>>,
    },
    RecordEvent {
        kind: EventKind,
        license_id: Option<String>,
        detail: String,
        reply: Reply<()>,
    },
    /// Claim due deliveries for one attempt each (the delivery worker).
    ClaimDeliveries {
        limit: usize,
        reply: Reply<Vec<DueDelivery>>,
    },
    /// Record how an attempt at a claimed delivery went.
    RecordAttempt {
        due: DueDelivery,
        result: Result<(), String>,
        reply: Reply<AttemptRecord>,
    },
    /// Queue a delivery of type `test` to the webhook; answers its id.
    QueueTest {
        webhook: String,
        reply: Reply<String>,
    },
}

/// What a command may do to leases, declared by the command itself so a
/// store that locks before it writes (PostgreSQL's writer) takes the right
/// locks, and a new command cannot be forgotten there: the match below
/// names every command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeaseWrites<'a> {
    /// Reads or writes no lease the rules count.
    Nothing,
    /// Counts the license's seats and inserts (or takes back) one: nobody
    /// else may count or change that license's seats meanwhile.
    Checkout(&'a str),
    /// Renews a seat of the license; never inserts or deletes one.
    Renew(&'a str),
    /// Deletes a seat of the license (or keeps it lingering).
    Delete(&'a str),
    /// May delete seats of any license.
    DeleteAny,
}

impl RuleCommand {
    /// `licenses`: a heartbeat on a license with an `idle_timeout` may
    /// reclaim its seat; elsewhere it only renews.
    pub fn lease_writes(&self, licenses: &Licenses) -> LeaseWrites<'_> {
        match self {
            RuleCommand::Checkout { req, .. } => LeaseWrites::Checkout(&req.license_id),
            RuleCommand::Heartbeat { license_id, .. } => {
                let reclaims = licenses
                    .get(license_id)
                    .is_some_and(|l| l.policy.idle_timeout.is_some());
                if reclaims {
                    LeaseWrites::Delete(license_id)
                } else {
                    LeaseWrites::Renew(license_id)
                }
            }
            RuleCommand::Release { license_id, .. } => LeaseWrites::Delete(license_id),
            RuleCommand::Revoke { .. } | RuleCommand::Reap { .. } => LeaseWrites::DeleteAny,
            RuleCommand::PruneHistory { .. }
            | RuleCommand::Tick { .. }
            | RuleCommand::Flush { .. }
            | RuleCommand::LiveCounts { .. }
            | RuleCommand::RecordEvent { .. }
            | RuleCommand::ClaimDeliveries { .. }
            | RuleCommand::RecordAttempt { .. }
            | RuleCommand::QueueTest { .. } => LeaseWrites::Nothing,
        }
    }
}

impl LeaseWrites<'_> {
    /// Whose remembered denials such a command may change.
    pub fn touch(self) -> Touch {
        match self {
            LeaseWrites::Nothing => Touch::Nothing,
            LeaseWrites::Checkout(id) | LeaseWrites::Renew(id) | LeaseWrites::Delete(id) => {
                Touch::License(id.to_string())
            }
            LeaseWrites::DeleteAny => Touch::Everything,
        }
    }
}

/// An answer held back until the batch commits.
pub type Finish = Box<dyn FnOnce(Result<(), &str>) + Send>;

pub fn finish<T: Send + 'static>(reply: Reply<T>, result: Result<T, StoreError>) -> Finish {
    Box::new(move |commit| {
        let answer = match commit {
            Ok(()) => result,
            Err(msg) => Err(StoreError::CommitFailed(msg.to_string())),
        };
        let _ = reply.send(answer);
    })
}

/// Answer a command that never ran with `e`.
pub fn error_finish(cmd: Command, e: StoreError) -> Finish {
    match cmd {
        Command::Rule(RuleCommand::Checkout { reply, .. }) => finish(reply, Err(e)),
        Command::Rule(RuleCommand::Heartbeat { reply, .. }) => finish(reply, Err(e)),
        Command::Rule(RuleCommand::Release { reply, .. }) => finish(reply, Err(e)),
        Command::Rule(RuleCommand::Revoke { reply, .. }) => finish(reply, Err(e)),
        Command::Rule(RuleCommand::Reap { reply, .. }) => finish(reply, Err(e)),
        Command::Rule(RuleCommand::PruneHistory { reply, .. }) => finish(reply, Err(e)),
        Command::Rule(RuleCommand::Tick { reply, .. }) => finish(reply, Err(e)),
        Command::Rule(RuleCommand::Flush { reply }) => finish(reply, Err(e)),
        Command::Rule(RuleCommand::LiveCounts { reply }) => finish(reply, Err(e)),
        Command::Rule(RuleCommand::RecordEvent { reply, .. }) => finish(reply, Err(e)),
        Command::Rule(RuleCommand::ClaimDeliveries { reply, .. }) => finish(reply, Err(e)),
        Command::Rule(RuleCommand::RecordAttempt { reply, .. }) => finish(reply, Err(e)),
        Command::Rule(RuleCommand::QueueTest { reply, .. }) => finish(reply, Err(e)),
        Command::Shutdown { reply } => finish(reply, Err(e)),
    }
}

/// What one applied command leaves to its batch.
pub struct Done {
    /// Its held-back answer.
    pub finish: Finish,
    /// Whether it succeeded (a failed command's savepoint is rolled back).
    pub ok: bool,
    /// The events it wrote, published after commit.
    pub events: Vec<Event>,
    /// A denial the writer may repeat beside itself once the batch
    /// commits (`store/repeats.rs`).
    pub denial: Option<Remembered>,
}

/// Apply one command by the lease rules, in the store transaction `rules`
/// holds. `commit` is the batch's commit, for answers given before it;
/// `remember_denials`: the store repeats denials (SQLite), so say how
/// long a plain checkout's denial holds.
pub fn apply<T: LeaseTx>(
    mut rules: Rules<'_, T>,
    cmd: RuleCommand,
    options: &StoreOptions,
    commit: &CommitSignal,
    remember_denials: bool,
) -> Done {
    fn done<T: Send + 'static>(reply: Reply<T>, r: Result<T, StoreError>) -> (Finish, bool) {
        let ok = r.is_ok();
        (finish(reply, r), ok)
    }
    // The decision now, with the batch's commit signal: the caller builds
    // its answer during the fsync and releases it only after.
    fn early<T: Send + 'static>(
        reply: Reply<Applied<T>>,
        r: Result<T, StoreError>,
        commit: &CommitSignal,
    ) -> (Finish, bool) {
        let ok = r.is_ok();
        let applied = r.map(|value| Applied {
            value,
            commit: commit.clone(),
        });
        let _ = reply.send(applied);
        (Box::new(|_| {}), ok)
    }
    let mut denial = None;
    let (finish, ok) = match cmd {
        RuleCommand::Checkout {
            req,
            ahead,
            counted,
            reply,
        } => {
            let ahead = match ahead {
                Ahead::Waiters(waiters) => Ok(waiters),
                Ahead::SharedLine { before } => rules.tx.waiting_line(&req.license_id, before),
            };
            let decided = ahead.and_then(|ahead| {
                let outcome = rules.checkout(&req, &ahead, counted)?;
                if remember_denials && counted && ahead.is_empty() {
                    // Not remembering is always right: a failed look-up
                    // only costs the repeats a trip to the writer.
                    denial = rules.remembered(&req, &outcome).ok().flatten();
                }
                Ok(outcome)
            });
            early(reply, decided, commit)
        }
        RuleCommand::Heartbeat {
            license_id,
            seat_id,
            idle,
            reply,
        } => early(reply, rules.heartbeat(&license_id, &seat_id, idle), commit),
        RuleCommand::Release {
            license_id,
            seat_id,
            reply,
        } => done(reply, rules.release(&license_id, &seat_id)),
        RuleCommand::Revoke {
            seat_id,
            reason,
            block,
            force,
            reply,
        } => done(reply, rules.revoke(&seat_id, reason, block, force)),
        RuleCommand::Reap { limit, reply } => {
            done(reply, rules.reap(limit, options.event_retention))
        }
        RuleCommand::PruneHistory { limit, reply } => {
            let cutoff = rules.now.saturating_sub(options.history_retention);
            done(reply, rules.prune_history(cutoff, limit))
        }
        // The alive tick is also when alerts are evaluated (each second).
        RuleCommand::Tick { waiting, reply } => done(reply, rules.evaluate_alerts(&waiting)),
        RuleCommand::Flush { reply } => done(reply, Ok(())),
        RuleCommand::LiveCounts { reply } => done(reply, rules.live_counts()),
        RuleCommand::RecordEvent {
            kind,
            license_id,
            detail,
            reply,
        } => done(
            reply,
            rules.record_event(kind, license_id.as_deref(), &detail),
        ),
        RuleCommand::ClaimDeliveries { limit, reply } => done(reply, rules.claim_deliveries(limit)),
        RuleCommand::RecordAttempt { due, result, reply } => {
            done(reply, rules.record_attempt(&due, result))
        }
        RuleCommand::QueueTest { webhook, reply } => done(reply, rules.queue_test(&webhook)),
    };
    Done {
        finish,
        ok,
        events: rules.events,
        denial,
    }
}

/// A writer's loop: take the first queued command, then whatever else is
/// already waiting (up to `max_batch`), and hand the batch to `process`
/// (one transaction, one commit). Returns at [`Command::Shutdown`], after
/// processing what was queued before it, with the stop's reply; or when
/// every sender is gone. Commands queued after the stop are refused (their
/// callers get [`StoreError::Closed`]).
pub fn run_batches(
    mut rx: mpsc::Receiver<Command>,
    max_batch: usize,
    mut process: impl FnMut(Vec<Command>),
) -> Option<Reply<()>> {
    while let Some(first) = rx.blocking_recv() {
        let mut batch = vec![first];
        while batch.len() < max_batch {
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
            process(batch);
            return match rest.into_iter().next() {
                Some(Command::Shutdown { reply }) => Some(reply),
                _ => None,
            };
        }
        process(batch);
    }
    None
}
