//! `GET /v1/admin/events/stream`: the event log as Server-Sent Events.
//!
//! Subscribe to live events first, then read the backlog after the client's
//! `Last-Event-ID` from the database, then follow the live feed skipping ids
//! already sent: no gap between backlog and live, no duplicate. A subscriber
//! that falls behind the broadcast buffer goes back to the database.
//!
//! A stream opened with a dashboard sign-in ([`SignInLink`]) sends nothing
//! once the sign-in has ended, and then ends:
//! - ended on this server (logout, a sign-in replacing it): its
//!   [`EndWatch`] is raised before the logout answers, and is read right
//!   before every event sent;
//! - ended by time (idle, lifetime): the stream knows when its sign-in would
//!   end, and re-reads it from the store then, and before any event sent
//!   past then;
//! - ended on another replica (or its token changed): the store is re-read
//!   every [`SIGN_IN_CHECK_EVERY`].
//!
//! A stream opened with a bearer token ends only at shutdown.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use leasehold_common::Timestamp;
use leasehold_common::api::Event;
use tokio::sync::broadcast::error::RecvError;
use tokio::time::Instant;
use warp::Reply;

use super::ui_auth::{self, RequestMeta};
use crate::AppState;
use crate::sign_ins::EndWatch;

const PAGE: usize = 1000;

/// How often a stream opened with a sign-in re-reads it from the store (a
/// sign-in ended on another replica).
const SIGN_IN_CHECK_EVERY: Duration = Duration::from_secs(1);

struct Feed {
    state: Arc<AppState>,
    live: tokio::sync::broadcast::Receiver<Event>,
    last_sent: i64,
    pending: VecDeque<Event>,
    backlog_left: bool,
    /// The sign-in the stream lives by, if opened with one.
    sign_in: Option<SignInLink>,
}

/// The events after `after`, live; `sign_in`: the request of a stream
/// opened with a sign-in cookie, which ends with the sign-in.
pub fn stream(state: Arc<AppState>, after: i64, sign_in: Option<RequestMeta>) -> impl Reply {
    let feed = Feed {
        live: state.store.subscribe(),
        // Watched from here on; the first event waits for a store read, so
        // a sign-in ended before this line is not trusted either.
        sign_in: sign_in.map(|meta| SignInLink::new(&state, meta)),
        state: state.clone(),
        last_sent: after,
        pending: VecDeque::new(),
        backlog_left: true,
    };
    let events = futures_util::stream::unfold(feed, |mut feed| async move {
        let ev = feed.next().await?;
        Some((Ok::<_, Infallible>(to_sse(&ev)), feed))
    });
    let mut shutdown = state.shutdown.clone();
    let events = events.take_until(async move {
        let _ = shutdown.wait_for(|stopping| *stopping).await;
    });
    warp::sse::reply(
        warp::sse::keep_alive()
            .interval(Duration::from_secs(15))
            .stream(events),
    )
}

impl Feed {
    /// The next event to send; `None` ends the stream.
    async fn next(&mut self) -> Option<Event> {
        loop {
            if let Some(ev) = self.pending.pop_front() {
                if ev.id <= self.last_sent {
                    continue;
                }
                // Right before the send: nothing leaves after the sign-in
                // has ended, however long ago the event was dequeued.
                if let Some(link) = &mut self.sign_in
                    && !link.holds(&self.state).await
                {
                    return None;
                }
                self.last_sent = ev.id;
                return Some(ev);
            }
            if self.backlog_left {
                match self.state.store.events_after(self.last_sent, PAGE).await {
                    Ok(page) => {
                        self.backlog_left = page.len() == PAGE;
                        self.pending.extend(page);
                        continue;
                    }
                    Err(e) => {
                        tracing::warn!("event stream: cannot read backlog: {e}");
                        return None;
                    }
                }
            }
            let received = match &mut self.sign_in {
                None => self.live.recv().await,
                Some(link) => {
                    let check_at = link.check_at;
                    tokio::select! {
                        biased;
                        () = link.end.ended() => return None,
                        () = tokio::time::sleep_until(check_at) => {
                            if !link.holds(&self.state).await {
                                return None;
                            }
                            continue;
                        }
                        received = self.live.recv() => received,
                    }
                }
            };
            match received {
                Ok(ev) => self.pending.push_back(ev),
                Err(RecvError::Lagged(_)) => self.backlog_left = true,
                Err(RecvError::Closed) => return None,
            }
        }
    }
}

/// A stream's tie to the sign-in that opened it.
struct SignInLink {
    meta: RequestMeta,
    /// Raised by this server the moment it ends the sign-in.
    end: EndWatch,
    /// When the sign-in ends unless used again, as last read from the
    /// store (`None`: not read yet, or the store was away).
    ends_at: Option<Timestamp>,
    /// When to read the store next: [`SIGN_IN_CHECK_EVERY`] after the last
    /// read, or when the sign-in would end if sooner.
    check_at: Instant,
}

impl SignInLink {
    fn new(state: &AppState, meta: RequestMeta) -> SignInLink {
        // The guard let the request in by its cookie, so it has one.
        let id = meta.sign_in_cookie().unwrap_or_default();
        SignInLink {
            end: state.ui.sign_ins.watch_end(id),
            meta,
            ends_at: None,
            check_at: Instant::now(),
        }
    }

    /// Whether the sign-in still holds: the end watch (a read), and a store
    /// read when one is due or the sign-in's end time has passed. A store
    /// that is away keeps the stream; a later read decides.
    async fn holds(&mut self, state: &AppState) -> bool {
        if self.end.has_ended() {
            return false;
        }
        let past_end = self.ends_at.is_some_and(|t| state.clock.now() >= t);
        if past_end || Instant::now() >= self.check_at {
            let read = ui_auth::sign_in_of(state, &self.meta).await;
            let now = Instant::now();
            self.check_at = now + SIGN_IN_CHECK_EVERY;
            self.ends_at = None;
            match read {
                Ok(sign_in) => {
                    let ends_at = sign_in.ends_at(state);
                    let left = ends_at.millis_since(state.clock.now()).max(0) as u64;
                    self.check_at = self.check_at.min(now + Duration::from_millis(left));
                    self.ends_at = Some(ends_at);
                }
                Err(e) if e.status == warp::http::StatusCode::UNAUTHORIZED => {
                    tracing::debug!("event stream: its sign-in ended; closing it");
                    return false;
                }
                Err(_) => {}
            }
        }
        // Raised during the read: ended all the same.
        !self.end.has_ended()
    }
}

fn to_sse(ev: &Event) -> warp::sse::Event {
    let data = serde_json::to_string(ev).unwrap_or_else(|_| "{}".into());
    warp::sse::Event::default().id(ev.id.to_string()).data(data)
}
