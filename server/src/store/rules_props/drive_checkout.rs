//! A checkout, on the rules and the model: the answers must match, and
//! besides the model each answer is checked directly on the store's state
//! before it (room for a fresh grant, the caps, a really full pool with
//! nothing the caller may get back, the exact `retry_after`).

use leasehold_common::liveness::lapses_at;

use super::super::model::{Effects, Expect, Lic, Model, Spoken, ensure, ensure_eq, ms};
use super::super::{CheckoutOutcome, CheckoutRequest, LeaseRow, Limit, SeatMode, Waiter};
use super::drive::{Run, Step};

/// What the store held before a checkout, and the checkout itself.
struct Before {
    req: CheckoutRequest,
    ahead: Vec<Waiter>,
    counted: bool,
    /// The license's live seats in the store.
    live: Vec<LeaseRow>,
    /// The leases in the store.
    leases: usize,
    /// The seats the model gives the waiters ahead.
    spoken: Spoken,
    ctx: String,
}

impl Run {
    pub fn checkout(
        &mut self,
        license: Lic,
        who: (u8, Option<u8>, Option<u8>, Option<u64>),
        ahead: &[(u8, Option<u8>)],
        counted: bool,
        fx: &mut Effects,
    ) -> Step {
        let req = self.m.request(license, who);
        let ahead = Model::waiters(ahead);
        let known = self.m.pol(&req.license_id).is_some();
        // The store's view before the checkout, for the direct checks.
        let b = Before {
            live: match known {
                true => self
                    .stored_live(&req.license_id)
                    .into_iter()
                    .cloned()
                    .collect(),
                false => Vec::new(),
            },
            leases: self.w.store.leases.len(),
            spoken: self.m.spoken_for(&req.license_id, &ahead),
            ctx: format!("checkout {req:?} ahead {ahead:?}"),
            req,
            ahead,
            counted,
        };
        let expect = self.m.checkout(&b.req, &b.ahead);
        let denial = expect.denial();
        let (got, events) = self.w.run(|r| r.checkout(&b.req, &b.ahead, counted));
        let got = got.map_err(|e| e.to_string())?;
        let ctx = &b.ctx;
        match (got, expect) {
            (
                CheckoutOutcome::Granted {
                    lease,
                    reused: false,
                    overage,
                },
                Expect::Fresh(mut want, want_overage),
            ) => {
                ensure_eq!(overage, want_overage, "{ctx}: overage flag");
                self.check_fresh(&b, &lease, overage)?;
                want.seat_id = lease.seat_id.clone();
                ensure_eq!(lease, want, "{ctx}: fresh seat");
                self.m
                    .granted(lease, b.req.idempotency_key.clone(), overage, fx);
            }
            (
                CheckoutOutcome::Granted {
                    lease,
                    reused: true,
                    overage: false,
                },
                Expect::Reused(want),
            ) => {
                ensure_eq!(lease, want, "{ctx}: replay or re-claim");
                self.check_reused(&b, &lease)?;
            }
            (
                got @ CheckoutOutcome::Full {
                    seats,
                    live,
                    reserved,
                    retry_after,
                },
                Expect::Full {
                    seats: ws,
                    live: wl,
                    reserved: wres,
                    retry_after: wr,
                },
            ) => {
                ensure_eq!(
                    (seats, live, reserved, retry_after),
                    (ws, wl, wres, wr),
                    "{ctx}: full answer"
                );
                self.check_full(&b, &got)?;
            }
            (
                CheckoutOutcome::LimitReached {
                    limit,
                    max,
                    group,
                    retry_after,
                },
                Expect::LimitReached {
                    limit: wl,
                    max: wm,
                    group: wg,
                    retry_after: wr,
                },
            ) => {
                ensure_eq!(
                    (limit, max, &group, retry_after),
                    (wl, wm, &wg, wr),
                    "{ctx}: limit reached"
                );
                self.m.note(match limit {
                    Limit::Holder => "checkout: holder limit",
                    Limit::Group => "checkout: group limit",
                    Limit::Borrow => "checkout: borrow limit",
                });
            }
            (
                CheckoutOutcome::Granted {
                    lease,
                    reused: true,
                    overage: false,
                },
                Expect::Lent(want),
            ) => {
                ensure_eq!(lease, want, "{ctx}: the machine's seat lent");
                let before = b.live.iter().find(|l| l.seat_id == lease.seat_id);
                ensure!(before.is_some(), "{ctx}: lent seat was not live");
                let was_borrowed = before.is_some_and(|l| l.mode == SeatMode::Borrow);
                self.m.note(if was_borrowed {
                    "checkout: borrow extended"
                } else {
                    "checkout: borrow turned"
                });
                self.m.lent(&lease, fx);
            }
            (CheckoutOutcome::BorrowTooLong { max }, Expect::BorrowTooLong { max: want }) => {
                ensure_eq!(max, want, "{ctx}: borrow.max");
                self.m.note("checkout: borrow too long");
            }
            (CheckoutOutcome::NotAllowed(got), Expect::NotAllowed(want)) if got == want => {
                self.m.note("checkout: not allowed");
            }
            (CheckoutOutcome::Blocked { until }, Expect::Blocked { until: want }) => {
                ensure_eq!(until, want, "{ctx}: blocked until");
                self.m.note("checkout: blocked");
                ensure!(until > self.m.now, "{ctx}: a block that ended refused");
            }
            (CheckoutOutcome::UnknownLicense, Expect::UnknownLicense) => {
                self.m.note("checkout: unknown license");
            }
            (got, want) => {
                return Err(format!("{ctx}\n  rules: {got:?}\n  model: {want:?}"));
            }
        }
        if let Some(reason) = denial {
            self.m.denied(&b.req, b.counted, reason, fx);
        }
        Ok(events)
    }

