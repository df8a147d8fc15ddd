//! A checkout as the model decides it: borrow terms, blocks, replays by
//! Idempotency-Key, re-claims by machine, allow/deny, lending the machine's
//! own seat, the waiters ahead, the holder and group caps and the pool
//! with its reservations and overage. Then its effects: the seat inserted,
//! the `checkout` event, a denial counted and its throttled event.

use std::time::Duration;

use leasehold_common::Timestamp;
use leasehold_common::api::{DenialReason, EventKind};

use super::events::{Denial, Effects, WantEvent};
use super::policy::Pol;
use super::state::{Held, Model};
use crate::store::{CheckoutRequest, LeaseRow, Limit, NotAllowedBecause, SeatMode, Waiter};

/// What the model says a checkout must answer.
#[derive(Debug)]
pub enum Expect {
    /// A new seat (its id comes from the rules), and whether it came from
    /// the overage allowance.
    Fresh(LeaseRow, bool),
    Reused(LeaseRow),
    /// The machine's own seat, turned into a borrow or its borrow extended
    /// (already applied to the model).
    Lent(LeaseRow),
    BorrowTooLong {
        max: Duration,
    },
    Full {
        seats: u32,
        live: u32,
        reserved: u32,
        retry_after: Duration,
    },
    LimitReached {
        limit: Limit,
        max: u32,
        group: Option<String>,
        retry_after: Duration,
    },
    NotAllowed(NotAllowedBecause),
    Blocked {
        until: Timestamp,
    },
    UnknownLicense,
}

impl Expect {
    /// The reason a refusal is counted with (none for a grant, an unknown
    /// license or a borrow asked for too long).
    pub fn denial(&self) -> Option<DenialReason> {
        Some(match self {
            Expect::Full { .. } => DenialReason::Full,
            Expect::LimitReached { limit, .. } => match limit {
                Limit::Holder => DenialReason::Holder,
                Limit::Group => DenialReason::Group,
                Limit::Borrow => DenialReason::Borrow,
            },
            Expect::NotAllowed(_) => DenialReason::NotAllowed,
            Expect::Blocked { .. } => DenialReason::Blocked,
            _ => return None,
        })
    }
}

/// Seats given (on paper) to waiters ahead in line: (holder, group).
pub type Spoken = Vec<(String, Option<String>)>;

/// What the cap and count steps say.
enum Admit {
    /// In, counting for this group.
    Grant(Option<String>),
    HolderCap(u32),
    GroupCap(String, u32),
    Full {
        others: u32,
    },
}

impl Model {
    /// The cap and count steps for `holder`, with the seats `spoken` for
    /// waiters ahead (holder, group) counted as live.
    fn admit(&self, license: &str, holder: &str, fp: Option<&str>, spoken: &Spoken) -> Admit {
        let pol = self.pol(license).unwrap();
        let sp = self.sp(license);
        let count = |f: &dyn Fn(&str, Option<&str>) -> bool| {
            let stored = self.live_where(license, |l| f(&l.holder, l.group.as_deref()));
            let ahead = spoken.iter().filter(|(h, g)| f(h, g.as_deref()));
            (stored.len() + ahead.count()) as u32
        };
        if let Some(max) = sp.max_per_holder
            && count(&|h, _| h == holder) >= max
        {
            return Admit::HolderCap(max);
        }
        let group = sp.group_of(holder, fp);
        if let Some(g) = group
            && let Some(max) = g.max
            && count(&|_, of| of == Some(g.name.as_str())) >= max
        {
            return Admit::GroupCap(g.name.clone(), max);
        }
        let others: u32 = sp
            .groups
            .iter()
            .filter(|g| g.reserve > 0 && Some(&g.name) != group.map(|own| &own.name))
            .map(|g| {
                g.reserve
                    .saturating_sub(count(&|_, of| of == Some(g.name.as_str())))
            })
            .sum();
        if u64::from(count(&|_, _| true)) + u64::from(others)
            >= u64::from(pol.seats) + u64::from(sp.overage)
        {
            return Admit::Full { others };
        }
        Admit::Grant(group.map(|g| g.name.clone()))
    }

