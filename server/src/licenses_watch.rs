//! Watching the licenses file for live edits.
//!
//! An edit is taken only when the file has stopped changing (debounced, and
//! read twice to the same bytes) and parses and validates as a whole; any
//! problem keeps the last good policy, logs it and records a `config` event.
//! Shrinking a pool evicts nobody: the counter simply refuses new checkouts
//! until enough leases end.

use std::path::{Path, PathBuf};
use std::time::Duration;

use leasehold_common::api::EventKind;
use notify::{RecursiveMode, Watcher};
use tokio::sync::{mpsc, watch};

use crate::licenses::{LicensesHandle, parse_edit};
use crate::store::{Store, StoreKind};

/// How long the file must be quiet before an edit is read.
const DEBOUNCE: Duration = Duration::from_millis(250);
/// A backstop for filesystems where change notifications are lost.
const POLL_EVERY: Duration = Duration::from_secs(5);

/// Watch the licenses file and hot-reload it until `shutdown` flips. Every
/// outcome is a `config` event (waiters in line wake on it: a grown pool may
/// let them in). `loaded` is the text the server started with: an edit made
/// between that read and this watch is compared with it, not lost.
pub async fn watch_file(
    path: PathBuf,
    loaded: Vec<u8>,
    handle: LicensesHandle,
    store: Store,
    mut shutdown: watch::Receiver<bool>,
) {
    let (_watcher, mut rx) = watch_directory_of(&path);
    let mut last_seen = Some(loaded);
    // Anything written before the watch began: look once at the start.
    let mut look_now = true;
    loop {
        tokio::select! {
            _ = shutdown.changed() => return,
            _ = std::future::ready(()), if look_now => look_now = false,
            got = rx.recv() => {
                if got.is_none() {
                    // Watcher gone: fall back to polling only.
                    tokio::time::sleep(POLL_EVERY).await;
                }
                // Debounce: wait until events stop arriving.
                while let Ok(Some(())) = tokio::time::timeout(DEBOUNCE, rx.recv()).await {}
            }
            _ = tokio::time::sleep(POLL_EVERY) => {}
        }
        let Some(bytes) = read_settled(&path).await else {
            continue; // mid-rename or deleted: wait for the next change
        };
        if last_seen.as_deref() == Some(bytes.as_slice()) {
            continue;
        }
        last_seen = Some(bytes.clone());
        apply_edit(&path, &bytes, &handle, &store).await;
    }
}

/// Change notifications for `path`, or `None` (poll only) if the platform
/// will not watch its directory. Keep the watcher alive as long as `rx`.
fn watch_directory_of(
    path: &Path,
) -> (
    Option<notify::RecommendedWatcher>,
    mpsc::UnboundedReceiver<()>,
) {
    let (tx, rx) = mpsc::unbounded_channel::<()>();
    // Watch the directory, not the file: editors that save by rename replace
    // the inode, and a watch on the old file would go deaf.
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."));
    let file_name = path.file_name().map(|n| n.to_os_string());
    let watcher = notify::recommended_watcher(move |res: notify::Result<notify::Event>| {
        if let Ok(ev) = res
            && (ev.paths.is_empty()
                || ev
                    .paths
                    .iter()
                    .any(|p| p.file_name() == file_name.as_deref()))
        {
            let _ = tx.send(());
        }
    })
    .and_then(|mut w| w.watch(&dir, RecursiveMode::NonRecursive).map(|()| w));
    match watcher {
        Ok(w) => (Some(w), rx),
        Err(e) => {
            tracing::warn!(
                "cannot watch {} ({e}); checking it every {}s instead",
                dir.display(),
                POLL_EVERY.as_secs()
            );
            (None, rx)
        }
    }
}

/// Read the file twice, a moment apart, and accept it only if both reads
/// agree: a half-written file must never be taken for the new policy.
async fn read_settled(path: &Path) -> Option<Vec<u8>> {
    let first = tokio::fs::read(path).await.ok()?;
    tokio::time::sleep(Duration::from_millis(50)).await;
    let second = tokio::fs::read(path).await.ok()?;
    (first == second).then_some(first)
}

async fn apply_edit(path: &Path, bytes: &[u8], handle: &LicensesHandle, store: &Store) {
    let detail = match parse_edit(bytes) {
        // Several replicas: the database holds the policy. Publishing records
        // one `config` event for the cluster, and every replica's writer
        // takes the new policy at its next batch.
        Ok(new) if store.kind() == StoreKind::Postgres => {
            let text = String::from_utf8_lossy(bytes).into_owned();
            match store.publish_licenses(text, new.clone(), "reloaded").await {
                Some(Ok(published)) => {
                    handle.replace(new);
                    tracing::info!(
                        "reloaded {} (cluster policy version {}): {}",
                        path.display(),
                        published.version,
                        if published.changes.is_empty() {
                            "no policy change".to_string()
                        } else {
                            published.changes.join("; ")
                        }
                    );
                }
                Some(Err(e)) => tracing::error!(
                    "cannot make {} the cluster's policy: {e}; the previous policy stays in force",
                    path.display()
                ),
                None => {}
            }
            return;
        }
        Ok(new) => {
            let old = handle.current();
            let changes = old.describe_changes(&new);
            handle.replace(new);
            let summary = if changes.is_empty() {
                "no policy change".to_string()
            } else {
                changes.join("; ")
            };
            tracing::info!("reloaded {}: {summary}", path.display());
            format!("reloaded: {summary}")
        }
        Err(problem) => {
            tracing::warn!(
                "rejected edit of {}: {problem}; the previous policy stays in force",
                path.display()
            );
            format!("rejected edit, previous policy kept: {problem}")
        }
    };
    if let Err(e) = store.record_event(EventKind::Config, None, detail).await {
        tracing::error!("cannot record config event: {e}");
    }
}
