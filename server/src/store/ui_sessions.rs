//! Dashboard sign-in sessions (`/ui/login`): one row per session, keyed by
//! the SHA-256 of its id (the cookie), so the database never holds a usable
//! session id. Both stores keep them, so a session survives a restart and
//! works on every replica.
//!
//! On SQLite the writes are [`UiSessionOp`]s run by the writer thread (the
//! one writer); on PostgreSQL they are plain statements on the read pool
//! (`pg/ui_sessions.rs`): no lease rule is involved.

use leasehold_common::Timestamp;

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
    /// A fingerprint of the token that signed the session in
    /// (`AdminToken::session_fingerprint`): a session whose token has
    /// changed since is over.
    pub token_fp: String,
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
