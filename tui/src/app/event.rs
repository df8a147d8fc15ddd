//! What crosses between the event loop and [`super::App`]: the
//! [`AppEvent`]s fed in, and the [`Command`]s handed back to carry out,
//! with what they carry (a page of holders asked for and answered, a
//! pool's usage as it arrived).

use crossterm::event::KeyEvent;
use leasehold_common::Timestamp;
use leasehold_common::api::{Event, LicensesResponse, SeatsPage, UsagePoint};

/// Everything the event loop feeds into [`super::App::update`].
#[derive(Debug, Clone)]
pub enum AppEvent {
    Key(KeyEvent),
    /// The 1 Hz tick: countdowns move, old messages fade.
    Tick,
    /// The terminal was resized (the loop recomputes the page size).
    Resize,
    /// A successful poll of the licenses.
    Snapshot(Box<Snapshot>),
    /// A page of holders, answering a [`Command::FetchPage`].
    Page(Box<PageReply>),
    /// A [`Command::FetchPage`] failed; `error` is the one-line reason.
    PageFailed {
        id: u64,
        error: String,
    },
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
    /// One pool's usage (last hour, today's denials), fetched every 30 s.
    Usage(Box<UsageUpdate>),
    /// The outcome of a [`Command::Revoke`].
    RevokeDone {
        seat_id: String,
        holder: String,
        outcome: RevokeOutcome,
    },
}

/// One poll of the licenses, and the local time the answer arrived.
#[derive(Debug, Clone)]
pub struct Snapshot {
    pub licenses: LicensesResponse,
    pub received_at: Timestamp,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RevokeOutcome {
    Revoked,
    /// 404 `unknown_seat`: released, reaped or revoked by someone else.
    Vanished,
    /// 409 `borrowed`: a borrowed seat is freed only with force; the
    /// server's sentence says why.
    Borrowed(String),
    Failed(String),
}

/// Work for the event loop; the app never performs it inline.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    Revoke {
        seat_id: String,
        holder: String,
        reason: Option<String>,
        /// Refuse the holder's re-checkout for this many seconds.
        block_s: Option<u64>,
        /// Free a borrowed seat too (`"force": true`).
        force: bool,
    },
    /// Poll the licenses now instead of waiting for the next second.
    Refresh,
    /// Fetch one page of holders; answered by [`AppEvent::Page`].
    FetchPage(PageRequest),
}

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

/// One pool's fetch, as it arrived (not `Eq`: a point's `over_s` is a float).
#[derive(Debug, Clone, PartialEq)]
pub struct UsageUpdate {
    pub license_id: String,
    /// The points of `from=now-1h&step=60s`.
    pub last_hour: Option<Vec<UsagePoint>>,
    pub denials_today: Option<u64>,
}
