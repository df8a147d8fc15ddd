//! `GET /v1/admin/events/stream`: the event log as Server-Sent Events.
//!
//! Subscribe to live events first, then read the backlog after the client's
//! `Last-Event-ID` from the database, then follow the live feed skipping ids
//! already sent: no gap between backlog and live, no duplicate. A subscriber
//! that falls behind the broadcast buffer goes back to the database.
//!
//! A stream opened with a dashboard session checks the session every
//! [`SESSION_CHECK_EVERY`] and ends when it has (logout, idle, lifetime, a
//! changed token, on any replica: the check reads the store on the server's
//! clock); a stream opened with a bearer token ends only at shutdown.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use leasehold_common::api::Event;
use tokio::sync::broadcast::error::RecvError;
use warp::Reply;

use super::ui_auth::{self, RequestMeta};
use crate::AppState;

const PAGE: usize = 1000;

/// How often a stream opened with a session checks that it still holds.
const SESSION_CHECK_EVERY: Duration = Duration::from_secs(1);

struct Feed {
    state: Arc<AppState>,
    live: tokio::sync::broadcast::Receiver<Event>,
    last_sent: i64,
    pending: VecDeque<Event>,
    backlog_left: bool,
}

/// The events after `after`, live; `session`: the request of a stream
/// opened with a session cookie, which ends with the session.
pub fn stream(state: Arc<AppState>, after: i64, session: Option<RequestMeta>) -> impl Reply {
    let feed = Feed {
        live: state.store.subscribe(),
        state: state.clone(),
        last_sent: after,
        pending: VecDeque::new(),
        backlog_left: true,
    };
    let events = futures_util::stream::unfold(feed, |mut feed| async move {
        loop {
            if let Some(ev) = feed.pending.pop_front() {
                if ev.id <= feed.last_sent {
                    continue;
                }
                feed.last_sent = ev.id;
                return Some((Ok::<_, Infallible>(to_sse(&ev)), feed));
            }
            if feed.backlog_left {
                match feed.state.store.events_after(feed.last_sent, PAGE).await {
                    Ok(page) => {
                        feed.backlog_left = page.len() == PAGE;
                        feed.pending.extend(page);
                        continue;
                    }
                    Err(e) => {
                        tracing::warn!("event stream: cannot read backlog: {e}");
                        return None;
                    }
                }
            }
            match feed.live.recv().await {
                Ok(ev) => feed.pending.push_back(ev),
                Err(RecvError::Lagged(_)) => feed.backlog_left = true,
                Err(RecvError::Closed) => return None,
            }
        }
    });
    let mut shutdown = state.shutdown.clone();
    let events = events.take_until(async move {
        tokio::select! {
            _ = shutdown.wait_for(|stopping| *stopping) => {}
            _ = session_ended(state, session) => {}
        }
    });
    warp::sse::reply(
        warp::sse::keep_alive()
            .interval(Duration::from_secs(15))
            .stream(events),
    )
}

/// Resolves once the session `meta` carries has ended; never without one.
async fn session_ended(state: Arc<AppState>, meta: Option<RequestMeta>) {
    let Some(meta) = meta else {
        return std::future::pending().await;
    };
    loop {
        tokio::time::sleep(SESSION_CHECK_EVERY).await;
        match ui_auth::session_of(&state, &meta).await {
            Ok(_) => {}
            Err(e) if e.status == warp::http::StatusCode::UNAUTHORIZED => {
                tracing::debug!("event stream: its session ended; closing it");
                return;
            }
            // The store is away: keep the stream; a later check decides.
            Err(_) => {}
        }
    }
}

fn to_sse(ev: &Event) -> warp::sse::Event {
    let data = serde_json::to_string(ev).unwrap_or_else(|_| "{}".into());
    warp::sse::Event::default().id(ev.id.to_string()).data(data)
}
