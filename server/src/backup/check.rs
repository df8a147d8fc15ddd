//! Is a file a Leasehold database this build understands, and is it whole.

use std::path::Path;
use std::time::Duration;

use rusqlite::{Connection, OpenFlags};

use super::BackupError;
use crate::store::SCHEMA_VERSION;

/// Tables every Leasehold schema since v1 has.
const OUR_TABLES: &[&str] = &["leases", "events", "meta"];

/// Open `path` without the right to change it (a running server's
/// database, or the file to restore from).
pub(super) fn open_read_only(path: &Path) -> Result<Connection, BackupError> {
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let conn = Connection::open_with_flags(path, flags).map_err(BackupError::sqlite(path))?;
    // The server's checkpoint can hold the WAL's locks for a moment.
    conn.busy_timeout(Duration::from_secs(5))
        .map_err(BackupError::sqlite(path))?;
    Ok(conn)
}

/// The schema version of a Leasehold database at most as new as this build;
/// anything else is refused with the reason.
pub(super) fn leasehold_version(conn: &Connection, path: &Path) -> Result<i64, BackupError> {
    let not_ours = |reason: String| BackupError::NotLeasehold {
        path: path.to_path_buf(),
        reason,
    };
    // "file is not a database" and the like come from the first read.
    let version: i64 = conn
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .map_err(|e| not_ours(e.to_string()))?;
    if version <= 0 {
        return Err(not_ours(format!("schema version {version}")));
    }
    if version > SCHEMA_VERSION {
        return Err(BackupError::SchemaTooNew {
            path: path.to_path_buf(),
            version,
            supported: SCHEMA_VERSION,
        });
    }
    for table in OUR_TABLES {
        let found: bool = conn
            .query_row(
                "SELECT count(*) > 0 FROM sqlite_master WHERE type = 'table' AND name = ?1",
                [table],
                |r| r.get(0),
            )
            .map_err(|e| not_ours(e.to_string()))?;
        if !found {
            return Err(not_ours(format!("it has no {table} table")));
        }
    }
    Ok(version)
}

/// `PRAGMA integrity_check` says `ok`, or the first problem it found.
pub(super) fn integrity_ok(conn: &Connection, path: &Path) -> Result<(), BackupError> {
    let first: String = conn
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .map_err(BackupError::sqlite(path))?;
    if first == "ok" {
        Ok(())
    } else {
        Err(BackupError::Integrity {
            path: path.to_path_buf(),
            detail: first,
        })
    }
}

/// The newest event id ever handed out (`sqlite_sequence` outlives pruning),
/// 0 if none.
pub(super) fn last_event_id(conn: &Connection, path: &Path) -> Result<i64, BackupError> {
    conn.query_row(
        "SELECT coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'events'), 0)",
        [],
        |r| r.get(0),
    )
    .map_err(BackupError::sqlite(path))
}