    /// The waiters ahead, in arrival order, each given a seat if the rules
    /// let it in now (with the seats given to those before it).
    pub fn spoken_for(&self, license: &str, ahead: &[Waiter]) -> Spoken {
        let mut spoken = Spoken::new();
        if self.pol(license).is_none() {
            return spoken;
        }
        for w in ahead {
            let fp = w.fingerprint.as_deref();
            if !self.sp(license).allows(&w.holder, fp) {
                continue;
            }
            if let Admit::Grant(group) = self.admit(license, &w.holder, fp, &spoken) {
                spoken.push((w.holder.clone(), group));
            }
        }
        spoken
    }

    /// A lingering seat goes back only to the holder and machine that
    /// released it, while the license still lets that holder in.
    pub fn lingering_for_another(&self, row: &LeaseRow, req: &CheckoutRequest) -> bool {
        row.mode == SeatMode::Linger
            && (row.holder != req.holder
                || req.fingerprint.is_none()
                || row.fingerprint != req.fingerprint
                || !self
                    .sp(&req.license_id)
                    .allows(&req.holder, req.fingerprint.as_deref()))
    }

    /// The live seat this request's machine may take back (as the store's
    /// fingerprint lookup finds it), unless it lingers for another holder.
    fn machine_seat(&self, req: &CheckoutRequest) -> Option<String> {
        let fp = req.fingerprint.as_ref()?;
        let seat = self
            .leases
            .iter()
            .filter(|(_, s)| {
                s.lease.license_id == req.license_id
                    && s.lease.fingerprint.as_ref() == Some(fp)
                    && self.live(&s.lease)
            })
            // Not lingering for another holder first, then the
            // latest-expiring, then the greatest seat id.
            .max_by_key(|(seat, s)| {
                let takeable = s.lease.mode != SeatMode::Linger || s.lease.holder == req.holder;
                (takeable, s.lease.expires_at, seat.as_str())
            })
            .map(|(seat, _)| seat.clone())?;
        // A lingering seat goes back only to the holder that released it,
        // while still allowed in; the rules look at the one row the store
        // finds and no other.
        (!self.lingering_for_another(&self.leases[&seat].lease, req)).then_some(seat)
    }

    /// A seat asked for again: renewed, its user active (an idle period
    /// ends now), but a borrowed one as stored.
    fn take_back(&mut self, seat: &str) -> LeaseRow {
        let row = self.leases[seat].lease.clone();
        match row.mode {
            SeatMode::Borrow => row,
            SeatMode::Heartbeat | SeatMode::Linger => {
                self.close(&row, self.now);
                self.renew(seat, None)
            }
        }
    }

    /// The seat the caller may get back (by key, then by machine), renewed.
    fn replay_or_reclaim(&mut self, req: &CheckoutRequest) -> Option<LeaseRow> {
        if let Some(key) = &req.idempotency_key {
            let seat = self
                .leases
                .iter()
                .find(|(_, s)| {
                    s.lease.license_id == req.license_id && s.idempotency_key.as_ref() == Some(key)
                })
                .map(|(seat, _)| seat.clone());
            if let Some(seat) = seat {
                let row = &self.leases[&seat].lease;
                if self.live(row) && !self.lingering_for_another(row, req) {
                    return Some(self.take_back(&seat));
                }
                // Once it lapsed, the key is free again.
                self.leases.get_mut(&seat).unwrap().idempotency_key = None;
            }
        }
        if req.borrow.is_none()
            && let Some(seat) = self.machine_seat(req)
        {
            return Some(self.take_back(&seat));
        }
        None
    }

