//! One license's use over a time range, computed exactly from session
//! boundaries (`GET /v1/admin/usage`). Pure: no I/O, no clock — `now` is a
//! field of the [`UsageRange`].
//!
//! A sweep line: sessions arrive ordered by start; the ends of the open ones
//! wait in a min-heap, so memory grows with the sessions open at one instant
//! (and the distinct holders), never with the length of the range. Between
//! two boundaries the number of open sessions is constant, and each such
//! segment is split at bucket edges and pool-size changes and added up.
//!
//! Conventions (documented in `assets/openapi.yaml`):
//! - A session is the half-open interval `[started_at, ended_at)`: an end and
//!   a start at the same instant do not overlap. An open session runs until
//!   `now`; time after `now` counts as nothing used and nothing available.
//! - The pool size in force at `t` is the latest recorded size with
//!   `at <= t`; before the first record, the first record's size (history
//!   starts with the size the server had then); with no record, 0.
//! - `full_s` is the time with every seat in use (`open >= seats`, on a
//!   pool of at least one seat); `over_s` the time with more sessions open
//!   than the pool size (`open > seats`: overage, or a pool shrunk below the
//!   seats still held). Time over a pool of at least one seat is full time
//!   too (`over_s <= full_s` there); a pool of 0 seats (suspended, or the
//!   license gone from the file) is never full, but any seat held on it is
//!   over.
//! - The history covers the range from `covered_from`: the later of `from`
//!   and the license's first pool-size record (the server's first start, or
//!   when the license was added); with no record at all, `to` (nothing is
//!   covered). Seat time before it is not available: `utilization` is over
//!   the covered span, and so should every share of "the range" be.
//! - `utilization` counts use above the pool size (a pool shrunk below the
//!   seats still held) as at most the pool size, so it stays within 0..=1;
//!   `seat_hours` counts every session's time, `borrowed_hours` the part
//!   of it on borrowed seats.
//! - Each denial is kept to the millisecond and belongs to the bucket
//!   holding its instant; `true_denials` are the `full` ones no grant to
//!   the same holder followed within the tolerance (`store::denials`).

pub mod what_if;

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashSet};

use leasehold_common::Timestamp;
use leasehold_common::api::{DenialReason, DenialsByReason, UsagePoint, UsageSummary};

/// Most buckets one answer may hold.
pub const MAX_POINTS: i64 = 10_000;
/// Buckets a default step aims for at most.
pub const DEFAULT_POINTS: i64 = 500;

/// Steps a default is chosen from, in milliseconds: round numbers a chart
/// can label. Beyond the last, whole days.
const NICE_STEPS_MS: &[i64] = &[
    1_000, 5_000, 10_000, 30_000, 60_000, 300_000, 600_000, 900_000, 1_800_000, 3_600_000,
    7_200_000, 10_800_000, 21_600_000, 43_200_000, 86_400_000,
];

/// The range asked about: `[from, to)` in buckets of `step_ms`, judged at
/// `now`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UsageRange {
    pub from: Timestamp,
    pub to: Timestamp,
    pub step_ms: i64,
    pub now: Timestamp,
}

/// Why a range cannot be answered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RangeError {
    #[error("from ({from}) must be before to ({to})")]
    Empty { from: Timestamp, to: Timestamp },
    #[error("step must be longer than 0")]
    ZeroStep,
    #[error("the range would have {points} points; at most {MAX_POINTS} (choose a longer step)")]
    TooManyPoints { points: i64 },
}

impl UsageRange {
    /// A checked range; `step_ms` `None` picks [`default_step_ms`].
    pub fn new(
        from: Timestamp,
        to: Timestamp,
        step_ms: Option<i64>,
        now: Timestamp,
    ) -> Result<UsageRange, RangeError> {
        if from >= to {
            return Err(RangeError::Empty { from, to });
        }
        let span = to.millis_since(from);
        let step_ms = step_ms.unwrap_or_else(|| default_step_ms(span));
        if step_ms <= 0 {
            return Err(RangeError::ZeroStep);
        }
        let points = points(span, step_ms);
        if points > MAX_POINTS {
            return Err(RangeError::TooManyPoints { points });
        }
        Ok(UsageRange {
            from,
            to,
            step_ms,
            now,
        })
    }

