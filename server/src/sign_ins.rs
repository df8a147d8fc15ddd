//! Dashboard sign-ins on top of the [`Store`]: create, find, touch,
//! end and expire. The HTTP sign-in adds the cookie, the role check and CSRF
//! on top; the reaper expires. Nothing here knows about HTTP, so both can
//! use it.
//!
//! A sign-in id is 256 random bits, given to the browser once; the store
//! keeps only its SHA-256 (a database leak signs nobody in), the role and
//! its times, so a sign-in survives a restart and works on every replica.
//!
//! What lives as long as a sign-in on this server (an event stream) holds
//! an [`EndWatch`] ([`SignIns::watch_end`]): ending the sign-in here
//! (logout, a sign-in replacing it) raises it before the call returns, so
//! before the logout answers. Sign-ins ended on another replica, or by time,
//! are for the holder to notice (`http/sse.rs` re-reads the store).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use leasehold_common::Timestamp;
use leasehold_common::time::duration_millis;
use sha2::{Digest, Sha256};
use tokio::sync::watch;

use crate::store::{SignInOp, SignInRow, Store, StoreError};

/// A sign-in's use is recorded at most this often.
const TOUCH_EVERY_MAX: Duration = Duration::from_secs(60);

/// How long sign-ins last, and their life cycle. Clones share the
/// [`EndWatch`]es.
#[derive(Debug, Clone)]
pub struct SignIns {
    /// A sign-in not used for this long ends.
    pub idle_timeout: Duration,
    /// A sign-in ends this long after it began, however active.
    pub lifetime: Duration,
    watched: Arc<Watched>,
}

impl SignIns {
    pub fn new(idle_timeout: Duration, lifetime: Duration) -> Self {
        SignIns {
            idle_timeout,
            lifetime,
            watched: Arc::default(),
        }
    }

    /// Be told at once when this server ends the sign-in `id` names; hold
    /// the watch only as long as what it is for (dropping it forgets it).
    pub fn watch_end(&self, id: &str) -> EndWatch {
        self.watched.watch(id_sha256(id))
    }

    /// How many sign-ins are watched now.
    pub fn watched(&self) -> usize {
        self.watched.len()
    }

    /// How many watches are held now (an event stream holds one).
    pub fn watches(&self) -> usize {
        self.watched.watches()
    }

    /// How often a sign-in's use is recorded: once a minute, or a tenth of
    /// the idle timeout if that is shorter (so a short timeout still sees an
    /// active sign-in as active).
    pub fn touch_every(&self) -> Duration {
        (self.idle_timeout / 10).min(TOUCH_EVERY_MAX)
    }

    /// When the sign-in ends unless used again.
    pub fn ends_at(&self, row: &SignInRow) -> Timestamp {
        row.expires_at
            .min(row.last_seen_at.saturating_add(self.idle_timeout))
    }

