//! Waiting episodes (RIGHTSIZING §4): with `k` seats an episode that finds
//! none free waits in line from its first denial to its last and takes a
//! seat at the first instant one is free, holding it for the median
//! session from there. At one instant: ends; sessions that start; the
//! line, earliest first denial first; episodes that start.
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
//!   seats, [`Occupancy`]) plus `d` reaches `k`. With `d < 0` only a level
//!   where `F_k` is full (at or below `F`'s lowest free seat) decides
//!   otherwise; with `d > 0` only one with at most `d` free seats below
//!   `k` in `F`.
//! - *extra* holds (`W_k` only) and *missing* ones (`F_k` only) change `d`
//!   when they end; the line of each `k` holds its waiting episodes.
//! - per `k`, the difference in denials, seat time and time full, added to
//!   the first-fit answer by [`LevelDelta::apply`].
//!
//! Levels are independent, so each event touches only the levels whose
//! `d`, line or holds it concerns: a few, unless many episodes wait at once.
//! An episode that cannot wait (one denial) is exactly the first-fit
//! request, and `k` at or above the peak never sees a full pool, so neither
//! costs anything here.

use std::cmp::Reverse;
use std::collections::{BTreeSet, BinaryHeap, HashMap, VecDeque};

use level_set::LevelSet;

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
    free: BTreeSet<usize>,
    fresh: usize,
    occupancy: Occupancy,
    /// Ends of the holds only `W_k` has: `(end, k)`.
    extra_ends: BinaryHeap<Reverse<(i64, usize)>>,
    /// The levels at which an `F` hold (by item) is missing from `W_k`.
    missing: HashMap<usize, Vec<usize>>,
    /// Levels where `W_k` holds fewer (`d < 0`): it has room where `F_k`
    /// is full, i.e. at levels up to `F`'s lowest free seat.
    fewer: LevelSet,
    /// Levels where `W_k` holds more (`d > 0`), and the largest `d` any
    /// has had: `W_k` is full only when at most `d` seats below `k` are
    /// free in `F`, so only at levels up to the `d + 1`-th free seat.
    more: LevelSet,
    most_more: i32,
    /// Levels with someone in line.
    lined: LevelSet,
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
            free: BTreeSet::new(),
            most_more: 0,
            fresh: 0,
            occupancy: Occupancy(vec![0; peak + 1]),
            extra_ends: BinaryHeap::new(),
            missing: HashMap::new(),
            fewer: LevelSet::new(peak),
            more: LevelSet::new(peak),
            lined: LevelSet::new(peak),
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
    /// where `F_k` is full and `W_k` holds fewer, or `W_k` holds more and
    /// is full.
    fn account(&mut self, t: i64) {
        let dt = i128::from(t - self.cursor);
        if dt <= 0 {
            return;
        }
        for k in self.fewer.range(0, self.lowest_free()) {
            self.levels[k].delta.full_ms -= dt;
        }
        for k in self.maybe_full_with_more() {
            if self.w_full(k) {
                self.levels[k].delta.full_ms += dt;
            }
        }
        self.cursor = t;
    }

    fn set_d(&mut self, k: usize, by: i32) {
        let before = self.levels[k].d;
        let after = before + by;
        self.levels[k].d = after;
        match before.signum() {
            -1 => self.fewer.remove(k),
            1 => self.more.remove(k),
            _ => {}
        }
        match after.signum() {
            -1 => self.fewer.insert(k),
            1 => self.more.insert(k),
            _ => {}
        }
        self.most_more = self.most_more.max(after);
    }

    /// Levels where `W_k` holds more and may be full: `F_k` has a free
    /// seat, and at most `most_more` of them.
    fn maybe_full_with_more(&self) -> Vec<usize> {
        if self.more.is_empty() {
            return Vec::new();
        }
        let lowest = self.lowest_free();
        let highest = self.nth_free(self.most_more as usize);
        if highest <= lowest {
            return Vec::new();
        }
        self.more.range(lowest + 1, highest).collect()
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
            self.free.insert(seat);
            let missing_at = self.missing.remove(&item).unwrap_or_default();
            for &k in &missing_at {
                self.set_d(k, 1);
            }
            // Each line above the seat may be served (where `W_k` did not
            // hold it, `w_full` says no).
            self.freed.extend(self.lined.range(seat + 1, usize::MAX));
        }
        while let Some(&Reverse((end, k))) = self.extra_ends.peek() {
            if end > t {
                break;
            }
            self.extra_ends.pop();
            self.set_d(k, -1);
            if self.lined.contains(k) {
                self.freed.push(k);
            }
        }
    }

    fn lowest_free(&self) -> usize {
        self.free.first().copied().unwrap_or(self.fresh)
    }

    /// `F`'s `n`-th lowest free seat (0-based), never-used seats included.
    fn nth_free(&self, n: usize) -> usize {
        match self.free.iter().nth(n) {
            Some(&seat) => seat,
            None => self.fresh + (n - self.free.len()),
        }
    }

    /// Is `W_k` full (before the request at hand joins `F`)?
    fn w_full(&self, k: usize) -> bool {
        self.occupancy.below(k) + self.levels[k].d >= k as i32
    }

    /// `r` joins `F` at `seat`.
    fn place(&mut self, r: &Request, seat: usize) {
        if r.end > r.start {
            if !self.free.remove(&seat) {
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

    /// A session: where the counts differ, `W_k` may decide otherwise:
    /// it has room where `F_k` is full (`k <= seat`), or is full where
    /// `F_k` has room.
    fn session(&mut self, r: &Request) {
        let seat = self.lowest_free();
        let room: Vec<usize> = self.fewer.range(0, seat).collect();
        for k in room {
            self.levels[k].delta.denials -= 1;
            self.extra_at(k, r.start, r.end);
        }
        for k in self.maybe_full_with_more() {
            if self.w_full(k) {
                self.levels[k].delta.denials += 1;
                self.missing_at(r, k);
            }
        }
        self.place(r, seat);
    }

    /// An episode's first denial: `F_k` grants it below its seat; `W_k`
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
        for k in self.maybe_full_with_more() {
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
    /// first denial first; an episode whose last denial has passed is
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
                self.lined.remove(k);
            }
        }
        self.freed = freed;
    }
}

