//! The event stream kept alive: connect, read, and on any failure reconnect
//! with backoff, resuming after the last event id seen (`Last-Event-ID`), so
//! a reconnect loses nothing and repeats nothing.
//!
//! Used by the console and by `leasehold events --follow`.

use std::time::Duration;

use futures_util::StreamExt;
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
                let mut stream = std::pin::pin!(stream);
                let err = loop {
                    match tokio::time::timeout(IDLE_LIMIT, stream.next()).await {
                        Err(_) => {
                            tracing::info!("event stream idle for {IDLE_LIMIT:?}; reopening");
                            break None;
                        }
                        Ok(None) => {
                            break Some(ApiError::Unreachable {
                                server: client.base().to_string(),
                                cause: "the server closed the event stream".into(),
                            });
                        }
                        Ok(Some(Err(e))) => break Some(e),
                        Ok(Some(Ok(ev))) => {
                            // Ids are strictly increasing: anything else is a replay.
                            if last_id.is_some_and(|l| ev.id <= l) {
                                continue;
                            }
                            last_id = Some(ev.id);
                            if tx.send(StreamMsg::Event(ev)).is_err() {
                                return;
                            }
                        }
                    }
                };
                match err {
                    None => continue,
                    Some(e) => {
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
