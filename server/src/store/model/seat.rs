//! A held seat as the model sees it change: renewed by a heartbeat (with
//! the brief's idle rule, restated), reclaimed when idle past the timeout,
//! lost (and why: the 410 reason), released (into linger or out),
//! revoked (a borrowed one only with force; a block set), and every way a
//! seat leaves the table with its session and idle period.

use std::time::Duration;

use leasehold_common::api::{EventKind, SeatLostReason, SessionEnd};
use leasehold_common::liveness::live_until;
use leasehold_common::policy::format_duration;
use leasehold_common::{Timestamp, is_live};

use super::events::{Effects, Session, WantEvent};
use super::ops::Report;
use super::state::Model;
use super::time::{Rel, ms};
use crate::store::{HeartbeatOutcome, LeaseRow, RevokeOutcome, SeatMode};

/// Shorter idle periods are not history (the brief: "at least 60 s").
pub const MIN_IDLE_MS: i64 = 60_000;
/// A report whose idle start is more than this later than the last one's
/// means the user came back (the brief: "more than 2 s").
const CAME_BACK_MS: i64 = 2_000;

/// What an idle report does to a live seat kept by heartbeats.
#[derive(Debug)]
enum Verdict {
    /// Its user had been idle for the timeout since `since` (the seat's
    /// idle start after this report) at `at`: reclaimed as of `at`.
    Reclaim { since: Timestamp, at: Timestamp },
    /// Renewed with this idle start; `ended`: the period its user came
    /// back from.
    Renew {
        idle_since: Option<Timestamp>,
        ended: Option<(Timestamp, Timestamp)>,
    },
}

/// A heartbeat as the model answers it.
#[derive(Debug)]
pub struct Beat {
    pub want: HeartbeatOutcome,
    /// The seat was reclaimed by this report (one live seat fewer).
    pub reclaimed: bool,
    /// Which case it was, for a failure's message.
    pub why: String,
}

impl Model {
    pub fn renew(&mut self, seat: &str, idle_since: Option<Timestamp>) -> LeaseRow {
        let ttl = self.pol(&self.leases[seat].lease.license_id).unwrap().ttl();
        let now = self.now;
        let s = self.leases.get_mut(seat).unwrap();
        s.lease.issued_at = now;
        s.lease.expires_at = now.saturating_add(ttl);
        s.lease.mode = SeatMode::Heartbeat;
        s.lease.idle_since = idle_since;
        s.lease.clone()
    }

    /// The seat's idle period (if any) ends at `to`: recorded if a minute
    /// or longer.
    pub fn close(&mut self, lease: &LeaseRow, to: Timestamp) {
        if let Some(from) = lease.idle_since
            && to.millis_since(from) >= MIN_IDLE_MS
        {
            self.periods
                .push((lease.license_id.clone(), lease.seat_id.clone(), from, to));
        }
    }

    /// The `idle_s` a report sends for the seat (`None`: no report).
    pub fn idle_secs(&self, seat: &str, report: Report) -> Option<u64> {
        let row = self.leases.get(seat).map(|s| &s.lease);
        let idle_so_far = row
            .and_then(|l| l.idle_since)
            .map_or(0, |since| self.now.millis_since(since) / 1000);
        let timeout_s = row
            .and_then(|l| self.pol(&l.license_id))
            .and_then(|p| p.idle_ms)
            .map_or(60, |t| t.div_ceil(1000) as i64);
        match report {
            Report::Absent => None,
            Report::Zero => Some(0),
            Report::Secs(s) | Report::Large(s) => Some(s),
            Report::Continue(d) => Some((idle_so_far + d).max(0) as u64),
            Report::NearTimeout(d) => Some((timeout_s + d).max(0) as u64),
        }
    }

    /// The brief's rule for a report on a live seat kept by heartbeats:
    /// `idle_since = now − idle_s`, not before checkout; a start more than
    /// 2 s later than the last one's ends the last period (the user came
    /// back); 0 or none is activity; reclaimed once `now − idle_since`
    /// reaches the timeout (the period in force first: a report cannot
    /// undo a timeout already reached).
    fn after_report(&self, row: &LeaseRow, idle_s: Option<u64>) -> Verdict {
        let timeout = self.pol(&row.license_id).unwrap().idle_timeout();
        let reached = |since: Timestamp| {
            let at = since.saturating_add(timeout?);
            (at <= self.now).then_some(Verdict::Reclaim { since, at })
        };
        if let Some(verdict) = row.idle_since.and_then(reached) {
            return verdict;
        }
        let reported = idle_s.filter(|&s| s > 0).map(|s| {
            self.now
                .saturating_sub(Duration::from_secs(s))
                .max(row.checked_out_at)
        });
        let (idle_since, ended) = match (row.idle_since, reported) {
            (None, new) => (new, None),
            (Some(last), Some(new)) if new.millis_since(last) <= CAME_BACK_MS => {
                (Some(last.min(new)), None)
            }
            // Back: the last period ended when the user last used the
            // application (now, if active now).
            (Some(last), new) => (new, Some((last, new.unwrap_or(self.now)))),
        };
        match idle_since.and_then(reached) {
            Some(verdict) => verdict,
            None => Verdict::Renew { idle_since, ended },
        }
    }

