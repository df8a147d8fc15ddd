//! The event stream kept alive: connect, read, and on any failure reconnect
//! with backoff, resuming after the last event id seen (`Last-Event-ID`), so
//! a reconnect loses nothing and repeats nothing.
//!
//! Used by the console and by `leasehold events --follow`.

use std::time::Duration;

use futures_util::{Stream, StreamExt};
use leasehold_common::api::Event;
use tokio::sync::mpsc;

use crate::api::{AdminClient, ApiError};

/// First and largest wait between reconnects.
pub const BACKOFF_MIN: Duration = Duration::from_millis(500);
pub const BACKOFF_MAX: Duration = Duration::from_secs(10);
/// A stream silent this long is presumed dead (a half-open TCP connection
/// after a host vanished) and reopened quietly; resuming by id makes that
/// free when it was merely quiet.
pub const IDLE_LIMIT: Duration = Duration::from_secs(60);

#[derive(Debug)]
pub enum StreamMsg {
    Up,
    Event(Event),
    Down(ApiError),
}

/// The next wait after `current`: doubled, capped.
pub fn next_backoff(current: Duration) -> Duration {
    (current * 2).clamp(BACKOFF_MIN, BACKOFF_MAX)
}

/// Run until the receiver is dropped. `last_id` is where to resume from
/// (`None`: whatever the server sends a new client).
pub async fn run(
    client: AdminClient,
    mut last_id: Option<i64>,
    tx: mpsc::UnboundedSender<StreamMsg>,
) {
    let mut backoff = BACKOFF_MIN;
    loop {
        match client.event_stream(last_id).await {
            Ok(stream) => {
                tracing::info!(?last_id, "event stream connected");
                if tx.send(StreamMsg::Up).is_err() {
                    return;
                }
                backoff = BACKOFF_MIN;
                match relay(stream, &mut last_id, &tx, client.base()).await {
                    Ended::Idle => continue,
                    Ended::NobodyListens => return,
                    Ended::Broken(e) => {
                        tracing::warn!("event stream lost: {e}");
                        if tx.send(StreamMsg::Down(e)).is_err() {
                            return;
                        }
                    }
                }
            }
            Err(e) => {
                tracing::warn!("event stream: {e}");
                if tx.send(StreamMsg::Down(e)).is_err() {
                    return;
                }
            }
        }
        tokio::select! {
            _ = tokio::time::sleep(backoff) => {}
            _ = tx.closed() => return,
        }
        backoff = next_backoff(backoff);
    }
}

/// How one connection of the stream ended.
enum Ended {
    /// Silent for [`IDLE_LIMIT`]: reopen at once, no backoff, no report.
    Idle,
    /// Closed or failed: report it and back off.
    Broken(ApiError),
    /// The receiver was dropped.
    NobodyListens,
}

/// Pass the events of one connection on, skipping replays, until it ends.
async fn relay(
    stream: impl Stream<Item = Result<Event, ApiError>>,
    last_id: &mut Option<i64>,
    tx: &mpsc::UnboundedSender<StreamMsg>,
    server: &str,
) -> Ended {
    let mut stream = std::pin::pin!(stream);
    loop {
        match tokio::time::timeout(IDLE_LIMIT, stream.next()).await {
            Err(_) => {
                tracing::info!("event stream idle for {IDLE_LIMIT:?}; reopening");
                return Ended::Idle;
            }
            Ok(None) => {
                return Ended::Broken(ApiError::Unreachable {
                    server: server.to_string(),
                    cause: "the server closed the event stream".into(),
                });
            }
            Ok(Some(Err(e))) => return Ended::Broken(e),
            Ok(Some(Ok(ev))) => {
                // Ids are strictly increasing: anything else is a replay.
                if last_id.is_some_and(|l| ev.id <= l) {
                    continue;
                }
                *last_id = Some(ev.id);
                if tx.send(StreamMsg::Event(ev)).is_err() {
                    return Ended::NobodyListens;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_up_to_the_cap() {
        let mut b = BACKOFF_MIN;
        let mut seen = vec![b];
        for _ in 0..8 {
            b = next_backoff(b);
            seen.push(b);
        }
        assert_eq!(seen[1], Duration::from_secs(1));
        assert_eq!(seen[2], Duration::from_secs(2));
        assert_eq!(*seen.last().unwrap(), BACKOFF_MAX);
    }
}
