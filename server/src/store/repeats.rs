//! Repeated denials, answered beside the writer (SQLite).
//!
//! A client refused and retrying at once (a retry storm) asks the writer
//! the same question again and again while nothing that decides it has
//! changed; each ask took a place in a batch and made the batches of other
//! clients' checkouts smaller and more numerous (BENCHMARKS.md). So the
//! writer remembers each denial of a plain checkout (no wait, no borrow,
//! nobody in line) that its batch commits, with how long the answer must
//! stay the same ([`Remembered::until`]): until the first seat of the
//! license could lapse, the `denied` event's throttle window ends, a block
//! ends, or a second has passed, whichever is first. A repeat (same
//! license, holder, fingerprint and idempotency key) within that time is
//! answered here, its retry time counted down, and its denial is handed
//! to the writer's next batch to count, with its own instant (every batch
//! takes them; the alive tick makes one each second).
//!
//! Anything that could change the answer forgets it before it is
//! acknowledged: the writer forgets a license's answers before it commits
//! a batch that changed that license's seats, and all of them for a
//! revoke, a reap, a config event or the outage rule ([`Touch`]); a reload
//! is told by the policy an answer was decided under. The memo is only
//! right with one writer owning every seat, so only SQLite has one.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use leasehold_common::api::DenialReason;
use leasehold_common::{Licenses, Timestamp};

use super::{CheckoutOutcome, CheckoutRequest};
use crate::clock::SharedClock;
use crate::licenses::LicensesHandle;

/// The longest an answer is repeated without asking the writer again.
pub const REPEAT_AT_MOST: Duration = Duration::from_secs(1);

/// Which licenses' answers a command may have changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Touch {
    /// Nothing a checkout decision reads (history, alerts, deliveries).
    Nothing,
    License(String),
    /// Seats of any license, or the policy.
    Everything,
}

/// A denial the writer decided, as it may be repeated.
#[derive(Debug, Clone)]
pub struct Remembered {
    pub license_id: String,
    pub holder: String,
    pub fingerprint: Option<String>,
    pub idempotency_key: Option<String>,
    pub outcome: CheckoutOutcome,
    pub reason: DenialReason,
    pub decided_at: Timestamp,
    /// The answer holds before this instant.
    pub until: Timestamp,
    /// When the outcome's `retry_after` runs out (`None`: it is a fixed
    /// time, one TTL, or the outcome has none).
    pub retry_at: Option<Timestamp>,
}

impl Remembered {
    fn answers(&self, req: &CheckoutRequest) -> bool {
        self.fingerprint == req.fingerprint && self.idempotency_key == req.idempotency_key
    }

    fn answers_same_request(&self, other: &Remembered) -> bool {
        self.fingerprint == other.fingerprint && self.idempotency_key == other.idempotency_key
    }

    /// The outcome as the writer would give it at `now`.
    fn outcome_at(&self, now: Timestamp) -> CheckoutOutcome {
        let mut outcome = self.outcome.clone();
        if let Some(at) = self.retry_at {
            let left = Duration::from_millis(at.millis_since(now).max(0) as u64);
            match &mut outcome {
                CheckoutOutcome::Full { retry_after, .. }
                | CheckoutOutcome::LimitReached { retry_after, .. } => *retry_after = left,
                _ => {}
            }
        }
        outcome
    }
}

/// A denial answered here, for the writer to count.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Repeated {
    pub license_id: String,
    pub holder: String,
    pub fingerprint: Option<String>,
    pub reason: DenialReason,
    pub at: Timestamp,
}

/// Answers by license, then holder, each with the policy it was decided
/// under.
type Answers = HashMap<String, HashMap<String, Vec<(Remembered, Arc<Licenses>)>>>;

/// More answers than this and the lapsed ones are dropped.
const KEEP_AT_MOST: usize = 10_000;

/// Repeats waiting to be counted beyond this (the writer's batches keep
/// failing: a full disk) go to the writer again, to be refused or failed
/// there: memory stays bounded and no count is dropped.
const UNCOUNTED_AT_MOST: usize = 100_000;

#[derive(Default)]
struct State {
    answers: Answers,
    kept: usize,
    uncounted: Vec<Repeated>,
}