    /// Start a sign-in with `role`, signed in by the token whose
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
            .sign_in_write(SignInOp::Create(SignInRow {
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

    /// The sign-in `id` names, if it has not ended. An id that is not one
    /// we could have made is not looked up.
    pub async fn find(
        &self,
        store: &Store,
        id: &str,
        now: Timestamp,
    ) -> Result<Option<SignInRow>, StoreError> {
        if !could_be_ours(id) {
            return Ok(None);
        }
        let row = store.sign_in(&id_sha256(id)).await?;
        Ok(row.filter(|row| now < self.ends_at(row)))
    }

    /// Record a use at `now`, if the last record is older than
    /// [`SignIns::touch_every`] (a write per request would be wasted).
    pub async fn touch(
        &self,
        store: &Store,
        row: &mut SignInRow,
        now: Timestamp,
    ) -> Result<(), StoreError> {
        if now.millis_since(row.last_seen_at) >= duration_millis(self.touch_every()) {
            store
                .sign_in_write(SignInOp::Touch {
                    id_sha256: row.id_sha256.clone(),
                    at: now,
                })
                .await?;
            row.last_seen_at = now;
        }
        Ok(())
    }

    /// End the sign-in `id` names, if any (a browser signing in again: its
    /// previous sign-in must not outlive the new one).
    pub async fn end_id(&self, store: &Store, id: &str) -> Result<(), StoreError> {
        if !could_be_ours(id) {
            return Ok(());
        }
        self.delete(store, id_sha256(id)).await
    }

    /// End a sign-in now (logout).
    pub async fn end(&self, store: &Store, row: &SignInRow) -> Result<(), StoreError> {
        self.delete(store, row.id_sha256.clone()).await
    }

    /// Delete the sign-in, then raise its watches: after the delete, so a
    /// watch taken meanwhile finds the sign-in gone when its holder checks
    /// the store. Raised even if the delete failed: ending a stream early
    /// is harmless (the browser reconnects), outliving a logout is not.
    async fn delete(&self, store: &Store, id_sha256: String) -> Result<(), StoreError> {
        let deleted = store
            .sign_in_write(SignInOp::Delete {
                id_sha256: id_sha256.clone(),
            })
            .await
            .map(drop);
        self.watched.end(&id_sha256);
        deleted
    }

    /// Delete the sign-ins that have ended (idle too long or past their
    /// lifetime); how many.
    pub async fn expire(&self, store: &Store, now: Timestamp) -> Result<usize, StoreError> {
        store
            .sign_in_write(SignInOp::DeleteExpired {
                now,
                idle_cutoff: now.saturating_sub(self.idle_timeout),
            })
            .await
    }
}

/// Told when this server ends a sign-in: see [`SignIns::watch_end`].
#[derive(Debug)]
pub struct EndWatch {
    id_sha256: String,
    /// Which flag of that sign-in (a sign-in ended and watched again has a
    /// new one).
    generation: u64,
    ended: watch::Receiver<bool>,
    watched: Arc<Watched>,
}

impl EndWatch {
    /// Whether this server has ended the sign-in (a read, never waits).
    pub fn has_ended(&self) -> bool {
        *self.ended.borrow()
    }

    /// Resolves once this server has ended the sign-in.
    pub async fn ended(&mut self) {
        // The flag is raised before its sender goes, so an error is only a
        // server tearing down: an end all the same.
        let _ = self.ended.wait_for(|ended| *ended).await;
    }
}

impl Drop for EndWatch {
    /// The last watch of a sign-in forgets it: the map holds only watched
    /// sign-ins.
    fn drop(&mut self) {
        let mut map = self.watched.lock();
        if let Some((generation, flag)) = map.get(&self.id_sha256)
            && *generation == self.generation
            && flag.receiver_count() <= 1
        {
            map.remove(&self.id_sha256);
        }
    }
}

/// The watched sign-ins by the SHA-256 of their id: a flag each, with a
/// generation so a watch dropped late cannot forget a newer flag.
#[derive(Debug, Default)]
struct Watched {
    by_id_sha256: Mutex<HashMap<String, (u64, watch::Sender<bool>)>>,
    next_generation: std::sync::atomic::AtomicU64,
}

impl Watched {
    fn lock(&self) -> MutexGuard<'_, HashMap<String, (u64, watch::Sender<bool>)>> {
        self.by_id_sha256.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn watch(self: &Arc<Self>, id_sha256: String) -> EndWatch {
        let mut map = self.lock();
        let (generation, flag) = map.entry(id_sha256.clone()).or_insert_with(|| {
            let generation = self
                .next_generation
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            (generation, watch::channel(false).0)
        });
        EndWatch {
            id_sha256,
            generation: *generation,
            ended: flag.subscribe(),
            watched: self.clone(),
        }
    }

    /// Raise the sign-in's flag and forget it.
    fn end(&self, id_sha256: &str) {
        let flag = self.lock().remove(id_sha256);
        if let Some((_, flag)) = flag {
            flag.send_replace(true);
        }
    }

    fn len(&self) -> usize {
        self.lock().len()
    }

    fn watches(&self) -> usize {
        self.lock()
            .values()
            .map(|(_, flag)| flag.receiver_count())
            .sum()
    }
}

/// Whether `id` has the shape of the ids [`SignIns::create`] makes (64
/// lowercase hex characters): anything else is refused without a store
/// read, so made-up cookies cost nothing.
fn could_be_ours(id: &str) -> bool {
    id.len() == 64 && id.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// What the store keeps of a sign-in id.
pub fn id_sha256(sign_in_id: &str) -> String {
    hex::encode(Sha256::digest(sign_in_id.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sign_ins() -> SignIns {
        SignIns::new(Duration::from_secs(60), Duration::from_secs(3600))
    }

    #[test]
    fn ending_a_session_raises_its_watches_only() {
        let s = sign_ins();
        let (a1, a2, b) = (s.watch_end("a"), s.watch_end("a"), s.watch_end("b"));
        assert_eq!(s.watched(), 2);
        s.watched.end(&id_sha256("a"));
        assert!(a1.has_ended() && a2.has_ended());
        assert!(!b.has_ended());
        assert_eq!(s.watched(), 1, "an ended sign-in is forgotten");
        // Watched again after its end (a stream opened meanwhile): a new
        // flag, which the old watches going cannot forget.
        let a3 = s.watch_end("a");
        assert!(!a3.has_ended());
        drop((a1, a2));
        assert_eq!(s.watched(), 2);
        s.watched.end(&id_sha256("a"));
        assert!(a3.has_ended());
    }

    #[test]
    fn the_last_watch_going_forgets_the_sign_in() {
        let s = sign_ins();
        let (w1, w2) = (s.watch_end("a"), s.clone().watch_end("a"));
        drop(w1);
        assert_eq!(s.watched(), 1, "still watched by the other");
        drop(w2);
        assert_eq!(s.watched(), 0);
    }

    #[tokio::test]
    async fn a_waiting_watch_wakes_at_the_end() {
        let s = sign_ins();
        let mut w = s.watch_end("a");
        let waiting = tokio::spawn(async move { w.ended().await });
        tokio::task::yield_now().await;
        s.watched.end(&id_sha256("a"));
        tokio::time::timeout(Duration::from_secs(5), waiting)
            .await
            .expect("woken")
            .expect("no panic");
    }
}
