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

use super::sanitize::sanitize_seat;
use super::sort_key::SortKey;
use super::{App, Command, secs};
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

/// One request for a page of seats, carried out by the event loop.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PageRequest {
    /// Echoed in the answer; only the newest request's answer is used.
    pub id: u64,
    /// Wait this long first (debounce); a newer request makes it moot.
    pub delay_ms: u64,
    /// The filter as typed (the server trims and lower-cases it).
    pub q: String,
    /// The server's sort: `license`, `holder`, `expires_at`, `checked_out_at`.
    pub sort: &'static str,
    pub desc: bool,
    pub limit: usize,
    pub after: Option<String>,
}

/// The answer to a [`PageRequest`], the local time it arrived, and how long
/// the request took (milliseconds, a measure of what it cost the server).
#[derive(Debug, Clone)]
pub struct PageReply {
    pub id: u64,
    pub page: SeatsPage,
    pub received_at: Timestamp,
    pub elapsed_ms: u64,
}

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
        | EventKind::Config => true,
        EventKind::Denied | EventKind::Lost => false,
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
    /// list already, only the selection moves.
    pub(super) fn jump(&mut self, last: bool) -> Vec<Command> {
        let p = &self.paging;
        let at_start = p.anchors.len() <= 1;
        let whole = at_start && p.next.is_none();
        let here = at_start && p.from_end == last;
        self.selected = if last { usize::MAX } else { 0 };
        self.ensure_visible();
        // A new order on its way starts at this end: let it land there
        // rather than on the seat selected before.
        if let Some(load) = &mut self.paging.load
            && matches!(load.goal, Goal::Reorder | Goal::Reset { .. })
            && load.from_end == last
        {
            load.goal = Goal::Reset { last };
            return Vec::new();
        }
        if whole || here {
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
        self.start_load(Goal::Refresh, delay)
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

    /// A page request failed: keep what is shown, try again on a tick.
    pub(super) fn on_page_failed(&mut self, id: u64) {
        if self.paging.load.as_ref().is_some_and(|l| l.id == id) {
            self.finish_load();
            self.paging.dirty = true;
            self.paging.retry_wait = Some(self.paging.retry_wait.map_or(BACKOFF_MIN, next_backoff));
        }
    }

    fn finish_load(&mut self) {
        if let Some(load) = self.paging.load.take() {
            self.paging.last_cost_ms = load.cost_ms;
        }
        self.paging.load_ended = Some(self.last_now);
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
mod tests {
    use crossterm::event::KeyCode;
    use leasehold_common::api::EventKind;

    use super::super::test_support::*;
    use super::super::{AppEvent, Modal};
    use super::*;

    /// What a request asks of the server, without its id and delay.
    fn ask(cmd: &Command) -> (String, &'static str, bool, Option<String>) {
        let Command::FetchPage(r) = cmd else {
            panic!("not a page request: {cmd:?}")
        };
        (r.q.clone(), r.sort, r.desc, r.after.clone())
    }

    fn only_fetch(cmds: &[Command]) -> &PageRequest {
        match cmds {
            [Command::FetchPage(r)] => r,
            other => panic!("one page request expected: {other:?}"),
        }
    }

    /// A server of `n` holders `h00000`…, sorted by holder: answers page
    /// requests as `GET /v1/admin/seats` would (cursor = last holder).
    struct FakeServer {
        seats: Vec<SeatView>,
        requests: usize,
    }

    impl FakeServer {
        fn new(n: usize) -> FakeServer {
            let seats = (0..n)
                .map(|i| {
                    seat(
                        "p",
                        &format!("h{i:05}"),
                        &format!("{i:032x}"),
                        -(i as i64),
                        60,
                    )
                })
                .collect();
            FakeServer { seats, requests: 0 }
        }

        fn answer(&mut self, r: &PageRequest) -> AppEvent {
            self.requests += 1;
            let q = r.q.trim().to_lowercase();
            let mut rows: Vec<&SeatView> = self
                .seats
                .iter()
                .filter(|s| s.holder.contains(&q))
                .collect();
            assert!(matches!(r.sort, "holder" | "license"), "{}", r.sort);
            if r.desc {
                rows.reverse();
            }
            let total = rows.len() as u64;
            let start = match &r.after {
                None => 0,
                Some(c) => rows.iter().position(|s| &s.holder == c).unwrap() + 1,
            };
            let page: Vec<SeatView> = rows[start..]
                .iter()
                .take(r.limit)
                .map(|s| (*s).clone())
                .collect();
            let next = (start + r.limit < rows.len()).then(|| page.last().unwrap().holder.clone());
            AppEvent::Page(Box::new(PageReply {
                id: r.id,
                page: SeatsPage {
                    now: ts(0),
                    seats: page,
                    total,
                    next,
                },
                received_at: ts(0),
                elapsed_ms: 0,
            }))
        }

        /// Answer `cmds` and every request they lead to.
        fn serve(&mut self, app: &mut App, mut cmds: Vec<Command>) {
            while let Some(cmd) = cmds.pop() {
                if let Command::FetchPage(r) = cmd {
                    let ev = self.answer(&r);
                    cmds.extend(app.update(ev, ts(0)));
                }
            }
        }
    }

    /// An app sorted by holder over `n` fake holders, first window loaded.
    fn paged_app(n: usize) -> (App, FakeServer) {
        let mut app = App::new("s", false, false);
        app.set_page_rows(20, 5);
        let mut server = FakeServer::new(n);
        let cmds = app.update(ch('s'), ts(0));
        assert_eq!(app.sort, SortKey::Holder);
        server.serve(&mut app, cmds);
        (app, server)
    }

    fn selected(app: &App) -> &str {
        &app.selected_seat().unwrap().holder
    }

    #[test]
    fn scrolling_down_fetches_the_next_page_and_up_comes_back() {
        let (mut app, mut server) = paged_app(1000);
        assert_eq!(app.seats.len(), 200, "two pages of 100");
        assert_eq!(app.holder_counts(), (1000, 1000));
        // Down to the second page's lower half: one shift, one page further.
        let mut shifts = 0;
        for _ in 0..150 {
            let cmds = app.update(ch('j'), ts(0));
            if !cmds.is_empty() {
                assert_eq!(ask(&cmds[0]).3, Some("h00099".into()), "after page 1");
                shifts += 1;
                server.serve(&mut app, cmds);
            }
        }
        assert_eq!(shifts, 1);
        assert_eq!(selected(&app), "h00150");
        assert_eq!(app.seats[0].holder, "h00100", "window moved a page on");
        assert!(app.selected - app.scroll < app.page_rows, "still on screen");
        // PgDn to the end of the list.
        for _ in 0..100 {
            let cmds = app.update(key(KeyCode::PageDown), ts(0));
            server.serve(&mut app, cmds);
        }
        assert_eq!(selected(&app), "h00999");
        // And back up, by the kept cursors, to the very first holder.
        for _ in 0..100 {
            let cmds = app.update(key(KeyCode::PageUp), ts(0));
            server.serve(&mut app, cmds);
        }
        assert_eq!(selected(&app), "h00000");
        assert_eq!(app.seats.len(), 200);
    }

    #[test]
    fn end_fetches_the_last_page_in_reverse_and_home_the_first() {
        let (mut app, mut server) = paged_app(100_000);
        let before = server.requests;
        let cmds = app.update(key(KeyCode::End), ts(0));
        assert_eq!(
            ask(&cmds[0]),
            (String::new(), "holder", true, None),
            "the table's end is the reversed order's start"
        );
        server.serve(&mut app, cmds);
        assert_eq!(server.requests - before, 2, "two pages, not a walk");
        assert_eq!(selected(&app), "h99999");
        assert_eq!(app.seats.last().unwrap().holder, "h99999");
        // Up from the end pages backwards.
        for _ in 0..3 {
            let cmds = app.update(key(KeyCode::PageUp), ts(0));
            server.serve(&mut app, cmds);
        }
        assert_eq!(selected(&app), "h99939");
        for _ in 0..10 {
            let cmds = app.update(key(KeyCode::PageUp), ts(0));
            server.serve(&mut app, cmds);
        }
        assert_eq!(selected(&app), "h99739");
        let cmds = app.update(key(KeyCode::Home), ts(0));
        server.serve(&mut app, cmds);
        assert_eq!(selected(&app), "h00000");
    }

    #[test]
    fn home_while_a_new_filter_loads_lands_on_the_first_row() {
        let (mut app, mut server) = paged_app(1000);
        for _ in 0..5 {
            app.update(ch('j'), ts(0));
        }
        app.update(ch('/'), ts(0));
        let cmds = app.update(ch('h'), ts(0));
        app.update(key(KeyCode::Enter), ts(0));
        assert!(app.update(key(KeyCode::Home), ts(0)).is_empty());
        server.serve(&mut app, cmds);
        assert_eq!(selected(&app), "h00000", "not the seat selected before");
    }

    #[test]
    fn the_filter_is_the_servers_q_sent_once_typing_pauses() {
        let (mut app, mut server) = paged_app(1000);
        app.update(ch('/'), ts(0));
        let mut last = None;
        for c in "h0042".chars() {
            let cmds = app.update(ch(c), ts(0));
            let r = only_fetch(&cmds);
            assert_eq!(r.delay_ms, FILTER_DEBOUNCE_MS, "debounced");
            last = Some(r.clone());
        }
        let last = last.unwrap();
        assert_eq!(last.q, "h0042");
        // Only the newest request counts: an older answer is dropped.
        let stale = PageRequest {
            id: last.id - 1,
            ..last.clone()
        };
        let shown = app.seats.len();
        app.update(server.answer(&stale), ts(0));
        assert_eq!(app.seats.len(), shown);
        server.serve(&mut app, vec![Command::FetchPage(last)]);
        let names: Vec<&str> = app.seats.iter().map(|s| s.holder.as_str()).collect();
        assert_eq!(
            names,
            [
                "h00420", "h00421", "h00422", "h00423", "h00424", "h00425", "h00426", "h00427",
                "h00428", "h00429"
            ]
        );
        assert_eq!(app.holder_counts(), (10, 1000), "matching of all");
        // Esc clears it at once.
        app.update(key(KeyCode::Enter), ts(0));
        let cmds = app.update(key(KeyCode::Esc), ts(0));
        assert_eq!(only_fetch(&cmds).delay_ms, 0);
        assert_eq!(only_fetch(&cmds).q, "");
    }

    #[test]
    fn sort_columns_map_onto_the_servers_sorts() {
        let mut app = App::new("s", false, false);
        let mut seen = Vec::new();
        for _ in 0..SortKey::ALL.len() {
            for k in ['s', 'S'] {
                let cmds = app.update(ch(k), ts(0));
                let (_, sort, desc, after) = ask(&cmds[0]);
                assert_eq!(after, None, "a new order starts at the top");
                seen.push((app.sort.label(), sort, desc));
            }
        }
        assert_eq!(
            seen,
            [
                ("holder", "holder", false),
                ("holder", "holder", true),
                ("held for", "checked_out_at", true),
                ("held for", "checked_out_at", false),
                ("expires in", "expires_at", false),
                ("expires in", "expires_at", true),
                ("license", "license", false),
                ("license", "license", true),
            ]
        );
    }

    #[test]
    fn a_burst_of_events_makes_one_coalesced_refetch() {
        let (mut app, mut server) = paged_app(300);
        let t = |ms: i64| Timestamp::from_millis(ts(10).as_millis() + ms);
        let mut cmds = Vec::new();
        for i in 0..50 {
            let mut ev = event(i + 1, EventKind::Checkout);
            ev.at = t(i);
            cmds.extend(app.update(AppEvent::StreamEvent(Box::new(ev)), t(i)));
        }
        let r = only_fetch(&cmds).clone();
        assert_eq!(r.delay_ms, 0, "the first load was long ago");
        assert_eq!(r.after, None, "the same window again");
        // Events that do not change seats cause nothing.
        assert!(
            app.update(
                AppEvent::StreamEvent(Box::new(event(99, EventKind::Denied))),
                t(60)
            )
            .is_empty()
        );
        // Events during the load make one more, EVENT_GAP_MS after the first.
        let first = server.answer(&r);
        let second = app.update(first, t(100));
        assert_eq!(second.len(), 1, "the second page");
        let Command::FetchPage(r2) = &second[0] else {
            panic!()
        };
        let done = server.answer(r2);
        let again = app.update(done, t(120));
        let r3 = only_fetch(&again);
        assert_eq!(r3.delay_ms, (EVENT_GAP_MS - 120) as u64);
        // Nothing more until that one is answered.
        assert!(
            app.update(
                AppEvent::StreamEvent(Box::new(event(100, EventKind::Release))),
                t(130)
            )
            .is_empty()
        );
    }

    #[test]
    fn an_expensive_load_makes_the_next_wait_longer() {
        let (mut app, mut server) = paged_app(150);
        let t = |ms: i64| Timestamp::from_millis(ts(100).as_millis() + ms);
        let cmds = app.update(
            AppEvent::StreamEvent(Box::new(event(1, EventKind::Checkout))),
            t(0),
        );
        // Both pages took 300 ms (a filter scanning 100,000 seats).
        let mut cmds = cmds;
        while let [Command::FetchPage(r)] = cmds.as_slice() {
            let AppEvent::Page(mut reply) = server.answer(r) else {
                unreachable!()
            };
            reply.elapsed_ms = 150;
            cmds = app.update(AppEvent::Page(reply), t(300));
        }
        let cmds = app.update(
            AppEvent::StreamEvent(Box::new(event(2, EventKind::Release))),
            t(400),
        );
        assert_eq!(only_fetch(&cmds).delay_ms, 50 * 300 - 400);
    }

    #[test]
    fn failed_loads_are_retried_less_and_less_often() {
        let (mut app, mut server) = paged_app(10);
        let at = |ms: i64| Timestamp::from_millis(ts(0).as_millis() + ms);
        let mut now = 10_000;
        let mut cmds = app.update(
            AppEvent::StreamEvent(Box::new(event(2, EventKind::Release))),
            at(now),
        );
        let mut waits = Vec::new();
        for _ in 0..6 {
            let req = only_fetch(&cmds);
            now += req.delay_ms as i64;
            let failed = AppEvent::PageFailed {
                id: req.id,
                error: "connection refused".into(),
            };
            app.update(failed, at(now));
            cmds = app.update(AppEvent::Tick, at(now));
            waits.push(only_fetch(&cmds).delay_ms);
        }
        assert_eq!(waits, [500, 1000, 2000, 4000, 8000, 10_000]);
        // Once pages arrive again, loads are as frequent as before.
        now += only_fetch(&cmds).delay_ms as i64;
        app.update(AppEvent::Tick, at(now));
        server.serve(&mut app, cmds);
        let cmds = app.update(
            AppEvent::StreamEvent(Box::new(event(3, EventKind::Release))),
            at(now + 600),
        );
        assert_eq!(only_fetch(&cmds).delay_ms, 0);
    }

    #[test]
    fn ticks_refresh_the_window_now_and_then() {
        let (mut app, _) = paged_app(10);
        let period = app.refresh_period_ms();
        assert_eq!(period, REFRESH_MAX_MS, "no licenses known: the longest");
        let at = |ms: i64| Timestamp::from_millis(ts(0).as_millis() + ms);
        assert!(app.update(AppEvent::Tick, at(1000)).is_empty());
        assert_eq!(app.update(AppEvent::Tick, at(period)).len(), 1);
        let mut fast = pool("fast", 3, 1);
        fast.ttl_s = 12.0;
        load(
            &mut app,
            vec![],
            vec![pool("slow", 3, 1), fast],
            ts(0),
            ts(0),
        );
        assert_eq!(
            app.refresh_period_ms(),
            3_000,
            "a quarter of the shortest TTL"
        );
    }

    #[test]
    fn revoke_from_a_later_page() {
        let (mut app, mut server) = paged_app(1000);
        for _ in 0..8 {
            let cmds = app.update(key(KeyCode::PageDown), ts(0));
            server.serve(&mut app, cmds);
        }
        let target = app.selected_seat().unwrap().clone();
        assert!(target.holder.as_str() > "h00150", "{}", target.holder);
        app.update(ch('r'), ts(0));
        assert!(matches!(&app.modal, Some(Modal::Revoke(m)) if m.holder == target.holder));
        let cmds = app.update(ch('y'), ts(0));
        assert_eq!(
            cmds,
            vec![Command::Revoke {
                seat_id: target.seat_id.clone(),
                holder: target.holder.clone(),
                reason: None,
                block_s: None,
                force: false,
            }]
        );
        let cmds = app.update(
            AppEvent::RevokeDone {
                seat_id: target.seat_id.clone(),
                holder: target.holder.clone(),
                outcome: super::super::RevokeOutcome::Revoked,
            },
            ts(1),
        );
        assert!(app.seats.iter().all(|s| s.seat_id != target.seat_id));
        assert_eq!(cmds[0], Command::Refresh);
        let (_, _, _, after) = ask(&cmds[1]);
        assert!(after.is_some(), "the same (later) window again");
    }

    #[test]
    fn freeze_holds_refreshes_but_not_navigation() {
        let (mut app, mut server) = paged_app(1000);
        app.update(ch('f'), ts(0));
        let ev = AppEvent::StreamEvent(Box::new(event(1, EventKind::Checkout)));
        assert!(app.update(ev, ts(5)).is_empty(), "no refresh while frozen");
        assert!(app.update(AppEvent::Tick, ts(60)).is_empty());
        let cmds = app.update(ch('f'), ts(61));
        assert_eq!(cmds.len(), 1, "resuming refreshes");
        server.serve(&mut app, cmds);
        app.update(ch('f'), ts(62));
        for _ in 0..8 {
            let cmds = app.update(key(KeyCode::PageDown), ts(62));
            server.serve(&mut app, cmds);
        }
        assert_eq!(selected(&app), "h00160", "scrolling still pages");
    }

    #[test]
    fn selection_follows_the_seat_when_rows_arrive_above_it() {
        let (mut app, mut server) = paged_app(300);
        for _ in 0..5 {
            app.update(ch('j'), ts(0));
        }
        assert_eq!(selected(&app), "h00005");
        server.seats.insert(0, seat("p", "a-new", "ff", 0, 60));
        let cmds = app.start_load(Goal::Refresh, 0);
        server.serve(&mut app, cmds);
        assert_eq!(selected(&app), "h00005");
        assert_eq!(app.seats[0].holder, "a-new");
    }
}
