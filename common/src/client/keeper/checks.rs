//! What the keeper checks of each lease it is given: its token against the
//! server's JWKS and its body against the token and the request; and, when
//! the application pins its vendor's key, the chain from that key to the
//! lease ([`check_chain`], on the keeper's clock): after each checkout and
//! borrow, when the entitlement it relied on ends, and when a renewal runs
//! the lease past that end. See the module doc of [`super`],
//! "Entitlements".

use std::time::Duration;

use super::Driver;
use crate::api::Lease;
use crate::client::config::KeeperConfig;
use crate::client::error::ClientError;
use crate::client::machine::check_lease;
use crate::client::stats::bump;
use crate::entitlement::{EntitledBy, Pins, VendorKey, check_chain};
use crate::time::Timestamp;
use crate::token::{TokenError, verify};

/// After a re-check that could not fetch the entitlements, try again this
/// soon (and at the end of the entitlement relied on at the latest).
pub(super) const RECHECK_RETRY: Duration = Duration::from_secs(1);

/// The application's pins, and when the held lease must be checked again.
/// Pure: the driver gives it the local time.
#[derive(Debug, Clone)]
pub(super) struct Gate {
    keys: Vec<VendorKey>,
    version: Option<String>,
    /// `exp + grace` of the entitlement the held lease was last found
    /// entitled by; `None`: perpetual, or nothing checked yet.
    ends_at: Option<Timestamp>,
    /// A re-check failed transiently: try again at this local time.
    retry_at: Option<Timestamp>,
}

impl Gate {
    /// `None` unless the application pins a vendor key.
    pub fn new(config: &KeeperConfig) -> Option<Gate> {
        (!config.vendor_keys.is_empty()).then(|| Gate {
            keys: config.vendor_keys.clone(),
            version: config.version.clone(),
            ends_at: None,
            retry_at: None,
        })
    }

    fn pins(&self) -> Pins<'_> {
        Pins {
            vendor_keys: &self.keys,
            version: self.version.as_deref(),
        }
    }

    /// The held `lease` must be checked again at `now`: the entitlement it
    /// relied on has ended on this clock, or the lease was renewed past
    /// that end (compared in the token's whole seconds, as the check
    /// does), or a failed re-check is due again.
    pub fn due(&self, now: Timestamp, lease: &Lease) -> bool {
        let exp_ms = lease.expires_at.as_millis().div_euclid(1000) * 1000;
        let ended = self
            .ends_at
            .is_some_and(|end| now >= end || exp_ms > end.as_millis());
        ended || self.retry_at.is_some_and(|at| now >= at)
    }

    /// When the next re-check is due, if ever (the driver wakes for it).
    pub fn wake_at(&self) -> Option<Timestamp> {
        match (self.ends_at, self.retry_at) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// The lease was found entitled by `by`.
    fn relied_on(&mut self, by: &EntitledBy) {
        self.ends_at = by.ends_at_ms.map(Timestamp::from_millis);
        self.retry_at = None;
    }

    /// A re-check at `now` failed transiently. `true`: keep the lease and
    /// try again soon (the entitlement relied on has not ended on this
    /// clock); `false`: it has ended, so the lease cannot be kept unproven.
    fn retry_soon(&mut self, now: Timestamp) -> bool {
        let Some(end) = self.ends_at.filter(|&end| now < end) else {
            return false;
        };
        self.retry_at = Some(now.saturating_add(RECHECK_RETRY).min(end));
        true
    }
}

impl Driver {
    /// Verify the lease's token against the JWKS (refetched once if the key
    /// is unknown: the server may have a new key) and its body against the
    /// token and the request.
    pub(super) async fn verified(
        &mut self,
        lease: Lease,
        seat: Option<&str>,
        timeout: Duration,
    ) -> Result<Lease, ClientError> {
        let mut fetched = false;
        if self.jwks.is_none() {
            self.jwks = Some(self.client.jwks(timeout).await?);
            fetched = true;
        }
        let claims = loop {
            let jwks = self.jwks.as_ref().expect("fetched above");
            match verify(&lease.token, jwks) {
                Ok(c) => break c,
                Err(TokenError::UnknownKey) if !fetched => {
                    self.jwks = Some(self.client.jwks(timeout).await?);
                    fetched = true;
                }
                Err(e) => {
                    return Err(ClientError::Invalid(format!(
                        "lease token for seat {}: {e}",
                        lease.seat_id
                    )));
                }
            }
        };
        check_lease(&lease, &claims, &self.expected, seat)
            .map_err(|e| ClientError::Invalid(e.to_string()))?;
        Ok(lease)
    }

    /// A verified lease just checked out or borrowed: kept if entitled (or
    /// nothing is pinned), else released, with the reason as the error.
    pub(super) async fn entitled(
        &mut self,
        lease: Lease,
        timeout: Duration,
    ) -> Result<Lease, ClientError> {
        if self.gate.is_none() {
            return Ok(lease);
        }
        match self.check_chain_now(&lease, timeout).await {
            Ok(()) => Ok(lease),
            Err(e) => {
                self.release_unentitled(&lease.seat_id, &e).await;
                Err(e)
            }
        }
    }

    /// [`Driver::entitled`] for a borrow (`result`, verified): one that is
    /// not entitled was released, and so is the seat held before, if it
    /// was the one lent (the machine then holds nothing).
    pub(super) async fn entitled_borrow(
        &mut self,
        result: Result<Lease, ClientError>,
        timeout: Duration,
    ) -> Result<Lease, ClientError> {
        let lease = result?;
        let result = self.entitled(lease, timeout).await;
        if let Err(e) = &result {
            // Logged by the borrow; the error that stops the keeper.
            self.last_error = Some(e.clone());
            let change = self.machine.on_released(self.clock.now(), e);
            self.publish(change);
        }
        result
    }

