//! The console's state and every rule that changes it, with no I/O.
//!
//! [`App::update`] takes one [`AppEvent`] (a key, a tick, the licenses from
//! the poller, a page of holders, an event from the SSE stream, the outcome
//! of a revoke) together with the local time, changes the state, and returns
//! the [`Command`]s the event loop must carry out (fetch a page of holders,
//! revoke a seat, poll now). Nothing here talks to the network or reads the
//! clock, so the unit tests drive the whole console by hand, and `ui.rs`
//! draws only from this state.
//!
//! The holders table holds a window of the server's pages, never the whole
//! list: the server filters, sorts and counts (`paging.rs`), and the window
//! is fetched again when a stream event may have changed it (coalesced) and
//! every few seconds for the heartbeats, which are not events.
//!
//! Every string that came from the server is passed through
//! [`sanitize_for_terminal`] on the way in ([`App::update`]), so no holder
//! name or event detail can reach the terminal with an escape sequence in it.
//!
//! Countdowns are computed against the *server's* clock: each answer carries
//! the server's `now`, and [`App::server_now`] is the local clock plus the
//! offset measured at the last answer. A console on a laptop whose clock is
//! two minutes off still shows the right "expires in".
//!
//! Parts: `event` (what goes in and out), `link` (connection state), `keys`
//! (key dispatch), `revoke` (the revoke modal), `paging` (the holders
//! table's window of server pages: when to fetch which), `sort_key` (the
//! sort columns), `sanitize` (server strings on arrival), `usage` (each
//! pool's last hour and today's denials).

mod event;
mod keys;
mod link;
mod paging;
mod revoke;
mod sanitize;
mod sort_key;
#[cfg(test)]
pub(crate) mod test_support;
mod usage;

use std::collections::{HashMap, VecDeque};
use std::time::Duration;

use leasehold_common::api::{Event, LicenseSummary, SeatState, SeatView};
use leasehold_common::text::sanitize_for_terminal;
use leasehold_common::{Timestamp, is_live};

use crate::format::short_id;
use paging::{Goal, Paging, changes_seats};
use sanitize::sanitize_event;

pub use event::{AppEvent, Command, PageReply, PageRequest, RevokeOutcome, Snapshot, UsageUpdate};
pub use link::Link;
pub use revoke::RevokeModal;
pub use sort_key::SortKey;
pub use usage::{Minute, PoolUsage, SPARK_MINUTES};

/// How many events the feed keeps (newest first).
pub const EVENT_CAP: usize = 1000;
/// How long a status message stays on screen, in milliseconds.
pub const MESSAGE_MS: i64 = 10_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pane {
    Holders,
    Events,
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
    /// Released, still counting against the pool until its linger ends.
    Lingering,
    /// Borrowed for offline use: counts until the borrow ends or returns.
    Borrowed,
}

impl RowState {
    pub fn word(self) -> &'static str {
        match self {
            RowState::Live => "live",
            RowState::Expiring => "expiring",
            RowState::Lapsed => "lapsed",
            RowState::Lingering => "lingering",
            RowState::Borrowed => "borrowed",
        }
    }

    pub fn glyph(self) -> &'static str {
        match self {
            RowState::Live => "●",
            RowState::Expiring => "▲",
            RowState::Lapsed => "✗",
            RowState::Lingering => "◌",
            RowState::Borrowed => "⇄",
        }
    }
}

