//! The holders table as a window onto the server's keyset-paged seats
//! (`GET /v1/admin/seats?q=&sort=&order=&limit=&after=`): the console holds
//! two consecutive pages, never the whole list, so 100,000 holders cost the
//! server and the console what a screenful does.
//!
//! The window is two pages in *fetch order*: the table's order, or its
//! reverse after End (a reversed request's first page is the table's last
//! rows, so End costs one page, not a walk through them all). The cursors
//! that start each page in fetch order are kept (`anchors`), so scrolling
//! back the way it came refetches from a cursor the server gave out; a
//! cursor is a position in the order, not a row, so it stays valid while
//! seats come and go. A load is always the window's first page, then the
//! second from the first's `next`, so the two never overlap or leave a gap.
//!
//! When to load is decided here, with no I/O and no clock of its own: a
//! load is a chain of [`Command::FetchPage`]s, each answered by an
//! [`AppEvent::Page`] (or `PageFailed`) carrying the request's id; an answer
//! to anything but the newest request is dropped.

use std::time::Duration;

use leasehold_common::Timestamp;
use leasehold_common::api::{EventKind, SeatView, SeatsPage};

use super::event::{Command, PageReply, PageRequest};
use super::sanitize::sanitize_seat;
use super::sort_key::SortKey;
use super::{App, secs};
use crate::stream::{BACKOFF_MIN, next_backoff};

/// Rows per page, at least; a page is also at least two screenfuls, so the
/// window always covers the screen around the selection.
pub const PAGE_MIN: usize = 100;
/// Loads caused by events start at least this long apart (milliseconds):
/// however busy the stream, at most two loads a second.
pub const EVENT_GAP_MS: i64 = 500;
/// ... and at least this many times as long as the last load took: a
/// filter makes the server scan every seat (and count them for `total`),
/// ≈ 0.2 s per page with 100,000 holders, so a filtered window is
/// refreshed about every 20 s and this console's refreshes keep the server
/// busy at most 1/50 of the time (an unfiltered page costs ≈ 1.5 ms).
const COST_FACTOR: i64 = 50;
/// How long typing must pause before the filter goes to the server.
pub const FILTER_DEBOUNCE_MS: u64 = 250;
/// Bounds of the periodic refresh (milliseconds), see [`App::refresh_period_ms`].
const REFRESH_MIN_MS: i64 = 2_000;
const REFRESH_MAX_MS: i64 = 10_000;

impl SortKey {
    /// The server's sort for this column, and whether the column's
    /// ascending order is the server's descending one.
    pub fn server_sort(self) -> (&'static str, bool) {
        match self {
            SortKey::License => ("license", false),
            SortKey::Holder => ("holder", false),
            // Shortest-held first is the latest checkout first.
            SortKey::HeldFor => ("checked_out_at", true),
            SortKey::ExpiresIn => ("expires_at", false),
        }
    }
}

