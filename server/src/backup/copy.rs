//! One consistent snapshot of a database, copied page by page into a temp
//! file beside its destination and renamed into place once whole.
//!
//! The source connection opens a read transaction before the copy and keeps
//! it to the end, so every step copies from the same snapshot. Without it,
//! SQLite's backup restarts from the first page whenever another connection
//! commits between two steps, which under a steady stream of heartbeats
//! means never finishing. In WAL mode that read transaction does not hold
//! up the server's writer; it only keeps the server's checkpoints from
//! copying frames newer than the snapshot until the backup ends (the WAL
//! grows meanwhile, and shrinks again afterwards).

use std::fs::File;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::Connection;
use rusqlite::backup::{Backup, StepResult};

use super::BackupError;
use super::check;

/// How much to copy per step and how long to rest between steps.
#[derive(Debug, Clone, Copy)]
pub(super) struct Pace {
    pages: i32,
    pause: Duration,
}

impl Pace {
    /// Beside a running server: 4 MiB at a time (1 KiB pages), then a rest,
    /// so the copy never takes both cores of a small machine for long (see
    /// BENCHMARKS.md, "Backup while serving").
    pub const ONLINE: Pace = Pace {
        pages: 4096,
        pause: Duration::from_millis(2),
    };
    /// Nobody else is using the database.
    pub const AT_ONCE: Pace = Pace {
        pages: -1,
        pause: Duration::from_millis(10),
    };
}

/// What a copy holds.
#[derive(Debug)]
pub(super) struct Copied {
    pub bytes: u64,
    pub last_event_id: i64,
}

/// Copy one snapshot of `source` to `out`: a temp file in `out`'s
/// directory, checked, synced, then renamed over `out`.
pub(super) fn snapshot_into(
    source: &Connection,
    out: &Path,
    pace: Pace,
) -> Result<Copied, BackupError> {
    let (temp, copied) = snapshot_to_temp(source, out, pace)?;
    temp.persist()?;
    Ok(copied)
}

/// The snapshot in a checked, synced temp file that becomes `dest` on
/// [`TempFile::persist`] (and is deleted if dropped before).
pub(super) fn snapshot_to_temp(
    source: &Connection,
    dest: &Path,
    pace: Pace,
) -> Result<(TempFile, Copied), BackupError> {
    let temp = TempFile::beside(dest)?;
    let mut target = Connection::open(&temp.path).map_err(BackupError::sqlite(&temp.path))?;
    let last_event_id = copy_pages(source, &mut target, &temp.path, pace)?;
    // One self-contained file: no -wal beside the copy. The server switches
    // a restored database back to WAL when it opens it.
    let _: String = target
        .query_row("PRAGMA journal_mode=DELETE", [], |r| r.get(0))
        .map_err(BackupError::sqlite(&temp.path))?;
    check::integrity_ok(&target, &temp.path)?;
    drop(target);
    // Holder names and the event log: readable by the owner only, like the
    // key files.
    std::fs::set_permissions(&temp.path, std::fs::Permissions::from_mode(0o600))
        .map_err(BackupError::io("cannot set the mode of", &temp.path))?;
    File::open(&temp.path)
        .and_then(|f| f.sync_all())
        .map_err(BackupError::io("cannot sync", &temp.path))?;
    let bytes = std::fs::metadata(&temp.path)
        .map_err(BackupError::io("cannot read", &temp.path))?
        .len();
    Ok((
        temp,
        Copied {
            bytes,
            last_event_id,
        },
    ))
}

/// Run the backup API inside one read transaction of `source`; returns the
/// snapshot's newest event id.
fn copy_pages(
    source: &Connection,
    target: &mut Connection,
    target_path: &Path,
    pace: Pace,
) -> Result<i64, BackupError> {
    let source_path = PathBuf::from(source.path().unwrap_or_default());
    let src_err = BackupError::sqlite(&source_path);
    // The first read fixes the snapshot every step then copies.
    source
        .execute_batch("BEGIN DEFERRED")
        .map_err(BackupError::sqlite(&source_path))?;
    let result = (|| {
        let last_event_id = check::last_event_id(source, &source_path)?;
        let backup = Backup::new(source, target).map_err(BackupError::sqlite(target_path))?;
        loop {
            match backup
                .step(pace.pages)
                .map_err(BackupError::sqlite(target_path))?
            {
                StepResult::Done => return Ok(last_event_id),
                StepResult::More | StepResult::Busy | StepResult::Locked => {
                    std::thread::sleep(pace.pause)
                }
                // The enum is non-exhaustive; treat anything new as "again".
                _ => std::thread::sleep(pace.pause),
            }
        }
    })();
    source.execute_batch("ROLLBACK").map_err(src_err)?;
    result
}

/// A file that is deleted unless it is renamed into place.
pub(super) struct TempFile {
    pub(super) path: PathBuf,
    dest: PathBuf,
    kept: bool,
}

impl TempFile {
    /// `.<name>.partial-<pid>` beside `dest`: the same file system, so the
    /// rename is atomic; a leftover from a crashed run is replaced.
    fn beside(dest: &Path) -> Result<TempFile, BackupError> {
        let name = dest
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "leasehold.db".to_string());
        let dir = match dest.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let path = dir.join(format!(".{name}.partial-{}", std::process::id()));
        match std::fs::remove_file(&path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(BackupError::io("cannot remove", &path)(e));
            }
            _ => {}
        }
        Ok(TempFile {
            path,
            dest: dest.to_path_buf(),
            kept: false,
        })
    }

    /// Rename over the destination and sync the directory, so the new name
    /// survives a power loss.
    pub(super) fn persist(mut self) -> Result<(), BackupError> {
        std::fs::rename(&self.path, &self.dest)
            .map_err(BackupError::io("cannot rename the copy to", &self.dest))?;
        self.kept = true;
        if let Some(dir) = self.dest.parent().filter(|p| !p.as_os_str().is_empty()) {
            File::open(dir)
                .and_then(|d| d.sync_all())
                .map_err(BackupError::io("cannot sync directory", dir))?;
        }
        Ok(())
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        if !self.kept {
            let _ = std::fs::remove_file(&self.path);
            // The copy's rollback journal, if a failure left one.
            let mut journal = self.path.clone().into_os_string();
            journal.push("-journal");
            let _ = std::fs::remove_file(journal);
        }
    }
}
