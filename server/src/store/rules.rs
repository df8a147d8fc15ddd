//! The lease rules, written once and run over any store.
//!
//! "What is the checkout rule?" is answered here, as named steps: a blocked
//! holder is refused, a retried request gets its seat again, the same
//! machine re-claims its live seat, a full pool is refused, and otherwise a
//! seat is granted. The rules decide; a store only answers the queries of
//! [`LeaseTx`] inside the transaction its writer opened. Every liveness
//! question binds the one predicate from `leasehold_common::liveness`.

use std::collections::HashMap;
use std::time::Duration;

use leasehold_common::api::{Event, EventKind, SessionEnd};
use leasehold_common::liveness::{lapses_at, live_until};
use leasehold_common::{Licenses, Timestamp, is_live, live_threshold, reap_cutoff};

use super::{CheckoutOutcome, CheckoutRequest, HeartbeatOutcome, LeaseRow, StoreError};

pub use super::lease_tx::{EndedSession, LeaseTx, NewEvent, Result};

/// Denied checkouts and heartbeats on lapsed seats can arrive thousands of
/// times a second from a misbehaving client; the log keeps one per key per
/// this window (the metrics count them all).
const EVENT_THROTTLE_MS: i64 = 10_000;

/// Keys seen within the last [`EVENT_THROTTLE_MS`]; lives as long as the
/// writer, across batches.
#[derive(Debug, Default)]
pub struct EventThrottle {
    seen: HashMap<String, i64>,
}

impl EventThrottle {
    /// True once per key per [`EVENT_THROTTLE_MS`].
    fn first_in_window(&mut self, key: String, now: Timestamp) -> bool {
        let now = now.as_millis();
        if self.seen.len() > 10_000 {
            self.seen.retain(|_, at| now - *at < EVENT_THROTTLE_MS);
        }
        match self.seen.get(&key) {
            Some(at) if now - *at < EVENT_THROTTLE_MS && now >= *at => false,
            _ => {
                self.seen.insert(key, now);
                true
            }
        }
    }
}

/// The text of a `reap` event.
pub fn reap_detail(expired: Timestamp) -> String {
    format!("expired {expired} unrenewed")
}

/// One command's view of the world: a store transaction, the decision time,
/// the policies, and the events the command wrote (published after commit).
pub struct Rules<'a, T: LeaseTx> {
    pub tx: &'a mut T,
    pub now: Timestamp,
    pub licenses: &'a Licenses,
    pub throttle: &'a mut EventThrottle,
    pub events: Vec<Event>,
}

impl<'a, T: LeaseTx> Rules<'a, T> {
    /// The rules over `tx`, deciding at `now` by `licenses`.
    pub fn new(
        tx: &'a mut T,
        now: Timestamp,
        licenses: &'a Licenses,
        throttle: &'a mut EventThrottle,
    ) -> Self {
        Rules {
            tx,
            now,
            licenses,
            throttle,
            events: Vec::new(),
        }
    }

    /// Checkout: blocked → idempotency replay → fingerprint re-claim → full →
    /// grant. `ahead` waiters in line before this one have their seats
    /// spoken for. `counted`: a refusal is the answer the client sees, so
    /// it counts as a denial in the usage history (a `?wait=` attempt that
    /// will be retried is not).
    pub fn checkout(
        &mut self,
        req: &CheckoutRequest,
        ahead: u32,
        counted: bool,
    ) -> Result<CheckoutOutcome> {
        let Some(lic) = self.licenses.get(&req.license_id) else {
            return Ok(CheckoutOutcome::UnknownLicense);
        };
        let (license_id, policy) = (lic.id.as_str(), lic.policy);
        if let Some(until) = self.blocked(license_id, req)? {
            if counted {
                self.tx.count_denial(license_id, self.now)?;
            }
            return Ok(CheckoutOutcome::Blocked { until });
        }
        if let Some(lease) = self.idempotent_replay(license_id, req, policy.skew, policy.ttl)? {
            return Ok(CheckoutOutcome::Granted {
                lease,
                reused: true,
            });
        }
        if let Some(lease) = self.fingerprint_reclaim(license_id, req, policy.skew, policy.ttl)? {
            return Ok(CheckoutOutcome::Granted {
                lease,
                reused: true,
            });
        }
        let threshold = live_threshold(self.now, policy.skew);
        let live = self.tx.live_count(license_id, threshold)?;
        if live.saturating_add(ahead) >= policy.seats {
            if counted {
                self.tx.count_denial(license_id, self.now)?;
            }
            return self.full(license_id, req, live, policy.seats, policy.skew, policy.ttl);
        }
        let lease = self.grant(license_id, req, policy.ttl)?;
        Ok(CheckoutOutcome::Granted {
            lease,
            reused: false,
        })
    }

