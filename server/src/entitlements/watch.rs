//! When the loader scans: at start (before the server answers anyone),
//! whenever the directory changes (debounced), after a licenses-file
//! reload, when an entitlement's term next changes state (its events on
//! time), and in any case once a minute.

use std::path::Path;
use std::time::Duration;

use notify::{RecursiveMode, Watcher};
use tokio::sync::{mpsc, watch};

use super::loader::Loader;

/// How long the directory must be quiet before it is read.
const DEBOUNCE: Duration = Duration::from_millis(250);
/// A backstop for filesystems where change notifications are lost.
const RESCAN_EVERY: Duration = Duration::from_secs(60);

/// Scan on every reason to, until `shutdown` flips. The caller ran the
/// first scan.
pub async fn run(mut loader: Loader, mut shutdown: watch::Receiver<bool>) {
    let (_watcher, mut changes) = watch_dir(&loader.dir);
    let licenses = loader.licenses.clone();
    // Anything written between the first scan and the watch: look again.
    loader.scan().await;
    loop {
        let until_next_state = next_state_change(&loader).unwrap_or(RESCAN_EVERY);
        tokio::select! {
            _ = shutdown.changed() => return,
            got = changes.recv() => {
                if got.is_none() {
                    tokio::time::sleep(RESCAN_EVERY).await;
                }
                while let Ok(Some(())) = tokio::time::timeout(DEBOUNCE, changes.recv()).await {}
            }
            _ = licenses.file_changed() => {}
            _ = tokio::time::sleep(until_next_state.min(RESCAN_EVERY)) => {}
        }
        loader.scan().await;
    }
}

/// Until the next `nbf`, `exp` or `exp + grace` of an entitlement in force
/// (a little after, so the state has changed when the scan looks).
fn next_state_change(loader: &Loader) -> Option<Duration> {
    let now = loader.clock.now().as_millis();
    let licenses = loader.licenses.current();
    licenses
        .entitled()
        .ledger()
        .entitlements()
        .iter()
        .flat_map(|e| {
            let c = &e.claims;
            [
                c.nbf.map(|s| s * 1000),
                c.exp.map(|s| s * 1000),
                c.ends_at_ms(),
            ]
        })
        .flatten()
        .filter(|&at| at > now)
        .min()
        .map(|at| Duration::from_millis((at - now) as u64 + 50))
}

/// Change notifications for `dir`; `None` (rescans only) if the platform
/// will not watch it. Keep the watcher alive as long as the receiver.
fn watch_dir(
    dir: &Path,
) -> (
    Option<notify::RecommendedWatcher>,
    mpsc::UnboundedReceiver<()>,
) {
    let (tx, rx) = mpsc::unbounded_channel::<()>();
    let watcher = notify::recommended_watcher(move |res: notify::Result<notify::Event>| {
        if res.is_ok() {
            let _ = tx.send(());
        }
    })
    .and_then(|mut w| w.watch(dir, RecursiveMode::NonRecursive).map(|()| w));
    match watcher {
        Ok(w) => (Some(w), rx),
        Err(e) => {
            tracing::warn!(
                "cannot watch {} ({e}); reading it every {}s instead",
                dir.display(),
                RESCAN_EVERY.as_secs()
            );
            (None, rx)
        }
    }
}
