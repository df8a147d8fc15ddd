//! "What if we had k seats?" (`GET /v1/admin/usage/what-if`): the recorded
//! demand of a range replayed exactly against every seat count at once.
//! Pure: no I/O, no clock — the store feeds a [`DemandBuilder`] and `now`
//! only decided which sessions it read as open.
//!
//! **Demand.** Every session overlapping the covered range `[covered_from,
//! to)`, clipped to it (an open one ends at `to`), is a request. The true
//! denials of the range form *episodes* per holder and fingerprint: in
//! time order, a true denial at most the tolerance after the previous one
//! joins its episode. An episode is one request that may wait from its
//! first denial to its last; granted at `g`, it holds `[g, g + median)`
//! clipped to `to`, where the median is over the clipped sessions'
//! durations (an even count: the mean of the two middle ones, rounded down
//! to the millisecond; no session: the TTL). An idle timeout `t` removes
//! `[p.from + t, p.to)` from a session for each recorded idle period `p`
//! at least `t` long; what is left are its requests (the user came back at
//! `p.to`: a new request). A cut that removes no time inside the covered
//! range is not counted in `idle_cut` (a period exactly `t` long removes
//! nothing).
//!
//! **Replay.** Requests in time order to the millisecond. At one instant:
//! ends; sessions that start, the earliest end first; episodes already
//! waiting, earliest first denial first; episodes that start. With `k`
//! seats a session is granted when fewer than `k` granted requests are in
//! use at its start, else denied; an episode likewise, except that when
//! none is free it waits in line until its last denial, and is one
//! denial if no seat came by then. A zero-length request is granted or
//! denied the same way and holds nothing. An episode of one denial never
//! waits: it is exactly a request of the first-fit pass below, which
//! answers every `k` when no episode can wait; `waiting.rs` adds what
//! waiting changes.
//!
//! **One pass for every k.** Give each request the lowest-numbered free
//! seat of an unbounded pool (first fit). Seats `1..=k` then hold exactly
//! the requests the `k`-seat replay grants: by induction over the events,
//! a request lands on a seat `<= k` iff one of those is free, iff fewer
//! than `k` granted requests are in use, and what happens on seats `> k`
//! never touches seats `<= k`. So with, per seat, the requests it served
//! and the time it was held, and the time spent with each seat as the
//! lowest free one, every `k` is a sum: denials are the requests served
//! above `k`, seat time is what seats `<= k` held, and all `k` are in use
//! exactly while the lowest free seat is above `k`. Cost: one sort and one
//! sweep with two heaps of at most the demand peak, `O(n log peak)`,
//! whatever the number of seat counts asked.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::ops::RangeInclusive;
use std::time::Duration;

use leasehold_common::Timestamp;
use leasehold_common::api::{WhatIfPoint, WhatIfRecommendation};
use leasehold_common::time::duration_millis;

/// Most seat counts one answer may hold.
pub const MAX_SEAT_COUNTS: u32 = 1000;

/// What the store reads for a what-if: one license's history over
/// `[from, to)` (`to` already no later than `now`).
#[derive(Debug, Clone)]
pub struct WhatIfQuery {
    pub license_id: String,
    pub from: Timestamp,
    pub to: Timestamp,
    /// For sessions of lapsed, unreaped leases (read as lapses).
    pub now: Timestamp,
    pub skew: Duration,
    /// A true denial's request lasts the median session, or this without one.
    pub ttl: Duration,
    pub idle_timeout: Option<Duration>,
    /// A `full` denial followed by a grant to its holder within it is false.
    pub tolerance: Duration,
}

/// Collects the demand of `[covered_from, to)`: feed it every session of
/// the license with its recorded idle periods (any order), then
/// [`DemandBuilder::finish`] with the true denials.
#[derive(Debug)]
pub struct DemandBuilder {
    covered_from: i64,
    to: i64,
    idle_timeout_ms: Option<i64>,
    /// Requests of sessions (after cuts), clipped: `(start, end)`.
    sessions: Vec<(i64, i64)>,
    /// Clipped durations of the sessions, before any cut, for the median.
    durations: Vec<i64>,
    session_count: u64,
    idle_cut: u64,
    /// Scratch: the time an idle timeout removes from one session.
    gaps: Vec<(i64, i64)>,
}

