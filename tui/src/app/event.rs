//! What crosses between the event loop and [`super::App`]: the
//! [`AppEvent`]s fed in, and the [`Command`]s handed back to carry out.

use crossterm::event::KeyEvent;
use leasehold_common::Timestamp;
use leasehold_common::api::{Event, LicensesResponse};

use super::paging::{PageReply, PageRequest};

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
    Usage(Box<super::UsageUpdate>),
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
