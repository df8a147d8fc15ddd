//! Dashboard sign-ins on SQLite (the rows are described in
//! `store/sign_ins.rs`): the writes run on the backend's own sign-ins
//! connection (`SqliteBackend`), outside the lease writer; reads use the
//! read pool.

use leasehold_common::Timestamp;
use rusqlite::{Connection, OptionalExtension, params};

use crate::store::StoreError;
use crate::store::sign_ins::{SignInOp, SignInRow};

/// Apply `op` on the sign-ins' connection.
pub fn apply(conn: &Connection, op: &SignInOp) -> Result<usize, StoreError> {
    let n = match op {
        SignInOp::Create(row) => conn
            .prepare_cached(
                "INSERT INTO ui_sessions
                     (id_sha256, role, created_at, last_seen_at, expires_at, token_fp)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            )?
            .execute(params![
                row.id_sha256,
                row.role,
                row.created_at.as_millis(),
                row.last_seen_at.as_millis(),
                row.expires_at.as_millis(),
                row.token_fp
            ])?,
        SignInOp::Touch { id_sha256, at } => conn
            .prepare_cached(
                "UPDATE ui_sessions SET last_seen_at = ?2
                 WHERE id_sha256 = ?1 AND last_seen_at < ?2",
            )?
            .execute(params![id_sha256, at.as_millis()])?,
        SignInOp::Delete { id_sha256 } => conn
            .prepare_cached("DELETE FROM ui_sessions WHERE id_sha256 = ?1")?
            .execute(params![id_sha256])?,
        SignInOp::DeleteExpired { now, idle_cutoff } => conn
            .prepare_cached("DELETE FROM ui_sessions WHERE expires_at < ?1 OR last_seen_at < ?2")?
            .execute(params![now.as_millis(), idle_cutoff.as_millis()])?,
    };
    Ok(n)
}

/// The sign-in whose id hashes to `id_sha256`, expired or not.
pub fn get(c: &Connection, id_sha256: &str) -> rusqlite::Result<Option<SignInRow>> {
    c.prepare_cached(
        "SELECT id_sha256, role, created_at, last_seen_at, expires_at, token_fp
         FROM ui_sessions WHERE id_sha256 = ?1",
    )?
    .query_row(params![id_sha256], |r| {
        Ok(SignInRow {
            id_sha256: r.get(0)?,
            role: r.get(1)?,
            created_at: Timestamp::from_millis(r.get(2)?),
            last_seen_at: Timestamp::from_millis(r.get(3)?),
            expires_at: Timestamp::from_millis(r.get(4)?),
            token_fp: r.get(5)?,
        })
    })
    .optional()
}
