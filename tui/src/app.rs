//! The console's state and every rule that changes it, with no I/O.
//!
//! [`App::update`] takes one [`AppEvent`] (a key, a tick, a snapshot from the
//! poller, an event from the SSE stream, the outcome of a revoke) together
//! with the local time, changes the state, and returns the [`Command`]s the
//! event loop must carry out (revoke a seat, refresh now). Nothing here talks
//! to the network or reads the clock, so the unit tests below drive the whole
//! console by hand, and `ui.rs` draws only from this state.
//!
//! Every string that came from the server is passed through
//! [`sanitize_for_terminal`] on the way in ([`App::update`]), so no holder
//! name or event detail can reach the terminal with an escape sequence in it.
//!
//! Countdowns are computed against the *server's* clock: each snapshot carries
//! the server's `now`, and [`App::server_now`] is the local clock plus the
//! offset measured at the last snapshot. A console on a laptop whose clock is
//! two minutes off still shows the right "expires in".

use std::collections::{HashMap, VecDeque};
use std::time::Duration;

use crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use leasehold_common::api::{
    Event, LicenseSummary, LicensesResponse, SeatState, SeatView, SeatsResponse,
};
use leasehold_common::text::{REASON_MAX_CHARS, is_unsafe_char, sanitize_for_terminal};

use crate::format::short_id;
use leasehold_common::{Timestamp, is_live};

/// How many events the feed keeps (newest first).
pub const EVENT_CAP: usize = 1000;
/// How long a status message stays on screen, in milliseconds.
pub const MESSAGE_MS: i64 = 10_000;

/// Everything the event loop feeds into [`App::update`].
#[derive(Debug, Clone)]
pub enum AppEvent {
    Key(KeyEvent),
    /// The 1 Hz tick: countdowns move, old messages fade.
    Tick,
    /// The terminal was resized (the loop recomputes the page size).
    Resize,
    /// A successful poll of licenses + seats.
    Snapshot(Box<Snapshot>),
    /// A poll failed; `error` is the one-line reason.
    PollFailed {
        error: String,
    },
    /// The SSE stream is (re)connected.
    StreamUp,
    /// One event from the SSE stream.
    StreamEvent(Box<Event>),
    /// The SSE stream broke; the loop retries with backoff.
    StreamDown {
        error: String,
    },
    /// The outcome of a [`Command::Revoke`].
    RevokeDone {
        seat_id: String,
        holder: String,
        outcome: RevokeOutcome,
    },
}

/// One poll: both responses, and the local time the answer arrived.
#[derive(Debug, Clone)]
pub struct Snapshot {
    pub licenses: LicensesResponse,
    pub seats: SeatsResponse,
    pub received_at: Timestamp,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RevokeOutcome {
    Revoked,
    /// 404 `unknown_seat`: released, reaped or revoked by someone else.
    Vanished,
    Failed(String),
}

/// Work for the event loop; the app never performs it inline.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    Revoke {
        seat_id: String,
        holder: String,
        reason: Option<String>,
    },
    /// Poll now instead of waiting for the next second.
    Refresh,
}

/// State of one connection (the poller or the event stream).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Link {
    Connecting,
    Up,
    Down {
        /// Local time of the first failure in this outage.
        since: Timestamp,
        failures: u32,
        error: String,
    },
}

impl Link {
    fn fail(&mut self, now: Timestamp, error: String) {
        *self = match std::mem::replace(self, Link::Connecting) {
            Link::Down {
                since, failures, ..
            } => Link::Down {
                since,
                failures: failures + 1,
                error,
            },
            _ => Link::Down {
                since: now,
                failures: 1,
                error,
            },
        };
    }

    pub fn is_down(&self) -> bool {
        matches!(self, Link::Down { .. })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pane {
    Holders,
    Events,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SortKey {
    License,
    Holder,
    HeldFor,
    ExpiresIn,
    State,
}

impl SortKey {
    pub const ALL: [SortKey; 5] = [
        SortKey::License,
        SortKey::Holder,
        SortKey::HeldFor,
        SortKey::ExpiresIn,
        SortKey::State,
    ];

    pub fn label(self) -> &'static str {
        match self {
            SortKey::License => "license",
            SortKey::Holder => "holder",
            SortKey::HeldFor => "held for",
            SortKey::ExpiresIn => "expires in",
            SortKey::State => "state",
        }
    }

    fn next(self) -> SortKey {
        let i = SortKey::ALL.iter().position(|&k| k == self).unwrap_or(0);
        SortKey::ALL[(i + 1) % SortKey::ALL.len()]
    }
}

/// How a seat looks on screen, derived from the server's state and the
/// countdown against the server clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RowState {
    /// Live and renewed recently.
    Live,
    /// Live, but less than a third of its TTL left: its holder has missed
    /// heartbeats (a healthy client renews every third of the window).
    Expiring,
    /// Past expiry + skew (by the server's word or by the countdown): the
    /// seat no longer counts and the reaper will take it.
    Lapsed,
}

impl RowState {
    pub fn word(self) -> &'static str {
        match self {
            RowState::Live => "live",
            RowState::Expiring => "expiring",
            RowState::Lapsed => "lapsed",
        }
    }

    pub fn glyph(self) -> &'static str {
        match self {
            RowState::Live => "●",
            RowState::Expiring => "▲",
            RowState::Lapsed => "✗",
        }
    }
}