    /// The 410 reason for a seat not in the table (under this license):
    /// how its session ended, if within a ttl + skew (else it would have
    /// lapsed anyway), on its own license; else lapsed.
    pub fn gone_because(&self, license: &str, seat: &str) -> SeatLostReason {
        let Some(pol) = self.pol(license) else {
            return SeatLostReason::Lapsed;
        };
        let since = self
            .now
            .saturating_sub(pol.ttl())
            .saturating_sub(pol.skew());
        match self.ended.get(seat) {
            Some((lic, end, at)) if lic == license && *at >= since => match end {
                SessionEnd::Release => SeatLostReason::Released,
                SessionEnd::Revoke => SeatLostReason::Revoked,
                SessionEnd::Idle => SeatLostReason::Idle,
                SessionEnd::Lapse => SeatLostReason::Lapsed,
            },
            _ => SeatLostReason::Lapsed,
        }
    }

    /// A heartbeat reporting `idle_s` (`None`: no report) on the seat: the
    /// answer, applied to the model with its effects.
    pub fn heartbeat(
        &mut self,
        license: &str,
        seat: &str,
        idle_s: Option<u64>,
        fx: &mut Effects,
    ) -> Beat {
        let here = self
            .leases
            .get(seat)
            .filter(|s| s.lease.license_id == license && self.pol(license).is_some())
            .map(|s| s.lease.clone());
        let beat = |want, why: &str| Beat {
            want,
            reclaimed: false,
            why: why.to_string(),
        };
        match here {
            Some(row) if row.mode == SeatMode::Linger => {
                self.note("heartbeat: lingering");
                beat(
                    HeartbeatOutcome::Lost(SeatLostReason::Released),
                    "lingering",
                )
            }
            Some(row) if row.mode == SeatMode::Borrow && self.live(&row) => {
                self.note("heartbeat: borrowed");
                let expires_at = row.expires_at;
                beat(HeartbeatOutcome::Borrowed { expires_at }, "borrowed")
            }
            Some(row) if self.live(&row) => self.report(row, idle_s, fx),
            Some(row) => {
                self.note("heartbeat: lapsed");
                if self.first_in_window(format!("lost {seat}")) {
                    fx.events.push(WantEvent {
                        detail: None,
                        ..WantEvent::seat(EventKind::Lost, &row, None)
                    });
                }
                beat(HeartbeatOutcome::Lost(SeatLostReason::Lapsed), "lapsed")
            }
            None => {
                let want = self.gone_because(license, seat);
                self.note(match want {
                    SeatLostReason::Released => "heartbeat (not here): released",
                    SeatLostReason::Revoked => "heartbeat (not here): revoked",
                    SeatLostReason::Idle => "heartbeat (not here): idle",
                    SeatLostReason::Lapsed => "heartbeat (not here): lapsed",
                    SeatLostReason::Expired => "heartbeat (not here): expired",
                });
                let why = format!("not here; its session: {:?}", self.ended.get(seat));
                beat(HeartbeatOutcome::Lost(want), &why)
            }
        }
    }

    /// A heartbeat on a live seat kept by heartbeats: renewed with its new
    /// idle start, or reclaimed.
    fn report(&mut self, row: LeaseRow, idle_s: Option<u64>, fx: &mut Effects) -> Beat {
        match self.after_report(&row, idle_s) {
            Verdict::Reclaim { since, at } => {
                // As of this report: it may have set or moved the idle
                // start (`a_report_that_reaches_the_timeout_records_its_idle_start`).
                self.reclaimed(fx, &row.seat_id, Some(since), at);
                self.note(if row.idle_since == Some(since) {
                    "heartbeat: reclaimed"
                } else {
                    "heartbeat: reclaimed by its report"
                });
                Beat {
                    want: HeartbeatOutcome::Lost(SeatLostReason::Idle),
                    reclaimed: true,
                    why: format!("reclaimed (idle since {}, at {})", Rel(since), Rel(at)),
                }
            }
            Verdict::Renew { idle_since, ended } => {
                if let Some((from, to)) = ended {
                    let back = LeaseRow {
                        idle_since: Some(from),
                        ..row.clone()
                    };
                    self.close(&back, to);
                    self.note("heartbeat: came back");
                }
                match (row.idle_since, idle_since) {
                    (Some(a), Some(b)) if a == b => self.note("heartbeat: still idle"),
                    (_, Some(_)) => self.note("heartbeat: idle"),
                    _ => {}
                }
                self.note("heartbeat: renewed");
                Beat {
                    want: HeartbeatOutcome::Renewed(self.renew(&row.seat_id, idle_since)),
                    reclaimed: false,
                    why: "renewed".to_string(),
                }
            }
        }
    }

