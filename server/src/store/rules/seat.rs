//! What happens to a seat after its checkout: renewed by heartbeats (and
//! replays), released by its client, revoked by an admin; and where its
//! session ends.

use std::time::Duration;

use leasehold_common::api::{EventKind, SessionEnd};
use leasehold_common::is_live;
use leasehold_common::liveness::live_until;

use super::{EndedSession, LeaseTx, Result, Rules};
use crate::store::{HeartbeatOutcome, LeaseRow, RevokeOutcome, SeatMode};

impl<T: LeaseTx> Rules<'_, T> {
    /// New expiry for an existing seat, on the server's clock, kept by
    /// heartbeats from now on (a lingering seat is live again). Only these
    /// change, so the renewed row is built here rather than read back.
    pub(super) fn renew(&mut self, row: &LeaseRow, ttl: Duration) -> Result<LeaseRow> {
        let renewed = LeaseRow {
            issued_at: self.now,
            expires_at: self.now.saturating_add(ttl),
            mode: SeatMode::Heartbeat,
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
        let Some(row) = self.tx.lease(Some(license_id), seat_id)? else {
            return Ok(HeartbeatOutcome::Lost);
        };
        // Released (lingering): only a new checkout takes it back.
        if row.mode == SeatMode::Linger {
            return Ok(HeartbeatOutcome::Lost);
        }
        let live = is_live(row.expires_at, self.now, policy.skew);
        // Borrowed: out until its expiry, never renewed (that would let a
        // client keep a seat past `borrow.max` by heartbeats).
        if live && row.mode == SeatMode::Borrow {
            return Ok(HeartbeatOutcome::Borrowed {
                expires_at: row.expires_at,
            });
        }
        if live {
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
        let lingering = LeaseRow {
            expires_at: self.now.saturating_add(linger),
            mode: SeatMode::Linger,
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
        self.tx.record_sessions(&[EndedSession { lease, end, at }])
    }
}
