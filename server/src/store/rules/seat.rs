//! What happens to a seat after its checkout: renewed by heartbeats (and
//! replays), released by its client, revoked by an admin; and where its
//! session ends.

use std::time::Duration;

use leasehold_common::api::{EventKind, SeatLostReason, SessionEnd};
use leasehold_common::liveness::live_until;
use leasehold_common::{LicenseConfig, Timestamp, is_live};

use super::idle::{after_report, idle_period};
use super::{EndedSession, LeaseTx, Result, Rules};
use crate::store::{HeartbeatOutcome, LeaseRow, RevokeOutcome, SeatMode};

impl<T: LeaseTx> Rules<'_, T> {
    /// A seat taken back by a checkout: kept by heartbeats from now on (a
    /// lingering seat is live again), its user active (an open idle period
    /// ends here).
    pub(super) fn renew(&mut self, row: &LeaseRow, ttl: Duration) -> Result<LeaseRow> {
        self.end_idle_period(row, self.now)?;
        self.renewed(row, ttl, None)
    }

    /// New expiry for an existing seat, on the server's clock. Only these
    /// change, so the renewed row is built here rather than read back.
    fn renewed(
        &mut self,
        row: &LeaseRow,
        ttl: Duration,
        idle_since: Option<Timestamp>,
    ) -> Result<LeaseRow> {
        let renewed = LeaseRow {
            issued_at: self.now,
            expires_at: self.capped(self.now.saturating_add(ttl)),
            mode: SeatMode::Heartbeat,
            idle_since,
            ..row.clone()
        };
        self.tx.renew_lease(row, &renewed)?;
        Ok(renewed)
    }

    /// The seat's open idle period ends at `to` (kept if long enough).
    pub(super) fn end_idle_period(&mut self, row: &LeaseRow, to: Timestamp) -> Result<()> {
        match row.idle_since.and_then(|from| idle_period(row, from, to)) {
            Some(period) => self.record_idle(&[period]),
            None => Ok(()),
        }
    }

    /// Heartbeat: only a live seat of *this* license renews (a seat id is a
    /// capability, but only together with its own license's key). `idle`
    /// is how long its client reports its user idle (`None`: active).
    pub fn heartbeat(
        &mut self,
        license_id: &str,
        seat_id: &str,
        idle: Option<Duration>,
    ) -> Result<HeartbeatOutcome> {
        let Some(lic) = self.licenses.get(license_id) else {
            return Ok(HeartbeatOutcome::Lost(SeatLostReason::Lapsed));
        };
        let policy = lic.policy;
        let Some(row) = self.tx.lease(Some(license_id), seat_id)? else {
            let reason = self.gone_because(lic, seat_id)?;
            return Ok(HeartbeatOutcome::Lost(reason));
        };
        // Released (lingering): only a new checkout takes it back.
        if row.mode == SeatMode::Linger {
            return Ok(HeartbeatOutcome::Lost(SeatLostReason::Released));
        }
        let live = is_live(row.expires_at, self.now, policy.skew);
        // Borrowed: out until its expiry, never renewed (that would let a
        // client keep a seat past `borrow.max` by heartbeats).
        if live && row.mode == SeatMode::Borrow {
            return Ok(HeartbeatOutcome::Borrowed {
                expires_at: row.expires_at,
            });
        }
        if live && let Some(grant) = self.licenses.grant(lic, self.now.as_millis()) {
            if self.over_entitlement(lic, &grant, &row)? {
                self.end_over_entitlement(&row)?;
                return Ok(HeartbeatOutcome::Lost(SeatLostReason::Expired));
            }
            self.lease_cap = grant.lease_cap_ms.map(Timestamp::from_millis);
        }
        if live {
            let report = after_report(
                row.idle_since,
                row.checked_out_at,
                idle,
                (self.now, self.idle_counted_from),
                policy.idle_timeout,
            );
            if let Some(at) = report.reclaim_at {
                // As of this report: it may have set or moved the idle start.
                let idle = LeaseRow {
                    idle_since: report.idle_since,
                    ..row.clone()
                };
                self.reclaim(lic, &idle, at)?;
                return Ok(HeartbeatOutcome::Lost(SeatLostReason::Idle));
            }
            if let Some((from, to)) = report.ended {
                self.end_idle_period(
                    &LeaseRow {
                        idle_since: Some(from),
                        ..row.clone()
                    },
                    to,
                )?;
            }
            let renewed = self.renewed(&row, policy.ttl, report.idle_since)?;
            return Ok(HeartbeatOutcome::Renewed(renewed));
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
        Ok(HeartbeatOutcome::Lost(SeatLostReason::Lapsed))
    }

    /// A seat over what the entitlements grant now leaves at its heartbeat:
    /// its session lapses now, so the count is back within the grant as
    /// soon as the newest seats have asked.
    fn end_over_entitlement(&mut self, row: &LeaseRow) -> Result<()> {
        let Some(gone) = self.tx.delete_lease(&row.seat_id, Some(&row.license_id))? else {
            return Ok(());
        };
        self.end_session(&gone, SessionEnd::Lapse)?;
        self.event(
            EventKind::Lost,
            Some(&gone.license_id),
            Some(&gone.seat_id),
            Some(&gone.holder),
            Some("over what the license's entitlements grant now: not renewed"),
        )
    }

    /// Why a seat that is no longer in the table is gone, as its session's
    /// end says. Only a session that ended within a ttl + skew matters: a
    /// seat gone longer ago would have lapsed by now anyway, whatever
    /// ended it (and a seat the history never had lapsed too).
    fn gone_because(&mut self, lic: &LicenseConfig, seat_id: &str) -> Result<SeatLostReason> {
        let ended_since = self
            .now
            .saturating_sub(lic.policy.ttl)
            .saturating_sub(lic.policy.skew);
        Ok(
            match self.tx.ended_session(&lic.id, seat_id, ended_since)? {
                Some(SessionEnd::Release) => SeatLostReason::Released,
                Some(SessionEnd::Revoke) => SeatLostReason::Revoked,
                Some(SessionEnd::Idle) => SeatLostReason::Idle,
                Some(SessionEnd::Lapse) | None => SeatLostReason::Lapsed,
            },
        )
    }

    /// Release: idempotent, `false` if the seat was not there. On a license
    /// with `linger`, a live seat stays and counts until the linger ends.
    pub fn release(&mut self, license_id: &str, seat_id: &str) -> Result<bool> {
        if let Some(released) = self.linger(license_id, seat_id)? {
            return Ok(released);
        }
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

    /// The seat stays, lingering: it counts (for the pool, its group and its
    /// holder) until `linger` from now, and its machine may take it back.
    /// `None` when it leaves at once instead (no linger, lapsed, borrowed).
    fn linger(&mut self, license_id: &str, seat_id: &str) -> Result<Option<bool>> {
        let Some(lic) = self.licenses.get(license_id) else {
            return Ok(None);
        };
        let Some(linger) = lic.policy.linger else {
            return Ok(None);
        };
        let Some(row) = self.tx.lease(Some(license_id), seat_id)? else {
            return Ok(None);
        };
        match row.mode {
            // A second release changes nothing.
            SeatMode::Linger => return Ok(Some(true)),
            SeatMode::Borrow => return Ok(None),
            SeatMode::Heartbeat if !is_live(row.expires_at, self.now, lic.policy.skew) => {
                return Ok(None);
            }
            SeatMode::Heartbeat => {}
        }
        // Released: its user is done, idle or not.
        self.end_idle_period(&row, self.now)?;
        let lingering = LeaseRow {
            expires_at: self.now.saturating_add(linger),
            mode: SeatMode::Linger,
            idle_since: None,
            ..row.clone()
        };
        self.tx.renew_lease(&row, &lingering)?;
        let detail = format!("lingering until {}", lingering.expires_at);
        self.event(
            EventKind::Release,
            Some(license_id),
            Some(seat_id),
            Some(&row.holder),
            Some(&detail),
        )?;
        Ok(Some(true))
    }

    /// Revoke (admin): delete the seat and, with `block`, refuse its holder +
    /// fingerprint a new seat until then. A live borrowed seat only with
    /// `force`: its holder's token stays valid offline until it expires, so
    /// freeing it early can put one seat more in use than sold.
    pub fn revoke(
        &mut self,
        seat_id: &str,
        reason: Option<String>,
        block: Option<Duration>,
        force: bool,
    ) -> Result<RevokeOutcome> {
        let Some(row) = self.tx.lease(None, seat_id)? else {
            return Ok(RevokeOutcome::Unknown);
        };
        let skew = self.licenses.get(&row.license_id).map(|l| l.policy.skew);
        let out_on_loan = row.mode == SeatMode::Borrow
            && skew.is_none_or(|skew| is_live(row.expires_at, self.now, skew));
        if out_on_loan && !force {
            return Ok(RevokeOutcome::Borrowed(row));
        }
        let Some(row) = self.tx.delete_lease(seat_id, None)? else {
            return Ok(RevokeOutcome::Unknown);
        };
        self.end_session(&row, SessionEnd::Revoke)?;
        let mut detail = reason.unwrap_or_default();
        if out_on_loan {
            let sep = if detail.is_empty() { "" } else { "; " };
            detail = format!(
                "{detail}{sep}borrowed until {}: its token stays valid offline until then",
                row.expires_at
            );
        }
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
        Ok(RevokeOutcome::Revoked(row))
    }

    /// A seat's session ends when the lease leaves the table: at `now` for a
    /// release or revoke of a live seat, and when the predicate stopped
    /// counting it ([`live_until`]) for one that had already lapsed.
    pub(super) fn end_session(&mut self, lease: &LeaseRow, end: SessionEnd) -> Result<()> {
        let skew = self.licenses.get(&lease.license_id).map(|l| l.policy.skew);
        let (end, at) = match skew {
            Some(skew) if !is_live(lease.expires_at, self.now, skew) => {
                (SessionEnd::Lapse, live_until(lease.expires_at, skew))
            }
            _ => (end, self.now),
        };
        let ended = [EndedSession { lease, end, at }];
        self.tx.record_sessions(&ended)?;
        self.close_idle_periods(&ended)
    }
}