    /// A borrow asked for: refused by the terms, or the machine's own seat
    /// lent (`Some(Expect::Lent)`); `None`: a fresh borrowed seat may be
    /// decided as any checkout.
    fn lend(&mut self, req: &CheckoutRequest, pol: Pol, b: Duration) -> Option<Expect> {
        let license = req.license_id.as_str();
        let sp = self.sp(license).clone();
        let terms = sp.borrow.as_ref()?;
        if !sp.allows_borrow(&req.holder, req.fingerprint.as_deref()) {
            return Some(Expect::NotAllowed(NotAllowedBecause::BorrowAllow));
        }
        let own = self.machine_seat(req);
        let own_borrow = own
            .as_ref()
            .is_some_and(|seat| self.leases[seat].lease.mode == SeatMode::Borrow);
        let borrowed = self.live_where(license, |l| l.mode == SeatMode::Borrow);
        if !own_borrow && borrowed.len() as u32 >= terms.seats {
            return Some(Expect::LimitReached {
                limit: Limit::Borrow,
                max: terms.seats,
                group: None,
                retry_after: self.retry_after(pol, &borrowed),
            });
        }
        let seat = own?;
        let now = self.now;
        // Out on loan: no heartbeats report idleness until it is back.
        let row = self.leases[&seat].lease.clone();
        self.close(&row, now);
        let s = &mut self.leases.get_mut(&seat).unwrap().lease;
        s.idle_since = None;
        let until = now.saturating_add(b);
        s.expires_at = match s.mode {
            SeatMode::Borrow => s.expires_at.max(until),
            SeatMode::Heartbeat | SeatMode::Linger => until,
        };
        s.issued_at = now;
        s.mode = SeatMode::Borrow;
        Some(Expect::Lent(s.clone()))
    }

    /// Decide a checkout and apply its effects (renewal, a freed key, a
    /// seat lent), but not the insertion of a fresh seat: see
    /// [`Model::granted`].
    pub fn checkout(&mut self, req: &CheckoutRequest, ahead: &[Waiter]) -> Expect {
        let Some(pol) = self.pol(&req.license_id) else {
            return Expect::UnknownLicense;
        };
        if let Some(b) = req.borrow {
            match &self.sp(&req.license_id).borrow {
                None => return Expect::NotAllowed(NotAllowedBecause::LendsNothing),
                Some(terms) if b.is_zero() || b.as_secs() > terms.max_s => {
                    return Expect::BorrowTooLong {
                        max: Duration::from_secs(terms.max_s),
                    };
                }
                Some(_) => {}
            }
        }
        let block = (
            req.license_id.clone(),
            req.holder.clone(),
            req.fingerprint.clone().unwrap_or_default(),
        );
        if let Some(&until) = self.blocks.get(&block)
            && until > self.now
        {
            return Expect::Blocked { until };
        }
        if let Some(row) = self.replay_or_reclaim(req) {
            return Expect::Reused(row);
        }
        if !self
            .sp(&req.license_id)
            .allows(&req.holder, req.fingerprint.as_deref())
        {
            return Expect::NotAllowed(NotAllowedBecause::Lists);
        }
        if let Some(b) = req.borrow
            && let Some(expect) = self.lend(req, pol, b)
        {
            return expect;
        }
        self.fresh(req, pol, ahead)
    }

