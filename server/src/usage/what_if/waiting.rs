//! Waiting episodes (RIGHTSIZING §4): with `k` seats an episode that finds
//! none free waits in line from its first refusal to its last and takes a
//! seat at the first instant one is free, holding it for the median
//! session from there. At one instant: ends; sessions that start; the
//! line, earliest first refusal first; episodes that start.
//!
//! The first-fit pass (`what_if.rs`) answers every `k` at once because a
//! request's fate at `k` seats never depends on seats above `k`. A wait
//! breaks that: when an episode is served late, the `k`-seat replay holds
//! it over a span no other seat count does. So this module replays the
//! difference: it runs the same first-fit pool `F` again and beside it,
//! for each `k` below the demand peak, only where the waiting replay `W_k`
//! differs from `F_k` (seats `1..=k` of `F`):
//!
//! - `d` = seats `W_k` holds − seats `F_k` holds. While `d = 0` both are
//!   full or not at once, so they decide every request alike and nothing
//!   needs doing; `W_k` is full iff `F_k`'s count (a prefix sum over the
//!   seats, [`Occupancy`]) plus `d` reaches `k`.
//! - *extra* holds (`W_k` only) and *missing* ones (`F_k` only) change `d`
//!   when they end; the line of each `k` holds its waiting episodes.
//! - per `k`, the difference in denials, seat time and time full, added to
//!   the first-fit answer by [`LevelDelta::apply`].
//!
//! Levels are independent, so each event touches only the levels whose
//! `d`, line or holds it concerns: a few, unless many episodes wait at once.
//! An episode that cannot wait (one refusal) is exactly the first-fit
//! request, and `k` at or above the peak never sees a full pool, so neither
//! costs anything here.

use std::cmp::Reverse;
use std::collections::{BTreeSet, BinaryHeap, HashMap, VecDeque};

use super::{Demand, Episode};

/// What waiting changes at one seat count, against the first-fit answer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LevelDelta {
    denials: i64,
    held_ms: i128,
    full_ms: i128,
}

impl LevelDelta {
    /// First-fit denials, with waiting.
    pub fn denials(&self, first_fit: u64) -> u64 {
        u64::try_from(i128::from(first_fit) + i128::from(self.denials)).unwrap_or(0)
    }

    /// First-fit seat time used, with waiting.
    pub fn held_ms(&self, first_fit: u128) -> u128 {
        u128::try_from(first_fit as i128 + self.held_ms).unwrap_or(0)
    }

    /// First-fit time with every seat in use, with waiting.
    pub fn full_ms(&self, first_fit: u128) -> u128 {
        u128::try_from(first_fit as i128 + self.full_ms).unwrap_or(0)
    }
}

/// The deltas of every seat count below `peak` (index `k`; empty when no
/// episode can wait).
pub(super) fn deltas(demand: &Demand, peak: u32) -> Vec<LevelDelta> {
    if peak < 2 || demand.episodes.iter().all(|e| e.last == e.first) {
        return Vec::new();
    }
    let mut pass = Pass::new(demand, peak as usize);
    pass.run();
    pass.levels.into_iter().map(|l| l.delta).collect()
}

/// Seats held in the first-fit pool, countable by prefix (a Fenwick tree).
struct Occupancy(Vec<i32>);

impl Occupancy {
    fn add(&mut self, seat: usize, by: i32) {
        let mut i = seat + 1;
        while i < self.0.len() {
            self.0[i] += by;
            i += i & i.wrapping_neg();
        }
    }

    /// Held seats among `0..k`.
    fn below(&self, k: usize) -> i32 {
        let (mut i, mut sum) = (k.min(self.0.len() - 1), 0);
        while i > 0 {
            sum += self.0[i];
            i -= i & i.wrapping_neg();
        }
        sum
    }
}

#[derive(Default)]
struct Level {
    /// Seats `W_k` holds minus seats `F_k` holds.
    d: i32,
    line: VecDeque<Episode>,
    delta: LevelDelta,
}

/// One request of the first-fit order: `item` numbers it.
#[derive(Clone, Copy)]
struct Request {
    item: usize,
    start: i64,
    end: i64,
    episode: Option<Episode>,
}

