//! Entitlements in the rules. A license with a vendor decides by what the
//! vendor's entitlements in force grant at the decision instant, narrowed
//! by the licenses file (which may only narrow): seats, overage and
//! borrowing are the smaller of the two, and groups' reserves shrink,
//! the later groups' first, to fit the seats. No lease of it outlives the
//! latest `exp + grace` of its active entitlements.
//!
//! The checkout asks right after the license is found: not entitled (no
//! active entitlement) → version (the newest active entitlement's range).
//! A heartbeat of a seat among the newest over the entitled count is not
//! renewed (`410 expired`), so term seats never become permanent.
//!
//! A license without a vendor pays one branch: [`effective`] hands back
//! the file's own policy, with no grant and no cap.

use std::borrow::Cow;
use std::time::Duration;

use leasehold_common::entitlement::{Grant, Version};
use leasehold_common::{LicenseConfig, Licenses, Timestamp, live_threshold};

use super::{LeaseTx, Result, Rules};
use crate::store::{CheckoutOutcome, CheckoutRequest, LeaseRow, Scope, SeatMode};

/// The policy a license decides by at an instant, and what its vendor's
/// entitlements grant it then (`None`: a license without a vendor).
#[derive(Debug)]
pub struct Effective<'l> {
    pub lic: Cow<'l, LicenseConfig>,
    pub grant: Option<Grant>,
}

impl Effective<'_> {
    /// No lease may expire after this (`None`: no cap).
    pub fn lease_cap(&self) -> Option<Timestamp> {
        let grant = self.grant.as_ref()?;
        grant.lease_cap_ms.map(Timestamp::from_millis)
    }
}

/// `lic` as it decides at `now`: itself without a vendor, else narrowed to
/// what its vendor's entitlements grant.
pub fn effective<'l>(licenses: &Licenses, lic: &'l LicenseConfig, now: Timestamp) -> Effective<'l> {
    match licenses.grant(lic, now.as_millis()) {
        None => Effective {
            lic: Cow::Borrowed(lic),
            grant: None,
        },
        Some(grant) => Effective {
            lic: Cow::Owned(narrowed(lic, &grant)),
            grant: Some(grant),
        },
    }
}

/// The file's policy narrowed to a grant: each limit the smaller of the
/// two; borrowing only where both allow it.
fn narrowed(lic: &LicenseConfig, grant: &Grant) -> LicenseConfig {
    let mut out = lic.clone();
    out.policy.seats = lic.policy.seats.min(grant.seats);
    out.policy.overage = lic.policy.overage.min(grant.overage).min(out.policy.seats);
    out.borrow = match (&lic.borrow, grant.borrow) {
        (Some(file), Some(granted)) => {
            let mut b = file.clone();
            let granted_max = Duration::from_secs(u64::try_from(granted.max_s).unwrap_or(0));
            b.max = b.max.min(granted_max);
            b.seats = b.seats.min(granted.seats);
            Some(b).filter(|b| !b.max.is_zero() && b.seats > 0)
        }
        _ => None,
    };
    shrink_reserves(&mut out);
    out
}

/// Reserves never add up to more than the seats: the later groups' shrink
/// first.
fn shrink_reserves(lic: &mut LicenseConfig) {
    let mut over = lic
        .groups
        .iter()
        .map(|g| g.reserve)
        .sum::<u32>()
        .saturating_sub(lic.policy.seats);
    for group in lic.groups.iter_mut().rev() {
        let cut = group.reserve.min(over);
        group.reserve -= cut;
        over -= cut;
    }
}

impl<T: LeaseTx> Rules<'_, T> {
    /// The entitlement steps of a checkout: `not_entitled` with no active
    /// entitlement, then the version against the newest one's range.
    /// `None`: go on (every lease from here on capped at the term's end).
    pub(super) fn entitlement_steps(
        &mut self,
        lic: &LicenseConfig,
        grant: &Grant,
        req: &CheckoutRequest,
        counted: bool,
    ) -> Result<Option<CheckoutOutcome>> {
        if !grant.is_entitled() {
            self.denied(&lic.id, &req.holder, || {
                "not entitled: no entitlement of the license's vendor grants it now".to_string()
            })?;
            return self
                .refused(req, counted, CheckoutOutcome::NotEntitled)
                .map(Some);
        }
        let Some(range) = &grant.versions else {
            return Ok(None);
        };
        let version = match req.version.as_deref().map(Version::parse) {
            Some(None) => return Ok(Some(CheckoutOutcome::InvalidVersion)),
            Some(Some(v)) => Some(v),
            None => None,
        };
        if version.is_some_and(|v| range.contains(&v)) {
            return Ok(None);
        }
        let versions = range.to_string();
        self.denied(&lic.id, &req.holder, || {
            format!("version not entitled: the entitlement covers {versions}")
        })?;
        self.refused(
            req,
            counted,
            CheckoutOutcome::VersionNotEntitled { versions },
        )
        .map(Some)
    }

    /// Whether a heartbeat's seat is among the newest live seats over what
    /// the entitlements grant now (all of them when nothing does): then it
    /// is not renewed. The licenses file's own `seats` never cut here (a
    /// resize behaves as it always has).
    pub(super) fn over_entitlement(
        &mut self,
        lic: &LicenseConfig,
        grant: &Grant,
        row: &LeaseRow,
    ) -> Result<bool> {
        if row.mode == SeatMode::Borrow {
            return Ok(false);
        }
        let room = grant
            .seats
            .saturating_add(lic.policy.overage.min(grant.overage));
        let threshold = live_threshold(self.now, lic.policy.skew);
        let live = self.tx.live_count(Scope::License(&lic.id), threshold)?;
        if live <= room {
            return Ok(false);
        }
        let newer = self.tx.live_newer_than(row, threshold)?;
        Ok(newer < live - room)
    }

    /// `expires_at` capped at the entitlements' end, if any.
    pub(super) fn capped(&self, expires_at: Timestamp) -> Timestamp {
        match self.lease_cap {
            Some(cap) => expires_at.min(cap),
            None => expires_at,
        }
    }
}