    /// Directly on the store: room for one more, counting the other
    /// groups' unused reservations, within the caps, to an allowed holder;
    /// no second seat for a borrowing machine; a new seat id.
    fn check_fresh(
        &mut self,
        b: &Before,
        lease: &LeaseRow,
        overage: bool,
    ) -> std::result::Result<(), String> {
        let (ctx, req, live_before, spoken) = (&b.ctx, &b.req, &b.live, &b.spoken);
        let seats = self.m.pol(&req.license_id).unwrap().seats;
        let sp = self.m.sp(&req.license_id).clone();
        let of_group = |g: &str| {
            let stored = live_before.iter().filter(|l| l.group.as_deref() == Some(g));
            let ahead = spoken.iter().filter(|(_, of)| of.as_deref() == Some(g));
            (stored.count() + ahead.count()) as u32
        };
        let others: u32 = sp
            .groups
            .iter()
            .filter(|g| Some(&g.name) != lease.group.as_ref())
            .map(|g| g.reserve.saturating_sub(of_group(&g.name)))
            .sum();
        ensure!(
            (live_before.len() + spoken.len()) as u64 + u64::from(others)
                < u64::from(seats + sp.overage),
            "{ctx}: fresh grant with {} live + {} spoken for + {others} reserved \
             for others of {seats} seats + {} overage",
            live_before.len(),
            spoken.len(),
            sp.overage
        );
        if spoken.len() < b.ahead.len() {
            self.m
                .note("checkout: past a waiter who cannot use the seat");
        }
        ensure_eq!(
            overage,
            live_before.len() as u32 >= seats,
            "{ctx}: overage flag vs the live seats"
        );
        if let Some(g) = sp
            .groups
            .iter()
            .find(|g| Some(&g.name) == lease.group.as_ref())
            && let Some(max) = g.max
        {
            ensure!(
                of_group(&g.name) < max,
                "{ctx}: granted to group {} at its max {max}",
                g.name
            );
        }
        if let Some(max) = sp.max_per_holder {
            let mine = live_before
                .iter()
                .filter(|l| l.holder == lease.holder)
                .count();
            ensure!(
                (mine as u32) < max,
                "{ctx}: granted to a holder with {mine} of {max} seats"
            );
        }
        ensure!(
            sp.allows(&lease.holder, lease.fingerprint.as_deref()),
            "{ctx}: granted to a holder not allowed"
        );
        if lease.mode == SeatMode::Borrow {
            // No second seat for a borrowing machine.
            let mine = live_before.iter().find(|l| {
                l.fingerprint == req.fingerprint
                    && (l.mode != SeatMode::Linger
                        || (l.holder == req.holder
                            && sp.allows(&req.holder, req.fingerprint.as_deref())))
            });
            ensure!(
                mine.is_none(),
                "{ctx}: a new borrow though the machine holds {mine:?}"
            );
            self.m.note("checkout: borrow");
        }
        self.m.note(if overage {
            "checkout: overage"
        } else if lease.group.is_some() {
            "checkout: grouped"
        } else {
            "checkout: fresh"
        });
        ensure!(
            lease.seat_id.len() == 32 && !self.m.issued.iter().any(|(_, s)| *s == lease.seat_id),
            "{ctx}: seat id {} is not new",
            lease.seat_id
        );
        Ok(())
    }

