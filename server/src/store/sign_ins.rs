//! Dashboard sign-ins (`/ui/login`): one row per sign-in, keyed by
//! the SHA-256 of its id (the cookie), so the database never holds a usable
//! sign-in id. Both stores keep them, so a sign-in survives a restart and
//! works on every replica.
//!
//! The writes are [`SignInOp`]s, plain statements outside the lease
//! writer (no lease rule is involved): on SQLite on a connection of their
//! own (`sqlite/sign_ins.rs`), on PostgreSQL on the read pool
//! (`pg/sign_ins.rs`).

use leasehold_common::Timestamp;

/// One stored sign-in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignInRow {
    /// SHA-256 of the sign-in id, lowercase hex.
    pub id_sha256: String,
    /// `admin` or `viewer`.
    pub role: String,
    pub created_at: Timestamp,
    /// The last use recorded (touched at most once per touch interval).
    pub last_seen_at: Timestamp,
    /// The absolute end (sign-in + lifetime).
    pub expires_at: Timestamp,
    /// A fingerprint of the token that made the sign-in
    /// (`AdminToken::sign_in_fingerprint`): a sign-in whose token has
    /// changed since is over.
    pub token_fp: String,
}

/// A write to the sign-ins table (`ui_sessions`: the table keeps the
/// older word); the answer is the rows changed.
#[derive(Debug, Clone)]
pub enum SignInOp {
    Create(SignInRow),
    /// Record a use at `at` (never moves `last_seen_at` back).
    Touch {
        id_sha256: String,
        at: Timestamp,
    },
    Delete {
        id_sha256: String,
    },
    /// Delete sign-ins past their absolute end (`expires_at < now`) or
    /// unused since before `idle_cutoff`.
    DeleteExpired {
        now: Timestamp,
        idle_cutoff: Timestamp,
    },
}
