//! The console's event loop: the only part that touches the terminal.
//!
//! Five producers feed one channel of [`AppEvent`]s: terminal input, a 1 Hz
//! tick, the poller (the licenses every second, with backoff while the
//! server is away), the SSE stream ([`crate::stream`]) and the pools' usage
//! every 30 s or less often (`console/usage.rs`); pages of holders arrive as the app asks
//! for them (`console/pages.rs`: the app decides when, on keys, stream events
//! and ticks). The loop hands each event to [`App::update`], carries out the
//! [`Command`]s it returns in background tasks, and redraws once per batch of
//! events: on input, on data and on the tick, never in a busy loop and never
//! with a full clear.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use crossterm::event::{Event as TermEvent, EventStream, KeyEventKind};
use futures_util::StreamExt;
use leasehold_common::Timestamp;
use leasehold_common::api::RevokeRequest;
use ratatui::DefaultTerminal;
use ratatui::layout::Rect;
use tokio::sync::{Notify, mpsc};

use crate::api::{AdminClient, ApiError};
use crate::app::{App, AppEvent, Command, RevokeOutcome, Snapshot};
use crate::stream::{self, BACKOFF_MAX, StreamMsg};
use crate::ui;

mod pages;
mod usage;

/// The local wall clock. The only place the console reads it.
pub fn local_now() -> Timestamp {
    Timestamp::from_datetime(chrono::Utc::now())
}

/// Is colour off? (<https://no-color.org>: set and not empty.)
pub fn no_color_from_env() -> bool {
    std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty())
}

/// Open the console and run it until the user quits.
pub async fn run(client: AdminClient, read_only: bool) -> anyhow::Result<()> {
    let app = App::new(client.base(), read_only, no_color_from_env());
    // `try_init` enters raw mode and the alternate screen, and installs a
    // panic hook that restores the terminal before the panic is printed.
    let mut terminal = ratatui::try_init().context("opening the terminal")?;
    let result = event_loop(&mut terminal, app, client).await;
    ratatui::restore();
    result
}

async fn event_loop(
    terminal: &mut DefaultTerminal,
    mut app: App,
    client: AdminClient,
) -> anyhow::Result<()> {
    let (tx, mut rx) = mpsc::unbounded_channel::<AppEvent>();
    let refresh = Arc::new(Notify::new());
    let mut tasks = tokio::task::JoinSet::new();
    tasks.spawn(input_task(tx.clone()));
    tasks.spawn(tick_task(tx.clone()));
    tasks.spawn(poll_task(client.clone(), tx.clone(), refresh.clone()));
    tasks.spawn(stream_task(client.clone(), tx.clone()));
    let usage_changed = Arc::new(Notify::new());
    tasks.spawn(usage::run(
        client.clone(),
        tx.clone(),
        usage_changed.clone(),
    ));
    let pages = pages::Fetcher::new(client.clone(), tx.clone());

    loop {
        let size = terminal.size()?;
        let now = local_now();
        let area = Rect::new(0, 0, size.width, size.height);
        let (holders, events) = ui::page_rows(area, &app, now);
        app.set_page_rows(holders, events);
        terminal.draw(|frame| ui::draw(frame, &app, now))?;

        // Wait for one event, then take whatever else is already queued so
        // a burst (10,000-row snapshot, SSE backlog) costs one redraw.
        let Some(first) = rx.recv().await else { break };
        let mut batch = vec![first];
        while let Ok(more) = rx.try_recv() {
            batch.push(more);
        }
        for event in batch {
            if let AppEvent::StreamEvent(ev) = &event
                && usage::changes_usage(ev.kind)
            {
                usage_changed.notify_one();
            }
            for cmd in app.update(event, local_now()) {
                run_command(cmd, &client, &tx, &refresh, &pages);
            }
        }
        if app.should_quit {
            break;
        }
    }
    tasks.abort_all();
    Ok(())
}

