//! The checkout rule, as named steps, in the order they are asked:
//! blocked → idempotency replay → fingerprint re-claim → not allowed →
//! holder cap → group cap → count (with reservations and overage) → grant.
//! A license without seat policies skips the steps it has nothing for and
//! decides exactly as before them.

use std::collections::HashMap;
use std::time::Duration;

use leasehold_common::api::{DenialReason, EventKind};
use leasehold_common::liveness::lapses_at;
use leasehold_common::policy::{Group, LicenseConfig};
use leasehold_common::{Timestamp, is_live, live_threshold};

use super::lease_tx::Denial;
use super::tally::{Key, Tally};
use super::{LeaseTx, Result, Rules, new_seat_id};
use crate::store::{
    CheckoutOutcome, CheckoutRequest, LeaseRow, Limit, NotAllowedBecause, Scope, SeatMode, Waiter,
};

/// Whether the cap and count steps would let a holder in now.
enum Admission {
    Grant,
    /// `max_per_holder` or the group's `max` is reached.
    Cap(Limit, u32),
    /// No seat left: every one live, spoken for, or held back for groups
    /// the requester is not in (`others_reserved`).
    Full {
        others_reserved: u32,
    },
}

impl<T: LeaseTx> Rules<'_, T> {
    /// Checkout. `ahead`: the waiters in line before this one, first come
    /// first; the seats the rules would give them are spoken for.
    /// `counted`: a denial is the answer the client sees, so it counts as
    /// a denial in the usage history (a `?wait=` attempt that will be
    /// retried is not).
    pub fn checkout(
        &mut self,
        req: &CheckoutRequest,
        ahead: &[Waiter],
        counted: bool,
    ) -> Result<CheckoutOutcome> {
        let licenses = self.licenses;
        let Some(in_file) = licenses.get(&req.license_id) else {
            return Ok(CheckoutOutcome::UnknownLicense);
        };
        let terms = super::effective(licenses, in_file, self.now);
        if let Some(grant) = &terms.grant {
            if let Some(lease) = self.replay_as_granted(in_file, req)? {
                return Ok(reused(lease));
            }
            if let Some(refused) = self.entitlement_steps(in_file, grant, req, counted)? {
                return Ok(refused);
            }
            self.lease_cap = terms.lease_cap();
        }
        let lic: &LicenseConfig = &terms.lic;
        if let Some(denial) = self.borrow_terms(lic, req, counted)? {
            return Ok(denial);
        }
        if let Some(until) = self.blocked(&lic.id, req)? {
            return self.refused(req, counted, CheckoutOutcome::Blocked { until });
        }
        if let Some(lease) = self.idempotent_replay(lic, req)? {
            return Ok(reused(lease));
        }
        if req.borrow.is_none()
            && let Some(lease) = self.fingerprint_reclaim(lic, req)?
        {
            return Ok(reused(lease));
        }
        if !self.allowed(lic, req)? {
            return self.refused(
                req,
                counted,
                CheckoutOutcome::NotAllowed(NotAllowedBecause::Lists),
            );
        }
        if let Some(outcome) = self.borrow_steps(lic, req, counted)? {
            return Ok(outcome);
        }
        let threshold = live_threshold(self.now, lic.policy.skew);
        let mut tally = Tally::default();
        self.serve_line_first(lic, ahead, &mut tally, threshold)?;
        let group = lic.group_of(&req.holder, req.fingerprint.as_deref());
        match self.admission(lic, &req.holder, group, &mut tally, threshold)? {
            Admission::Cap(limit, max) => {
                let group = group.filter(|_| limit == Limit::Group);
                let limit = self.limit_reached(lic, req, limit, group, max, threshold)?;
                self.refused(req, counted, limit)
            }
            Admission::Full { others_reserved } => {
                let live = self.stored(lic, &mut tally, Key::License, threshold)?;
                let full = self.full(lic, req, live, others_reserved)?;
                self.refused(req, counted, full)
            }
            Admission::Grant => {
                let live = self.stored(lic, &mut tally, Key::License, threshold)?;
                let overage = live >= lic.policy.seats;
                let lease = self.grant(lic, req, group, overage)?;
                Ok(CheckoutOutcome::Granted {
                    lease,
                    reused: false,
                    overage,
                })
            }
        }
    }

    /// Whether a holder in no group would be refused `no_seats_available`
    /// now, the waiters `ahead` served first (the `full` alert).
    pub(super) fn pool_full(&mut self, lic: &LicenseConfig, ahead: &[Waiter]) -> Result<bool> {
        let threshold = live_threshold(self.now, lic.policy.skew);
        let mut tally = Tally::default();
        self.serve_line_first(lic, ahead, &mut tally, threshold)?;
        let admission = self.admission(lic, "", None, &mut tally, threshold)?;
        Ok(matches!(admission, Admission::Full { .. }))
    }

    /// Go down the line in arrival order, giving a seat (on paper) to each
    /// waiter the rules would let in now: their seats are not this
    /// request's to take. A waiter who cannot use what is free (a seat
    /// reserved for a group it is not in, its own cap) holds up no one.
    fn serve_line_first<'k>(
        &mut self,
        lic: &'k LicenseConfig,
        ahead: &'k [Waiter],
        tally: &mut Tally<'k>,
        threshold: Timestamp,
    ) -> Result<()> {
        if ahead.is_empty() {
            return Ok(());
        }
        tally.stored = Some(HashMap::new());
        let room = lic.policy.seats.saturating_add(lic.policy.overage);
        for waiter in ahead {
            if self.live(lic, tally, Key::License, threshold)? >= room {
                break;
            }
            let fingerprint = waiter.fingerprint.as_deref();
            if !lic.allows(&waiter.holder, fingerprint) {
                continue;
            }
            let group = lic.group_of(&waiter.holder, fingerprint);
            if let Admission::Grant =
                self.admission(lic, &waiter.holder, group, tally, threshold)?
            {
                tally.speak_for(&waiter.holder, group);
            }
        }
        Ok(())
    }

    /// The holder cap, the group cap and the count, in that order, for
    /// `holder` in `group`.
    fn admission<'k>(
        &mut self,
        lic: &'k LicenseConfig,
        holder: &'k str,
        group: Option<&'k Group>,
        tally: &mut Tally<'k>,
        threshold: Timestamp,
    ) -> Result<Admission> {
        if let Some(max) = lic.policy.max_per_holder
            && self.live(lic, tally, Key::Holder(holder), threshold)? >= max
        {
            return Ok(Admission::Cap(Limit::Holder, max));
        }
        if let Some((name, max)) = group.and_then(|g| g.max.map(|max| (&g.name, max)))
            && self.live(lic, tally, Key::Group(name), threshold)? >= max
        {
            return Ok(Admission::Cap(Limit::Group, max));
        }
        let live = self.live(lic, tally, Key::License, threshold)?;
        let others_reserved = self.others_reserved(lic, group, tally, threshold)?;
        let room = i64::from(lic.policy.seats) + i64::from(lic.policy.overage)
            - i64::from(live)
            - i64::from(others_reserved);
        Ok(if room < 1 {
            Admission::Full { others_reserved }
        } else {
            Admission::Grant
        })
    }

    /// The reservations the groups other than `own` have not used: a member
    /// may use its own group's, nobody else may.
    fn others_reserved<'k>(
        &mut self,
        lic: &'k LicenseConfig,
        own: Option<&Group>,
        tally: &mut Tally<'k>,
        threshold: Timestamp,
    ) -> Result<u32> {
        let own = own.map(|g| g.name.as_str());
        let mut unused = 0u32;
        for other in lic
            .groups
            .iter()
            .filter(|g| g.reserve > 0 && Some(g.name.as_str()) != own)
        {
            let used = self.live(lic, tally, Key::Group(&other.name), threshold)?;
            unused = unused.saturating_add(other.reserve.saturating_sub(used));
        }
        Ok(unused)
    }

    /// Live seats in `key`'s scope, counting those spoken for.
    fn live<'k>(
        &mut self,
        lic: &LicenseConfig,
        tally: &mut Tally<'k>,
        key: Key<'k>,
        threshold: Timestamp,
    ) -> Result<u32> {
        let spoken_for = tally.spoken_for.get(&key).copied().unwrap_or(0);
        Ok(self.stored(lic, tally, key, threshold)? + spoken_for)
    }

    /// Live seats in `key`'s scope in the store.
    fn stored<'k>(
        &mut self,
        lic: &LicenseConfig,
        tally: &mut Tally<'k>,
        key: Key<'k>,
        threshold: Timestamp,
    ) -> Result<u32> {
        if let Some(&n) = tally.stored.as_ref().and_then(|kept| kept.get(&key)) {
            return Ok(n);
        }
        let n = self.tx.live_count(key.scope(&lic.id), threshold)?;
        if let Some(kept) = &mut tally.stored {
            kept.insert(key, n);
        }
        Ok(n)
    }

    /// A denial, counted as a denial (with its reason) when the client
    /// sees it: always, unless it is one a `?wait=` line retries and this
    /// attempt is not the last ([`waits_in_line`]).
    pub(super) fn refused(
        &mut self,
        req: &CheckoutRequest,
        counted: bool,
        outcome: CheckoutOutcome,
    ) -> Result<CheckoutOutcome> {
        if let Some(reason) = denial_reason(&outcome)
            && (counted || waits_in_line(&outcome).is_none())
        {
            self.tx.count_denial(&Denial {
                license_id: &req.license_id,
                holder: &req.holder,
                fingerprint: req.fingerprint.as_deref(),
                reason,
                at: self.now,
            })?;
        }
        Ok(outcome)
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
        lic: &LicenseConfig,
        req: &CheckoutRequest,
    ) -> Result<Option<LeaseRow>> {
        let Some(key) = &req.idempotency_key else {
            return Ok(None);
        };
        let Some(row) = self.tx.lease_by_idempotency_key(&lic.id, key)? else {
            return Ok(None);
        };
        if is_live(row.expires_at, self.now, lic.policy.skew)
            && !lingering_for_another(lic, &row, req)
        {
            return self.take_back(&row, lic.policy.ttl).map(Some);
        }
        // Lapsed, or released and lingering for someone else: the request
        // it answered is over, and the key is free for a new seat.
        self.tx.forget_idempotency_key(&row.seat_id)?;
        Ok(None)
    }

    /// A license with a vendor: the retry of a checkout whose answer was
    /// lost gets the seat as it was granted, before any entitlement check
    /// (it was entitled then), and not renewed (it may not be now).
    fn replay_as_granted(
        &mut self,
        lic: &LicenseConfig,
        req: &CheckoutRequest,
    ) -> Result<Option<LeaseRow>> {
        let Some(key) = &req.idempotency_key else {
            return Ok(None);
        };
        let row = self.tx.lease_by_idempotency_key(&lic.id, key)?;
        Ok(row.filter(|row| {
            is_live(row.expires_at, self.now, lic.policy.skew)
                && !lingering_for_another(lic, row, req)
        }))
    }

    /// The same machine asking again (it lost its lease in a network blip):
    /// give back its live seat rather than counting it twice. A lingering
    /// seat goes back only to the holder that released it, and only while
    /// the license still lets that holder in.
    fn fingerprint_reclaim(
        &mut self,
        lic: &LicenseConfig,
        req: &CheckoutRequest,
    ) -> Result<Option<LeaseRow>> {
        let Some(fingerprint) = &req.fingerprint else {
            return Ok(None);
        };
        let threshold = live_threshold(self.now, lic.policy.skew);
        let Some(row) = self.tx.live_lease_by_fingerprint(
            &lic.id,
            fingerprint,
            &req.holder,
            threshold,
            super::TAKE_LAST,
        )?
        else {
            return Ok(None);
        };
        if lingering_for_another(lic, &row, req) {
            return Ok(None);
        }
        self.take_back(&row, lic.policy.ttl).map(Some)
    }

    /// A seat its holder asks for again: renewed (a lingering one is live
    /// again); a borrowed one is returned as stored, never shortened.
    fn take_back(&mut self, row: &LeaseRow, ttl: Duration) -> Result<LeaseRow> {
        match row.mode {
            SeatMode::Borrow => Ok(row.clone()),
            SeatMode::Heartbeat | SeatMode::Linger => self.renew(row, ttl),
        }
    }

    /// `deny` matches, or `allow` is present and does not: refused without
    /// counting anything (and never waiting in line).
    fn allowed(&mut self, lic: &LicenseConfig, req: &CheckoutRequest) -> Result<bool> {
        if lic.allows(&req.holder, req.fingerprint.as_deref()) {
            return Ok(true);
        }
        self.denied(&lic.id, &req.holder, || {
            "not allowed by the license's allow/deny lists".to_string()
        })?;
        Ok(false)
    }

    /// `limit_reached`, with the time until the earliest seat that the
    /// limit counts could lapse.
    pub(super) fn limit_reached(
        &mut self,
        lic: &LicenseConfig,
        req: &CheckoutRequest,
        limit: Limit,
        group: Option<&Group>,
        max: u32,
        threshold: Timestamp,
    ) -> Result<CheckoutOutcome> {
        let license_id = lic.id.as_str();
        let (scope, why) = match (limit, group) {
            (Limit::Group, Some(g)) => (
                Scope::Group {
                    license_id,
                    group: &g.name,
                },
                format!("group limit: {} holds its {max} seat(s)", g.name),
            ),
            (Limit::Borrow, _) => (
                Scope::Mode {
                    license_id,
                    mode: SeatMode::Borrow,
                },
                format!("borrow limit: {max} seat(s) borrowed"),
            ),
            (Limit::Holder | Limit::Group, _) => (
                Scope::Holder {
                    license_id,
                    holder: &req.holder,
                },
                format!("holder limit: {max} live seat(s) per holder"),
            ),
        };
        let retry_after = self.retry_after(lic, scope, threshold)?;
        self.denied(&lic.id, &req.holder, || why)?;
        Ok(CheckoutOutcome::LimitReached {
            limit,
            max,
            group: group.map(|g| g.name.clone()),
            retry_after,
        })
    }

    /// No seat left for this request (every seat live, spoken for by a
    /// waiter ahead, or held back for another group).
    fn full(
        &mut self,
        lic: &LicenseConfig,
        req: &CheckoutRequest,
        live: u32,
        reserved: u32,
    ) -> Result<CheckoutOutcome> {
        let threshold = live_threshold(self.now, lic.policy.skew);
        let seats = lic.policy.seats;
        // When the reservations alone take every seat the overage leaves, no
        // lapse lifts the denial: say one TTL.
        let retry_after = if seats + lic.policy.overage > reserved {
            self.retry_after(lic, Scope::License(&lic.id), threshold)?
        } else {
            lic.policy.ttl
        };
        self.denied(&lic.id, &req.holder, || {
            if reserved == 0 {
                format!("pool full: {live} of {seats} seats live")
            } else {
                format!(
                    "pool full: {live} of {seats} seats live, {reserved} reserved for other groups"
                )
            }
        })?;
        Ok(CheckoutOutcome::Full {
            seats,
            live,
            reserved,
            retry_after,
        })
    }

    /// Until the earliest live seat in `scope` lapses (one TTL if none).
    pub(super) fn retry_after(
        &mut self,
        lic: &LicenseConfig,
        scope: Scope<'_>,
        threshold: Timestamp,
    ) -> Result<Duration> {
        let skew = lic.policy.skew;
        self.retry_deadline = self
            .tx
            .earliest_live_expiry(scope, threshold)?
            .map(|e| lapses_at(e, skew));
        let ms = (self.retry_deadline)
            .map(|at| at.millis_since(self.now))
            .unwrap_or(lic.policy.ttl.as_millis() as i64)
            .max(0);
        Ok(Duration::from_millis(ms as u64))
    }

    /// A new seat with a fresh capability id, one TTL from now, counting
    /// for the requester's group from now until it leaves.
    fn grant(
        &mut self,
        lic: &LicenseConfig,
        req: &CheckoutRequest,
        group: Option<&Group>,
        overage: bool,
    ) -> Result<LeaseRow> {
        let (mode, lifetime) = match req.borrow {
            Some(borrow_for) => (SeatMode::Borrow, borrow_for),
            None => (SeatMode::Heartbeat, lic.policy.ttl),
        };
        let lease = LeaseRow {
            seat_id: new_seat_id(),
            license_id: lic.id.clone(),
            holder: req.holder.clone(),
            fingerprint: req.fingerprint.clone(),
            checked_out_at: self.now,
            issued_at: self.now,
            expires_at: self.capped(self.now.saturating_add(lifetime)),
            group: group.map(|g| g.name.clone()),
            mode,
            idle_since: None,
        };
        // The lease row is the open session (a replay or re-claim continues
        // it; heartbeats and the outage rule extend it through the lease's
        // own expiry); the session is written once, when the seat leaves.
        self.tx
            .insert_lease(&lease, req.idempotency_key.as_deref())?;
        let detail = checkout_detail(&lease, overage);
        self.event(
            EventKind::Checkout,
            Some(&lic.id),
            Some(&lease.seat_id),
            Some(&lease.holder),
            detail.as_deref(),
        )?;
        Ok(lease)
    }
}

