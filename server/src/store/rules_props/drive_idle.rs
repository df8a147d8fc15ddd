//! Heartbeats, sweeps, runs of clients and outages, on the rules and the
//! model; besides the model, the four properties of idle reclaim (issue
//! 30) checked on the store's own records: (1) a seat whose client
//! reports activity at least every ttl is never reclaimed; (2) after a
//! sweep with room in its limit no live seat is idle past its timeout, and
//! the live count dropped in that same command; (3) a borrowed seat is
//! never reclaimed; (4) a reclaim ends its session `Idle` at `idle_since +
//! timeout`, never as a lapse, and a license without `idle_timeout` never
//! reclaims.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use leasehold_common::api::{Event, EventKind, SeatLostReason, SessionEnd};
use leasehold_common::{Timestamp, is_live};

use super::super::memory::{StoredLease, StoredSession};
use super::super::model::{Effects, Lic, Rel, ensure, ensure_eq, ms};
use super::super::{HeartbeatOutcome, SeatMode};
use super::drive::{Run, Step};
use super::world::RETENTION;

impl Run {
    /// A heartbeat reporting `idle_s` (`None`: no report) on the seat, as
    /// the model says; its answer and the events the rules returned.
    pub fn heartbeat_seat(
        &mut self,
        license: &str,
        seat: &str,
        idle_s: Option<u64>,
        fx: &mut Effects,
    ) -> std::result::Result<(HeartbeatOutcome, Vec<Event>), String> {
        let live_before = self.live_by_license();
        let stored_before = self.w.store.leases.get(seat).map(|s| s.lease.clone());
        let idle = idle_s.map(Duration::from_secs);
        let (got, events) = self.w.run(|r| r.heartbeat(license, seat, idle));
        let got = got.map_err(|e| e.to_string())?;
        let ctx = format!("heartbeat {license}/{seat} idle_s {idle_s:?}");
        let beat = self.m.heartbeat(license, seat, idle_s, fx);
        if let HeartbeatOutcome::Renewed(row) = &got {
            let ttl = self.m.pol(license).unwrap().ttl();
            ensure_eq!(
                row.expires_at,
                self.m.now.saturating_add(ttl),
                "{ctx}: renewed expiry"
            );
        }
        ensure_eq!(got, beat.want, "{ctx} ({})", beat.why);
        // (1) Activity reported on a seat (in the table) that was not idle
        // never reclaims it; (4) nor does any report on a license without
        // a timeout (nor a seat's earlier reclaim: the 410 of a seat gone).
        if got == HeartbeatOutcome::Lost(SeatLostReason::Idle) {
            let timeout = self.m.pol(license).and_then(|p| p.idle_timeout());
            ensure!(timeout.is_some(), "{ctx}: reclaimed without idle_timeout");
            ensure!(
                idle_s.unwrap_or(0) > 0
                    || stored_before
                        .as_ref()
                        .is_none_or(|l| l.idle_since.is_some()),
                "{ctx}: an active seat reclaimed: {stored_before:?}"
            );
        }
        // (2) A reclaimed seat is free at once: one live seat fewer in this
        // same command; nothing else changes the live counts.
        let mut want_live = live_before;
        if beat.reclaimed {
            let i = self
                .m
                .pols
                .iter()
                .position(|(id, _)| id == license)
                .unwrap();
            want_live[i] -= 1;
        }
        ensure_eq!(self.live_by_license(), want_live, "{ctx}: the live counts");
        Ok((got, events))
    }

    /// A reaper sweep with `limit`: idle seats reclaimed first, then lapsed
    /// ones reaped, within the one limit.
    pub fn reap(&mut self, limit: usize, fx: &mut Effects) -> Step {
        let over = self.idle_past_timeout();
        let live_before = self.live_by_license();
        let sessions_before = self.w.store.sessions.len();
        let (got, events) = self.w.run(|r| r.reap(limit, RETENTION));
        let got = got.map_err(|e| e.to_string())?;
        let sweep = self.m.sweep(limit, fx);
        ensure_eq!(
            got,
            sweep.count(),
            "reap({limit}) count: {} idle, {} lapsed",
            sweep.reclaimed.len(),
            sweep.reaped.len()
        );
        for row in &sweep.reaped {
            let pol = self.m.pol(&row.license_id).unwrap();
            ensure!(
                !is_live(row.expires_at, self.m.now, pol.skew()),
                "a reapable lease is live: {row:?}"
            );
        }

        // (2) Directly on the store: every seat idle past its timeout is
        // gone within this sweep (room permitting: idle ones first), and
        // its seat is free at once.
        let idle_ended: Vec<&StoredSession> = self.w.store.sessions[sessions_before..]
            .iter()
            .filter(|s| s.end == SessionEnd::Idle)
            .collect();
        ensure_eq!(
            idle_ended.len(),
            over.len().min(limit),
            "reap({limit}): sessions ended idle, of {over:?} idle past their timeout"
        );
        if over.len() <= limit {
            let left = self.idle_past_timeout();
            ensure!(
                left.is_empty(),
                "reap({limit}) left {left:?} idle past the timeout"
            );
        } else {
            ensure_eq!(got, limit, "reap({limit}) with {} idle", over.len());
        }
        let live_after = self.live_by_license();
        for (i, (id, _)) in self.m.pols.iter().enumerate() {
            let freed = idle_ended.iter().filter(|s| s.lease.license_id == *id);
            ensure_eq!(
                live_before[i] - live_after[i],
                freed.count(),
                "reap({limit}): live seats of {id} freed"
            );
        }
        Ok(events)
    }