impl DemandBuilder {
    /// `covered_from <= to`; an idle timeout shorter than 1 ms counts as 1 ms.
    pub fn new(covered_from: Timestamp, to: Timestamp, idle_timeout: Option<Duration>) -> Self {
        DemandBuilder {
            covered_from: covered_from.as_millis().min(to.as_millis()),
            to: to.as_millis(),
            idle_timeout_ms: idle_timeout.map(|t| duration_millis(t).max(1)),
            sessions: Vec::new(),
            durations: Vec::new(),
            session_count: 0,
            idle_cut: 0,
            gaps: Vec::new(),
        }
    }

    /// Is `[start, end)` a request of the covered range? It overlaps it, or
    /// starts inside it (a zero-length one), as the usage sweep counts.
    fn covers(&self, start: i64, end: i64) -> bool {
        start < self.to && (start >= self.covered_from || end > self.covered_from)
    }

    /// One recorded session (`ended_at` `None`: still open, so it ends at
    /// `to`) with its recorded idle periods `(from, to)`, in any order.
    pub fn session(
        &mut self,
        started_at: Timestamp,
        ended_at: Option<Timestamp>,
        idle: &[(Timestamp, Timestamp)],
    ) {
        let start = started_at.as_millis();
        // An end before the start (never written) counts as zero length.
        let end = ended_at.map_or(self.to, Timestamp::as_millis).max(start);
        if !self.covers(start, end) {
            return;
        }
        self.session_count += 1;
        let (from, to) = (start.max(self.covered_from), end.min(self.to));
        self.durations.push(to - from);
        self.gaps.clear();
        // Nothing of a session that holds no time in the range is cut: it
        // stays one zero-length request.
        if let Some(t) = self.idle_timeout_ms.filter(|_| from < to) {
            for (p_from, p_to) in idle {
                let (p_from, p_to) = (p_from.as_millis(), p_to.as_millis());
                if p_to.saturating_sub(p_from) >= t {
                    let (a, b) = (p_from.saturating_add(t).max(start), p_to.min(end));
                    if a < b {
                        self.gaps.push((a, b));
                    }
                }
            }
        }
        if self.gaps.is_empty() {
            self.sessions.push((from, to));
            return;
        }
        self.gaps.sort_unstable();
        let (mut at, mut cut) = (start, false);
        for i in 0..self.gaps.len() {
            let (a, b) = self.gaps[i];
            cut |= a.max(self.covered_from) < b.min(self.to);
            if a > at {
                self.piece(at, a);
            }
            at = at.max(b);
        }
        if at < end {
            self.piece(at, end);
        }
        self.idle_cut += u64::from(cut);
    }

    /// One part of a session, kept clipped if it is in the covered range.
    fn piece(&mut self, start: i64, end: i64) {
        if self.covers(start, end) {
            self.sessions
                .push((start.max(self.covered_from), end.min(self.to)));
        }
    }

    /// The median clipped session, in milliseconds (`None`: no session).
    fn median_ms(&mut self) -> Option<i64> {
        let n = self.durations.len();
        if n == 0 {
            return None;
        }
        let (below, &mut upper, _) = self.durations.select_nth_unstable(n / 2);
        if n % 2 == 1 {
            return Some(upper);
        }
        // The other middle one is the largest of the lower half.
        let lower = below.iter().copied().max().unwrap_or(upper);
        Some(lower + (upper - lower) / 2)
    }

    /// The demand, with the true denials of the covered range grouped into
    /// episodes: `true_denials` holds one list per holder and fingerprint,
    /// and a denial at most `tolerance` after the previous one of its list
    /// joins that one's episode. `ttl` is a granted episode's length when
    /// no session is there to take the median of.
    pub fn finish(
        mut self,
        true_denials: impl IntoIterator<Item = Vec<Timestamp>>,
        tolerance: Duration,
        ttl: Duration,
    ) -> Demand {
        let length = self.median_ms().unwrap_or_else(|| duration_millis(ttl));
        let (covered_from, to) = (self.covered_from, self.to);
        let tolerance = duration_millis(tolerance);
        let (mut episodes, mut count) = (Vec::new(), 0u64);
        for mut instants in true_denials {
            instants.sort_unstable();
            let mut current: Option<Episode> = None;
            for d in instants.into_iter().map(Timestamp::as_millis) {
                if !(covered_from..to).contains(&d) {
                    continue;
                }
                count += 1;
                match &mut current {
                    Some(e) if d - e.last <= tolerance => e.last = d,
                    _ => episodes.extend(current.replace(Episode { first: d, last: d })),
                }
            }
            episodes.extend(current);
        }
        episodes.sort_unstable();
        self.sessions.sort_unstable();
        self.durations = Vec::new();
        Demand {
            covered_from,
            to,
            sessions: self.sessions,
            episodes,
            length,
            true_denials: count,
            session_count: self.session_count,
            idle_cut: self.idle_cut,
        }
    }
}

