//! The checkout rule, as named steps: blocked → idempotency replay →
//! fingerprint re-claim → full → grant.

use std::time::Duration;

use leasehold_common::api::EventKind;
use leasehold_common::liveness::lapses_at;
use leasehold_common::{Timestamp, is_live, live_threshold};

use super::{LeaseTx, Result, Rules, new_seat_id};
use crate::store::{CheckoutOutcome, CheckoutRequest, LeaseRow};

impl<T: LeaseTx> Rules<'_, T> {
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
}