    /// How many buckets: the last one is clipped at `to`.
    pub fn points(&self) -> usize {
        points(self.to.millis_since(self.from), self.step_ms) as usize
    }

    /// The bucket holding `t` (which must be in `[from, to)`).
    fn bucket(&self, t: i64) -> usize {
        ((t - self.from.as_millis()) / self.step_ms) as usize
    }

    /// Where bucket `i` ends (clipped at `to`).
    fn bucket_end(&self, i: usize) -> i64 {
        let offset = (i as i64 + 1).saturating_mul(self.step_ms);
        self.from
            .as_millis()
            .saturating_add(offset)
            .min(self.to.as_millis())
    }
}

fn points(span_ms: i64, step_ms: i64) -> i64 {
    span_ms / step_ms + i64::from(span_ms % step_ms != 0)
}

/// The shortest round step that cuts `span_ms` into at most
/// [`DEFAULT_POINTS`] buckets.
pub fn default_step_ms(span_ms: i64) -> i64 {
    let least = span_ms / DEFAULT_POINTS + i64::from(span_ms % DEFAULT_POINTS != 0);
    NICE_STEPS_MS
        .iter()
        .copied()
        .find(|s| *s >= least)
        .unwrap_or_else(|| {
            let day = 86_400_000;
            (least / day + i64::from(least % day != 0)).saturating_mul(day)
        })
}

/// The answer: one point per bucket and the range as a whole.
#[derive(Debug, Clone, PartialEq)]
pub struct Usage {
    pub points: Vec<UsagePoint>,
    pub summary: UsageSummary,
}

/// The pool-size records that matter for a range, oldest first: the one in
/// force at `from` (or, before the first record, the first) and those after.
#[derive(Debug, Clone, Default)]
pub struct PoolTimeline(Vec<(i64, u32)>);

impl PoolTimeline {
    /// From `(at, seats)` records in any order.
    pub fn new(mut records: Vec<(Timestamp, u32)>) -> PoolTimeline {
        records.sort_by_key(|(at, _)| *at);
        PoolTimeline(
            records
                .into_iter()
                .map(|(t, s)| (t.as_millis(), s))
                .collect(),
        )
    }

    /// The size in force at `t`.
    pub fn at(&self, t: i64) -> u32 {
        let after = self.0.partition_point(|(at, _)| *at <= t);
        match after {
            0 => self.0.first().map_or(0, |(_, s)| *s),
            i => self.0[i - 1].1,
        }
    }

    /// Where the history covers `[from, to)` from: the later of `from` and
    /// the first record, at most `to` (`to` with no record at all).
    pub fn covered_from(&self, from: i64, to: i64) -> i64 {
        self.0.first().map_or(to, |(at, _)| (*at).max(from).min(to))
    }

    /// The index of the record in force at `t` (0 before the first).
    fn index_at(&self, t: i64) -> usize {
        self.0.partition_point(|(at, _)| *at <= t).saturating_sub(1)
    }
}

#[derive(Debug, Clone, Copy, Default)]
struct Bucket {
    peak: u32,
    over_ms: u64,
    checkouts: u64,
    denials: DenialsByReason,
    true_denials: u64,
}