/// One holder's run of true denials (same fingerprint, each at most the
/// tolerance after the previous): one request that waits from its first
/// denial to its last. Ordered as the waiting line serves them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Episode {
    pub first: i64,
    pub last: i64,
}

/// The requests to replay: sessions sorted by `(start, end)`, episodes by
/// `(first, last)`.
#[derive(Debug, Clone, Default)]
pub struct Demand {
    covered_from: i64,
    to: i64,
    sessions: Vec<(i64, i64)>,
    episodes: Vec<Episode>,
    /// How long a granted episode holds its seat: the median session.
    length: i64,
    true_denials: u64,
    session_count: u64,
    idle_cut: u64,
}

impl Demand {
    pub fn covered_from(&self) -> Timestamp {
        Timestamp::from_millis(self.covered_from)
    }

    /// Recorded sessions overlapping the covered range.
    pub fn sessions(&self) -> u64 {
        self.session_count
    }

    /// True denials in the covered range, every retry counted.
    pub fn true_denials(&self) -> u64 {
        self.true_denials
    }

    /// The episodes the true denials form: each one replayed request.
    pub fn episodes(&self) -> u64 {
        self.episodes.len() as u64
    }

    /// Where an episode granted at `at` gives its seat back.
    fn episode_end(&self, at: i64) -> i64 {
        at.saturating_add(self.length).min(self.to)
    }

    /// Sessions the idle timeout cut.
    pub fn idle_cut(&self) -> u64 {
        self.idle_cut
    }

    /// Every request `(start, end, episode)` in replay order: sessions
    /// before episodes at one start, each kind in its own order. An
    /// episode here is granted at its first denial or not at all (the
    /// first-fit pass); `waiting.rs` replays the wait.
    fn in_order(&self) -> impl Iterator<Item = (i64, i64, Option<Episode>)> + '_ {
        let mut s = self.sessions.iter().peekable();
        let mut e = self.episodes.iter().peekable();
        std::iter::from_fn(move || match (s.peek(), e.peek()) {
            (Some(a), Some(b)) if a.0 <= b.first => s.next().map(|&(a, b)| (a, b, None)),
            (_, Some(_)) => e
                .next()
                .map(|&ep| (ep.first, self.episode_end(ep.first), Some(ep))),
            _ => s.next().map(|&(a, b)| (a, b, None)),
        })
    }

    /// The first-fit replay (see the module's comment).
    pub fn replay(&self) -> Replay {
        let mut r = Replay {
            span_ms: self.to - self.covered_from,
            requests: (self.sessions.len() + self.episodes.len()) as u64,
            ..Replay::default()
        };
        let mut seats = Seats::new(self.covered_from);
        for (start, end, _) in self.in_order() {
            seats.free_until(start, &mut r);
            let seat = seats.lowest_free();
            r.grow(seat);
            r.served[seat] += 1;
            if end > start {
                seats.take(seat, end);
                r.held_ms[seat] += (end - start) as u128;
                r.peak = r.peak.max(seats.in_use());
            }
        }
        seats.free_until(i64::MAX, &mut r);
        seats.account(self.to, &mut r);
        r.waiting = waiting::deltas(self, r.peak);
        r
    }
}

/// The unbounded pool of the first-fit replay: held seats by end, free
/// seats below the highest ever taken, and the time accounted so far.
struct Seats {
    held: BinaryHeap<Reverse<(i64, usize)>>,
    free: BinaryHeap<Reverse<usize>>,
    fresh: usize,
    cursor: i64,
}

impl Seats {
    fn new(from: i64) -> Seats {
        Seats {
            held: BinaryHeap::new(),
            free: BinaryHeap::new(),
            fresh: 0,
            cursor: from,
        }
    }

    /// The lowest free seat (0-based): freed ones are all below `fresh`.
    fn lowest_free(&self) -> usize {
        self.free.peek().map_or(self.fresh, |Reverse(s)| *s)
    }

    fn in_use(&self) -> u32 {
        self.held.len() as u32
    }