/// The denials a `?wait=` checkout stands in line after (the pool full,
/// a cap reached), with how long until it looks again. Any other denial
/// is final at once, so it is counted at once.
pub fn waits_in_line(outcome: &CheckoutOutcome) -> Option<Duration> {
    match outcome {
        CheckoutOutcome::Full { retry_after, .. }
        | CheckoutOutcome::LimitReached { retry_after, .. } => Some(*retry_after),
        _ => None,
    }
}

/// Why a denial is counted; `None` for an answer that is not a counted
/// denial.
pub(super) fn denial_reason(outcome: &CheckoutOutcome) -> Option<DenialReason> {
    Some(match outcome {
        CheckoutOutcome::Full { .. } => DenialReason::Full,
        CheckoutOutcome::LimitReached { limit, .. } => match limit {
            Limit::Holder => DenialReason::Holder,
            Limit::Group => DenialReason::Group,
            Limit::Borrow => DenialReason::Borrow,
        },
        CheckoutOutcome::NotAllowed(_) => DenialReason::NotAllowed,
        CheckoutOutcome::Blocked { .. } => DenialReason::Blocked,
        CheckoutOutcome::VersionNotEntitled { .. } => DenialReason::Version,
        CheckoutOutcome::NotEntitled => DenialReason::Entitlement,
        _ => return None,
    })
}