/// Policy numbers the console needs per license.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PoolPolicy {
    pub ttl: Duration,
    pub skew: Duration,
    /// A seat idle this long is reclaimed; `None`: never.
    pub idle_timeout: Option<Duration>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Modal {
    Help,
    /// Boxed: the dialog is much larger than the help's nothing.
    Revoke(Box<RevokeModal>),
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
    /// Per pool (sanitized id): the last hour's peaks and today's denials.
    usage: HashMap<String, PoolUsage>,
    /// The loaded window of holders, in the table's order (strings
    /// sanitized): two server pages, not the whole list.
    pub seats: Vec<SeatView>,
    /// The rows on screen as indices into `seats` (all of them, in order).
    pub view: Vec<usize>,
    /// Longest license id, holder and fingerprint (in chars) among `view`,
    /// kept with it so a frame does not walk every row.
    view_widths: [usize; 3],
    /// Whether some seat of `view` reports its user idle (the IDLE column
    /// is shown), kept with it for the same reason.
    view_idle: bool,
    /// The server's time when the window was fetched: a seat's `idle_s`
    /// is as of then.
    seats_at: Timestamp,
    /// Which pages the window holds and what is being fetched.
    paging: Paging,
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
    pending_usage: Vec<UsageUpdate>,

    pub modal: Option<Modal>,
    /// The revoke dialog as last confirmed: a 409 `borrowed` reopens it
    /// (reason and block kept) with the server's sentence and force offered.
    last_revoke: Option<RevokeModal>,
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
            usage: HashMap::new(),
            seats: Vec::new(),
            view: Vec::new(),
            view_widths: [0; 3],
            view_idle: false,
            seats_at: Timestamp::from_millis(0),
            paging: Paging::default(),
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
            pending_usage: Vec::new(),
            modal: None,
            last_revoke: None,
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

    /// Whether the holders table has an IDLE column: some seat of the
    /// window reports its user idle (as `leasehold seats` shows BACK AT
    /// only when some seat is borrowed).
    pub fn shows_idle(&self) -> bool {
        self.view_idle
    }

    /// How long `seat`'s user has been idle at `server_now`, in
    /// milliseconds: the server's `idle_s` (as of the window's fetch) run
    /// on like the other clocks until the next refresh; `None` when the
    /// seat is active or its client never reported.
    pub fn idle_ms(&self, seat: &SeatView, server_now: Timestamp) -> Option<i64> {
        let idle_s = i64::try_from(seat.idle_s?).unwrap_or(i64::MAX);
        let since_fetch = server_now.millis_since(self.seats_at).max(0);
        Some(idle_s.saturating_mul(1000).saturating_add(since_fetch))
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
        // Neither heartbeats: their expiry is the linger's or the borrow's
        // end, not a missed renewal.
        match seat.state {
            SeatState::Lingering => return RowState::Lingering,
            SeatState::Borrowed => return RowState::Borrowed,
            SeatState::Live | SeatState::Lapsed => {}
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
            AppEvent::Key(key) => return self.on_key(key),
            AppEvent::Tick => return self.on_tick(now),
            AppEvent::Resize => {}
            AppEvent::Snapshot(snap) => {
                self.poll = Link::Up;
                self.clock_offset_ms = snap.licenses.now.millis_since(snap.received_at);
                if self.frozen {
                    self.pending_snapshot = Some(snap);
                } else {
                    self.apply_snapshot(*snap);
                }
            }
            AppEvent::Page(reply) => return self.on_page(*reply),
            AppEvent::PageFailed { id, error } => {
                self.on_page_failed(id);
                self.poll
                    .fail(now, sanitize_for_terminal(&error).into_owned());
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
                let changes = changes_seats(ev.kind);
                if self.frozen {
                    self.pending_events.push(*ev);
                } else {
                    self.push_event(*ev);
                }
                if changes {
                    return self.seats_changed();
                }
            }
            AppEvent::Usage(u) => {
                if self.frozen {
                    self.pending_usage.push(*u);
                } else {
                    self.apply_usage(*u);
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
        self.last_update = Some((snap.licenses.now, snap.received_at));
        self.licenses = snap
            .licenses
            .licenses
            .into_iter()
            .map(sanitize::sanitize_license)
            .collect();
        self.policies = self
            .licenses
            .iter()
            .map(|l| {
                let policy = PoolPolicy {
                    ttl: secs(l.ttl_s),
                    skew: secs(l.skew_s),
                    idle_timeout: l.idle_timeout_s.map(secs),
                };
                (l.id.clone(), policy)
            })
            .collect();
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
            RevokeOutcome::Borrowed(why) => return self.on_revoke_refused(seat_id, &why, now),
        };
        let gone = level != Level::Error;
        self.post_at(text, level, now);
        if gone {
            // Take it off the screen now; the refresh confirms.
            if let Some(pos) = self.seats.iter().position(|s| s.seat_id == seat_id) {
                self.seats.remove(pos);
                self.view.pop();
                self.ensure_visible();
            }
            let mut cmds = vec![Command::Refresh];
            cmds.extend(self.seats_changed());
            return cmds;
        }
        Vec::new()
    }

    /// A plain revoke met 409 `borrowed`: the dialog comes back as it was,
    /// with the server's sentence and force offered (unless another dialog
    /// is open; then the status line says it), and the table is fetched
    /// again, since it may have shown the seat live.
    fn on_revoke_refused(&mut self, seat_id: &str, why: &str, now: Timestamp) -> Vec<Command> {
        let why = sanitize_for_terminal(why).into_owned();
        let again = self.last_revoke.take().filter(|m| m.seat_id == seat_id);
        match again {
            Some(mut m) if self.modal.is_none() => {
                m.refusal = Some(why);
                m.error = None;
                self.modal = Some(Modal::Revoke(Box::new(m)));
                self.post_at("not revoked: the seat is borrowed", Level::Warn, now);
            }
            _ => self.post_at(format!("not revoked: {why}"), Level::Warn, now),
        }
        self.seats_changed()
    }

    fn post(&mut self, text: impl Into<String>, level: Level) {
        self.post_at(text, level, self.last_now);
    }

    fn post_at(&mut self, text: impl Into<String>, level: Level, at: Timestamp) {
        self.message = Some(Message {
            text: text.into(),
            level,
            at,
        });
    }

    /// The filter or the order changed: the first rows of the new list,
    /// after `delay_ms` (typing is debounced).
    fn reorder(&mut self, delay_ms: u64) -> Vec<Command> {
        self.start_load(Goal::Reorder, delay_ms)
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
}

/// Seconds from the API as a duration; nonsense (negative, NaN, huge)
/// becomes zero or is capped rather than panicking.
fn secs(s: f64) -> Duration {
    if s.is_finite() && s > 0.0 {
        Duration::from_secs_f64(s.min(1e9))
    } else {
        Duration::ZERO
    }
}

#[cfg(test)]
mod tests {
    use super::test_support::*;
    use super::*;

    #[test]
    fn a_page_fills_the_table_in_the_servers_order() {
        let app = loaded_app();
        assert_eq!(holders(&app), ["alice", "bob", "carol", "dave"]);
        assert_eq!(app.poll, Link::Up);
        assert_eq!(app.licenses.len(), 2);
    }

    #[test]
    fn selection_follows_the_seat_across_refreshes() {
        let mut app = loaded_app();
        app.update(ch('j'), ts(0)); // bob
        // A new snapshot where a seat before bob went away.
        let mut seats = sample_seats();
        seats.remove(0);
        load(&mut app, seats, vec![], ts(1), ts(1));
        assert_eq!(app.selected_seat().unwrap().holder, "bob");
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
        assert_eq!(cmds[0], Command::Refresh);
        assert!(matches!(&cmds[1..], [Command::FetchPage(_)]), "{cmds:?}");
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
        load(&mut app, sample_seats(), vec![], ts(10), ts(10));
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
        load(
            &mut app,
            sample_seats(),
            vec![pool("demo-cad", 3, 2), pool("render", 5, 1)],
            server_now,
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
    fn idle_time_runs_on_from_the_fetch_and_the_column_follows_the_window() {
        let mut app = App::new("s", false, false);
        let mut seats = sample_seats();
        seats[1].idle_s = Some(90);
        load(&mut app, seats, vec![], ts(0), ts(0));
        assert!(app.shows_idle());
        assert_eq!(app.idle_ms(&app.seats[1], ts(5)), Some(95_000));
        assert_eq!(app.idle_ms(&app.seats[0], ts(5)), None);
        // The next window has no idle seat: no column.
        load(&mut app, sample_seats(), vec![], ts(10), ts(10));
        assert!(!app.shows_idle());
    }

    #[test]
    fn server_strings_are_sanitized_on_the_way_in() {
        let mut app = App::new("s", false, false);
        let mut evil = seat("demo", "mallory\u{1b}[31m\u{202e}", "e5", 0, 60);
        evil.fingerprint = Some("\u{9b}2J".into());
        load(&mut app, vec![evil], vec![], ts(0), ts(0));
        assert_eq!(app.seats[0].holder, "mallory\u{fffd}[31m\u{fffd}");
        assert_eq!(app.seats[0].fingerprint.as_deref(), Some("\u{fffd}2J"));
        let mut ev = event(1, leasehold_common::api::EventKind::Denied);
        ev.detail = Some("x\u{7}".into());
        app.update(AppEvent::StreamEvent(Box::new(ev)), ts(0));
        assert_eq!(app.events[0].detail.as_deref(), Some("x\u{fffd}"));
    }
}