fn run_command(
    cmd: Command,
    client: &AdminClient,
    tx: &mpsc::UnboundedSender<AppEvent>,
    refresh: &Arc<Notify>,
    pages: &pages::Fetcher,
) {
    match cmd {
        Command::Refresh => refresh.notify_one(),
        Command::FetchPage(req) => pages.fetch(req),
        Command::Revoke {
            seat_id,
            holder,
            reason,
            block_s,
            force,
        } => {
            let client = client.clone();
            let tx = tx.clone();
            tokio::spawn(async move {
                let body = RevokeRequest {
                    reason,
                    block_s,
                    force,
                };
                let outcome = match client.revoke(&seat_id, &body).await {
                    Ok(()) => RevokeOutcome::Revoked,
                    Err(ApiError::UnknownSeat { .. }) => RevokeOutcome::Vanished,
                    Err(ApiError::Borrowed { message }) => RevokeOutcome::Borrowed(message),
                    Err(e) => RevokeOutcome::Failed(e.to_string()),
                };
                tracing::info!(seat_id, holder, ?body, ?outcome, "revoke");
                let _ = tx.send(AppEvent::RevokeDone {
                    seat_id,
                    holder,
                    outcome,
                });
            });
        }
    }
}

async fn input_task(tx: mpsc::UnboundedSender<AppEvent>) {
    let mut events = EventStream::new();
    while let Some(ev) = events.next().await {
        let app_event = match ev {
            Ok(TermEvent::Key(k)) if k.kind != KeyEventKind::Release => AppEvent::Key(k),
            Ok(TermEvent::Resize(..)) => AppEvent::Resize,
            Ok(_) => continue,
            Err(e) => {
                tracing::error!("terminal input: {e}");
                return;
            }
        };
        if tx.send(app_event).is_err() {
            return;
        }
    }
}

async fn tick_task(tx: mpsc::UnboundedSender<AppEvent>) {
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    loop {
        tick.tick().await;
        if tx.send(AppEvent::Tick).is_err() {
            return;
        }
    }
}

/// Poll the licenses every second (one cheap query; the holders are paged,
/// `console/pages.rs`); while the server is away, back off (1 s, 2 s, 4 s
/// ... 10 s). A [`Command::Refresh`] cuts the wait short.
async fn poll_task(client: AdminClient, tx: mpsc::UnboundedSender<AppEvent>, refresh: Arc<Notify>) {
    let mut backoff = Duration::from_secs(1);
    loop {
        let wait = match client.licenses().await {
            Ok(licenses) => {
                backoff = Duration::from_secs(1);
                let snap = Snapshot {
                    licenses,
                    received_at: local_now(),
                };
                if tx.send(AppEvent::Snapshot(Box::new(snap))).is_err() {
                    return;
                }
                Duration::from_secs(1)
            }
            Err(e) => {
                tracing::warn!("poll: {e}");
                if tx
                    .send(AppEvent::PollFailed {
                        error: e.to_string(),
                    })
                    .is_err()
                {
                    return;
                }
                let wait = backoff;
                backoff = (backoff * 2).min(BACKOFF_MAX);
                wait
            }
        };
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            _ = refresh.notified() => {}
        }
    }
}

async fn stream_task(client: AdminClient, tx: mpsc::UnboundedSender<AppEvent>) {
    let (stx, mut srx) = mpsc::unbounded_channel();
    let stream = tokio::spawn(stream::run(client, None, stx));
    while let Some(msg) = srx.recv().await {
        let ev = match msg {
            StreamMsg::Up => AppEvent::StreamUp,
            StreamMsg::Event(e) => AppEvent::StreamEvent(Box::new(e)),
            StreamMsg::Down(e) => AppEvent::StreamDown {
                error: e.to_string(),
            },
        };
        if tx.send(ev).is_err() {
            break;
        }
    }
    stream.abort();
}