    /// Directly on the store: the caller's own live seat (by its key or
    /// its machine), and no lease added.
    fn check_reused(&mut self, b: &Before, lease: &LeaseRow) -> std::result::Result<(), String> {
        let (ctx, req) = (&b.ctx, &b.req);
        ensure!(
            b.live.iter().any(|l| l.seat_id == lease.seat_id),
            "{ctx}: reused seat {} was not live",
            lease.seat_id
        );
        ensure_eq!(
            self.w.store.leases.len(),
            b.leases,
            "{ctx}: a replay or re-claim added a lease"
        );
        let stored = &self.w.store.leases[&lease.seat_id];
        let replay = req.idempotency_key.is_some() && stored.idempotency_key == req.idempotency_key;
        ensure!(
            replay || (req.fingerprint.is_some() && lease.fingerprint == req.fingerprint),
            "{ctx}: reused {stored:?}, which is neither its key's nor its machine's"
        );
        let lingered = b
            .live
            .iter()
            .any(|l| l.seat_id == lease.seat_id && l.mode == SeatMode::Linger);
        if lingered {
            self.m.note("checkout: lingering seat back");
        }
        self.m.note(if replay {
            "checkout: replay"
        } else {
            "checkout: re-claim"
        });
        Ok(())
    }

    /// Directly on the store: really full, nothing the caller may get
    /// back, and `retry_after` until the earliest live lease lapses.
    fn check_full(&mut self, b: &Before, got: &CheckoutOutcome) -> std::result::Result<(), String> {
        let CheckoutOutcome::Full {
            seats,
            live,
            reserved,
            retry_after,
        } = *got
        else {
            unreachable!("a full answer");
        };
        let (ctx, req, live_before) = (&b.ctx, &b.req, &b.live);
        let overage = self.m.sp(&req.license_id).overage;
        self.m.note(if reserved > 0 {
            "checkout: full with reservations"
        } else if live < seats + overage {
            "checkout: full by waiters ahead"
        } else {
            "checkout: full"
        });
        ensure!(
            live as usize == live_before.len()
                && u64::from(live) + b.spoken.len() as u64 + u64::from(reserved)
                    >= u64::from(seats + overage),
            "{ctx}: {got:?} with {} live",
            live_before.len()
        );
        let sp = self.m.sp(&req.license_id);
        let mine = live_before.iter().find(|l| {
            (req.fingerprint.is_some()
                && l.fingerprint == req.fingerprint
                && (l.mode != SeatMode::Linger
                    || (l.holder == req.holder
                        && sp.allows(&req.holder, req.fingerprint.as_deref()))))
                || (req.idempotency_key.is_some()
                    && self.w.store.leases[&l.seat_id].idempotency_key == req.idempotency_key)
        });
        ensure!(
            mine.is_none(),
            "{ctx}: {got:?} though the caller holds {mine:?}"
        );
        let skew = self.m.pol(&req.license_id).unwrap().skew();
        let earliest = live_before
            .iter()
            .map(|l| lapses_at(l.expires_at, skew))
            .min();
        if let Some(e) = earliest
            && seats + overage > reserved
        {
            ensure_eq!(
                retry_after,
                ms(e.millis_since(self.m.now) as u64),
                "{ctx}: retry_after"
            );
        }
        Ok(())
    }
}