/// Policy numbers the console needs per license.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PoolPolicy {
    pub ttl: Duration,
    pub skew: Duration,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RevokeModal {
    pub seat_id: String,
    pub holder: String,
    pub license_id: String,
    pub fingerprint: Option<String>,
    pub reason: String,
    /// Typing goes into the reason field (otherwise `y`/`n` answer).
    pub editing_reason: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Modal {
    Help,
    Revoke(RevokeModal),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    Info,
    Success,
    Warn,
    Error,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    pub text: String,
    pub level: Level,
    /// Local time it was posted; the UI hides it after [`MESSAGE_MS`].
    pub at: Timestamp,
}

/// The whole state of the console.
#[derive(Debug)]
pub struct App {
    pub server: String,
    pub read_only: bool,
    pub no_color: bool,

    pub licenses: Vec<LicenseSummary>,
    policies: HashMap<String, PoolPolicy>,
    /// All seats of the last snapshot (strings sanitized).
    pub seats: Vec<SeatView>,
    /// Per seat: the filter's search text, the holder sort key, widths.
    search_keys: Vec<SeatKey>,
    /// Indices into `seats` after filter and sort: the rows on screen.
    pub view: Vec<usize>,
    /// Longest license id, holder and fingerprint (in chars) among `view`,
    /// kept with it so a frame does not walk every row.
    view_widths: [usize; 3],
    /// Newest first, at most [`EVENT_CAP`].
    pub events: VecDeque<Event>,
    pub last_event_id: Option<i64>,

    pub filter: String,
    pub filter_editing: bool,
    pub sort: SortKey,
    pub sort_desc: bool,
    pub pane: Pane,
    /// Selected row (index into `view`) and the first row shown.
    pub selected: usize,
    pub scroll: usize,
    /// Seat id of the selected row, so the selection follows the seat across
    /// refreshes and re-sorts.
    selected_seat: Option<String>,
    /// Rows the holders table shows (set from the terminal size).
    pub page_rows: usize,
    /// First event shown (0 = newest).
    pub event_scroll: usize,
    pub event_page_rows: usize,

    pub frozen: bool,
    pending_snapshot: Option<Box<Snapshot>>,
    pending_events: Vec<Event>,

    pub modal: Option<Modal>,
    pub message: Option<Message>,
    /// Local time used for messages posted from key handlers (the time of
    /// the last event handled).
    last_now: Timestamp,

    pub poll: Link,
    pub stream: Link,
    /// Server clock minus local clock, in milliseconds, at the last snapshot.
    pub clock_offset_ms: i64,
    /// Server time of the last applied snapshot, and the local time it arrived.
    pub last_update: Option<(Timestamp, Timestamp)>,
    pub should_quit: bool,
}

impl App {
    pub fn new(server: &str, read_only: bool, no_color: bool) -> Self {
        App {
            server: sanitize_for_terminal(server).into_owned(),
            read_only,
            no_color,
            licenses: Vec::new(),
            policies: HashMap::new(),
            seats: Vec::new(),
            search_keys: Vec::new(),
            view: Vec::new(),
            view_widths: [0; 3],
            events: VecDeque::new(),
            last_event_id: None,
            filter: String::new(),
            filter_editing: false,
            sort: SortKey::License,
            sort_desc: false,
            pane: Pane::Holders,
            selected: 0,
            scroll: 0,
            selected_seat: None,
            page_rows: 20,
            event_scroll: 0,
            event_page_rows: 8,
            frozen: false,
            pending_snapshot: None,
            pending_events: Vec::new(),
            modal: None,
            message: None,
            last_now: Timestamp::from_millis(0),
            poll: Link::Connecting,
            stream: Link::Connecting,
            clock_offset_ms: 0,
            last_update: None,
            should_quit: false,
        }
    }

    /// The server's clock, estimated from the local one.
    pub fn server_now(&self, local_now: Timestamp) -> Timestamp {
        Timestamp::from_millis(local_now.as_millis().saturating_add(self.clock_offset_ms))
    }

    pub fn policy(&self, license_id: &str) -> Option<PoolPolicy> {
        self.policies.get(license_id).copied()
    }

    /// The longest license id, holder and fingerprint (`—` counts 1) among
    /// the filtered rows, in characters (0 when there are none).
    pub fn column_widths(&self) -> [usize; 3] {
        self.view_widths
    }

    /// The seat under the cursor, if any.
    pub fn selected_seat(&self) -> Option<&SeatView> {
        self.view.get(self.selected).map(|&i| &self.seats[i])
    }

    /// How a seat looks at `server_now`. Uses the one liveness predicate of
    /// `leasehold-common` with the license's skew.
    pub fn row_state(&self, seat: &SeatView, server_now: Timestamp) -> RowState {
        let policy = self.policy(&seat.license_id);
        let skew = policy.map(|p| p.skew).unwrap_or_default();
        if seat.state == SeatState::Lapsed || !is_live(seat.expires_at, server_now, skew) {
            return RowState::Lapsed;
        }
        let ttl_ms = policy.map(|p| p.ttl.as_millis() as i64).unwrap_or(30_000);
        let left = seat.expires_at.millis_since(server_now);
        if left < ttl_ms / 3 {
            RowState::Expiring
        } else {
            RowState::Live
        }
    }

    /// Set how many rows the holders table and the event feed show.
    pub fn set_page_rows(&mut self, holders: usize, events: usize) {
        self.page_rows = holders.max(1);
        self.event_page_rows = events.max(1);
        self.ensure_visible();
    }

    /// Apply one event at local time `now`; returns the work to do.
    pub fn update(&mut self, event: AppEvent, now: Timestamp) -> Vec<Command> {
        self.last_now = now;
        match event {
            AppEvent::Key(key) => return self.on_key(key).into_iter().collect(),
            AppEvent::Tick | AppEvent::Resize => {}
            AppEvent::Snapshot(snap) => {
                self.poll = Link::Up;
                self.clock_offset_ms = snap.seats.now.millis_since(snap.received_at);
                if self.frozen {
                    self.pending_snapshot = Some(snap);
                } else {
                    self.apply_snapshot(*snap);
                }
            }
            AppEvent::PollFailed { error } => {
                self.poll
                    .fail(now, sanitize_for_terminal(&error).into_owned());
            }
            AppEvent::StreamUp => self.stream = Link::Up,
            AppEvent::StreamDown { error } => {
                self.stream
                    .fail(now, sanitize_for_terminal(&error).into_owned());
            }
            AppEvent::StreamEvent(ev) => {
                if self.frozen {
                    self.pending_events.push(*ev);
                } else {
                    self.push_event(*ev);
                }
            }
            AppEvent::RevokeDone {
                seat_id,
                holder,
                outcome,
            } => return self.on_revoke_done(&seat_id, &holder, outcome, now),
        }
        Vec::new()
    }

    fn apply_snapshot(&mut self, snap: Snapshot) {
        self.last_update = Some((snap.seats.now, snap.received_at));
        self.licenses = snap
            .licenses
            .licenses
            .into_iter()
            .map(|mut l| {
                l.id = sanitize_for_terminal(&l.id).into_owned();
                l
            })
            .collect();
        self.policies = self
            .licenses
            .iter()
            .map(|l| {
                let policy = PoolPolicy {
                    ttl: secs(l.ttl_s),
                    skew: secs(l.skew_s),
                };
                (l.id.clone(), policy)
            })
            .collect();
        self.seats = snap.seats.seats.into_iter().map(sanitize_seat).collect();
        self.search_keys = self.seats.iter().map(search_key).collect();
        self.rebuild_view();
    }

    /// Add an event from the stream unless it was seen already (ids are
    /// strictly increasing, so anything at or below the last id is a replay).
    fn push_event(&mut self, ev: Event) {
        if self.last_event_id.is_some_and(|last| ev.id <= last) {
            return;
        }
        self.last_event_id = Some(ev.id);
        self.events.push_front(sanitize_event(ev));
        self.events.truncate(EVENT_CAP);
        // Keep the admin's place when scrolled back in the feed.
        if self.event_scroll > 0 {
            self.event_scroll = (self.event_scroll + 1).min(self.events.len().saturating_sub(1));
        }
    }

    fn on_revoke_done(
        &mut self,
        seat_id: &str,
        holder: &str,
        outcome: RevokeOutcome,
        now: Timestamp,
    ) -> Vec<Command> {
        let who = format!(
            "{} (seat {})",
            sanitize_for_terminal(holder),
            short_id(seat_id)
        );
        let (text, level) = match outcome {
            RevokeOutcome::Revoked => (format!("revoked {who}"), Level::Success),
            RevokeOutcome::Vanished => (
                format!("{who} was already gone: released, reaped or revoked meanwhile"),
                Level::Warn,
            ),
            RevokeOutcome::Failed(err) => (
                format!("revoke of {who} failed: {}", sanitize_for_terminal(&err)),
                Level::Error,
            ),
        };
        let gone = level != Level::Error;
        self.message = Some(Message {
            text,
            level,
            at: now,
        });
        if gone {
            // Take it off the screen now; the refresh confirms.
            if let Some(pos) = self.seats.iter().position(|s| s.seat_id == seat_id) {
                self.seats.remove(pos);
                self.search_keys.remove(pos);
                self.rebuild_view();
            }
            return vec![Command::Refresh];
        }
        Vec::new()
    }

    fn post(&mut self, text: impl Into<String>, level: Level) {
        self.message = Some(Message {
            text: text.into(),
            level,
            at: self.last_now,
        });
    }

    /// Recompute the visible rows from filter and sort, keeping the
    /// selection on the same seat when it is still there.
    fn rebuild_view(&mut self) {
        let needle = self.filter.to_lowercase();
        let mut view: Vec<usize> = if needle.is_empty() {
            (0..self.seats.len()).collect()
        } else {
            self.search_keys
                .iter()
                .enumerate()
                .filter(|(_, k)| k.search.contains(&needle))
                .map(|(i, _)| i)
                .collect()
        };
        let seats = &self.seats;
        let keys = &self.search_keys;
        let sort = self.sort;
        let compare = |a: usize, b: usize| {
            let (x, y) = (&seats[a], &seats[b]);
            let primary = match sort {
                SortKey::License => x
                    .license_id
                    .cmp(&y.license_id)
                    .then_with(|| x.holder.cmp(&y.holder)),
                SortKey::Holder => keys[a]
                    .holder_lower()
                    .cmp(keys[b].holder_lower())
                    .then_with(|| x.license_id.cmp(&y.license_id)),
                // Shortest-held first: the latest checkout.
                SortKey::HeldFor => y.checked_out_at.cmp(&x.checked_out_at),
                SortKey::ExpiresIn => x.expires_at.cmp(&y.expires_at),
                // Lapsed first, then the soonest to expire.
                SortKey::State => state_rank(x.state)
                    .cmp(&state_rank(y.state))
                    .then_with(|| x.expires_at.cmp(&y.expires_at)),
            };
            primary.then_with(|| x.seat_id.cmp(&y.seat_id))
        };
        // Sort compact stand-ins that order like the start of the key, held
        // side by side, and compare the seats themselves only on a tie: with
        // 100,000 rows the comparisons would otherwise chase pointers into
        // every seat's strings (see tui/benches/render.rs).
        let mut decorated: Vec<([u128; 3], usize)> = view
            .iter()
            .map(|&i| (sort_prefix(sort, &seats[i], &keys[i]), i))
            .collect();
        decorated.sort_unstable_by(|x, y| x.0.cmp(&y.0).then_with(|| compare(x.1, y.1)));
        view.clear();
        view.extend(decorated.iter().map(|d| d.1));
        if self.sort_desc {
            view.reverse();
        }
        let mut widths = [0; 3];
        for &i in &view {
            for (w, k) in widths.iter_mut().zip(keys[i].widths) {
                *w = (*w).max(k);
            }
        }
        self.view_widths = widths;
        self.selected = match &self.selected_seat {
            Some(id) => {
                // Scan the seats in memory order, then find the hit's row.
                let hits: Vec<usize> = seats
                    .iter()
                    .enumerate()
                    .filter(|(_, s)| &s.seat_id == id)
                    .map(|(i, _)| i)
                    .collect();
                view.iter()
                    .position(|i| hits.contains(i))
                    .unwrap_or(self.selected)
            }
            None => self.selected,
        };
        self.view = view;
        self.ensure_visible();
    }

    /// Clamp selection and scroll so the selected row is on screen.
    fn ensure_visible(&mut self) {
        let n = self.view.len();
        if n == 0 {
            self.selected = 0;
            self.scroll = 0;
        } else {
            self.selected = self.selected.min(n - 1);
            if self.selected < self.scroll {
                self.scroll = self.selected;
            } else if self.selected >= self.scroll + self.page_rows {
                self.scroll = self.selected + 1 - self.page_rows;
            }
            self.scroll = self.scroll.min(n.saturating_sub(self.page_rows));
        }
        self.selected_seat = self.selected_seat().map(|s| s.seat_id.clone());
        self.event_scroll = self.event_scroll.min(self.events.len().saturating_sub(1));
    }

    fn move_by(&mut self, delta: isize) {
        match self.pane {
            Pane::Holders => {
                self.selected = self.selected.saturating_add_signed(delta);
            }
            Pane::Events => {
                self.event_scroll = self.event_scroll.saturating_add_signed(delta);
            }
        }
        self.ensure_visible();
    }

    fn move_to_end(&mut self, end: bool) {
        match self.pane {
            Pane::Holders => self.selected = if end { usize::MAX } else { 0 },
            Pane::Events => self.event_scroll = if end { usize::MAX } else { 0 },
        }
        self.ensure_visible();
    }

    fn page(&self) -> isize {
        match self.pane {
            Pane::Holders => self.page_rows.max(1) as isize,
            Pane::Events => self.event_page_rows.max(1) as isize,
        }
    }

    /// Handle one key. Pure: changes state, returns at most one command.
    pub fn on_key(&mut self, key: KeyEvent) -> Option<Command> {
        if key.kind == KeyEventKind::Release {
            return None;
        }
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        if ctrl && matches!(key.code, KeyCode::Char('c') | KeyCode::Char('q')) {
            self.should_quit = true;
            return None;
        }
        match self.modal.take() {
            Some(Modal::Help) => {
                // Any key closes the help.
                return None;
            }
            Some(Modal::Revoke(m)) => return self.on_revoke_key(m, key),
            None => {}
        }
        if self.filter_editing {
            self.on_filter_key(key);
            return None;
        }
        match key.code {
            KeyCode::Char('q') => self.should_quit = true,
            KeyCode::Char('?') => self.modal = Some(Modal::Help),
            KeyCode::Down | KeyCode::Char('j') => self.move_by(1),
            KeyCode::Up | KeyCode::Char('k') => self.move_by(-1),
            KeyCode::PageDown => self.move_by(self.page()),
            KeyCode::PageUp => self.move_by(-self.page()),
            KeyCode::Char('d') if ctrl => self.move_by(self.page()),
            KeyCode::Char('u') if ctrl => self.move_by(-self.page()),
            KeyCode::Home | KeyCode::Char('g') => self.move_to_end(false),
            KeyCode::End | KeyCode::Char('G') => self.move_to_end(true),
            KeyCode::Tab | KeyCode::BackTab => {
                self.pane = match self.pane {
                    Pane::Holders => Pane::Events,
                    Pane::Events => Pane::Holders,
                }
            }
            KeyCode::Char('/') => {
                self.filter_editing = true;
                self.pane = Pane::Holders;
            }
            KeyCode::Esc => {
                if !self.filter.is_empty() {
                    self.filter.clear();
                    self.rebuild_view();
                } else {
                    self.message = None;
                }
            }
            KeyCode::Char('s') => {
                self.sort = self.sort.next();
                self.sort_desc = false;
                self.rebuild_view();
            }
            KeyCode::Char('S') => {
                self.sort_desc = !self.sort_desc;
                self.rebuild_view();
            }
            KeyCode::Char('f') => self.toggle_freeze(),
            KeyCode::Char('R') => return Some(Command::Refresh),
            KeyCode::Char('r') => self.open_revoke(),
            _ => {}
        }
        None
    }

    fn toggle_freeze(&mut self) {
        self.frozen = !self.frozen;
        if self.frozen {
            self.post("frozen: updates are held back (f to resume)", Level::Info);
        } else {
            if let Some(snap) = self.pending_snapshot.take() {
                self.apply_snapshot(*snap);
            }
            for ev in std::mem::take(&mut self.pending_events) {
                self.push_event(ev);
            }
            self.post("resumed live updates", Level::Info);
        }
    }

    fn open_revoke(&mut self) {
        if self.read_only {
            self.post("read-only console: revoke is disabled", Level::Warn);
            return;
        }
        if self.pane != Pane::Holders {
            self.post(
                "select a seat in the holders table to revoke it",
                Level::Info,
            );
            return;
        }
        let Some(seat) = self.selected_seat() else {
            self.post("no seat selected", Level::Info);
            return;
        };
        self.modal = Some(Modal::Revoke(RevokeModal {
            seat_id: seat.seat_id.clone(),
            holder: seat.holder.clone(),
            license_id: seat.license_id.clone(),
            fingerprint: seat.fingerprint.clone(),
            reason: String::new(),
            editing_reason: false,
        }));
    }

    fn on_revoke_key(&mut self, mut m: RevokeModal, key: KeyEvent) -> Option<Command> {
        let confirm = match key.code {
            KeyCode::Esc => false,
            KeyCode::Enter => true,
            KeyCode::Tab | KeyCode::BackTab => {
                m.editing_reason = !m.editing_reason;
                self.modal = Some(Modal::Revoke(m));
                return None;
            }
            KeyCode::Backspace if m.editing_reason => {
                m.reason.pop();
                self.modal = Some(Modal::Revoke(m));
                return None;
            }
            KeyCode::Char('u')
                if m.editing_reason && key.modifiers.contains(KeyModifiers::CONTROL) =>
            {
                m.reason.clear();
                self.modal = Some(Modal::Revoke(m));
                return None;
            }
            KeyCode::Char(c) if m.editing_reason => {
                if !is_unsafe_char(c) && m.reason.chars().count() < REASON_MAX_CHARS {
                    m.reason.push(c);
                }
                self.modal = Some(Modal::Revoke(m));
                return None;
            }
            KeyCode::Char('y') | KeyCode::Char('Y') => true,
            KeyCode::Char('n') | KeyCode::Char('N') => false,
            _ => {
                // Any other key leaves the modal open.
                self.modal = Some(Modal::Revoke(m));
                return None;
            }
        };
        if !confirm {
            self.post("revoke cancelled", Level::Info);
            return None;
        }
        let reason = m.reason.trim();
        self.post(
            format!("revoking {} (seat {})…", m.holder, short_id(&m.seat_id)),
            Level::Info,
        );
        Some(Command::Revoke {
            seat_id: m.seat_id.clone(),
            holder: m.holder.clone(),
            reason: (!reason.is_empty()).then(|| reason.to_string()),
        })
    }

    fn on_filter_key(&mut self, key: KeyEvent) {
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        match key.code {
            KeyCode::Esc => {
                self.filter_editing = false;
                self.filter.clear();
            }
            KeyCode::Enter => self.filter_editing = false,
            KeyCode::Backspace => {
                self.filter.pop();
            }
            KeyCode::Char('u') if ctrl => self.filter.clear(),
            KeyCode::Down => return self.move_by(1),
            KeyCode::Up => return self.move_by(-1),
            KeyCode::Char(c) if !ctrl && !is_unsafe_char(c) => self.filter.push(c),
            _ => return,
        }
        self.rebuild_view();
    }
}

fn state_rank(s: SeatState) -> u8 {
    match s {
        SeatState::Lapsed => 0,
        SeatState::Live => 1,
    }
}

fn secs(s: f64) -> Duration {
    if s.is_finite() && s > 0.0 {
        Duration::from_secs_f64(s.min(1e9))
    } else {
        Duration::ZERO
    }
}

fn clean(s: String) -> String {
    // Printable ASCII is never unsafe: skip the per-char Unicode checks.
    if s.bytes().all(|b| (0x20..0x7f).contains(&b)) {
        return s;
    }
    match sanitize_for_terminal(&s) {
        std::borrow::Cow::Borrowed(_) => s,
        std::borrow::Cow::Owned(o) => o,
    }
}

fn sanitize_seat(mut s: SeatView) -> SeatView {
    s.license_id = clean(s.license_id);
    s.seat_id = clean(s.seat_id);
    s.holder = clean(s.holder);
    s.fingerprint = s.fingerprint.map(clean);
    s
}

fn sanitize_event(mut e: Event) -> Event {
    e.license_id = e.license_id.map(clean);
    e.seat_id = e.seat_id.map(clean);
    e.holder = e.holder.map(clean);
    e.detail = e.detail.map(clean);
    e
}

/// What filter, sort and column widths need of one seat, made once per
/// snapshot.
#[derive(Debug)]
struct SeatKey {
    /// Lower-cased "license␟holder␟fingerprint␟seat", for the filter.
    search: String,
    /// Where the lower-cased holder sits in `search`, for the holder sort.
    holder: std::ops::Range<usize>,
    /// Characters in the license id, the holder and the fingerprint (`—`,
    /// shown for none, counts 1).
    widths: [usize; 3],
}

impl SeatKey {
    fn holder_lower(&self) -> &str {
        &self.search[self.holder.clone()]
    }
}

fn search_key(s: &SeatView) -> SeatKey {
    let fingerprint = s.fingerprint.as_deref().unwrap_or("");
    let mut search = String::with_capacity(
        s.license_id.len() + s.holder.len() + fingerprint.len() + s.seat_id.len() + 3,
    );
    // Part by part is the same as lower-casing the joined string: the
    // separator is neither cased nor case-ignorable, so it ends the context
    // of a final sigma just as the end of the string does.
    let push_lower = |out: &mut String, part: &str| {
        if part.is_ascii() {
            let from = out.len();
            out.push_str(part);
            out[from..].make_ascii_lowercase();
        } else {
            out.push_str(&part.to_lowercase());
        }
    };
    push_lower(&mut search, &s.license_id);
    search.push('\u{1f}');
    let start = search.len();
    push_lower(&mut search, &s.holder);
    let holder = start..search.len();
    search.push('\u{1f}');
    push_lower(&mut search, fingerprint);
    search.push('\u{1f}');
    push_lower(&mut search, &s.seat_id);
    let widths = [
        s.license_id.chars().count(),
        s.holder.chars().count(),
        s.fingerprint.as_deref().map_or(1, |f| f.chars().count()),
    ];
    SeatKey {
        search,
        holder,
        widths,
    }
}

/// Numbers that order seats like the start of the `sort` key does (a < b
/// here implies a < b there; ties say nothing). A string field is followed
/// by the next one only when its prefix holds all of it; otherwise by
/// `u128::MAX` (never a prefix of UTF-8: no 0xFF byte), which orders it
/// after every complete string with the same prefix, as its length does.
fn sort_prefix(sort: SortKey, s: &SeatView, k: &SeatKey) -> [u128; 3] {
    let (seat, holder) = (s.seat_id.as_bytes(), s.holder.as_bytes());
    match sort {
        SortKey::License => {
            let license = s.license_id.as_bytes();
            if fits(license, 16) {
                [
                    str_prefix(license),
                    str_prefix(holder),
                    str_prefix(holder.get(16..).unwrap_or_default()),
                ]
            } else {
                [str_prefix(license), u128::MAX, u128::MAX]
            }
        }
        SortKey::Holder => {
            let lower = k.holder_lower().as_bytes();
            let license = if fits(lower, 32) {
                str_prefix(s.license_id.as_bytes())
            } else {
                u128::MAX
            };
            [
                str_prefix(lower),
                str_prefix(lower.get(16..).unwrap_or_default()),
                license,
            ]
        }
        SortKey::HeldFor => [
            u128::from(!time_order(s.checked_out_at)),
            str_prefix(seat),
            str_prefix(seat.get(16..).unwrap_or_default()),
        ],
        SortKey::ExpiresIn => [
            u128::from(time_order(s.expires_at)),
            str_prefix(seat),
            str_prefix(seat.get(16..).unwrap_or_default()),
        ],
        SortKey::State => [
            (u128::from(state_rank(s.state)) << 64) | u128::from(time_order(s.expires_at)),
            str_prefix(seat),
            str_prefix(seat.get(16..).unwrap_or_default()),
        ],
    }
}

/// Do the first `n` bytes, zero-padded, tell `s` apart from every other
/// string (no longer than `n`, no NUL that padding could stand for)?
fn fits(s: &[u8], n: usize) -> bool {
    s.len() <= n && !s.contains(&0)
}

/// The first 16 bytes, big-endian, zero-padded: orders like the bytes.
fn str_prefix(s: &[u8]) -> u128 {
    let mut buf = [0u8; 16];
    let n = s.len().min(16);
    buf[..n].copy_from_slice(&s[..n]);
    u128::from_be_bytes(buf)
}

/// Milliseconds as an unsigned number in the same order.
fn time_order(t: Timestamp) -> u64 {
    (t.as_millis() as u64) ^ (1 << 63)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub const T0: i64 = 1_796_011_200_000; // 2026-11-30T04:00:00Z

    pub fn ts(offset_s: i64) -> Timestamp {
        Timestamp::from_millis(T0 + offset_s * 1000)
    }

    pub fn key(code: KeyCode) -> AppEvent {
        AppEvent::Key(KeyEvent::new(code, KeyModifiers::NONE))
    }

    pub fn ch(c: char) -> AppEvent {
        key(KeyCode::Char(c))
    }

    pub fn seat(license: &str, holder: &str, id: &str, checked_out: i64, expires: i64) -> SeatView {
        SeatView {
            license_id: license.into(),
            seat_id: id.into(),
            holder: holder.into(),
            fingerprint: Some(format!("fp-{holder}")),
            checked_out_at: ts(checked_out),
            issued_at: ts(expires - 60),
            expires_at: ts(expires),
            state: SeatState::Live,
        }
    }

    pub fn pool(id: &str, seats: u32, live: u32) -> LicenseSummary {
        LicenseSummary {
            id: id.into(),
            seats,
            live,
            waiting: 0,
            ttl_s: 60.0,
            skew_s: 5.0,
            reap_grace_s: 15.0,
        }
    }

    /// A snapshot taken at server time `server_now`, received locally at
    /// `local_now`.
    pub fn snapshot(
        seats: Vec<SeatView>,
        pools: Vec<LicenseSummary>,
        server_now: Timestamp,
        local_now: Timestamp,
    ) -> AppEvent {
        AppEvent::Snapshot(Box::new(Snapshot {
            licenses: LicensesResponse {
                now: server_now,
                licenses: pools,
            },
            seats: SeatsResponse {
                now: server_now,
                seats,
            },
            received_at: local_now,
        }))
    }

    pub fn sample_seats() -> Vec<SeatView> {
        vec![
            seat(
                "demo-cad",
                "alice",
                "a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1",
                -3600,
                50,
            ),
            seat(
                "demo-cad",
                "bob",
                "b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2",
                -120,
                12,
            ),
            seat(
                "demo-cad",
                "carol",
                "c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3",
                -600,
                -8,
            ),
            seat(
                "render",
                "dave",
                "d4d4d4d4d4d4d4d4d4d4d4d4d4d4d4d4",
                -30,
                58,
            ),
        ]
    }

    pub fn loaded_app() -> App {
        let mut app = App::new("http://127.0.0.1:7400", false, false);
        app.update(
            snapshot(
                sample_seats(),
                vec![pool("demo-cad", 3, 2), pool("render", 5, 1)],
                ts(0),
                ts(0),
            ),
            ts(0),
        );
        app
    }

    fn holders(app: &App) -> Vec<&str> {
        app.view
            .iter()
            .map(|&i| app.seats[i].holder.as_str())
            .collect()
    }

    fn event(id: i64, kind: leasehold_common::api::EventKind) -> Event {
        Event {
            id,
            at: ts(id),
            kind,
            license_id: Some("demo-cad".into()),
            seat_id: Some("a1a1a1a1".into()),
            holder: Some("alice".into()),
            detail: None,
        }
    }

    #[test]
    fn snapshot_fills_the_view_sorted_by_license_then_holder() {
        let app = loaded_app();
        assert_eq!(holders(&app), ["alice", "bob", "carol", "dave"]);
        assert_eq!(app.poll, Link::Up);
        assert_eq!(app.licenses.len(), 2);
    }

    #[test]
    fn keys_move_the_selection_within_bounds() {
        let mut app = loaded_app();
        app.update(ch('j'), ts(0));
        app.update(key(KeyCode::Down), ts(0));
        assert_eq!(app.selected_seat().unwrap().holder, "carol");
        app.update(ch('G'), ts(0));
        assert_eq!(app.selected, 3);
        app.update(ch('j'), ts(0));
        assert_eq!(app.selected, 3, "stays on the last row");
        app.update(ch('g'), ts(0));
        app.update(ch('k'), ts(0));
        assert_eq!(app.selected, 0, "stays on the first row");
        app.update(key(KeyCode::PageDown), ts(0));
        assert_eq!(app.selected, 3);
    }

    #[test]
    fn selection_follows_the_seat_across_refreshes() {
        let mut app = loaded_app();
        app.update(ch('j'), ts(0)); // bob
        // A new snapshot where a seat before bob went away.
        let mut seats = sample_seats();
        seats.remove(0);
        app.update(snapshot(seats, vec![], ts(1), ts(1)), ts(1));
        assert_eq!(app.selected_seat().unwrap().holder, "bob");
    }

    #[test]
    fn scroll_keeps_the_selection_on_screen() {
        let mut app = App::new("s", false, false);
        let seats: Vec<_> = (0..100)
            .map(|i| seat("p", &format!("h{i:03}"), &format!("{i:032x}"), 0, 60))
            .collect();
        app.update(snapshot(seats, vec![], ts(0), ts(0)), ts(0));
        app.set_page_rows(10, 5);
        for _ in 0..15 {
            app.update(ch('j'), ts(0));
        }
        assert_eq!(app.selected, 15);
        assert_eq!(app.scroll, 6);
        app.update(key(KeyCode::PageUp), ts(0));
        assert_eq!((app.selected, app.scroll), (5, 5));
        app.update(ch('G'), ts(0));
        assert_eq!((app.selected, app.scroll), (99, 90));
    }

    #[test]
    fn filter_matches_holder_license_fingerprint_and_seat_id() {
        let mut app = loaded_app();
        app.update(ch('/'), ts(0));
        assert!(app.filter_editing);
        for c in "REN".chars() {
            app.update(ch(c), ts(0));
        }
        assert_eq!(holders(&app), ["dave"], "license, case-insensitive");
        app.update(key(KeyCode::Enter), ts(0));
        assert!(!app.filter_editing);
        assert_eq!(app.filter, "REN");

        app.update(key(KeyCode::Esc), ts(0));
        assert_eq!(app.filter, "", "Esc clears the filter first");
        assert_eq!(app.view.len(), 4);

        app.update(ch('/'), ts(0));
        for c in "fp-car".chars() {
            app.update(ch(c), ts(0));
        }
        assert_eq!(holders(&app), ["carol"], "fingerprint");
        app.update(key(KeyCode::Esc), ts(0));
        assert!(!app.filter_editing);
        assert_eq!(app.view.len(), 4, "Esc while typing clears and leaves");

        app.update(ch('/'), ts(0));
        for c in "b2b2".chars() {
            app.update(ch(c), ts(0));
        }
        assert_eq!(holders(&app), ["bob"], "seat id");
        app.update(key(KeyCode::Backspace), ts(0));
        assert_eq!(app.filter, "b2b");
        // q while typing is text, not quit.
        app.update(ch('q'), ts(0));
        assert!(!app.should_quit);
        assert!(app.view.is_empty());
        app.update(ch('r'), ts(0));
        assert!(app.modal.is_none(), "r while typing does not revoke");
    }

    #[test]
    fn sort_cycles_columns_and_reverses() {
        let mut app = loaded_app();
        app.update(ch('s'), ts(0));
        assert_eq!(app.sort, SortKey::Holder);
        assert_eq!(holders(&app), ["alice", "bob", "carol", "dave"]);
        app.update(ch('s'), ts(0));
        assert_eq!(app.sort, SortKey::HeldFor);
        assert_eq!(holders(&app), ["dave", "bob", "carol", "alice"]);
        app.update(ch('s'), ts(0));
        assert_eq!(app.sort, SortKey::ExpiresIn);
        assert_eq!(holders(&app), ["carol", "bob", "alice", "dave"]);
        app.update(ch('S'), ts(0));
        assert_eq!(holders(&app), ["dave", "alice", "bob", "carol"]);
        app.update(ch('s'), ts(0));
        assert_eq!(app.sort, SortKey::State);
        assert!(!app.sort_desc, "a new column starts ascending");
        app.update(ch('s'), ts(0));
        assert_eq!(app.sort, SortKey::License, "wraps around");
    }

    #[test]
    fn revoke_flow_confirm_with_y_returns_a_command() {
        let mut app = loaded_app();
        app.update(ch('j'), ts(0)); // bob
        app.update(ch('r'), ts(0));
        let Some(Modal::Revoke(m)) = &app.modal else {
            panic!("revoke modal expected");
        };
        assert_eq!(m.holder, "bob");
        assert_eq!(m.license_id, "demo-cad");
        // j/k/q do nothing inside the modal.
        assert!(app.update(ch('q'), ts(0)).is_empty());
        assert!(!app.should_quit);
        let cmds = app.update(ch('y'), ts(0));
        assert_eq!(
            cmds,
            vec![Command::Revoke {
                seat_id: "b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2".into(),
                holder: "bob".into(),
                reason: None
            }]
        );
        assert!(app.modal.is_none());
        // The outcome arrives: the row goes away and a refresh is asked for.
        let cmds = app.update(
            AppEvent::RevokeDone {
                seat_id: "b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2".into(),
                holder: "bob".into(),
                outcome: RevokeOutcome::Revoked,
            },
            ts(1),
        );
        assert_eq!(cmds, vec![Command::Refresh]);
        assert_eq!(holders(&app), ["alice", "carol", "dave"]);
        let msg = app.message.as_ref().unwrap();
        assert_eq!(msg.level, Level::Success);
        assert_eq!(msg.text, "revoked bob (seat b2b2b2b2)");
    }

    #[test]
    fn revoke_with_a_typed_reason_and_enter() {
        let mut app = loaded_app();
        app.update(ch('r'), ts(0));
        app.update(key(KeyCode::Tab), ts(0));
        for c in "stuck yes".chars() {
            app.update(ch(c), ts(0));
        }
        let Some(Modal::Revoke(m)) = &app.modal else {
            panic!("modal closed by typing y/n in the reason");
        };
        assert_eq!(m.reason, "stuck yes");
        let cmds = app.update(key(KeyCode::Enter), ts(0));
        assert_eq!(
            cmds,
            vec![Command::Revoke {
                seat_id: "a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1".into(),
                holder: "alice".into(),
                reason: Some("stuck yes".into())
            }]
        );
    }

    #[test]
    fn revoke_cancelled_with_n_or_esc() {
        let mut app = loaded_app();
        app.update(ch('r'), ts(0));
        assert!(app.update(ch('n'), ts(0)).is_empty());
        assert!(app.modal.is_none());
        app.update(ch('r'), ts(0));
        app.update(key(KeyCode::Tab), ts(0));
        app.update(ch('x'), ts(0));
        assert!(app.update(key(KeyCode::Esc), ts(0)).is_empty());
        assert!(app.modal.is_none());
        assert_eq!(app.message.as_ref().unwrap().text, "revoke cancelled");
        assert_eq!(app.view.len(), 4);
    }

    #[test]
    fn vanished_seat_is_a_message_not_an_error() {
        let mut app = loaded_app();
        let cmds = app.update(
            AppEvent::RevokeDone {
                seat_id: "c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3".into(),
                holder: "carol".into(),
                outcome: RevokeOutcome::Vanished,
            },
            ts(0),
        );
        assert_eq!(cmds, vec![Command::Refresh]);
        let msg = app.message.as_ref().unwrap();
        assert_eq!(msg.level, Level::Warn);
        assert!(msg.text.contains("already gone"), "{}", msg.text);
        assert_eq!(app.view.len(), 3);

        let cmds = app.update(
            AppEvent::RevokeDone {
                seat_id: "a1".into(),
                holder: "alice".into(),
                outcome: RevokeOutcome::Failed("cannot reach the server".into()),
            },
            ts(0),
        );
        assert!(cmds.is_empty());
        assert_eq!(app.message.as_ref().unwrap().level, Level::Error);
    }

    #[test]
    fn read_only_disables_revoke() {
        let mut app = App::new("s", true, false);
        app.update(snapshot(sample_seats(), vec![], ts(0), ts(0)), ts(0));
        assert!(app.update(ch('r'), ts(0)).is_empty());
        assert!(app.modal.is_none());
        assert!(app.message.as_ref().unwrap().text.contains("read-only"));
    }

    #[test]
    fn help_opens_and_any_key_closes_it() {
        let mut app = loaded_app();
        app.update(ch('?'), ts(0));
        assert_eq!(app.modal, Some(Modal::Help));
        app.update(ch('q'), ts(0));
        assert!(app.modal.is_none());
        assert!(
            !app.should_quit,
            "the key that closes help does nothing else"
        );
        app.update(ch('q'), ts(0));
        assert!(app.should_quit);
    }

    #[test]
    fn ctrl_c_quits_even_from_a_modal() {
        let mut app = loaded_app();
        app.update(ch('r'), ts(0));
        app.update(
            AppEvent::Key(KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL)),
            ts(0),
        );
        assert!(app.should_quit);
    }

    #[test]
    fn freeze_holds_back_snapshots_and_events() {
        let mut app = loaded_app();
        app.update(ch('f'), ts(0));
        assert!(app.frozen);
        app.update(snapshot(vec![], vec![], ts(1), ts(1)), ts(1));
        app.update(
            AppEvent::StreamEvent(Box::new(event(1, leasehold_common::api::EventKind::Reap))),
            ts(1),
        );
        assert_eq!(app.view.len(), 4, "frozen: old data stays");
        assert!(app.events.is_empty());
        app.update(ch('f'), ts(2));
        assert!(app.view.is_empty());
        assert_eq!(app.events.len(), 1);
    }

    #[test]
    fn events_are_deduplicated_by_id_newest_first() {
        use leasehold_common::api::EventKind;
        let mut app = App::new("s", false, false);
        for id in [1, 2, 2, 1, 3] {
            app.update(
                AppEvent::StreamEvent(Box::new(event(id, EventKind::Checkout))),
                ts(0),
            );
        }
        let ids: Vec<i64> = app.events.iter().map(|e| e.id).collect();
        assert_eq!(ids, [3, 2, 1]);
        assert_eq!(app.last_event_id, Some(3));
    }

    #[test]
    fn connection_loss_keeps_data_and_counts_failures() {
        let mut app = loaded_app();
        app.update(
            AppEvent::PollFailed {
                error: "connection refused".into(),
            },
            ts(5),
        );
        app.update(
            AppEvent::PollFailed {
                error: "connection refused\u{1b}[2J".into(),
            },
            ts(7),
        );
        assert_eq!(
            app.poll,
            Link::Down {
                since: ts(5),
                failures: 2,
                error: "connection refused\u{fffd}[2J".into()
            }
        );
        assert_eq!(app.view.len(), 4, "last data kept");
        app.update(
            AppEvent::StreamDown {
                error: "eof".into(),
            },
            ts(7),
        );
        assert!(app.stream.is_down());
        // Back again.
        app.update(snapshot(sample_seats(), vec![], ts(10), ts(10)), ts(10));
        app.update(AppEvent::StreamUp, ts(10));
        assert_eq!(app.poll, Link::Up);
        assert_eq!(app.stream, Link::Up);
    }

    #[test]
    fn countdown_uses_the_server_clock() {
        // The local clock is 120 s behind the server's.
        let mut app = App::new("s", false, false);
        let server_now = ts(0);
        let local_now = ts(-120);
        app.update(
            snapshot(
                sample_seats(),
                vec![pool("demo-cad", 3, 2), pool("render", 5, 1)],
                server_now,
                local_now,
            ),
            local_now,
        );
        assert_eq!(app.clock_offset_ms, 120_000);
        // Three local seconds later the server clock reads ts(3).
        let later_local = ts(-117);
        let now = app.server_now(later_local);
        assert_eq!(now, ts(3));
        let alice = &app.seats[0];
        assert_eq!(alice.expires_at.millis_since(now), 47_000);
        assert_eq!(app.row_state(alice, now), RowState::Live);
        let bob = &app.seats[1];
        assert_eq!(
            app.row_state(bob, now),
            RowState::Expiring,
            "9 s left of a 60 s TTL"
        );
        // carol expired at -8 s: past the 5 s skew, so lapsed.
        let carol = &app.seats[2];
        assert_eq!(app.row_state(carol, now), RowState::Lapsed);
        // bob is still live inside the skew window, lapsed after it.
        assert_eq!(app.row_state(bob, ts(16)), RowState::Expiring);
        assert_eq!(app.row_state(bob, ts(18)), RowState::Lapsed);
    }

    #[test]
    fn server_strings_are_sanitized_on_the_way_in() {
        let mut app = App::new("s", false, false);
        let mut evil = seat("demo", "mallory\u{1b}[31m\u{202e}", "e5", 0, 60);
        evil.fingerprint = Some("\u{9b}2J".into());
        app.update(snapshot(vec![evil], vec![], ts(0), ts(0)), ts(0));
        assert_eq!(app.seats[0].holder, "mallory\u{fffd}[31m\u{fffd}");
        assert_eq!(app.seats[0].fingerprint.as_deref(), Some("\u{fffd}2J"));
        let mut ev = event(1, leasehold_common::api::EventKind::Denied);
        ev.detail = Some("x\u{7}".into());
        app.update(AppEvent::StreamEvent(Box::new(ev)), ts(0));
        assert_eq!(app.events[0].detail.as_deref(), Some("x\u{fffd}"));
    }

    #[test]
    fn ten_thousand_holders_filter_and_sort_quickly() {
        let mut app = App::new("s", false, false);
        let seats: Vec<_> = (0..10_000)
            .map(|i| {
                seat(
                    &format!("pool-{}", i % 7),
                    &format!("user-{i:05}"),
                    &format!("{i:032x}"),
                    -(i as i64),
                    60 - (i as i64 % 50),
                )
            })
            .collect();
        let start = std::time::Instant::now();
        app.update(snapshot(seats, vec![], ts(0), ts(0)), ts(0));
        app.update(ch('/'), ts(0));
        for c in "user-01234".chars() {
            app.update(ch(c), ts(0));
        }
        assert_eq!(app.view.len(), 1);
        app.update(key(KeyCode::Esc), ts(0));
        for _ in 0..5 {
            app.update(ch('s'), ts(0));
        }
        assert_eq!(app.view.len(), 10_000);
        // Generous bound for a debug build on a busy 2-core machine.
        assert!(
            start.elapsed() < std::time::Duration::from_secs(5),
            "{:?}",
            start.elapsed()
        );
    }
}