/// The sweep. Feed [`Sweep::session`] in order of `started_at` and
/// [`Sweep::denials`] in any order, then [`Sweep::finish`].
pub struct Sweep {
    range: UsageRange,
    /// `now` clamped into the range: nothing is counted after it.
    horizon: i64,
    /// No seat time is available before it (see the module's conventions).
    covered_from: i64,
    pool: PoolTimeline,
    pool_index: usize,
    buckets: Vec<Bucket>,
    /// Where the sweep stands, and how many sessions are open there.
    cursor: i64,
    open: u32,
    ends: BinaryHeap<Reverse<i64>>,
    peak: u32,
    peak_at: Option<i64>,
    session_ms: u128,
    borrowed_ms: u128,
    idle_ms: u128,
    used_ms: u128,
    available_ms: u128,
    full_ms: u128,
    over_ms: u128,
    denials: DenialsByReason,
    true_denials: u64,
    holders: HashSet<String>,
    denied_holders: HashSet<String>,
}

impl Sweep {
    pub fn new(range: UsageRange, pool: PoolTimeline) -> Sweep {
        let (from, to) = (range.from.as_millis(), range.to.as_millis());
        Sweep {
            horizon: range.now.as_millis().clamp(from, to),
            covered_from: pool.covered_from(from, to),
            pool_index: pool.index_at(from),
            pool,
            buckets: vec![Bucket::default(); range.points()],
            cursor: from,
            open: 0,
            ends: BinaryHeap::new(),
            peak: 0,
            peak_at: None,
            session_ms: 0,
            borrowed_ms: 0,
            idle_ms: 0,
            used_ms: 0,
            available_ms: 0,
            full_ms: 0,
            over_ms: 0,
            denials: DenialsByReason::default(),
            true_denials: 0,
            holders: HashSet::new(),
            denied_holders: HashSet::new(),
            range,
        }
    }

    /// Is `[started_at, ended_at)` (open: `None`) a session of the range?
    /// It overlaps `[from, to)`, or started inside it (a zero-length one).
    pub fn in_range(
        range: &UsageRange,
        started_at: Timestamp,
        ended_at: Option<Timestamp>,
    ) -> bool {
        started_at < range.to
            && (started_at >= range.from || ended_at.is_none_or(|e| e > range.from))
    }

    /// One session; `started_at` must not be earlier than the last one fed.
    /// `borrowed`: its seat was borrowed for offline use.
    pub fn session(
        &mut self,
        started_at: Timestamp,
        ended_at: Option<Timestamp>,
        holder: &str,
        borrowed: bool,
    ) {
        if !Sweep::in_range(&self.range, started_at, ended_at) {
            return;
        }
        if !self.holders.contains(holder) {
            self.holders.insert(holder.to_string());
        }
        let (from, start) = (self.range.from.as_millis(), started_at.as_millis());
        if start >= from {
            let b = self.range.bucket(start);
            self.buckets[b].checkouts += 1;
        }
        // Ordered input never goes back; clamping keeps a misordered row
        // from running the sweep backwards.
        let begin = start.max(from).max(self.cursor);
        let end = ended_at
            .unwrap_or(self.range.now)
            .as_millis()
            .min(self.horizon);
        if end <= begin {
            return;
        }
        if borrowed {
            self.borrowed_ms += (end - begin) as u128;
        }
        self.advance_to(begin);
        self.open = self.open.saturating_add(1);
        self.ends.push(Reverse(end));
    }

    /// One recorded idle period (any order): its part inside the range, up
    /// to now, counts as idle seat time.
    pub fn idle_period(&mut self, from: Timestamp, to: Timestamp) {
        let begin = from.max(self.range.from).as_millis();
        let end = to.as_millis().min(self.horizon);
        if end > begin {
            self.idle_ms += (end - begin) as u128;
        }
    }

    /// `count` denials of `holder` for `reason` at the instant `at` (any
    /// order), of which `true_count` were true denials; they count in the
    /// bucket holding `at`.
    pub fn denials(
        &mut self,
        at: Timestamp,
        reason: DenialReason,
        holder: &str,
        count: u64,
        true_count: u64,
    ) {
        if at < self.range.from || at >= self.range.to {
            return;
        }
        if true_count > 0 && !self.denied_holders.contains(holder) {
            self.denied_holders.insert(holder.to_string());
        }
        let b = &mut self.buckets[self.range.bucket(at.as_millis())];
        b.denials.add(reason, count);
        b.true_denials += true_count;
        self.denials.add(reason, count);
        self.true_denials += true_count;
    }