struct Pass<'a> {
    demand: &'a Demand,
    levels: Vec<Level>,
    /// `F`: held seats by end, free seats, the next never-used seat.
    held: BinaryHeap<Reverse<(i64, usize, usize)>>,
    free: BinaryHeap<Reverse<usize>>,
    fresh: usize,
    occupancy: Occupancy,
    /// Ends of the holds only `W_k` has: `(end, k)`.
    extra_ends: BinaryHeap<Reverse<(i64, usize)>>,
    /// The levels at which an `F` hold (by item) is missing from `W_k`.
    missing: HashMap<usize, Vec<usize>>,
    /// Levels with `d != 0`, and levels with someone in line.
    unbalanced: BTreeSet<usize>,
    lined: BTreeSet<usize>,
    /// Levels at which `W_k` freed a seat at this instant.
    freed: Vec<usize>,
    cursor: i64,
}

impl<'a> Pass<'a> {
    fn new(demand: &'a Demand, peak: usize) -> Self {
        Pass {
            demand,
            levels: (0..peak).map(|_| Level::default()).collect(),
            held: BinaryHeap::new(),
            free: BinaryHeap::new(),
            fresh: 0,
            occupancy: Occupancy(vec![0; peak + 1]),
            extra_ends: BinaryHeap::new(),
            missing: HashMap::new(),
            unbalanced: BTreeSet::new(),
            lined: BTreeSet::new(),
            freed: Vec::new(),
            cursor: demand.covered_from,
        }
    }

    fn run(&mut self) {
        let requests: Vec<Request> = self
            .demand
            .in_order()
            .enumerate()
            .map(|(item, (start, end, episode))| Request {
                item,
                start,
                end,
                episode,
            })
            .collect();
        let mut next = requests.iter().peekable();
        loop {
            let ends = [
                self.held.peek().map(|Reverse(h)| h.0),
                self.extra_ends.peek().map(|Reverse(e)| e.0),
                next.peek().map(|r| r.start),
            ];
            let Some(t) = ends.into_iter().flatten().min() else {
                break;
            };
            self.account(t);
            self.end_at(t);
            while let Some(r) = next.next_if(|r| r.start == t && r.episode.is_none()) {
                self.session(r);
            }
            self.serve_line(t);
            while let Some(r) = next.next_if(|r| r.start == t) {
                self.episode(r);
            }
        }
        self.account(self.demand.to);
        for level in &mut self.levels {
            level.delta.denials += level.line.len() as i64;
        }
    }

    /// Time all `k` seats were in use, `W_k` against `F_k`, up to `t`:
    /// only where the two hold different counts.
    fn account(&mut self, t: i64) {
        let dt = i128::from(t - self.cursor);
        if dt <= 0 {
            return;
        }
        for &k in &self.unbalanced {
            let f = self.occupancy.below(k);
            let w = f + self.levels[k].d;
            let full = |n: i32| i128::from(n == k as i32);
            self.levels[k].delta.full_ms += dt * (full(w) - full(f));
        }
        self.cursor = t;
    }

    fn set_d(&mut self, k: usize, by: i32) {
        let level = &mut self.levels[k];
        level.d += by;
        if level.d == 0 {
            self.unbalanced.remove(&k);
        } else {
            self.unbalanced.insert(k);
        }
    }

    /// Every hold ending at `t`, in `F` and in the `W_k`.
    fn end_at(&mut self, t: i64) {
        self.freed.clear();
        while let Some(&Reverse((end, seat, item))) = self.held.peek() {
            if end > t {
                break;
            }
            self.held.pop();
            self.occupancy.add(seat, -1);
            self.free.push(Reverse(seat));
            let missing_at = self.missing.remove(&item).unwrap_or_default();
            for &k in &missing_at {
                self.set_d(k, 1);
            }
            // Each line above the seat may be served (where `W_k` did not
            // hold it, `w_full` says no).
            self.freed.extend(self.lined.range(seat + 1..));
        }
        while let Some(&Reverse((end, k))) = self.extra_ends.peek() {
            if end > t {
                break;
            }
            self.extra_ends.pop();
            self.set_d(k, -1);
            if self.lined.contains(&k) {
                self.freed.push(k);
            }
        }
    }