    fn take(&mut self, seat: usize, until: i64) {
        if self.free.peek() == Some(&Reverse(seat)) {
            self.free.pop();
        } else {
            self.fresh += 1;
        }
        self.held.push(Reverse((until, seat)));
    }

    /// Free every seat held until `t` or earlier (ends before starts at
    /// one instant), accounting the time up to each end, then up to `t`.
    fn free_until(&mut self, t: i64, r: &mut Replay) {
        while let Some(&Reverse((end, seat))) = self.held.peek() {
            if end > t {
                break;
            }
            self.held.pop();
            self.account(end, r);
            self.free.push(Reverse(seat));
        }
        if t != i64::MAX {
            self.account(t, r);
        }
    }

    /// The time since the cursor, spent with the current lowest free seat.
    fn account(&mut self, t: i64, r: &mut Replay) {
        if t > self.cursor {
            let lowest = self.lowest_free();
            r.grow(lowest);
            r.lowest_free_ms[lowest] += (t - self.cursor) as u128;
            self.cursor = t;
        }
    }
}

/// The first-fit replay's tallies, per seat (0-based); every seat count's
/// answer is a sum over them.
#[derive(Debug, Clone, Default)]
pub struct Replay {
    span_ms: i64,
    requests: u64,
    peak: u32,
    /// Requests served by each seat (a zero-length one by the seat it would
    /// have taken).
    served: Vec<u64>,
    held_ms: Vec<u128>,
    /// Time during which each seat was the lowest free one.
    lowest_free_ms: Vec<u128>,
    /// What waiting episodes change, by seat count (`waiting.rs`).
    waiting: Vec<waiting::LevelDelta>,
}

impl Replay {
    fn grow(&mut self, seat: usize) {
        if self.served.len() <= seat {
            self.served.resize(seat + 1, 0);
            self.held_ms.resize(seat + 1, 0);
            self.lowest_free_ms.resize(seat + 1, 0);
        }
    }

    /// Every replayed request.
    pub fn requests(&self) -> u64 {
        self.requests
    }

    /// The most requests in use at once (unlimited seats).
    pub fn peak(&self) -> u32 {
        self.peak
    }

    /// The answer for each seat count of `seats`, and the smallest whose
    /// denial rate is at most `target` percent.
    pub fn curve(
        &self,
        seats: RangeInclusive<u32>,
        target: f64,
    ) -> (Vec<WhatIfPoint>, Option<WhatIfRecommendation>) {
        let n = self.served.len();
        // Prefix sums over seats 1..=k (index k), so each point is O(1).
        let (mut served, mut held, mut full_at_or_below) =
            (vec![0u64; n + 1], vec![0u128; n + 1], vec![0u128; n + 1]);
        for i in 0..n {
            served[i + 1] = served[i] + self.served[i];
            held[i + 1] = held[i] + self.held_ms[i];
            full_at_or_below[i + 1] = full_at_or_below[i] + self.lowest_free_ms[i];
        }
        let curve: Vec<WhatIfPoint> = seats
            .map(|k| {
                let i = (k as usize).min(n);
                let wait = self.waiting.get(k as usize).copied().unwrap_or_default();
                self.point(
                    k,
                    wait.denials(served[n] - served[i]),
                    wait.held_ms(held[i]),
                    wait.full_ms(full_at_or_below[n] - full_at_or_below[i]),
                )
            })
            .collect();
        let recommended =
            curve
                .iter()
                .find(|p| p.denial_rate <= target)
                .map(|p| WhatIfRecommendation {
                    seats: p.seats,
                    denial_rate: p.denial_rate,
                });
        (curve, recommended)
    }

    fn point(&self, k: u32, denials: u64, used_ms: u128, full_ms: u128) -> WhatIfPoint {
        let available = u128::from(k) * self.span_ms.max(0) as u128;
        WhatIfPoint {
            seats: k,
            denials,
            denial_rate: if self.requests == 0 {
                0.0
            } else {
                denials as f64 * 100.0 / self.requests as f64
            },
            peak: self.peak.min(k),
            // With no seat, nothing is ever "all in use".
            full_s: if k == 0 { 0.0 } else { full_ms as f64 / 1000.0 },
            utilization: if available == 0 {
                0.0
            } else {
                used_ms as f64 / available as f64
            },
        }
    }
}

mod waiting;

#[cfg(test)]
mod tests;
