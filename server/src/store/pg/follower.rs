//! The event follower: every replica's events, in id order, into this
//! replica's broadcast channel (SSE streams, waiters).
//!
//! `LISTEN` is only the wake-up; the events table is the truth. Ids are
//! gap-free and become visible in order (see the `cluster` row in
//! [`super::schema`]), so reading `id > last` after each wake-up, and on a
//! short poll in case a notification is lost, misses nothing and repeats
//! nothing.

use std::time::Duration;

use futures_util::StreamExt;
use leasehold_common::api::Event;
use tokio::sync::{broadcast, mpsc, watch};
use tokio_postgres::{AsyncMessage, NoTls};

use super::EVENTS_CHANNEL;
use super::pool::events_after;

/// How often the table is read without a notification.
const POLL_EVERY: Duration = Duration::from_millis(500);
/// Events read per query while catching up.
const PAGE: usize = 1000;
const RECONNECT_MAX: Duration = Duration::from_secs(2);

/// Follow the event log from `last` on until `stop` flips.
pub async fn follow(
    config: tokio_postgres::Config,
    events: broadcast::Sender<Event>,
    mut last: i64,
    mut stop: watch::Receiver<bool>,
) {
    let mut backoff = Duration::from_millis(100);
    loop {
        if *stop.borrow() {
            return;
        }
        match follow_connected(&config, &events, &mut last, &mut stop).await {
            Ok(()) => return,
            Err(e) => tracing::warn!("event follower: {e}; reconnecting"),
        }
        tokio::select! {
            _ = tokio::time::sleep(backoff) => {}
            _ = stop.changed() => return,
        }
        backoff = (backoff * 2).min(RECONNECT_MAX);
    }
}

/// One connection's worth of following; `Ok` when told to stop.
async fn follow_connected(
    config: &tokio_postgres::Config,
    events: &broadcast::Sender<Event>,
    last: &mut i64,
    stop: &mut watch::Receiver<bool>,
) -> Result<(), tokio_postgres::Error> {
    let (client, mut connection) = config.connect(NoTls).await?;
    let (wake_tx, mut wake) = mpsc::unbounded_channel::<()>();
    tokio::spawn(async move {
        let mut messages = futures_util::stream::poll_fn(move |cx| connection.poll_message(cx));
        while let Some(message) = messages.next().await {
            match message {
                Ok(AsyncMessage::Notification(_)) => {
                    let _ = wake_tx.send(());
                }
                Ok(_) => {}
                Err(e) => {
                    tracing::debug!("event follower connection: {e}");
                    break;
                }
            }
        }
    });
    client
        .batch_execute(&format!("LISTEN {EVENTS_CHANNEL}"))
        .await?;
    loop {
        loop {
            let page = match events_after(&client, *last, PAGE).await {
                Ok(page) => page,
                Err(e) => {
                    tracing::warn!("event follower: {e}");
                    break;
                }
            };
            let full = page.len() == PAGE;
            for event in page {
                *last = event.id;
                let _ = events.send(event);
            }
            if !full {
                break;
            }
        }
        if client.is_closed() {
            // Let the caller reconnect; the error says why.
            client.simple_query("SELECT 1").await?;
        }
        tokio::select! {
            woke = wake.recv() => {
                if woke.is_none() {
                    client.simple_query("SELECT 1").await?;
                }
            }
            _ = tokio::time::sleep(POLL_EVERY) => {}
            _ = stop.changed() => return Ok(()),
        }
    }
}
