//! Keeping the WAL small while the writer commits without pause.
//!
//! SQLite copies WAL frames back into the database in a *checkpoint*, and
//! starts the WAL over from its first frame only when a write transaction
//! begins while every frame has been copied. A background checkpoint can
//! never see that under sustained load: the writer appends new frames while
//! it copies. Measured before this module: the WAL grew by ≈ 30 MB/s under
//! the heartbeat bench and never shrank, and every COMMIT's sync then had to
//! write the file's new size too.
//!
//! So the work is split. The `store-checkpoint` thread copies frames with
//! PASSIVE checkpoints (it never blocks the writer); once the WAL is longer
//! than [`RESTART_FRAMES`] (`StoreOptions::wal_restart_frames`) and a pass
//! has copied nearly all of it, it asks the writer to catch up. The writer,
//! between two batches, runs one PASSIVE checkpoint of its own for the frames
//! committed since that pass began, so its next transaction restarts the WAL
//! at frame one. The file then keeps its size and a sync writes data only.
//!
//! A catch-up costs the writer one sync of the database file. SQLite syncs
//! the database only when a checkpoint reaches the end of the WAL, so the
//! background passes left their copied pages dirty and the catch-up wrote
//! them all back: 40–120 ms with a million leases. The checkpoint thread now
//! syncs the database after each pass ([`sync_database`]), and a catch-up
//! while a million leases are reaped takes ≈ 22 ms.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use rusqlite::Connection;

use crate::store::StoreError;

/// By default, a WAL longer than this (in frames: 1 KiB pages, so ≈ 256 MiB)
/// is restarted. Each restart costs the writer one catch-up, a stall of one
/// database sync (before [`sync_database`]: ≈ 10 ms under the heartbeat
/// bench, 40–120 ms with a million leases in the store). At 64 MiB those
/// stalls came every two or three seconds at full load and showed in the p99
/// of checkouts with 1,000,000 leases; at 256 MiB they are four times
/// rarer. A lighter load restarts the WAL on its own whenever a background
/// pass copies everything.
pub const RESTART_FRAMES: i64 = 262_144;

/// The writer's catch-up is asked for only when a pass left at most this many
/// of the frames it saw uncopied (readers of old snapshots can hold frames
/// back). What the catch-up copies is what was committed while the pass ran.
const CATCH_UP_FRAMES: i64 = 512;

/// By default, how often the checkpointer copies committed frames into the
/// database when it is not far behind.
pub const CHECKPOINT_EVERY: Duration = Duration::from_millis(500);

/// What the checkpointer and the writer share.
#[derive(Debug)]
pub struct WalHousekeeping {
    restart_frames: i64,
    /// Set by the checkpointer, taken by the writer.
    catch_up_wanted: AtomicBool,
}

/// What one `PRAGMA wal_checkpoint` reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CheckpointResult {
    /// Frames in the WAL when the checkpoint began.
    pub frames: i64,
    /// Of those, frames now copied into the database.
    pub copied: i64,
}

/// One PASSIVE checkpoint: copy what no reader still needs, never wait.
pub fn passive_checkpoint(conn: &Connection) -> rusqlite::Result<CheckpointResult> {
    conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |r| {
        Ok(CheckpointResult {
            frames: r.get(1)?,
            copied: r.get(2)?,
        })
    })
}

impl WalHousekeeping {
    pub fn new(restart_frames: i64) -> WalHousekeeping {
        WalHousekeeping {
            restart_frames,
            catch_up_wanted: AtomicBool::new(false),
        }
    }

    /// The writer, between batches: if asked, copy the last frames so the
    /// next transaction starts the WAL over. Returns whether it ran.
    pub fn writer_catch_up(&self, conn: &Connection) -> bool {
        if !self.catch_up_wanted.swap(false, Ordering::Relaxed) {
            return false;
        }
        if let Err(e) = passive_checkpoint(conn) {
            tracing::debug!("checkpoint catch-up: {e}");
        }
        true
    }

    /// What the checkpointer does with a pass's result: ask the writer to
    /// finish the job once the WAL is long and nearly all copied. Returns
    /// whether another pass should follow at once: much is left to copy and
    /// the last pass got somewhere (a reader holding an old snapshot stops
    /// progress, and then the thread must not spin).
    fn after_pass(&self, previous: Option<CheckpointResult>, pass: CheckpointResult) -> bool {
        if pass.frames < self.restart_frames {
            return false;
        }
        if pass.frames - pass.copied <= CATCH_UP_FRAMES {
            self.catch_up_wanted.store(true, Ordering::Relaxed);
            return false;
        }
        previous.is_none_or(|p| p.copied != pass.copied)
    }
}

