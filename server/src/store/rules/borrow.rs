//! The checkout steps a borrow request (`borrow_s`) adds: its terms, asked
//! first (a license without `[license.borrow]` lends nothing; a borrow
//! longer than `borrow.max` is bad input), then, after allow/deny,
//! `borrow.allow`, turning (or extending) the machine's own seat, and
//! `borrow.seats` for a new one. A borrowed seat counts for the pool, its
//! group and its holder like any seat, until it is returned or expires.

use leasehold_common::policy::BorrowPolicy;
use leasehold_common::{LicenseConfig, live_threshold};

use super::checkout::{borrowed_detail, lingering_for_another, reused};
use super::{LeaseTx, Result, Rules};
use crate::store::{
    CheckoutOutcome, CheckoutRequest, LeaseRow, Limit, NotAllowedBecause, Scope, SeatMode,
};
use leasehold_common::api::EventKind;

impl<T: LeaseTx> Rules<'_, T> {
    /// A borrow the license cannot grant whoever asks: none offered
    /// (`not_allowed`), or longer than `borrow.max` (bad input).
    pub(super) fn borrow_terms(
        &mut self,
        lic: &LicenseConfig,
        req: &CheckoutRequest,
        counted: bool,
    ) -> Result<Option<CheckoutOutcome>> {
        let Some(borrow_for) = req.borrow else {
            return Ok(None);
        };
        let Some(terms) = &lic.borrow else {
            self.denied(&lic.id, &req.holder, || {
                "borrow refused: the license lends no seats".to_string()
            })?;
            return self
                .refused(
                    req,
                    counted,
                    CheckoutOutcome::NotAllowed(NotAllowedBecause::LendsNothing),
                )
                .map(Some);
        };
        if borrow_for.is_zero() || borrow_for > terms.max {
            return Ok(Some(CheckoutOutcome::BorrowTooLong { max: terms.max }));
        }
        Ok(None)
    }

    /// After allow/deny: `borrow.allow`, then the machine's own live seat
    /// becomes the borrow (or its borrow runs to the later end), then
    /// `borrow.seats` for a new seat. `None`: go on to the caps and the
    /// count, and grant a new borrowed seat.
    pub(super) fn borrow_steps(
        &mut self,
        lic: &LicenseConfig,
        req: &CheckoutRequest,
        counted: bool,
    ) -> Result<Option<CheckoutOutcome>> {
        let (Some(borrow_for), Some(terms)) = (req.borrow, &lic.borrow) else {
            return Ok(None);
        };
        let fingerprint = req.fingerprint.as_deref();
        if !lic.allows_borrow(&req.holder, fingerprint) {
            self.denied(&lic.id, &req.holder, || {
                "borrow refused: not in the license's borrow.allow".to_string()
            })?;
            return self
                .refused(
                    req,
                    counted,
                    CheckoutOutcome::NotAllowed(NotAllowedBecause::BorrowAllow),
                )
                .map(Some);
        }
        let threshold = live_threshold(self.now, lic.policy.skew);
        let own = match fingerprint {
            Some(fp) => self
                .tx
                .live_lease_by_fingerprint(&lic.id, fp, &req.holder, threshold, super::TAKE_LAST)?
                .filter(|row| !lingering_for_another(lic, row, req)),
            None => None,
        };
        // The requester's own borrow is not counted against `borrow.seats`.
        if own.as_ref().is_none_or(|row| row.mode != SeatMode::Borrow)
            && let Some(limit) = self.borrow_limit(lic, req, terms, counted)?
        {
            return Ok(Some(limit));
        }
        let Some(own) = own else {
            return Ok(None);
        };
        let until = self.capped(self.now.saturating_add(borrow_for));
        let lent = LeaseRow {
            issued_at: self.now,
            expires_at: match own.mode {
                SeatMode::Borrow => own.expires_at.max(until),
                SeatMode::Heartbeat | SeatMode::Linger => until,
            },
            mode: SeatMode::Borrow,
            // Out on loan: no heartbeats report idleness until it is back.
            idle_since: None,
            ..own.clone()
        };
        self.end_idle_period(&own, self.now)?;
        self.tx.renew_lease(&own, &lent)?;
        let detail = borrowed_detail(&lent);
        self.event(
            EventKind::Checkout,
            Some(&lic.id),
            Some(&lent.seat_id),
            Some(&lent.holder),
            Some(&detail),
        )?;
        Ok(Some(reused(lent)))
    }

    /// `limit_reached` (`"limit": "borrow"`) when `borrow.seats` are out.
    fn borrow_limit(
        &mut self,
        lic: &LicenseConfig,
        req: &CheckoutRequest,
        terms: &BorrowPolicy,
        counted: bool,
    ) -> Result<Option<CheckoutOutcome>> {
        let threshold = live_threshold(self.now, lic.policy.skew);
        let borrowed = Scope::Mode {
            license_id: &lic.id,
            mode: SeatMode::Borrow,
        };
        if self.tx.live_count(borrowed, threshold)? < terms.seats {
            return Ok(None);
        }
        let limit = self.limit_reached(lic, req, Limit::Borrow, None, terms.seats, threshold)?;
        self.refused(req, counted, limit).map(Some)
    }
}
