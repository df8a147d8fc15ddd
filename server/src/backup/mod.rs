//! `leaseholdd backup` and `leaseholdd restore`: the SQLite database copied
//! out of a data dir while a server runs on it, and back into a stopped
//! server's data dir.
//!
//! - [`check`]: is a file a Leasehold database this build understands, and
//!   does it pass `PRAGMA integrity_check`.
//! - [`copy`]: SQLite's online backup API from one snapshot, paced, into a
//!   temp file that is renamed into place only when complete.
//! - [`restore`]: the data dir's lock, the stale WAL, the swap.
//!
//! PostgreSQL has its own tools (`pg_dump`, base backups, WAL archiving);
//! these commands refuse a data dir without a database.

mod check;
mod copy;
mod restore;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

pub use restore::{RestoreReport, restore};

use crate::store::database_path;

/// What can go wrong; each is one line after `leaseholdd: error: `.
#[derive(Debug, thiserror::Error)]
pub enum BackupError {
    #[error(
        "no Leasehold database at {} (is --data-dir right? on PostgreSQL use pg_dump instead)",
        .0.display()
    )]
    NoDatabase(PathBuf),
    #[error("{} is not a Leasehold database: {reason}", path.display())]
    NotLeasehold { path: PathBuf, reason: String },
    #[error(
        "{} has schema version {version}, newer than this leaseholdd understands ({supported}); use the newer leaseholdd",
        path.display()
    )]
    SchemaTooNew {
        path: PathBuf,
        version: i64,
        supported: i64,
    },
    #[error("{} already exists (--force replaces it)", .0.display())]
    Exists(PathBuf),
    #[error("data dir {} is in use by a running leaseholdd: stop it first", .0.display())]
    InUse(PathBuf),
    #[error("{} fails PRAGMA integrity_check: {detail}", path.display())]
    Integrity { path: PathBuf, detail: String },
    #[error("{what} {}: {source}", path.display())]
    Io {
        what: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}: {source}", path.display())]
    Sqlite {
        path: PathBuf,
        #[source]
        source: rusqlite::Error,
    },
}

impl BackupError {
    fn io(what: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> BackupError {
        let path = path.to_path_buf();
        move |source| BackupError::Io { what, path, source }
    }

    fn sqlite(path: &Path) -> impl FnOnce(rusqlite::Error) -> BackupError {
        let path = path.to_path_buf();
        move |source| BackupError::Sqlite { path, source }
    }
}

/// What a backup wrote.
#[derive(Debug)]
pub struct BackupReport {
    pub out: PathBuf,
    pub schema_version: i64,
    pub bytes: u64,
    /// The newest event in the copy (0 without events): what a restore
    /// starts from.
    pub last_event_id: i64,
    pub took: Duration,
}

/// Copy `<data_dir>/leasehold.db` to `out` as one consistent snapshot,
/// reading only (a server may be running on the data dir and keeps
/// serving). `out` appears only complete and checked.
pub fn backup(data_dir: &Path, out: &Path, force: bool) -> Result<BackupReport, BackupError> {
    let started = Instant::now();
    let db = database_path(data_dir);
    if !db.is_file() {
        return Err(BackupError::NoDatabase(db));
    }
    if out.exists() && !force {
        return Err(BackupError::Exists(out.to_path_buf()));
    }
    if out.is_dir() {
        return Err(BackupError::Io {
            what: "cannot write the backup to",
            path: out.to_path_buf(),
            source: std::io::Error::other("it is a directory"),
        });
    }
    let source = check::open_read_only(&db)?;
    let schema_version = check::leasehold_version(&source, &db)?;
    let copied = copy::snapshot_into(&source, out, copy::Pace::ONLINE)?;
    Ok(BackupReport {
        out: out.to_path_buf(),
        schema_version,
        bytes: copied.bytes,
        last_event_id: copied.last_event_id,
        took: started.elapsed(),
    })
}