#[cfg(test)]
mod sort_tests {
    use super::tests::{seat, snapshot, ts};
    use super::*;

    /// The plain comparison the prefix keys stand in for.
    fn reference_order(app: &App) -> Vec<usize> {
        let mut view: Vec<usize> = (0..app.seats.len()).collect();
        view.sort_by(|&a, &b| {
            let (x, y) = (&app.seats[a], &app.seats[b]);
            let primary = match app.sort {
                SortKey::License => x
                    .license_id
                    .cmp(&y.license_id)
                    .then_with(|| x.holder.cmp(&y.holder)),
                SortKey::Holder => x
                    .holder
                    .to_lowercase()
                    .cmp(&y.holder.to_lowercase())
                    .then_with(|| x.license_id.cmp(&y.license_id)),
                SortKey::HeldFor => y.checked_out_at.cmp(&x.checked_out_at),
                SortKey::ExpiresIn => x.expires_at.cmp(&y.expires_at),
                SortKey::State => state_rank(x.state)
                    .cmp(&state_rank(y.state))
                    .then_with(|| x.expires_at.cmp(&y.expires_at)),
            };
            primary.then_with(|| x.seat_id.cmp(&y.seat_id))
        });
        if app.sort_desc {
            view.reverse();
        }
        view
    }