    /// `Op::Clients`: see there. Each sweep and each heartbeat is one
    /// command, checked as any other.
    pub fn clients(
        &mut self,
        nth: usize,
        (rounds, half): (u8, bool),
        idle: u8,
        (sweep, lend): (bool, bool),
    ) -> std::result::Result<(), String> {
        let (license, pol) = self.m.pols[nth % self.m.pols.len()].clone();
        let step = if half { pol.ttl_ms / 2 } else { pol.ttl_ms }.max(1);
        // The clients: the license's live seats kept by heartbeats, each
        // with the instant its user last used the application (`None`:
        // active); each heartbeats until told its seat is lost.
        let now = self.m.now;
        let mut clients: Vec<(String, Option<Timestamp>)> = self
            .m
            .issued
            .iter()
            .enumerate()
            .filter_map(|(n, (_, seat))| Some((n, &self.m.leases.get(seat)?.lease)))
            .filter(|(_, l)| {
                l.license_id == license && l.mode == SeatMode::Heartbeat && self.m.live(l)
            })
            .map(|(n, l)| {
                let is_idle = idle & (1 << (n % 8)) != 0;
                // Idle from now on, or (odd seats) since the checkout: an
                // application left open at once.
                let from = if n % 2 == 0 { now } else { l.checked_out_at };
                (
                    l.seat_id.clone(),
                    is_idle.then(|| l.idle_since.unwrap_or(from)),
                )
            })
            .collect();
        // Active clients whose seat a heartbeat renewed: they keep it.
        let mut kept: BTreeSet<String> = BTreeSet::new();
        for round in 0..rounds {
            if clients.is_empty() {
                break;
            }
            let mut lost = BTreeSet::new();
            for (seat, last_used) in &clients {
                // An idle client's own clock rounds up every other round.
                let idle_s = match last_used {
                    Some(t) => {
                        Some((self.m.now.millis_since(*t) / 1000) as u64 + u64::from(round % 2))
                    }
                    None if round % 2 == 0 => Some(0),
                    None => None,
                };
                let mut answer = None;
                self.checked(|run, fx| {
                    let (got, events) = run.heartbeat_seat(&license, seat, idle_s, fx)?;
                    answer = Some(got);
                    Ok(events)
                })?;
                match answer {
                    Some(HeartbeatOutcome::Renewed(_)) => {
                        if last_used.is_none() {
                            kept.insert(seat.clone());
                        }
                    }
                    other => {
                        // (1) A client that reports activity at least every
                        // ttl keeps its seat.
                        ensure!(
                            !kept.contains(seat),
                            "clients: active seat {seat} lost: {other:?}"
                        );
                        if other == Some(HeartbeatOutcome::Lost(SeatLostReason::Idle)) {
                            self.m.note("clients: told idle");
                        }
                        lost.insert(seat.clone());
                    }
                }
            }
            clients.retain(|(seat, _)| !lost.contains(seat));
            self.set_now(self.m.now.saturating_add(ms(step)));
            if sweep {
                self.checked(|run, fx| run.reap(100, fx))?;
            }
        }
        for seat in &kept {
            let row = self.w.store.leases.get(seat).map(|s| &s.lease);
            ensure!(
                row.is_some_and(|l| self.m.live(l) && l.idle_since.is_none()),
                "clients: active seat {seat} not kept: {row:?}"
            );
            self.m.note("clients: active seat kept");
        }
        // The idle machines ask for their seats on loan (the generated
        // holders and machines are `h<n>` and `f<n>`).
        let number = |s: Option<&str>, p: char| s?.strip_prefix(p)?.parse::<u8>().ok();
        for (seat, last_used) in clients.iter().filter(|_| lend) {
            let row = self.m.leases.get(seat).map(|s| &s.lease);
            let holder = number(row.map(|l| l.holder.as_str()), 'h');
            let fp = number(row.and_then(|l| l.fingerprint.as_deref()), 'f');
            if let (Some(_), Some(h), Some(f)) = (last_used, holder, fp) {
                let who = (h, Some(f), None, Some(60));
                self.checked(|run, fx| run.checkout(Lic::Known(nth), who, &[], true, fx))?;
                self.m.note("clients: idle seat lent");
            }
        }
        Ok(())
    }