    fn lowest_free(&self) -> usize {
        self.free.peek().map_or(self.fresh, |Reverse(s)| *s)
    }

    /// Is `W_k` full (before the request at hand joins `F`)?
    fn w_full(&self, k: usize) -> bool {
        self.occupancy.below(k) + self.levels[k].d >= k as i32
    }

    /// `r` joins `F` at `seat`.
    fn place(&mut self, r: &Request, seat: usize) {
        if r.end > r.start {
            if self.free.peek() == Some(&Reverse(seat)) {
                self.free.pop();
            } else {
                self.fresh += 1;
            }
            self.occupancy.add(seat, 1);
            self.held.push(Reverse((r.end, seat, r.item)));
        }
    }

    /// `F_k` grants `r` and `W_k` does not (yet): its hold is missing.
    fn missing_at(&mut self, r: &Request, k: usize) {
        self.levels[k].delta.held_ms -= i128::from(r.end - r.start);
        if r.end > r.start {
            self.missing.entry(r.item).or_default().push(k);
            self.set_d(k, -1);
        }
    }

    /// `W_k` grants `[at, end)` that `F_k` does not hold.
    fn extra_at(&mut self, k: usize, at: i64, end: i64) {
        self.levels[k].delta.held_ms += i128::from(end - at);
        if end > at {
            self.extra_ends.push(Reverse((end, k)));
            self.set_d(k, 1);
        }
    }

    /// A session: where the counts differ, `W_k` may decide otherwise.
    fn session(&mut self, r: &Request) {
        let seat = self.lowest_free();
        let differing: Vec<usize> = self.unbalanced.iter().copied().collect();
        for k in differing {
            let (f_grants, w_grants) = (seat < k, !self.w_full(k));
            if f_grants && !w_grants {
                self.levels[k].delta.denials += 1;
                self.missing_at(r, k);
            } else if w_grants && !f_grants {
                self.levels[k].delta.denials -= 1;
                self.extra_at(k, r.start, r.end);
            }
        }
        self.place(r, seat);
    }

    /// An episode's first refusal: `F_k` grants it below its seat; `W_k`
    /// grants it when not full, else puts it in line if it can wait.
    fn episode(&mut self, r: &Request) {
        let Some(episode) = r.episode else { return };
        let seat = self.lowest_free();
        let waits = episode.last > episode.first;
        // F_k full: W_k is too unless it holds fewer (d < 0).
        for k in 1..=seat.min(self.levels.len() - 1) {
            if self.levels[k].d < 0 {
                self.levels[k].delta.denials -= 1;
                self.extra_at(k, r.start, r.end);
            } else if waits {
                self.join_line(k, episode, 1);
            }
        }
        let differing: Vec<usize> = self.unbalanced.range(seat + 1..).copied().collect();
        for k in differing {
            if self.w_full(k) {
                self.missing_at(r, k);
                if waits {
                    self.join_line(k, episode, 0);
                } else {
                    self.levels[k].delta.denials += 1;
                }
            }
        }
        self.place(r, seat);
    }

    /// `episode` waits at `k`; `f_denied`: `F_k` counted it a denial,
    /// which `W_k` does not (yet).
    fn join_line(&mut self, k: usize, episode: Episode, f_denied: i64) {
        let level = &mut self.levels[k];
        level.delta.denials -= f_denied;
        level.line.push_back(episode);
        self.lined.insert(k);
    }

    /// Each level that freed a seat at `t` serves its line, earliest
    /// first refusal first; an episode whose last refusal has passed is
    /// one denial.
    fn serve_line(&mut self, t: i64) {
        let mut freed = std::mem::take(&mut self.freed);
        freed.sort_unstable();
        freed.dedup();
        for &k in &freed {
            while let Some(&front) = self.levels[k].line.front() {
                if front.last < t {
                    self.levels[k].line.pop_front();
                    self.levels[k].delta.denials += 1;
                } else if !self.w_full(k) {
                    self.levels[k].line.pop_front();
                    self.extra_at(k, t, self.demand.episode_end(t));
                } else {
                    break;
                }
            }
            if self.levels[k].line.is_empty() {
                self.lined.remove(&k);
            }
        }
        self.freed = freed;
    }
}
