//! Dashboard sign-in sessions (`/ui/login`): one row per session, keyed by
//! the SHA-256 of its id (the cookie), so the database never holds a usable
//! session id. Both stores keep them, so a session survives a restart and
//! works on every replica.
//!
//! On SQLite the writes are [`UiSessionOp`]s run by the writer thread (the
//! one writer); on PostgreSQL they are plain statements on the read pool
//! (`pg/ui_sessions.rs`): no lease rule is involved.

use leasehold_common::Timestamp;
use rusqlite::{Connection, OptionalExtension, params};

use super::StoreError;

/// One stored session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UiSessionRow {
    /// SHA-256 of the session id, lowercase hex.
    pub id_sha256: String,
    /// `admin` or `viewer`.
    pub role: String,
    pub created_at: Timestamp,
    /// The last use recorded (touched at most once per touch interval).
    pub last_seen_at: Timestamp,
    /// The absolute end (sign-in + lifetime).
    pub expires_at: Timestamp,
}

/// A write to the sessions table; the answer is the rows changed.
#[derive(Debug, Clone)]
pub enum UiSessionOp {
    Create(UiSessionRow),
    /// Record a use at `at` (never moves `last_seen_at` back).
    Touch {
        id_sha256: String,
        at: Timestamp,
    },
    Delete {
        id_sha256: String,
    },
    /// Delete sessions past their absolute end (`expires_at < now`) or
    /// unused since before `idle_cutoff`.
    DeleteExpired {
        now: Timestamp,
        idle_cutoff: Timestamp,
    },
}

/// Apply `op` on the writer's connection (inside its transaction).
pub(super) fn apply(conn: &Connection, op: &UiSessionOp) -> Result<usize, StoreError> {
    let n = match op {
        UiSessionOp::Create(row) => conn
            .prepare_cached(
                "INSERT INTO ui_sessions (id_sha256, role, created_at, last_seen_at, expires_at)
                 VALUES (?1, ?2, ?3, ?4, ?5)",
            )?
            .execute(params![
                row.id_sha256,
                row.role,
                row.created_at.as_millis(),
                row.last_seen_at.as_millis(),
                row.expires_at.as_millis()
            ])?,
        UiSessionOp::Touch { id_sha256, at } => conn
            .prepare_cached(
                "UPDATE ui_sessions SET last_seen_at = ?2
                 WHERE id_sha256 = ?1 AND last_seen_at < ?2",
            )?
            .execute(params![id_sha256, at.as_millis()])?,
        UiSessionOp::Delete { id_sha256 } => conn
            .prepare_cached("DELETE FROM ui_sessions WHERE id_sha256 = ?1")?
            .execute(params![id_sha256])?,
        UiSessionOp::DeleteExpired { now, idle_cutoff } => conn
            .prepare_cached("DELETE FROM ui_sessions WHERE expires_at < ?1 OR last_seen_at < ?2")?
            .execute(params![now.as_millis(), idle_cutoff.as_millis()])?,
    };
    Ok(n)
}

/// The session whose id hashes to `id_sha256`, expired or not.
pub(super) fn get(c: &Connection, id_sha256: &str) -> rusqlite::Result<Option<UiSessionRow>> {
    c.prepare_cached(
        "SELECT id_sha256, role, created_at, last_seen_at, expires_at
         FROM ui_sessions WHERE id_sha256 = ?1",
    )?
    .query_row(params![id_sha256], |r| {
        Ok(UiSessionRow {
            id_sha256: r.get(0)?,
            role: r.get(1)?,
            created_at: Timestamp::from_millis(r.get(2)?),
            last_seen_at: Timestamp::from_millis(r.get(3)?),
            expires_at: Timestamp::from_millis(r.get(4)?),
        })
    })
    .optional()
}