    /// Close every session that ended by `x` (ends before starts at the
    /// same instant: intervals are half-open) and account the time up to `x`.
    fn advance_to(&mut self, x: i64) {
        while let Some(&Reverse(end)) = self.ends.peek() {
            if end > x {
                break;
            }
            self.ends.pop();
            self.account(end);
            self.open = self.open.saturating_sub(1);
        }
        self.account(x);
    }

    /// `open` sessions from the cursor to `until`, split at bucket edges and
    /// pool-size changes.
    fn account(&mut self, until: i64) {
        while self.cursor < until {
            let p = self.cursor;
            let b = self.range.bucket(p);
            while self
                .pool
                .0
                .get(self.pool_index + 1)
                .is_some_and(|(at, _)| *at <= p)
            {
                self.pool_index += 1;
            }
            let next_change = self
                .pool
                .0
                .get(self.pool_index + 1)
                .map_or(i64::MAX, |(at, _)| *at);
            // Split where the covered span starts, too.
            let covered_from = if p < self.covered_from {
                self.covered_from
            } else {
                i64::MAX
            };
            let q = until
                .min(self.range.bucket_end(b))
                .min(next_change)
                .min(covered_from);
            let seats = self.pool.at(p);
            let len = (q - p) as u128;
            let open = self.open;
            self.session_ms += u128::from(open) * len;
            if p >= self.covered_from {
                self.used_ms += u128::from(open.min(seats)) * len;
                self.available_ms += u128::from(seats) * len;
            }
            if seats > 0 && open >= seats {
                self.full_ms += len;
            }
            let over = open > seats;
            if over {
                self.over_ms += len;
            }
            let bucket = &mut self.buckets[b];
            bucket.peak = bucket.peak.max(open);
            if over {
                // A bucket is at most `step_ms` (an i64) long.
                bucket.over_ms += len as u64;
            }
            if open > self.peak {
                self.peak = open;
                self.peak_at = Some(p);
            }
            self.cursor = q;
        }
    }

    pub fn finish(mut self) -> Usage {
        self.advance_to(self.horizon);
        let range = self.range;
        let points = self
            .buckets
            .iter()
            .enumerate()
            .map(|(i, b)| UsagePoint {
                t: Timestamp::from_millis(range.from.as_millis() + i as i64 * range.step_ms),
                seats: self.pool.at(range.bucket_end(i)),
                peak: b.peak,
                over_s: b.over_ms as f64 / 1000.0,
                checkouts: b.checkouts,
                denials: b.denials.total(),
                denials_by_reason: b.denials,
                true_denials: b.true_denials,
            })
            .collect();
        let utilization = if self.available_ms == 0 {
            0.0
        } else {
            self.used_ms as f64 / self.available_ms as f64
        };
        let summary = UsageSummary {
            seats: self.pool.at(range.to.as_millis()),
            peak: self.peak,
            peak_at: self.peak_at.map(Timestamp::from_millis),
            full_s: self.full_ms as f64 / 1000.0,
            over_s: self.over_ms as f64 / 1000.0,
            idle_hours: self.idle_ms as f64 / 3_600_000.0,
            denials: self.denials.total(),
            denials_by_reason: self.denials,
            true_denials: self.true_denials,
            denied_holders: self.denied_holders.len() as u64,
            seat_hours: self.session_ms as f64 / 3_600_000.0,
            borrowed_hours: self.borrowed_ms as f64 / 3_600_000.0,
            utilization,
            holders: self.holders.len() as u64,
            covered_from: Some(Timestamp::from_millis(self.covered_from)),
        };
        Usage { points, summary }
    }
}

#[cfg(test)]
mod tests;