    /// A release: the answer (the seat was there under this license).
    /// With linger, a live seat stays, lingering until now + linger, its
    /// idle period over; a second release of a lingering seat changes
    /// nothing; else the seat leaves, its session ended.
    pub fn release(&mut self, license: &str, seat: &str, fx: &mut Effects) -> bool {
        let Some(row) = self
            .leases
            .get(seat)
            .filter(|s| s.lease.license_id == license)
            .map(|s| s.lease.clone())
        else {
            return false;
        };
        let linger = self
            .seat_pols
            .iter()
            .find(|(id, _)| *id == license)
            .and_then(|(_, sp)| sp.linger_ms);
        match (linger, row.mode) {
            (Some(_), SeatMode::Linger) => self.note("release: again while lingering"),
            (Some(linger), SeatMode::Heartbeat) if self.live(&row) => {
                // Released: its user is done, idle or not.
                self.close(&row, self.now);
                let until = self.now.saturating_add(ms(linger));
                let s = &mut self.leases.get_mut(seat).unwrap().lease;
                s.mode = SeatMode::Linger;
                s.idle_since = None;
                s.expires_at = until;
                let detail = format!("lingering until {until}");
                fx.events
                    .push(WantEvent::seat(EventKind::Release, &row, Some(detail)));
                self.note("release: lingering");
            }
            _ => {
                let row = self.remove(seat);
                fx.events
                    .push(WantEvent::seat(EventKind::Release, &row, None));
                let ended = self.ended(row, SessionEnd::Release);
                self.end_session(fx, ended);
            }
        }
        true
    }

    /// A revoke (with `reason`, a block for `block`, `force`): a borrowed
    /// live seat only with force; the block set; the session ended.
    pub fn revoke(
        &mut self,
        seat: &str,
        reason: Option<String>,
        block: Option<Duration>,
        force: bool,
        fx: &mut Effects,
    ) -> RevokeOutcome {
        let Some(row) = self.leases.get(seat).map(|s| s.lease.clone()) else {
            return RevokeOutcome::Unknown;
        };
        let on_loan = row.mode == SeatMode::Borrow && self.live(&row);
        if on_loan && !force {
            self.note("revoke: borrowed, kept");
            return RevokeOutcome::Borrowed(row);
        }
        self.remove(seat);
        let mut detail: Vec<String> = reason.into_iter().collect();
        if on_loan {
            detail.push(format!(
                "borrowed until {}: its token stays valid offline until then",
                row.expires_at
            ));
            self.note("revoke: borrowed, forced");
        }
        if let Some(block) = block.filter(|b| !b.is_zero()) {
            let until = self.now.saturating_add(block);
            let fp = row.fingerprint.clone().unwrap_or_default();
            let key = (row.license_id.clone(), row.holder.clone(), fp);
            self.blocks.insert(key, until);
            detail.push(format!("re-checkout blocked until {until}"));
            self.note("revoke: blocked");
        }
        let detail = (!detail.is_empty()).then(|| detail.join("; "));
        fx.events
            .push(WantEvent::seat(EventKind::Revoke, &row, detail));
        let ended = self.ended(row.clone(), SessionEnd::Revoke);
        self.end_session(fx, ended);
        RevokeOutcome::Revoked(row)
    }

    /// The session a seat leaving the table now gets: `end` now if it was
    /// live, else a lapse when it stopped counting.
    pub fn ended(&self, lease: LeaseRow, end: SessionEnd) -> Session {
        let skew = self.pol(&lease.license_id).unwrap().skew();
        if is_live(lease.expires_at, self.now, skew) {
            Session {
                lease,
                end,
                at: self.now,
            }
        } else {
            let at = live_until(lease.expires_at, skew);
            Session {
                lease,
                end: SessionEnd::Lapse,
                at,
            }
        }
    }

    pub fn remove(&mut self, seat: &str) -> LeaseRow {
        self.gone.insert(seat.to_string());
        self.leases.remove(seat).unwrap().lease
    }

    /// A seat left the table: its session, which also ends its idle
    /// period (recorded if a minute or longer).
    pub fn end_session(&mut self, fx: &mut Effects, s: Session) {
        self.close(&s.lease, s.at);
        let how = (s.lease.license_id.clone(), s.end, s.at);
        self.ended.insert(s.lease.seat_id.clone(), how);
        fx.sessions.push(s);
    }

    /// A reclaim: the seat gone, its session ended `Idle` at `at` (its
    /// idle start + the timeout), a `reclaim` event; the seat's idle start
    /// as recorded with it (and so the idle period's `from`) is
    /// `recorded`.
    pub fn reclaimed(
        &mut self,
        fx: &mut Effects,
        seat: &str,
        recorded: Option<Timestamp>,
        at: Timestamp,
    ) {
        let row = self.remove(seat);
        let timeout = self.pol(&row.license_id).unwrap().idle_timeout();
        let timeout = timeout.map(format_duration).unwrap_or_default();
        let detail = match recorded {
            Some(since) => format!("idle since {since}: idle_timeout {timeout}"),
            None => format!("idle: idle_timeout {timeout}"),
        };
        fx.events
            .push(WantEvent::seat(EventKind::Reclaim, &row, Some(detail)));
        let lease = LeaseRow {
            idle_since: recorded,
            ..row
        };
        let end = SessionEnd::Idle;
        self.end_session(fx, Session { lease, end, at });
    }
}