    /// Directly on the store: live seats kept by heartbeats whose user has
    /// been idle for their license's timeout.
    fn idle_past_timeout(&self) -> Vec<String> {
        let now = self.m.now;
        self.w
            .store
            .leases
            .values()
            .map(|s| &s.lease)
            .filter(|l| {
                let pol = self.m.pol(&l.license_id).unwrap();
                l.mode == SeatMode::Heartbeat
                    && is_live(l.expires_at, now, pol.skew())
                    && pol
                        .idle_timeout()
                        .zip(l.idle_since)
                        .is_some_and(|(t, since)| since.saturating_add(t) <= now)
            })
            .map(|l| l.seat_id.clone())
            .collect()
    }

    /// The live seats of each license in the store (licenses in id order).
    fn live_by_license(&self) -> Vec<usize> {
        self.m
            .pols
            .iter()
            .map(|(id, _)| self.stored_live(id).len())
            .collect()
    }

    /// (3), (4), on the store's own records of one command: only a seat
    /// kept by heartbeats is reclaimed (never a borrowed or lingering one),
    /// on a license with `idle_timeout`, while live; its session ends
    /// `Idle` at its idle start + the timeout; every `reclaim` event has
    /// that session (never a lapse).
    pub fn idle_properties(
        &self,
        before: &BTreeMap<String, StoredLease>,
        sessions_before: usize,
        events_before: usize,
    ) -> std::result::Result<(), String> {
        let sessions = &self.w.store.sessions[sessions_before..];
        for s in sessions.iter().filter(|s| s.end == SessionEnd::Idle) {
            let pol = self.m.pol(&s.lease.license_id).unwrap();
            let Some(timeout) = pol.idle_timeout() else {
                return Err(format!("reclaimed without idle_timeout: {s:?}"));
            };
            let was = before.get(&s.lease.seat_id).map(|b| &b.lease);
            ensure!(
                was.is_some_and(
                    |l| l.mode == SeatMode::Heartbeat && is_live(l.expires_at, s.at, pol.skew())
                ),
                "reclaimed {was:?}: not a live seat kept by heartbeats at {}",
                Rel(s.at)
            );
            // At the instant the timeout was reached (the model checks it
            // exactly): not before checkout + the timeout (an idle start is
            // never before checkout), not after now, nor after the recorded
            // idle start + the timeout.
            ensure!(
                s.lease.checked_out_at.saturating_add(timeout) <= s.at
                    && s.at <= self.m.now
                    && s.lease
                        .idle_since
                        .is_none_or(|since| s.at <= since.saturating_add(timeout)),
                "session {s:?} ended idle, but not at its idle start + {timeout:?}"
            );
        }
        for e in &self.w.store.events[events_before..] {
            if e.kind == EventKind::Reclaim {
                let ended = sessions
                    .iter()
                    .find(|s| Some(&s.lease.seat_id) == e.seat_id.as_ref());
                ensure!(
                    ended.is_some_and(|s| s.end == SessionEnd::Idle),
                    "reclaim {e:?} ended its session {ended:?}"
                );
            }
        }
        Ok(())
    }

    /// Nobody renewed for `gap_ms`: the outage rule as the model says it,
    /// and everything live when the gap began is live for a TTL from now.
    pub fn outage(&mut self, gap_ms: u64) -> Step {
        let last_alive = self.m.now;
        self.set_now(last_alive.saturating_add(ms(gap_ms)));
        let now = self.m.now;
        let want = self.m.outage(last_alive);
        let (got, events) = self.w.run(|r| r.outage(last_alive));
        ensure_eq!(got, want, "outage after {gap_ms} ms: leases extended");
        if got > 0 {
            self.m.note("outage: extended");
        }
        for l in self.w.store.leases.values().map(|s| &s.lease) {
            let pol = self.m.pol(&l.license_id).unwrap();
            if l.mode == SeatMode::Heartbeat && is_live(l.expires_at, last_alive, pol.skew()) {
                ensure!(
                    l.expires_at >= now.saturating_add(pol.ttl()),
                    "outage left {l:?} short"
                );
            }
        }
        Ok(events)
    }
}