    /// An admin revoked this holder + fingerprint and blocked re-checkout.
    fn blocked(&mut self, license_id: &str, req: &CheckoutRequest) -> Result<Option<Timestamp>> {
        let fingerprint = req.fingerprint.as_deref().unwrap_or("");
        let until = self
            .tx
            .block_until(license_id, &req.holder, fingerprint, self.now)?;
        if let Some(until) = until {
            self.denied(license_id, &req.holder, || {
                format!("blocked by an admin until {until}")
            })?;
        }
        Ok(until)
    }

    /// A retry of a checkout whose answer was lost: the same seat again, if
    /// it is still live. A lapsed one frees its key for a new seat.
    fn idempotent_replay(
        &mut self,
        license_id: &str,
        req: &CheckoutRequest,
        skew: Duration,
        ttl: Duration,
    ) -> Result<Option<LeaseRow>> {
        let Some(key) = &req.idempotency_key else {
            return Ok(None);
        };
        let Some(row) = self.tx.lease_by_idempotency_key(license_id, key)? else {
            return Ok(None);
        };
        if is_live(row.expires_at, self.now, skew) {
            return self.renew(&row, ttl).map(Some);
        }
        self.tx.forget_idempotency_key(&row.seat_id)?;
        Ok(None)
    }

    /// The same machine asking again (it lost its lease in a network blip):
    /// give back its live seat rather than counting it twice.
    fn fingerprint_reclaim(
        &mut self,
        license_id: &str,
        req: &CheckoutRequest,
        skew: Duration,
        ttl: Duration,
    ) -> Result<Option<LeaseRow>> {
        let Some(fingerprint) = &req.fingerprint else {
            return Ok(None);
        };
        let threshold = live_threshold(self.now, skew);
        match self
            .tx
            .live_lease_by_fingerprint(license_id, fingerprint, threshold)?
        {
            Some(row) => self.renew(&row, ttl).map(Some),
            None => Ok(None),
        }
    }

    /// Every seat is live (or spoken for by a waiter ahead): say when the
    /// earliest live lease could lapse.
    fn full(
        &mut self,
        license_id: &str,
        req: &CheckoutRequest,
        live: u32,
        seats: u32,
        skew: Duration,
        ttl: Duration,
    ) -> Result<CheckoutOutcome> {
        let threshold = live_threshold(self.now, skew);
        let retry_after = self
            .tx
            .earliest_live_expiry(license_id, threshold)?
            .map(|e| lapses_at(e, skew).millis_since(self.now))
            .unwrap_or(ttl.as_millis() as i64)
            .max(0);
        self.denied(license_id, &req.holder, || {
            format!("pool full: {live} of {seats} seats live")
        })?;
        Ok(CheckoutOutcome::Full {
            seats,
            live,
            retry_after: Duration::from_millis(retry_after as u64),
        })
    }

    /// A new seat with a fresh capability id, one TTL from now.
    fn grant(
        &mut self,
        license_id: &str,
        req: &CheckoutRequest,
        ttl: Duration,
    ) -> Result<LeaseRow> {
        let lease = LeaseRow {
            seat_id: new_seat_id(),
            license_id: license_id.to_string(),
            holder: req.holder.clone(),
            fingerprint: req.fingerprint.clone(),
            checked_out_at: self.now,
            issued_at: self.now,
            expires_at: self.now.saturating_add(ttl),
        };
        // The lease row is the open session (a replay or re-claim continues
        // it; heartbeats and the outage rule extend it through the lease's
        // own expiry); the session is written once, when the seat leaves.
        self.tx
            .insert_lease(&lease, req.idempotency_key.as_deref())?;
        let detail = lease
            .fingerprint
            .as_deref()
            .map(|f| format!("fingerprint {f}"));
        self.event(
            EventKind::Checkout,
            Some(license_id),
            Some(&lease.seat_id),
            Some(&lease.holder),
            detail.as_deref(),
        )?;
        Ok(lease)
    }

    /// New expiry for an existing seat, on the server's clock. Only the two
    /// times change, so the renewed row is built here rather than read back.
    fn renew(&mut self, row: &LeaseRow, ttl: Duration) -> Result<LeaseRow> {
        let renewed = LeaseRow {
            issued_at: self.now,
            expires_at: self.now.saturating_add(ttl),
            ..row.clone()
        };
        self.tx.renew_lease(row, &renewed)?;
        Ok(renewed)
    }