    /// The chain re-checked when due (the held lease's entitlement ended on
    /// the local clock, or the lease now runs past it): kept if entitled;
    /// else released, and the keeper stops (not entitled) or, when the
    /// entitlements could not be fetched after the end, checks out anew.
    /// `true` when it checked.
    pub(super) async fn recheck_if_due(&mut self) -> bool {
        let now = self.clock.now();
        let (Some(gate), Some(lease)) = (&self.gate, self.machine.state().lease()) else {
            return false;
        };
        if !gate.due(now, lease) {
            return false;
        }
        let lease = lease.clone();
        let (_, timeout) = self.start_request();
        let Err(e) = self.check_chain_now(&lease, timeout).await else {
            return true;
        };
        let now = self.clock.now();
        let gate = self.gate.as_mut().expect("checked above");
        if e.is_transient() && gate.retry_soon(now) {
            self.note_failure("entitlement check", &e);
            return true;
        }
        self.release_unentitled(&lease.seat_id, &e).await;
        self.note_failure("entitlement check", &e);
        let change = self.machine.on_released(now, &e);
        self.publish(change);
        true
    }

    /// The local time to wake at instead of `until`, for a re-check due
    /// earlier (only while a lease is held: otherwise there is none).
    pub(super) fn wake_for_recheck(&self, until: Timestamp) -> Timestamp {
        match (&self.gate, self.machine.state().is_held()) {
            (Some(gate), true) => gate.wake_at().map_or(until, |at| at.min(until)),
            _ => until,
        }
    }

    /// Fetch the license's entitlements and check the chain for `lease`
    /// with the JWKS it verified against, at the local time now.
    async fn check_chain_now(
        &mut self,
        lease: &Lease,
        timeout: Duration,
    ) -> Result<(), ClientError> {
        bump(&self.counters.entitlement_checks);
        let list = self.client.entitlements(timeout).await?;
        let now = self.clock.now();
        let Some(gate) = self.gate.as_mut() else {
            return Ok(());
        };
        // Fetched by the verification every lease passes first.
        let Some(jwks) = self.jwks.as_ref() else {
            return Err(ClientError::Invalid(
                "no JWKS to check the lease with".into(),
            ));
        };
        match check_chain(&lease.token, jwks, &list, gate.pins(), now.as_millis()) {
            Ok(by) => {
                gate.relied_on(&by);
                tracing::info!(seat = %lease.seat_id, vendor = %by.vendor, entitlement = %by.id, "leasehold: lease entitled");
                Ok(())
            }
            Err(why) => Err(ClientError::NotEntitled(why)),
        }
    }

    /// Release a seat the keeper will not hold unproven (its lease is not
    /// entitled, or could not be checked).
    async fn release_unentitled(&mut self, seat: &str, why: &ClientError) {
        tracing::warn!(seat = %seat, "leasehold: releasing the seat: {why}");
        if let Err(e) = self.client.release(seat, self.config.request_timeout).await {
            tracing::warn!(seat = %seat, "leasehold: release failed ({e}); the seat lapses at its expiry");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: i64 = 1_800_000_000_000;

    fn at(ms: i64) -> Timestamp {
        Timestamp::from_millis(T0 + ms)
    }

    fn gate(ends_at: Option<i64>) -> Gate {
        Gate {
            keys: Vec::new(),
            version: None,
            ends_at: ends_at.map(at),
            retry_at: None,
        }
    }

    fn lease(expires_ms: i64) -> Lease {
        Lease {
            license_id: "cad".into(),
            seat_id: "s".into(),
            holder: "h".into(),
            fingerprint: None,
            issued_at: at(0),
            expires_at: at(expires_ms),
            overage: false,
            borrowed: false,
            grace: false,
            entitlement_ends_at: None,
            token: String::new(),
        }
    }

    #[test]
    fn a_recheck_is_due_at_the_end_or_for_a_lease_past_it() {
        let g = gate(Some(60_000));
        assert!(!g.due(at(59_999), &lease(30_000)));
        assert!(g.due(at(60_000), &lease(30_000)), "the end, on this clock");
        assert!(g.due(at(1_000), &lease(61_000)), "renewed past the end");
        // The token's exp is whole seconds: 60.9 s is 60 s, not past.
        assert!(!g.due(at(1_000), &lease(60_900)));
        assert_eq!(g.wake_at(), Some(at(60_000)));
        let perpetual = gate(None);
        assert!(!perpetual.due(at(i64::from(u32::MAX)), &lease(i64::from(u32::MAX))));
        assert_eq!(perpetual.wake_at(), None);
    }

    #[test]
    fn a_failed_recheck_retries_before_the_end_and_gives_up_after_it() {
        let mut g = gate(Some(60_000));
        assert!(g.retry_soon(at(10_000)));
        assert_eq!(g.wake_at(), Some(at(11_000)));
        assert!(g.due(at(11_000), &lease(30_000)));
        assert!(g.retry_soon(at(59_500)));
        assert_eq!(g.wake_at(), Some(at(60_000)), "never past the end");
        assert!(!g.retry_soon(at(60_000)), "ended: not kept unproven");
        assert!(!gate(None).retry_soon(at(0)), "nothing relied on");
        let by = EntitledBy {
            vendor: "keyright".into(),
            id: "acme".into(),
            ends_at_ms: Some(T0 + 120_000),
            in_grace: false,
        };
        g.relied_on(&by);
        assert_eq!(g.wake_at(), Some(at(120_000)), "the retry is over");
        assert!(!g.due(at(60_000), &lease(90_000)));
    }
}