/// The writer's remembered denials, shared with every request handler.
pub struct RepeatedDenials {
    clock: SharedClock,
    licenses: LicensesHandle,
    state: Mutex<State>,
    /// Denials answered here and not yet handed to the writer.
    uncounted: AtomicBool,
}

impl RepeatedDenials {
    pub fn new(clock: SharedClock, licenses: LicensesHandle) -> Self {
        RepeatedDenials {
            clock,
            licenses,
            state: Mutex::default(),
            uncounted: AtomicBool::new(false),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The writer's answer to `req` if it is a repeat it still holds for
    /// (the caller checked that nobody waits in line); the denial is then
    /// counted by the writer's next batch.
    pub fn answer(&self, req: &CheckoutRequest) -> Option<CheckoutOutcome> {
        if req.borrow.is_some() {
            return None;
        }
        let now = self.clock.now();
        let policy = self.licenses.current();
        let mut state = self.lock();
        if state.uncounted.len() >= UNCOUNTED_AT_MOST {
            return None;
        }
        let (remembered, decided_by) = state
            .answers
            .get(&req.license_id)?
            .get(&req.holder)?
            .iter()
            .find(|(r, _)| r.answers(req))?;
        if now < remembered.decided_at
            || now >= remembered.until
            || !Arc::ptr_eq(decided_by, &policy)
        {
            return None;
        }
        let outcome = remembered.outcome_at(now);
        let repeated = Repeated {
            license_id: req.license_id.clone(),
            holder: req.holder.clone(),
            fingerprint: req.fingerprint.clone(),
            reason: remembered.reason,
            at: now,
        };
        state.uncounted.push(repeated);
        self.uncounted.store(true, Ordering::Release);
        Some(outcome)
    }

    /// Whether any answer is kept.
    pub fn remembers_any(&self) -> bool {
        !self.lock().answers.is_empty()
    }

    /// Whether denials answered here wait to be counted.
    pub fn has_uncounted(&self) -> bool {
        self.uncounted.load(Ordering::Acquire)
    }

    /// The denials answered here since the last call, oldest first.
    pub fn take_uncounted(&self) -> Vec<Repeated> {
        if !self.has_uncounted() {
            return Vec::new();
        }
        let mut state = self.lock();
        self.uncounted.store(false, Ordering::Release);
        std::mem::take(&mut state.uncounted)
    }

    /// Hand back denials taken by [`take_uncounted`](Self::take_uncounted)
    /// whose batch did not commit, to be counted by the next.
    pub fn count_again(&self, mut repeats: Vec<Repeated>) {
        if repeats.is_empty() {
            return;
        }
        let mut state = self.lock();
        repeats.append(&mut state.uncounted);
        state.uncounted = repeats;
        self.uncounted.store(true, Ordering::Release);
    }

    /// Forget the answers `touch` may have changed.
    pub fn forget(&self, touch: &Touch) {
        match touch {
            Touch::Nothing => {}
            Touch::License(id) => {
                let mut state = self.lock();
                if let Some(gone) = state.answers.remove(id) {
                    state.kept -= gone.values().map(Vec::len).sum::<usize>();
                }
            }
            Touch::Everything => {
                let mut state = self.lock();
                state.answers.clear();
                state.kept = 0;
            }
        }
    }

    /// Remember answers decided under `policy` in a batch that committed
    /// (a later answer to the same request replaces an earlier one).
    pub fn remember(&self, policy: &Arc<Licenses>, answers: Vec<Remembered>) {
        let Some(now) = answers.iter().map(|r| r.decided_at).max() else {
            return;
        };
        let mut state = self.lock();
        if state.kept + answers.len() > KEEP_AT_MOST {
            state.drop_lapsed(now);
        }
        for r in answers {
            if state.kept >= KEEP_AT_MOST {
                break;
            }
            let by_holder = state
                .answers
                .entry(r.license_id.clone())
                .or_default()
                .entry(r.holder.clone())
                .or_default();
            let before = by_holder.len();
            by_holder.retain(|(old, _)| !old.answers_same_request(&r));
            by_holder.push((r, policy.clone()));
            let added = by_holder.len() - before;
            state.kept += added;
        }
    }
}

impl State {
    /// Drop the answers that no longer hold at `now`.
    fn drop_lapsed(&mut self, now: Timestamp) {
        for by_holder in self.answers.values_mut() {
            for answers in by_holder.values_mut() {
                answers.retain(|(r, _)| r.until > now);
            }
            by_holder.retain(|_, answers| !answers.is_empty());
        }
        self.answers.retain(|_, by_holder| !by_holder.is_empty());
        self.kept = self
            .answers
            .values()
            .flat_map(|by_holder| by_holder.values())
            .map(Vec::len)
            .sum();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;

    const POLICY: &str = "[[license]]\nid = \"a\"\nkey = \"a-key\"\nseats = 1\n";

    fn memo() -> (Arc<ManualClock>, LicensesHandle, RepeatedDenials) {
        let clock = ManualClock::new(Timestamp::from_millis(1_000));
        let licenses = LicensesHandle::new(Licenses::parse(POLICY).unwrap());
        let memo = RepeatedDenials::new(clock.clone(), licenses.clone());
        (clock, licenses, memo)
    }

    fn request(holder: &str) -> CheckoutRequest {
        CheckoutRequest {
            license_id: "a".into(),
            holder: holder.into(),
            fingerprint: None,
            idempotency_key: None,
            borrow: None,
            version: None,
        }
    }

    fn full(holder: &str, until_ms: i64) -> Remembered {
        Remembered {
            license_id: "a".into(),
            holder: holder.into(),
            fingerprint: None,
            idempotency_key: None,
            outcome: CheckoutOutcome::Full {
                seats: 1,
                live: 1,
                reserved: 0,
                retry_after: Duration::from_millis(500),
            },
            reason: DenialReason::Full,
            decided_at: Timestamp::from_millis(1_000),
            until: Timestamp::from_millis(until_ms),
            retry_at: Some(Timestamp::from_millis(1_500)),
        }
    }

    #[test]
    fn repeats_until_the_answer_may_change_and_are_handed_over_once() {
        let (clock, licenses, memo) = memo();
        memo.remember(&licenses.current(), vec![full("h", 1_400)]);
        assert_eq!(memo.answer(&request("other")), None);
        clock.set(Timestamp::from_millis(1_100));
        let CheckoutOutcome::Full { retry_after, .. } = memo.answer(&request("h")).unwrap() else {
            panic!("not full");
        };
        assert_eq!(retry_after, Duration::from_millis(400));
        clock.set(Timestamp::from_millis(1_400));
        assert_eq!(memo.answer(&request("h")), None, "until is exclusive");
        let handed = memo.take_uncounted();
        assert_eq!(handed.len(), 1);
        assert_eq!(handed[0].at, Timestamp::from_millis(1_100));
        assert!(memo.take_uncounted().is_empty() && !memo.has_uncounted());

        // Forgotten with its license; under another policy, not repeated.
        clock.set(Timestamp::from_millis(1_000));
        memo.remember(&licenses.current(), vec![full("h", 1_400)]);
        memo.forget(&Touch::License("b".into()));
        assert!(memo.answer(&request("h")).is_some());
        memo.forget(&Touch::License("a".into()));
        assert_eq!(memo.answer(&request("h")), None);
        memo.remember(&licenses.current(), vec![full("h", 1_400)]);
        licenses.replace(Licenses::parse(POLICY).unwrap());
        assert_eq!(memo.answer(&request("h")), None);
    }

    #[test]
    fn repeats_stop_while_too_many_wait_to_be_counted_and_none_is_dropped() {
        let (_clock, licenses, memo) = memo();
        memo.remember(&licenses.current(), vec![full("h", 2_000)]);
        for _ in 0..UNCOUNTED_AT_MOST {
            assert!(memo.answer(&request("h")).is_some());
        }
        assert_eq!(memo.answer(&request("h")), None, "the writer is asked");
        let handed = memo.take_uncounted();
        memo.count_again(handed);
        assert_eq!(memo.answer(&request("h")), None);
        assert_eq!(memo.take_uncounted().len(), UNCOUNTED_AT_MOST);
        assert!(memo.answer(&request("h")).is_some());
    }
}