    /// Heartbeat: only a live seat of *this* license renews (a seat id is a
    /// capability, but only together with its own license's key).
    pub fn heartbeat(&mut self, license_id: &str, seat_id: &str) -> Result<HeartbeatOutcome> {
        let Some(lic) = self.licenses.get(license_id) else {
            return Ok(HeartbeatOutcome::Lost);
        };
        let policy = lic.policy;
        let Some(row) = self.tx.lease(license_id, seat_id)? else {
            return Ok(HeartbeatOutcome::Lost);
        };
        if is_live(row.expires_at, self.now, policy.skew) {
            return Ok(HeartbeatOutcome::Renewed(self.renew(&row, policy.ttl)?));
        }
        // Still in the table but lapsed: its client just learned it lost the
        // seat. Worth telling the admins (once).
        if self
            .throttle
            .first_in_window(format!("lost\0{seat_id}"), self.now)
        {
            self.event(
                EventKind::Lost,
                Some(license_id),
                Some(seat_id),
                Some(&row.holder),
                Some("heartbeat after the lease lapsed"),
            )?;
        }
        Ok(HeartbeatOutcome::Lost)
    }

    /// Release: idempotent, `false` if the seat was not there.
    pub fn release(&mut self, license_id: &str, seat_id: &str) -> Result<bool> {
        let Some(row) = self.tx.delete_lease(seat_id, Some(license_id))? else {
            return Ok(false);
        };
        self.end_session(&row, SessionEnd::Release)?;
        self.event(
            EventKind::Release,
            Some(license_id),
            Some(seat_id),
            Some(&row.holder),
            None,
        )?;
        Ok(true)
    }

    /// Revoke (admin): delete the seat and, with `block`, refuse its holder +
    /// fingerprint a new seat until then.
    pub fn revoke(
        &mut self,
        seat_id: &str,
        reason: Option<String>,
        block: Option<Duration>,
    ) -> Result<Option<LeaseRow>> {
        let Some(row) = self.tx.delete_lease(seat_id, None)? else {
            return Ok(None);
        };
        self.end_session(&row, SessionEnd::Revoke)?;
        let mut detail = reason.unwrap_or_default();
        if let Some(block) = block.filter(|b| !b.is_zero()) {
            let until = self.now.saturating_add(block);
            let fingerprint = row.fingerprint.as_deref().unwrap_or("");
            self.tx
                .set_block(&row.license_id, &row.holder, fingerprint, until)?;
            let sep = if detail.is_empty() { "" } else { "; " };
            detail = format!("{detail}{sep}re-checkout blocked until {until}");
        }
        self.event(
            EventKind::Revoke,
            Some(&row.license_id),
            Some(&row.seat_id),
            Some(&row.holder),
            (!detail.is_empty()).then_some(detail.as_str()),
        )?;
        Ok(Some(row))
    }

    /// Reap: delete up to `limit` leases that are reapable by the one
    /// predicate, with one `reap` event each, then prune ended blocks and old
    /// events. Leases of a license no longer in the licenses file are left
    /// alone: without its policy there is no grace to judge them by.
    pub fn reap(&mut self, limit: usize, event_retention: i64) -> Result<usize> {
        let mut reaped = 0;
        for lic in self.licenses.iter() {
            if reaped >= limit {
                break;
            }
            let cutoff = reap_cutoff(self.now, lic.policy.reap_grace);
            let gone = self.tx.reap_expired(&lic.id, cutoff, limit - reaped)?;
            self.record_reaped(&gone, lic.policy.skew)?;
            reaped += gone.len();
        }
        self.tx.prune(self.now, event_retention)?;
        Ok(reaped)
    }

    /// Reaped seats lapsed: each session ended when its lease stopped being
    /// live, and each gets a `reap` event.
    fn record_reaped(&mut self, gone: &[LeaseRow], skew: Duration) -> Result<()> {
        if gone.is_empty() {
            return Ok(());
        }
        let sessions: Vec<EndedSession<'_>> = gone
            .iter()
            .map(|lease| EndedSession {
                lease,
                end: SessionEnd::Lapse,
                at: live_until(lease.expires_at, skew),
            })
            .collect();
        self.tx.record_sessions(&sessions)?;
        let details: Vec<String> = gone.iter().map(|l| reap_detail(l.expires_at)).collect();
        let events: Vec<NewEvent<'_>> = gone
            .iter()
            .zip(&details)
            .map(|(lease, detail)| NewEvent {
                at: self.now,
                kind: EventKind::Reap,
                license_id: Some(&lease.license_id),
                seat_id: Some(&lease.seat_id),
                holder: Some(&lease.holder),
                detail: Some(detail),
            })
            .collect();
        self.events_in_order(&events)
    }

    /// A seat's session ends when the lease leaves the table: at `now` for a
    /// release or revoke of a live seat, and when the predicate stopped
    /// counting it ([`live_until`]) for one that had already lapsed.
    fn end_session(&mut self, lease: &LeaseRow, end: SessionEnd) -> Result<()> {
        let skew = self.licenses.get(&lease.license_id).map(|l| l.policy.skew);
        let (end, at) = match skew {
            Some(skew) if !is_live(lease.expires_at, self.now, skew) => {
                (SessionEnd::Lapse, live_until(lease.expires_at, skew))
            }
            _ => (end, self.now),
        };
        self.tx.record_sessions(&[EndedSession { lease, end, at }])
    }