    /// The caps and the pool, with the waiters ahead.
    fn fresh(&self, req: &CheckoutRequest, pol: Pol, ahead: &[Waiter]) -> Expect {
        let license = req.license_id.as_str();
        let spoken = self.spoken_for(license, ahead);
        let fp = req.fingerprint.as_deref();
        match self.admit(license, &req.holder, fp, &spoken) {
            Admit::HolderCap(max) => {
                let mine = self.live_where(license, |l| l.holder == req.holder);
                Expect::LimitReached {
                    limit: Limit::Holder,
                    max,
                    group: None,
                    retry_after: self.retry_after(pol, &mine),
                }
            }
            Admit::GroupCap(group, max) => {
                let theirs = self.live_where(license, |l| l.group.as_ref() == Some(&group));
                Expect::LimitReached {
                    limit: Limit::Group,
                    max,
                    group: Some(group),
                    retry_after: self.retry_after(pol, &theirs),
                }
            }
            Admit::Full { others } => {
                let overage = self.sp(license).overage;
                let retry_after = if pol.seats + overage > others {
                    self.retry_after(pol, &self.live_where(license, |_| true))
                } else {
                    pol.ttl()
                };
                Expect::Full {
                    seats: pol.seats,
                    live: self.live_count(license),
                    reserved: others,
                    retry_after,
                }
            }
            Admit::Grant(group) => Expect::Fresh(
                LeaseRow {
                    seat_id: String::new(),
                    license_id: req.license_id.clone(),
                    holder: req.holder.clone(),
                    fingerprint: req.fingerprint.clone(),
                    checked_out_at: self.now,
                    issued_at: self.now,
                    expires_at: self.now.saturating_add(req.borrow.unwrap_or(pol.ttl())),
                    group,
                    mode: match req.borrow {
                        Some(_) => SeatMode::Borrow,
                        None => SeatMode::Heartbeat,
                    },
                    idle_since: None,
                },
                self.live_count(license) >= pol.seats,
            ),
        }
    }

    /// A fresh seat granted (with the id the rules gave it): in the table,
    /// and its `checkout` event.
    pub fn granted(
        &mut self,
        lease: LeaseRow,
        key: Option<String>,
        overage: bool,
        fx: &mut Effects,
    ) {
        let parts: Vec<String> = [
            lease
                .fingerprint
                .as_ref()
                .map(|f| format!("fingerprint {f}")),
            lease.group.as_ref().map(|g| format!("group {g}")),
            overage.then(|| "overage".to_string()),
            (lease.mode == SeatMode::Borrow)
                .then(|| format!("borrowed until {}", lease.expires_at)),
        ]
        .into_iter()
        .flatten()
        .collect();
        let detail = (!parts.is_empty()).then(|| parts.join("; "));
        fx.events
            .push(WantEvent::seat(EventKind::Checkout, &lease, detail));
        self.issued
            .push((lease.license_id.clone(), lease.seat_id.clone()));
        self.leases.insert(
            lease.seat_id.clone(),
            Held {
                lease,
                idempotency_key: key,
            },
        );
    }

    /// The machine's own seat lent: its `checkout` event.
    pub fn lent(&mut self, lease: &LeaseRow, fx: &mut Effects) {
        let detail = format!("borrowed until {}", lease.expires_at);
        fx.events
            .push(WantEvent::seat(EventKind::Checkout, lease, Some(detail)));
    }

    /// A refused checkout: counted, with its reason, if the client sees it
    /// (a `?wait=` line retries only a full pool and a reached cap: any
    /// other denial is final and counted at once); logged once per holder
    /// per window.
    pub fn denied(
        &mut self,
        req: &CheckoutRequest,
        counted: bool,
        reason: DenialReason,
        fx: &mut Effects,
    ) {
        let retried = matches!(
            reason,
            DenialReason::Full | DenialReason::Holder | DenialReason::Group | DenialReason::Borrow
        );
        if counted || !retried {
            self.note(if counted {
                "denial counted"
            } else {
                "denial final at once on a ?wait= attempt"
            });
            fx.denials.push(Denial {
                license_id: req.license_id.clone(),
                holder: req.holder.clone(),
                fingerprint: req.fingerprint.clone(),
                reason,
                at: self.now,
            });
        }
        if self.first_in_window(format!("denied {} {}", req.license_id, req.holder)) {
            fx.events.push(WantEvent {
                kind: EventKind::Denied,
                license: Some(req.license_id.clone()),
                seat: None,
                holder: Some(req.holder.clone()),
                detail: None,
            });
        }
    }
}