mod level_set {
    /// A set of seat counts below the peak, as bits: the sets change at
    /// almost every event, so insert and remove are one bit each.
    pub struct LevelSet {
        words: Vec<u64>,
        len: usize,
    }

    impl LevelSet {
        pub fn new(levels: usize) -> LevelSet {
            LevelSet {
                words: vec![0; levels.div_ceil(64)],
                len: 0,
            }
        }

        pub fn is_empty(&self) -> bool {
            self.len == 0
        }

        pub fn contains(&self, k: usize) -> bool {
            self.words[k / 64] & (1 << (k % 64)) != 0
        }

        pub fn insert(&mut self, k: usize) {
            if !self.contains(k) {
                self.words[k / 64] |= 1 << (k % 64);
                self.len += 1;
            }
        }

        pub fn remove(&mut self, k: usize) {
            if self.contains(k) {
                self.words[k / 64] &= !(1 << (k % 64));
                self.len -= 1;
            }
        }

        /// The members in `lo..=hi`, in order.
        pub fn range(&self, lo: usize, hi: usize) -> impl Iterator<Item = usize> + '_ {
            let hi = hi.min(self.words.len() * 64 - 1);
            let words = if self.len == 0 || lo > hi {
                0..0
            } else {
                lo / 64..hi / 64 + 1
            };
            words.flat_map(move |w| {
                let mut bits = self.words[w];
                std::iter::from_fn(move || {
                    let bit = bits.trailing_zeros() as usize;
                    (bits != 0).then(|| {
                        bits &= bits - 1;
                        w * 64 + bit
                    })
                })
                .filter(move |&k| (lo..=hi).contains(&k))
            })
        }
    }
}
