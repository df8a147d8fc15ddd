//! What can go wrong in the store, one variant per failure.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("database error: {0}")]
    Sqlite(#[from] rusqlite::Error),
    #[error("PostgreSQL: {}", pg_message(.0))]
    Postgres(#[from] postgres::Error),
    /// PostgreSQL cannot be reached (or refused the batch as a whole):
    /// nothing was changed.
    #[error("the database is unavailable: {0}")]
    Unavailable(String),
    #[error("the event log holds an event of unknown kind {0:?}")]
    UnknownEventKind(String),
    #[error("the usage history holds a session ended in an unknown way {0:?}")]
    UnknownSessionEnd(String),
    #[error("the usage history holds a denial of unknown reason {0:?}")]
    UnknownDenialReason(String),
    #[error("the cluster's licenses policy is unreadable: {0}")]
    ClusterPolicy(String),
    #[error("the store is shutting down")]
    Closed,
    /// The batch's `COMMIT` failed and was rolled back. The text is SQLite's:
    /// the batch's one failure is shared by every command in it.
    #[error("commit failed: {0}")]
    CommitFailed(String),
    /// `BEGIN IMMEDIATE` failed, so the batch was not applied at all.
    #[error("cannot begin a transaction: {0}")]
    BeginFailed(String),
    #[error("cannot start the {thread} thread")]
    ThreadSpawn {
        thread: &'static str,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot switch {} to WAL mode (got {mode})", path.display())]
    NotWal { path: PathBuf, mode: String },
    /// A negative `user_version`: `version as usize` would wrap and skip
    /// every migration.
    #[error("database schema version {version} was not written by leaseholdd")]
    SchemaNotOurs { version: i64 },
    #[error(
        "database schema version {version} is newer than this leaseholdd understands ({supported})"
    )]
    SchemaTooNew { version: i64, supported: i64 },
    /// A store numbered a different count of events than it was asked to
    /// append; the command is rolled back rather than log half of it.
    #[error("asked to append {asked} event(s), the store numbered {got}")]
    EventIds { asked: usize, got: usize },
    /// A test delivery to a webhook the licenses file does not name.
    #[error("no webhook named {0:?} in the licenses file")]
    UnknownWebhook(String),
}

/// The server's own words for a database error (`postgres::Error` alone
/// says only "db error"), else the client's.
fn pg_message(e: &postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => format!("{} ({})", db.message(), db.code().code()),
        None => e.to_string(),
    }
}