    #[test]
    fn prefix_keys_sort_like_the_plain_comparison() {
        // Shared long prefixes, short and empty strings, non-ASCII and
        // final sigmas, equal times: where the prefixes tie.
        let licenses = [
            "a",
            "long-license-name-0001",
            "long-license-name-0002",
            "sixteen-bytes-id",
            "sixteen-bytes-idx",
            "Ω",
        ];
        let holders = [
            "build-agent-long-prefix-07",
            "build-agent-long-prefix-7",
            "Build-Agent-Long-Prefix-08",
            "ΣΟΦΙΑΣ",
            "σοφιας",
            "",
            "a",
            "A",
            "a-holder-name-longer-than-32-bytes-1",
            "A-HOLDER-NAME-LONGER-THAN-32-BYTES-2",
        ];
        let mut seats = Vec::new();
        for i in 0..600usize {
            let mut s = seat(
                licenses[i % 6],
                holders[(i / 6) % 10],
                &format!("{:032x}", (i * 7919) % 1000),
                -((i % 5) as i64),
                (i % 7) as i64 - 3,
            );
            if i % 11 == 0 {
                s.state = SeatState::Lapsed;
            }
            seats.push(s);
        }
        let mut app = App::new("s", false, false);
        app.update(snapshot(seats, vec![], ts(0), ts(0)), ts(0));
        for _ in 0..SortKey::ALL.len() {
            for _ in 0..2 {
                let expected = reference_order(&app);
                let key = |v: &[usize]| -> Vec<String> {
                    v.iter().map(|&i| format!("{:?}", app.seats[i])).collect()
                };
                assert_eq!(key(&app.view), key(&expected), "{:?}", app.sort);
                app.on_key(KeyEvent::new(KeyCode::Char('S'), KeyModifiers::NONE));
            }
            app.on_key(KeyEvent::new(KeyCode::Char('s'), KeyModifiers::NONE));
        }
    }
}