/// Flush the database file's pages that checkpoints have copied into it.
///
/// SQLite syncs the database only when a checkpoint reaches the end of the
/// WAL, which a background pass never does while the writer commits. Its
/// copied pages then piled up dirty in the kernel, and the writer's catch-up,
/// which does reach the end, had to write them all back: 40–120 ms (perf:
/// `ext4_do_writepages` under `walCheckpoint`). Syncing here moves that wait
/// to this thread. A failure only means the catch-up's own sync does it.
/// The file is opened once, beside the thread's connection (`fsync` flushes
/// the file's pages whichever descriptor wrote them).
fn sync_database(database: &std::fs::File) {
    if let Err(e) = database.sync_data() {
        tracing::debug!("checkpoint: syncing the database: {e}");
    }
}

/// The checkpoint thread and the sender whose drop stops it.
pub type Checkpointer = (std::sync::mpsc::Sender<()>, JoinHandle<()>);

/// Start the `store-checkpoint` thread on its own connection (`open`). On
/// stop it truncates the WAL, so a clean shutdown leaves a small file.
pub fn spawn_checkpointer(
    open: impl Fn() -> Result<Connection, StoreError> + Send + 'static,
    wal: Arc<WalHousekeeping>,
    every: Duration,
) -> Result<Checkpointer, StoreError> {
    let (stop, stopped) = std::sync::mpsc::channel::<()>();
    let handle = std::thread::Builder::new()
        .name("store-checkpoint".into())
        .spawn(move || {
            // The connection, and the database file opened once beside it
            // for [`sync_database`].
            let mut conn: Option<(Connection, Option<std::fs::File>)> = None;
            let mut wait = every;
            let mut previous = None;
            while let Err(std::sync::mpsc::RecvTimeoutError::Timeout) = stopped.recv_timeout(wait) {
                if conn.is_none() {
                    conn = open().ok().map(|c| {
                        let file = c.path().and_then(|p| std::fs::File::open(p).ok());
                        (c, file)
                    });
                }
                let Some((c, database)) = &conn else { continue };
                let pass = passive_checkpoint(c);
                if let Some(database) = database
                    && pass
                        .as_ref()
                        .is_ok_and(|p| previous.is_none_or(|q: CheckpointResult| q != *p))
                {
                    sync_database(database);
                }
                wait = match &pass {
                    Ok(p) if wal.after_pass(previous, *p) => Duration::ZERO,
                    Ok(_) => every,
                    Err(e) => {
                        tracing::debug!("checkpoint: {e}");
                        every
                    }
                };
                previous = pass.ok();
            }
            if let Some((c, _)) = &conn {
                let _ = c.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()));
            }
        })
        .map_err(|source| StoreError::ThreadSpawn {
            thread: "checkpoint",
            source,
        })?;
    Ok((stop, handle))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pass(frames: i64, copied: i64) -> CheckpointResult {
        CheckpointResult { frames, copied }
    }

    #[test]
    fn a_short_wal_needs_nothing() {
        let wal = WalHousekeeping::new(RESTART_FRAMES);
        assert!(!wal.after_pass(None, pass(RESTART_FRAMES - 1, 0)));
        assert!(!wal.catch_up_wanted.load(Ordering::Relaxed));
    }

    #[test]
    fn a_long_wal_far_behind_gets_another_pass_at_once() {
        let wal = WalHousekeeping::new(RESTART_FRAMES);
        let first = pass(RESTART_FRAMES * 3, RESTART_FRAMES);
        assert!(wal.after_pass(None, first));
        let second = pass(RESTART_FRAMES * 4, RESTART_FRAMES * 2);
        assert!(wal.after_pass(Some(first), second));
        assert!(!wal.catch_up_wanted.load(Ordering::Relaxed));
    }

    #[test]
    fn no_progress_waits_instead_of_spinning() {
        let wal = WalHousekeeping::new(RESTART_FRAMES);
        let pinned = pass(RESTART_FRAMES * 3, RESTART_FRAMES);
        assert!(!wal.after_pass(Some(pinned), pass(RESTART_FRAMES * 4, RESTART_FRAMES)));
    }

    #[test]
    fn a_long_wal_nearly_copied_asks_the_writer() {
        let wal = WalHousekeeping::new(RESTART_FRAMES);
        assert!(!wal.after_pass(None, pass(RESTART_FRAMES + 100, RESTART_FRAMES)));
        assert!(wal.catch_up_wanted.load(Ordering::Relaxed));
    }
}