/// Does an event of this kind change the seats the server lists?
/// (Heartbeats are not events; the periodic refresh covers them.)
pub(super) fn changes_seats(kind: EventKind) -> bool {
    match kind {
        EventKind::Checkout
        | EventKind::Release
        | EventKind::Reap
        | EventKind::Revoke
        | EventKind::Config
        | EventKind::Reclaim => true,
        EventKind::Denied | EventKind::Lost | EventKind::Alert | EventKind::Entitlement => false,
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    /// The window's first page.
    First,
    /// The second page, from the first's `next`.
    Second,
    /// While filtered: one row without the filter, for the count of all.
    CountAll,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Goal {
    /// The same window again, the selection following its seat.
    Refresh,
    /// One page further or back: the selection follows its seat.
    Shift,
    /// A new order or filter: the first rows, the selection on its seat if
    /// it is among them, else on the first.
    Reorder,
    /// Home/End: the first or last rows, selected.
    Reset { last: bool },
}

#[derive(Debug)]
struct Load {
    id: u64,
    step: Step,
    goal: Goal,
    /// The anchors the window will have once loaded.
    anchors: Vec<Option<String>>,
    from_end: bool,
    first: Option<SeatsPage>,
    second: Option<SeatsPage>,
    /// Milliseconds its requests took so far.
    cost_ms: i64,
}

/// Which part of the list the holders table holds, and what is being loaded.
#[derive(Debug, Default)]
pub(super) struct Paging {
    /// Fetch order is the table's order reversed (after End).
    from_end: bool,
    /// `after` of each page in fetch order, up to the window's first page
    /// (`[0]` is `None`, the start).
    anchors: Vec<Option<String>>,
    /// Rows of the window's first page (fetch order).
    split: usize,
    /// `next` of the first page (where the second starts) and of the second.
    mid: Option<String>,
    next: Option<String>,
    /// Seats matching the filter, and all seats, by the server's count.
    pub total: u64,
    pub all_total: u64,
    load: Option<Load>,
    /// Something may have changed since the last load began.
    dirty: bool,
    /// Local time the last load began, and the last one ended.
    load_started: Option<Timestamp>,
    load_ended: Option<Timestamp>,
    /// How long the last load's requests took, in milliseconds.
    last_cost_ms: i64,
    /// After failed loads, the least wait before the next: doubled per
    /// failure and capped like the stream's reconnect, so a server that is
    /// away is not asked once a second; `None` once a page arrives.
    retry_wait: Option<Duration>,
    /// A navigation whose load failed: the retry asks for it again, not
    /// for the window it was leaving, so a key press is never lost.
    retry: Option<Load>,
    last_id: u64,
}

impl App {
    /// How many seats match the filter, and how many are held at all (the
    /// server's counts), for the table's title.
    pub fn holder_counts(&self) -> (u64, u64) {
        let p = &self.paging;
        if self.filter.trim().is_empty() {
            (p.total, p.total)
        } else {
            (p.total, p.all_total.max(p.total))
        }
    }

    /// The periodic refresh: heartbeats move `expires_at` without an event,
    /// and a healthy client renews every third of its TTL, so its countdown
    /// stays above the "expiring" mark (a third of the TTL) if it is never
    /// more than a quarter TTL old. Within 2 s (no faster, to stay cheap)
    /// and 10 s (long TTLs still see expiries soon).
    pub fn refresh_period_ms(&self) -> i64 {
        let min_ttl = self
            .licenses
            .iter()
            .map(|l| secs(l.ttl_s).as_millis() as i64)
            .filter(|&t| t > 0)
            .min()
            .unwrap_or(REFRESH_MAX_MS * 4);
        (min_ttl / 4).clamp(REFRESH_MIN_MS, REFRESH_MAX_MS)
    }

    fn page_limit(&self) -> usize {
        PAGE_MIN.max(self.page_rows * 2)
    }

    /// Load the same window again, now (for `test_support`, which does not
    /// name this module's [`Goal`]).
    #[cfg(test)]
    pub(super) fn reload_now(&mut self) -> Vec<Command> {
        self.start_load(Goal::Refresh, 0)
    }

    /// Start loading the window `goal` asks for, after `delay_ms`.
    pub(super) fn start_load(&mut self, goal: Goal, delay_ms: u64) -> Vec<Command> {
        let p = &mut self.paging;
        let (anchors, from_end) = match goal {
            Goal::Refresh => {
                let anchors = if p.anchors.is_empty() {
                    vec![None]
                } else {
                    p.anchors.clone()
                };
                (anchors, p.from_end)
            }
            Goal::Shift => unreachable!("shifts go through shift()"),
            Goal::Reorder => (vec![None], false),
            Goal::Reset { last } => (vec![None], last),
        };
        self.begin(goal, anchors, from_end, delay_ms)
    }

    fn begin(
        &mut self,
        goal: Goal,
        anchors: Vec<Option<String>>,
        from_end: bool,
        delay_ms: u64,
    ) -> Vec<Command> {
        let p = &mut self.paging;
        p.last_id += 1;
        p.dirty = false;
        p.retry = None;
        p.load_started = Some(Timestamp::from_millis(
            self.last_now.as_millis() + delay_ms as i64,
        ));
        let after = anchors.last().cloned().flatten();
        p.load = Some(Load {
            id: p.last_id,
            step: Step::First,
            goal,
            anchors,
            from_end,
            first: None,
            second: None,
            cost_ms: 0,
        });
        vec![self.request(after, delay_ms, false)]
    }

    /// The request for the current load's step.
    fn request(&self, after: Option<String>, delay_ms: u64, count_all: bool) -> Command {
        let p = &self.paging;
        let load = p.load.as_ref().expect("a load in progress");
        let (sort, flipped) = self.sort.server_sort();
        Command::FetchPage(PageRequest {
            id: p.last_id,
            delay_ms,
            q: if count_all {
                String::new()
            } else {
                self.filter.clone()
            },
            sort,
            desc: self.sort_desc ^ flipped ^ load.from_end,
            limit: if count_all { 1 } else { self.page_limit() },
            after,
        })
    }

    /// Load the window one page further in fetch order (`forward`) or back.
    fn shift(&mut self, forward: bool) -> Vec<Command> {
        let p = &self.paging;
        let mut anchors = p.anchors.clone();
        if forward {
            anchors.push(p.mid.clone());
        } else {
            anchors.pop();
        }
        let from_end = p.from_end;
        self.begin(Goal::Shift, anchors, from_end, 0)
    }

    /// After the selection moved: load the next window when it nears an end
    /// of this one and the list goes on there. The thresholds (the outer
    /// halves of the two pages) leave half a page on either side after the
    /// shift, so a shift never asks for the shift back.
    pub(super) fn follow_selection(&mut self) -> Vec<Command> {
        let p = &self.paging;
        if matches!(&p.load, Some(l) if l.goal != Goal::Refresh) || self.seats.is_empty() {
            return Vec::new();
        }
        let n = self.seats.len();
        let f = if p.from_end {
            n - 1 - self.selected
        } else {
            self.selected
        };
        let second_len = n - p.split;
        if p.next.is_some() && p.mid.is_some() && f >= p.split + second_len / 2 {
            self.shift(true)
        } else if p.anchors.len() > 1 && f < p.split / 2 {
            self.shift(false)
        } else {
            Vec::new()
        }
    }

    /// Home/End: the first or last rows. When the window holds the whole
    /// list already, or that end, and stays, only the selection moves.
    pub(super) fn jump(&mut self, last: bool) -> Vec<Command> {
        let p = &self.paging;
        let at_start = p.anchors.len() <= 1;
        let whole = at_start && p.next.is_none();
        let here = at_start && p.from_end == last;
        self.selected = if last { usize::MAX } else { 0 };
        self.ensure_visible();
        // This end, not one a failed load was still to go to.
        self.paging.retry = None;
        // A new order on its way starts at this end: let it land there
        // rather than on the seat selected before.
        if let Some(load) = &mut self.paging.load
            && matches!(load.goal, Goal::Reorder | Goal::Reset { .. })
            && load.from_end == last
        {
            load.goal = Goal::Reset { last };
            return Vec::new();
        }
        // Any other navigation on its way would move the window away from
        // this end after the selection moved: ask for this end instead.
        let moving = matches!(&self.paging.load, Some(l) if l.goal != Goal::Refresh);
        if (whole || here) && !moving {
            Vec::new()
        } else {
            self.start_load(Goal::Reset { last }, 0)
        }
    }

    /// An event from the stream that may change the rows: load again, at
    /// most once per [`EVENT_GAP_MS`]; events during a load make one more.
    pub(super) fn seats_changed(&mut self) -> Vec<Command> {
        self.paging.dirty = true;
        self.load_if_due()
    }

    /// The 1 Hz tick: a pending change, or the periodic refresh.
    pub(super) fn on_tick(&mut self, now: Timestamp) -> Vec<Command> {
        let p = &self.paging;
        let stale = p
            .load_ended
            .is_none_or(|t| now.millis_since(t) >= self.refresh_period_ms());
        if stale && p.load.is_none() {
            self.paging.dirty = true;
        }
        self.load_if_due()
    }

    /// Load again if something changed and nothing is loading (or frozen),
    /// no sooner than [`EVENT_GAP_MS`] (or [`COST_FACTOR`] times the last
    /// load's time) after the last load began.
    pub(super) fn load_if_due(&mut self) -> Vec<Command> {
        let p = &self.paging;
        if !p.dirty || p.load.is_some() || self.frozen {
            return Vec::new();
        }
        let retry_ms = p.retry_wait.map_or(0, |d| d.as_millis() as i64);
        let gap = EVENT_GAP_MS.max(COST_FACTOR * p.last_cost_ms).max(retry_ms);
        let since = p
            .load_started
            .map_or(gap, |t| self.last_now.millis_since(t));
        let delay = (gap - since).max(0) as u64;
        match self.paging.retry.take() {
            Some(failed) => self.begin(failed.goal, failed.anchors, failed.from_end, delay),
            None => self.start_load(Goal::Refresh, delay),
        }
    }

    /// A page arrived.
    pub(super) fn on_page(&mut self, reply: PageReply) -> Vec<Command> {
        let Some(load) = self.paging.load.as_mut() else {
            return Vec::new();
        };
        if load.id != reply.id {
            return Vec::new();
        }
        self.paging.retry_wait = None;
        load.cost_ms += reply.elapsed_ms.min(i64::MAX as u64) as i64;
        self.clock_offset_ms = reply.page.now.millis_since(reply.received_at);
        self.last_update = Some((reply.page.now, reply.received_at));
        match load.step {
            Step::First => {
                let next = reply.page.next.clone();
                load.first = Some(reply.page);
                if next.is_some() {
                    load.step = Step::Second;
                    return vec![self.request(next, 0, false)];
                }
            }
            Step::Second => load.second = Some(reply.page),
            Step::CountAll => {
                self.paging.all_total = reply.page.total;
                self.finish_load();
                return self.load_if_due();
            }
        }
        self.apply_window();
        if self.filter.trim().is_empty() {
            self.paging.all_total = self.paging.total;
            self.finish_load();
            self.load_if_due()
        } else {
            let load = self.paging.load.as_mut().expect("still loading");
            load.step = Step::CountAll;
            vec![self.request(None, 0, true)]
        }
    }

    /// A page request failed: keep what is shown, try again on a tick (the
    /// same navigation, if it was one).
    pub(super) fn on_page_failed(&mut self, id: u64) {
        if self.paging.load.as_ref().is_some_and(|l| l.id == id) {
            let failed = self.finish_load();
            self.paging.retry = failed.filter(|l| l.goal != Goal::Refresh);
            self.paging.dirty = true;
            self.paging.retry_wait = Some(self.paging.retry_wait.map_or(BACKOFF_MIN, next_backoff));
        }
    }

    /// End the load in progress, handing it back.
    fn finish_load(&mut self) -> Option<Load> {
        let load = self.paging.load.take();
        if let Some(load) = &load {
            self.paging.last_cost_ms = load.cost_ms;
        }
        self.paging.load_ended = Some(self.last_now);
        load
    }

    /// Show the loaded pages, the selection on the same seat if it is
    /// still there and on the same screen line.
    fn apply_window(&mut self) {
        let load = self.paging.load.as_mut().expect("a load in progress");
        if self.frozen && load.goal == Goal::Refresh {
            // Freeze holds updates back; navigation still loads.
            self.paging.dirty = true;
            return;
        }
        let first = load.first.take().expect("first page");
        let fetched_at = first.now;
        let second = load.second.take();
        let goal = load.goal;
        let anchors = std::mem::take(&mut load.anchors);
        let from_end = load.from_end;
        let p = &mut self.paging;
        p.anchors = anchors;
        p.from_end = from_end;
        p.split = first.seats.len();
        p.mid = first.next;
        p.total = first.total;
        p.next = None;
        let mut rows: Vec<SeatView> = first.seats;
        if let Some(second) = second {
            p.total = second.total;
            p.next = second.next;
            rows.extend(second.seats);
        }
        if p.from_end {
            rows.reverse();
        }
        let line = self.selected.saturating_sub(self.scroll);
        self.seats = rows.into_iter().map(sanitize_seat).collect();
        self.view = (0..self.seats.len()).collect();
        self.view_widths = widths(&self.seats);
        self.view_idle = self.seats.iter().any(|s| s.idle_s.is_some());
        self.seats_at = fetched_at;
        let found = self
            .selected_seat
            .as_ref()
            .and_then(|id| self.seats.iter().position(|s| &s.seat_id == id));
        match (goal, found) {
            (Goal::Reset { last }, _) => {
                self.selected = if last { usize::MAX } else { 0 };
                self.scroll = 0;
            }
            (_, Some(i)) => {
                self.selected = i;
                self.scroll = i.saturating_sub(line);
            }
            (Goal::Reorder, None) => {
                self.selected = 0;
                self.scroll = 0;
            }
            (_, None) => {}
        }
        self.ensure_visible();
    }
}

/// The longest license id, holder and fingerprint (`—` counts 1), in chars.
fn widths(seats: &[SeatView]) -> [usize; 3] {
    seats.iter().fold([0; 3], |[l, h, f], s| {
        [
            l.max(s.license_id.chars().count()),
            h.max(s.holder.chars().count()),
            f.max(s.fingerprint.as_deref().map_or(1, |x| x.chars().count())),
        ]
    })
}

#[cfg(test)]
mod tests;
