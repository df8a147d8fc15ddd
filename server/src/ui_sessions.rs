//! Dashboard sign-in sessions on top of the [`Store`]: create, find, touch,
//! end and expire. The HTTP sign-in adds the cookie, the role check and CSRF
//! on top; the reaper expires. Nothing here knows about HTTP, so both can
//! use it.
//!
//! A session id is 256 random bits, given to the browser once; the store
//! keeps only its SHA-256 (a database leak signs nobody in), the role and
//! its times, so a session survives a restart and works on every replica.

use std::time::Duration;

use leasehold_common::Timestamp;
use leasehold_common::time::duration_millis;
use sha2::{Digest, Sha256};

use crate::store::{Store, StoreError, UiSessionOp, UiSessionRow};

/// A session's use is recorded at most this often.
const TOUCH_EVERY_MAX: Duration = Duration::from_secs(60);

/// How long sessions last, and their life cycle.
#[derive(Debug, Clone, Copy)]
pub struct UiSessions {
    /// A session not used for this long ends.
    pub idle_timeout: Duration,
    /// A session ends this long after sign-in, however active.
    pub lifetime: Duration,
}

impl UiSessions {
    /// How often a session's use is recorded: once a minute, or a tenth of
    /// the idle timeout if that is shorter (so a short timeout still sees an
    /// active session as active).
    pub fn touch_every(&self) -> Duration {
        (self.idle_timeout / 10).min(TOUCH_EVERY_MAX)
    }

    /// When the session ends unless used again.
    pub fn ends_at(&self, row: &UiSessionRow) -> Timestamp {
        row.expires_at
            .min(row.last_seen_at.saturating_add(self.idle_timeout))
    }

    /// Start a session with `role`, signed in by the token whose
    /// fingerprint is `token_fp`; its id, to hand to the browser.
    pub async fn create(
        &self,
        store: &Store,
        role: &str,
        token_fp: String,
        now: Timestamp,
    ) -> Result<String, StoreError> {
        let id = hex::encode(rand::random::<[u8; 32]>());
        store
            .ui_session_write(UiSessionOp::Create(UiSessionRow {
                id_sha256: id_sha256(&id),
                role: role.to_string(),
                created_at: now,
                last_seen_at: now,
                expires_at: now.saturating_add(self.lifetime),
                token_fp,
            }))
            .await?;
        Ok(id)
    }

    /// The session `id` names, if it has not ended. An id that is not one
    /// we could have made is not looked up.
    pub async fn find(
        &self,
        store: &Store,
        id: &str,
        now: Timestamp,
    ) -> Result<Option<UiSessionRow>, StoreError> {
        if !could_be_ours(id) {
            return Ok(None);
        }
        let row = store.ui_session(&id_sha256(id)).await?;
        Ok(row.filter(|row| now < self.ends_at(row)))
    }

    /// Record a use at `now`, if the last record is older than
    /// [`UiSessions::touch_every`] (a write per request would be wasted).
    pub async fn touch(
        &self,
        store: &Store,
        row: &mut UiSessionRow,
        now: Timestamp,
    ) -> Result<(), StoreError> {
        if now.millis_since(row.last_seen_at) >= duration_millis(self.touch_every()) {
            store
                .ui_session_write(UiSessionOp::Touch {
                    id_sha256: row.id_sha256.clone(),
                    at: now,
                })
                .await?;
            row.last_seen_at = now;
        }
        Ok(())
    }

    /// End the session `id` names, if any (a browser signing in again: its
    /// previous session must not outlive the new one).
    pub async fn end_id(&self, store: &Store, id: &str) -> Result<(), StoreError> {
        if !could_be_ours(id) {
            return Ok(());
        }
        store
            .ui_session_write(UiSessionOp::Delete {
                id_sha256: id_sha256(id),
            })
            .await
            .map(drop)
    }

    /// End a session now (logout).
    pub async fn end(&self, store: &Store, row: &UiSessionRow) -> Result<(), StoreError> {
        store
            .ui_session_write(UiSessionOp::Delete {
                id_sha256: row.id_sha256.clone(),
            })
            .await
            .map(drop)
    }

    /// Delete the sessions that have ended (idle too long or past their
    /// lifetime); how many.
    pub async fn expire(&self, store: &Store, now: Timestamp) -> Result<usize, StoreError> {
        store
            .ui_session_write(UiSessionOp::DeleteExpired {
                now,
                idle_cutoff: now.saturating_sub(self.idle_timeout),
            })
            .await
    }
}

/// Whether `id` has the shape of the ids [`UiSessions::create`] makes (64
/// lowercase hex characters): anything else is refused without a store
/// read, so made-up cookies cost nothing.
fn could_be_ours(id: &str) -> bool {
    id.len() == 64 && id.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// What the store keeps of a session id.
pub fn id_sha256(session_id: &str) -> String {
    hex::encode(Sha256::digest(session_id.as_bytes()))
}
