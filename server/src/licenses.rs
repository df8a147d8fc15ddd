//! The licenses file: loading at start-up, and watching it for live edits.
//!
//! The policy in force is an `Arc<Licenses>` behind [`LicensesHandle`]; a
//! reload swaps the whole `Arc`, so every request sees one consistent policy.
//! An edit is taken only when the file has stopped changing (debounced, and
//! read twice to the same bytes) and parses and validates as a whole; any
//! problem keeps the last good policy, logs it and records a `config` event.
//! Shrinking a pool evicts nobody: the counter simply refuses new checkouts
//! until enough leases end.

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use leasehold_common::Licenses;
use leasehold_common::api::EventKind;
use notify::{RecursiveMode, Watcher};
use tokio::sync::{mpsc, watch};

use crate::store::Store;

/// The policy in force, shared by the HTTP layer, the writer and the reaper.
#[derive(Clone, Default)]
pub struct LicensesHandle(Arc<RwLock<Arc<Licenses>>>);

impl LicensesHandle {
    pub fn new(licenses: Licenses) -> Self {
        LicensesHandle(Arc::new(RwLock::new(Arc::new(licenses))))
    }

    pub fn current(&self) -> Arc<Licenses> {
        match self.0.read() {
            Ok(g) => g.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    pub fn replace(&self, licenses: Licenses) {
        let new = Arc::new(licenses);
        match self.0.write() {
            Ok(mut g) => *g = new,
            Err(poisoned) => *poisoned.into_inner() = new,
        }
    }
}

/// Read and validate the licenses file; the error is one line naming the
/// file and the problem.
pub fn load_file(path: &Path) -> Result<Licenses, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read licenses file {}: {e}", path.display()))?;
    Licenses::parse(&text).map_err(|e| format!("{}: {e}", path.display()))
}

/// How long the file must be quiet before an edit is read.
const DEBOUNCE: Duration = Duration::from_millis(250);
/// A backstop for filesystems where change notifications are lost.
const POLL_EVERY: Duration = Duration::from_secs(5);

/// Watch the licenses file and hot-reload it until `shutdown` flips. Every
/// outcome is a `config` event (waiters in line wake on it: a grown pool may
/// let them in).
pub async fn watch_file(
    path: PathBuf,
    handle: LicensesHandle,
    store: Store,
    mut shutdown: watch::Receiver<bool>,
) {
    let (tx, mut rx) = mpsc::unbounded_channel::<()>();
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
    let _watcher = match watcher {
        Ok(w) => Some(w),
        Err(e) => {
            tracing::warn!(
                "cannot watch {} ({e}); checking it every {}s instead",
                dir.display(),
                POLL_EVERY.as_secs()
            );
            None
        }
    };

    let mut last_seen = std::fs::read(&path).ok();
    loop {
        tokio::select! {
            _ = shutdown.changed() => return,
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

/// Read the file twice, a moment apart, and accept it only if both reads
/// agree: a half-written file must never be taken for the new policy.
async fn read_settled(path: &Path) -> Option<Vec<u8>> {
    let first = tokio::fs::read(path).await.ok()?;
    tokio::time::sleep(Duration::from_millis(50)).await;
    let second = tokio::fs::read(path).await.ok()?;
    (first == second).then_some(first)
}

async fn apply_edit(path: &Path, bytes: &[u8], handle: &LicensesHandle, store: &Store) {
    let parsed = std::str::from_utf8(bytes)
        .map_err(|_| "licenses file is not UTF-8".to_string())
        .and_then(|text| Licenses::parse(text).map_err(|e| e.to_string()));
    let detail = match parsed {
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
