//! How long a denial stays the same answer, so a repeat of it can be
//! given beside the writer (`store/repeats.rs`), and counting the repeats
//! given there.

use leasehold_common::live_threshold;
use leasehold_common::liveness::lapses_at;

use super::checkout::denial_reason;
use super::lease_tx::Denial;
use super::{LeaseTx, Result, Rules, denied_key};
use crate::store::repeats::{REPEAT_AT_MOST, Remembered, Repeated};
use crate::store::{CheckoutOutcome, CheckoutRequest, Scope};

impl<T: LeaseTx> Rules<'_, T> {
    /// `outcome`, the counted denial of a plain checkout (no borrow, nobody
    /// ahead in line) that this command just decided, with the instant
    /// before which nothing but a write could change it: the first lapse
    /// of any live seat of the license, the end of the holder's `denied`
    /// event window, the end of a block, and at most [`REPEAT_AT_MOST`].
    /// `None` for anything else.
    pub fn remembered(
        &mut self,
        req: &CheckoutRequest,
        outcome: &CheckoutOutcome,
    ) -> Result<Option<Remembered>> {
        let Some(reason) = denial_reason(outcome) else {
            return Ok(None);
        };
        let Some(lic) = self.licenses.get(&req.license_id) else {
            return Ok(None);
        };
        // Every counted denial logs (or is throttled from logging) a
        // `denied` event; a repeat must fall in the same window to log none.
        let Some(events_until) = self.throttle.window_end(&denied_key(&lic.id, &req.holder)) else {
            return Ok(None);
        };
        // A license with a vendor: the answer also hangs on the version sent
        // and on terms that begin and end at any instant; the writer decides.
        if req.borrow.is_some() || lic.vendor.is_some() {
            return Ok(None);
        }
        let skew = lic.policy.skew;
        let threshold = live_threshold(self.now, skew);
        let mut until = self.now.saturating_add(REPEAT_AT_MOST).min(events_until);
        if let Some(e) = self
            .tx
            .earliest_live_expiry(Scope::License(&lic.id), threshold)?
        {
            until = until.min(lapses_at(e, skew));
        }
        if let CheckoutOutcome::Blocked { until: unblocked } = outcome {
            until = until.min(*unblocked);
        }
        Ok(Some(Remembered {
            license_id: req.license_id.clone(),
            holder: req.holder.clone(),
            fingerprint: req.fingerprint.clone(),
            idempotency_key: req.idempotency_key.clone(),
            outcome: outcome.clone(),
            reason,
            decided_at: self.now,
            until,
            retry_at: self.retry_deadline,
        }))
    }

    /// Count the denials given beside the writer, each at its own instant.
    pub fn count_repeats(&mut self, repeats: &[Repeated]) -> Result<()> {
        for r in repeats {
            self.tx.count_denial(&Denial {
                license_id: &r.license_id,
                holder: &r.holder,
                fingerprint: r.fingerprint.as_deref(),
                reason: r.reason,
                at: r.at,
            })?;
        }
        Ok(())
    }
}
