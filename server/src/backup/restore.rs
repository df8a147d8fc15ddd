//! `leaseholdd restore`: a backup into a stopped server's data dir.
//!
//! The data dir's lock is held throughout, so no server starts on a half
//! restored database; the backup is checked before anything in the data
//! dir changes, and the database appears by one rename.

use std::fs::File;
use std::path::{Path, PathBuf};

use super::copy::{self, Pace};
use super::{BackupError, check};
use crate::store::database_path;

/// What a restore put in place.
#[derive(Debug)]
pub struct RestoreReport {
    pub database: PathBuf,
    pub schema_version: i64,
    /// The newest event id in it: the server numbers new events after it.
    pub last_event_id: i64,
}

/// Replace `<data_dir>/leasehold.db` with the database in `from` (only
/// with `force` if there is one already).
pub fn restore(data_dir: &Path, from: &Path, force: bool) -> Result<RestoreReport, BackupError> {
    if !from.is_file() {
        return Err(BackupError::Io {
            what: "cannot read",
            path: from.to_path_buf(),
            source: std::io::Error::from(std::io::ErrorKind::NotFound),
        });
    }
    let source = check::open_read_only(from)?;
    let schema_version = check::leasehold_version(&source, from)?;
    check::integrity_ok(&source, from)?;

    std::fs::create_dir_all(data_dir)
        .map_err(BackupError::io("cannot create data dir", data_dir))?;
    let _lock = lock_stopped(data_dir)?;
    let database = database_path(data_dir);
    if database.exists() && !force {
        return Err(BackupError::Exists(database));
    }
    let (temp, copied) = copy::snapshot_to_temp(&source, &database, Pace::AT_ONCE)?;
    drop(source);
    same_owner_as(&temp.path, data_dir)?;
    // A WAL left by the old database would be replayed onto the new one.
    for suffix in ["-wal", "-shm", "-journal"] {
        let mut stale = database.clone().into_os_string();
        stale.push(suffix);
        let stale = PathBuf::from(stale);
        match std::fs::remove_file(&stale) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(BackupError::io("cannot remove", &stale)(e));
            }
            _ => {}
        }
    }
    temp.persist()?;
    Ok(RestoreReport {
        database,
        schema_version,
        last_event_id: copied.last_event_id,
    })
}

/// Give the restored file the data dir's owner: a restore run as root into
/// a service's state directory must leave a database the service can write.
fn same_owner_as(file: &Path, dir: &Path) -> Result<(), BackupError> {
    use std::os::unix::fs::MetadataExt;
    let owner = std::fs::metadata(dir).map_err(BackupError::io("cannot read", dir))?;
    let current = std::fs::metadata(file).map_err(BackupError::io("cannot read", file))?;
    if (current.uid(), current.gid()) == (owner.uid(), owner.gid()) {
        return Ok(());
    }
    std::os::unix::fs::chown(file, Some(owner.uid()), Some(owner.gid()))
        .map_err(BackupError::io("cannot give the data dir's owner to", file))
}

/// The lock a running server holds on its data dir (`lib.rs`,
/// `prepare_data_dir`); taken here so no server starts mid-restore.
fn lock_stopped(data_dir: &Path) -> Result<File, BackupError> {
    let path = data_dir.join(crate::DATA_DIR_LOCK);
    let lock = File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(BackupError::io("cannot open", &path))?;
    match lock.try_lock() {
        Ok(()) => Ok(lock),
        Err(std::fs::TryLockError::WouldBlock) => Err(BackupError::InUse(data_dir.to_path_buf())),
        Err(std::fs::TryLockError::Error(e)) => Err(BackupError::io("cannot lock", &path)(e)),
    }
}
