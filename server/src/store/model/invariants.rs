//! The invariants both drivers check after every step, on the seats a
//! store holds: the pools (no over-grant, caps, reservations, borrowing)
//! with the counts the predicate makes, and the seats (one live seat per
//! machine and holder, one lease per key, sane times).

use std::collections::BTreeSet;

use super::state::Model;
use super::time::Rel;
use crate::store::{LeaseRow, PoolCounts, SeatMode};

impl Model {
    /// live ≤ seats + overage for every license; until a policy change (it
    /// never evicts, so seats granted before it may sit above a cap it
    /// lowered) no group above its `max`, no holder above
    /// `max_per_holder`, the seats outside a group never in its
    /// reservation; never more than `borrow.seats` out, nor for longer
    /// than `borrow.max` from when it was last lent. The counts the
    /// predicate makes of `stored` (live, lingering, borrowed, per group),
    /// by license in id order, for the store's own counts to equal.
    pub fn check_pools(&self, stored: &[&LeaseRow]) -> Result<Vec<(String, PoolCounts)>, String> {
        let mut by_predicate = Vec::new();
        for (id, pol) in &self.pols {
            let sp = self.sp(id);
            let live: Vec<&LeaseRow> = stored
                .iter()
                .copied()
                .filter(|l| l.license_id == *id && self.live(l))
                .collect();
            let n = live.len() as u32;
            ensure!(
                n <= pol.seats + sp.overage,
                "over-grant: {id} has {n} live of {} seats + {} overage at {}",
                pol.seats,
                sp.overage,
                Rel(self.now)
            );
            let of_group = |g: &str| {
                live.iter()
                    .filter(|l| l.group.as_deref() == Some(g))
                    .count() as u32
            };
            if !self.changed {
                for g in &sp.groups {
                    if let Some(max) = g.max {
                        ensure!(
                            of_group(&g.name) <= max,
                            "group {} of {id} holds {} > max {max}",
                            g.name,
                            of_group(&g.name)
                        );
                    }
                    // Everyone else together never reaches into g's
                    // reservation.
                    let outside = n - of_group(&g.name);
                    ensure!(
                        outside + g.reserve <= pol.seats + sp.overage,
                        "{outside} seats outside group {} of {id} reach into its reserve {}",
                        g.name,
                        g.reserve
                    );
                }
                if let Some(max) = sp.max_per_holder {
                    for h in live.iter().map(|l| &l.holder) {
                        let k = live.iter().filter(|l| &l.holder == h).count() as u32;
                        ensure!(k <= max, "holder {h} of {id} has {k} > {max} seats");
                    }
                }
            }
            let borrowed: Vec<_> = live.iter().filter(|l| l.mode == SeatMode::Borrow).collect();
            let terms = sp.borrow.as_ref();
            ensure!(
                borrowed.len() as u32 <= terms.map_or(0, |b| b.seats),
                "{id} has {} borrowed seats with {terms:?}",
                borrowed.len()
            );
            for l in &borrowed {
                let max_ms = terms.map_or(0, |b| b.max_s as i64 * 1000);
                ensure!(
                    l.expires_at.millis_since(l.issued_at) <= max_ms,
                    "a borrow beyond {max_ms} ms: {l:?}"
                );
            }
            let counts = PoolCounts {
                live: n,
                lingering: live.iter().filter(|l| l.mode == SeatMode::Linger).count() as u32,
                borrowed: borrowed.len() as u32,
                groups: sp
                    .groups
                    .iter()
                    .map(|g| (g.name.clone(), of_group(&g.name)))
                    .collect(),
            };
            by_predicate.push((id.clone(), counts));
        }
        Ok(by_predicate)
    }

    /// One live (not lingering) seat per fingerprint and holder (two
    /// holders may share a machine when one's seat lingered), one lease
    /// per key; sane times (a lingering seat's expiry is its linger's end).
    pub fn check_seats<'a>(
        &self,
        leases: impl IntoIterator<Item = (&'a LeaseRow, Option<&'a String>)>,
    ) -> Result<(), String> {
        let mut fps = BTreeSet::new();
        let mut keys = BTreeSet::new();
        for (l, key) in leases {
            let pol = self.pol(&l.license_id).unwrap();
            if let Some(fp) = &l.fingerprint
                && l.mode == SeatMode::Heartbeat
                && self.live(l)
            {
                ensure!(
                    fps.insert((l.license_id.clone(), fp.clone(), l.holder.clone())),
                    "two live seats of {} for fingerprint {fp} and holder {}",
                    l.license_id,
                    l.holder
                );
            }
            if let Some(key) = key {
                ensure!(
                    keys.insert((l.license_id.clone(), key.clone())),
                    "two leases of {} for key {key}",
                    l.license_id
                );
            }
            ensure!(
                l.checked_out_at <= l.issued_at
                    && l.issued_at <= self.now
                    && (l.mode == SeatMode::Linger
                        || l.expires_at >= l.issued_at.saturating_add(pol.ttl())),
                "lease times {l:?} at {}",
                Rel(self.now)
            );
        }
        Ok(())
    }
}