/// A lingering seat goes back only to the holder and machine that
/// released it, and only while the license still lets that holder in.
pub(super) fn lingering_for_another(
    lic: &LicenseConfig,
    row: &LeaseRow,
    req: &CheckoutRequest,
) -> bool {
    row.mode == SeatMode::Linger
        && (row.holder != req.holder
            || req.fingerprint.is_none()
            || row.fingerprint != req.fingerprint
            || !lic.allows(&req.holder, req.fingerprint.as_deref()))
}

pub(super) fn reused(lease: LeaseRow) -> CheckoutOutcome {
    CheckoutOutcome::Granted {
        lease,
        reused: true,
        overage: false,
    }
}

/// The text of a `checkout` event: the machine, the group, and whether
/// the seat came from the overage allowance.
fn checkout_detail(lease: &LeaseRow, overage: bool) -> Option<String> {
    let parts: Vec<String> = [
        lease
            .fingerprint
            .as_ref()
            .map(|f| format!("fingerprint {f}")),
        lease.group.as_ref().map(|g| format!("group {g}")),
        overage.then(|| "overage".to_string()),
        (lease.mode == SeatMode::Borrow).then(|| borrowed_detail(lease)),
    ]
    .into_iter()
    .flatten()
    .collect();
    (!parts.is_empty()).then(|| parts.join("; "))
}

/// How a `checkout` event names a borrow.
pub(super) fn borrowed_detail(lease: &LeaseRow) -> String {
    format!("borrowed until {}", lease.expires_at)
}
