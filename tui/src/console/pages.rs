//! Carries out the app's page requests ([`Command::FetchPage`]): each in a
//! task of its own, answered with [`AppEvent::Page`] or `PageFailed`. A
//! request that asks to wait (the filter while typing) is dropped if a newer
//! one was made meanwhile, so typing a word sends one request, not one per
//! key.
//!
//! [`Command::FetchPage`]: crate::app::Command::FetchPage

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tokio::sync::mpsc;

use super::local_now;
use crate::api::{AdminClient, SeatsPageQuery};
use crate::app::{AppEvent, PageReply, PageRequest};

#[derive(Debug, Clone)]
pub struct Fetcher {
    client: AdminClient,
    tx: mpsc::UnboundedSender<AppEvent>,
    /// The id of the newest request (the app's ids only grow).
    newest: Arc<AtomicU64>,
}

impl Fetcher {
    pub fn new(client: AdminClient, tx: mpsc::UnboundedSender<AppEvent>) -> Fetcher {
        Fetcher {
            client,
            tx,
            newest: Arc::new(AtomicU64::new(0)),
        }
    }

    pub fn fetch(&self, req: PageRequest) {
        self.newest.store(req.id, Ordering::Relaxed);
        let this = self.clone();
        tokio::spawn(async move {
            if req.delay_ms > 0 {
                tokio::time::sleep(Duration::from_millis(req.delay_ms)).await;
                if this.newest.load(Ordering::Relaxed) != req.id {
                    return;
                }
            }
            let query = SeatsPageQuery {
                q: &req.q,
                sort: req.sort,
                desc: req.desc,
                limit: req.limit,
                after: req.after.as_deref(),
            };
            let sent = Instant::now();
            let event = match this.client.seats_page(&query).await {
                Ok(page) => AppEvent::Page(Box::new(PageReply {
                    id: req.id,
                    page,
                    received_at: local_now(),
                    elapsed_ms: sent.elapsed().as_millis() as u64,
                })),
                Err(e) => {
                    tracing::warn!("holders page: {e}");
                    AppEvent::PageFailed {
                        id: req.id,
                        error: e.to_string(),
                    }
                }
            };
            let _ = this.tx.send(event);
        });
    }
}