    /// Record each license's pool size from now on where it differs from
    /// the last one recorded (a license gone from the policy: 0 seats), so
    /// a past interval is judged against the seats it had then.
    pub fn record_pool_sizes(&mut self) -> Result<()> {
        let recorded = self.tx.current_pool_sizes()?;
        let mut changes: Vec<(&str, u32)> = self
            .licenses
            .iter()
            .filter(|l| recorded.get(&l.id) != Some(&l.policy.seats))
            .map(|l| (l.id.as_str(), l.policy.seats))
            .collect();
        changes.extend(
            recorded
                .iter()
                .filter(|(id, seats)| **seats > 0 && self.licenses.get(id).is_none())
                .map(|(id, _)| (id.as_str(), 0)),
        );
        for (license_id, seats) in changes {
            self.tx.record_pool_size(license_id, self.now, seats)?;
        }
        Ok(())
    }

    /// Drop history older than `cutoff`, at most `limit` rows per table.
    pub fn prune_history(&mut self, cutoff: Timestamp, limit: usize) -> Result<usize> {
        self.tx.prune_history(cutoff, limit)
    }

    /// Live seats per license, by the one predicate.
    pub fn live_counts(&mut self) -> Result<Vec<(String, u32)>> {
        let licenses = self.licenses;
        licenses
            .iter()
            .map(|l| {
                let threshold = live_threshold(self.now, l.policy.skew);
                Ok((l.id.clone(), self.tx.live_count(&l.id, threshold)?))
            })
            .collect()
    }

    /// The outage rule: after a gap in which nobody could renew, every lease
    /// that was live when the gap began (`last_alive`) gets at least one TTL
    /// from now. Returns how many leases it extended.
    pub fn outage(&mut self, last_alive: Timestamp) -> usize {
        let mut extended = 0;
        for lic in self.licenses.iter() {
            let renewed_until = self.now.saturating_add(lic.policy.ttl);
            let was_live = live_threshold(last_alive, lic.policy.skew);
            match self.tx.extend_live(&lic.id, was_live, renewed_until) {
                Ok(n) => extended += n,
                Err(e) => tracing::error!("store: outage extension for {}: {e}", lic.id),
            }
        }
        extended
    }

    /// Append an event that is not tied to a lease change (config reloads).
    pub fn record_event(
        &mut self,
        kind: EventKind,
        license_id: Option<&str>,
        detail: &str,
    ) -> Result<Event> {
        self.event(kind, license_id, None, None, Some(detail))?;
        Ok(self.events.last().cloned().expect("event just recorded"))
    }

    /// A denied checkout, logged once per holder per throttle window.
    fn denied(
        &mut self,
        license_id: &str,
        holder: &str,
        detail: impl FnOnce() -> String,
    ) -> Result<()> {
        if self
            .throttle
            .first_in_window(format!("denied\0{license_id}\0{holder}"), self.now)
        {
            let detail = detail();
            self.event(
                EventKind::Denied,
                Some(license_id),
                None,
                Some(holder),
                Some(&detail),
            )?;
        }
        Ok(())
    }

    fn event(
        &mut self,
        kind: EventKind,
        license_id: Option<&str>,
        seat_id: Option<&str>,
        holder: Option<&str>,
        detail: Option<&str>,
    ) -> Result<()> {
        self.events_in_order(&[NewEvent {
            at: self.now,
            kind,
            license_id,
            seat_id,
            holder,
            detail,
        }])
    }

    /// Append events and keep them, numbered, for publishing after commit.
    fn events_in_order(&mut self, events: &[NewEvent<'_>]) -> Result<()> {
        let ids = self.tx.append_events(events)?;
        if ids.len() != events.len() {
            // A store bug; roll the command back rather than log half of it.
            return Err(StoreError::EventIds {
                asked: events.len(),
                got: ids.len(),
            });
        }
        self.events
            .extend(events.iter().zip(ids).map(|(e, id)| Event {
                id,
                at: e.at,
                kind: e.kind,
                license_id: e.license_id.map(str::to_string),
                seat_id: e.seat_id.map(str::to_string),
                holder: e.holder.map(str::to_string),
                detail: e.detail.map(str::to_string),
            }));
        Ok(())
    }
}

/// 128 random bits, lowercase hex. Seat ids are capabilities, so they come
/// from a CSPRNG (rand's thread RNG is ChaCha seeded from the OS).
fn new_seat_id() -> String {
    hex::encode(rand::random::<[u8; 16]>())
}
