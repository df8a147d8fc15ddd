//! What a set of verified entitlements grants at an instant: each one's
//! state, and per license the entitled seats, overage, borrowing, version
//! range, grace and the cap on a lease's expiry.
//!
//! Pure: the caller gives the entitlements that loaded, what the store
//! remembers of the newest of each id, and the decision clock's `t` (ms).

use std::collections::{BTreeSet, HashMap};

use super::claims::{BorrowGrant, LicenseGrant};
use super::jws::Entitlement;
use super::versions::VersionRange;

/// The newest `iat` ever verified for a vendor's entitlement id, and that
/// one's `nbf`: an older file is replaced from then on, for good.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Newest {
    pub iat: i64,
    pub nbf: Option<i64>,
}

/// An entitlement's state at an instant (`rejected` is the loader's).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum State {
    Active,
    Grace,
    NotYet,
    Ended,
    Replaced,
    Conflict,
}

impl State {
    pub fn as_str(self) -> &'static str {
        match self {
            State::Active => "active",
            State::Grace => "grace",
            State::NotYet => "not_yet",
            State::Ended => "ended",
            State::Replaced => "replaced",
            State::Conflict => "conflict",
        }
    }

    /// Active or in grace: it grants seats.
    pub fn grants(self) -> bool {
        matches!(self, State::Active | State::Grace)
    }
}

/// What a license's vendor's entitlements grant it at an instant.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Grant {
    /// The sum of `seats` over the active entitlements (0: none active).
    pub seats: u32,
    pub overage: u32,
    /// Borrowing allowed up to these (the largest `max` and `seats`).
    pub borrow: Option<BorrowGrant>,
    /// The range of the newest active entitlement; `None`: any version.
    pub versions: Option<VersionRange>,
    /// Some entitlement that grants is past its `exp`.
    pub in_grace: bool,
    /// No lease may outlive this (ms): the latest `exp + grace`; `None`
    /// while a perpetual entitlement grants, or when nothing does.
    pub lease_cap_ms: Option<i64>,
    /// `jti`s of the entitlements that grant.
    pub from: Vec<String>,
}

impl Grant {
    pub fn is_entitled(&self) -> bool {
        self.seats > 0
    }
}

/// The verified entitlements, and the store's memory of the newest of each.
#[derive(Debug, Clone, Default)]
pub struct Ledger {
    entitlements: Vec<Entitlement>,
    newest: HashMap<(String, String), Newest>,
}

impl Ledger {
    /// `newest` is what the store remembers; the loaded files count too.
    pub fn new(entitlements: Vec<Entitlement>, newest: HashMap<(String, String), Newest>) -> Self {
        let mut ledger = Ledger {
            entitlements,
            newest,
        };
        for e in &ledger.entitlements {
            let c = &e.claims;
            let mine = Newest {
                iat: c.iat,
                nbf: c.nbf,
            };
            let seen = ledger
                .newest
                .entry((c.iss.clone(), c.jti.clone()))
                .or_insert(mine);
            if c.iat > seen.iat {
                *seen = mine;
            }
        }
        ledger
    }

    pub fn entitlements(&self) -> &[Entitlement] {
        &self.entitlements
    }

    /// Each entitlement's state at `t`, in the order given.
    pub fn states(&self, t: i64) -> Vec<State> {
        let conflicted: BTreeSet<usize> = self
            .licenses_named()
            .iter()
            .flat_map(|(vendor, license)| self.split(vendor, license, t).1)
            .collect();
        (0..self.entitlements.len())
            .map(|i| match self.term_state(i, t) {
                s if s.grants() && conflicted.contains(&i) => State::Conflict,
                s => s,
            })
            .collect()
    }

    /// What `vendor`'s entitlements grant `license` at `t`.
    pub fn grant(&self, vendor: &str, license: &str, t: i64) -> Grant {
        let (granting, _) = self.split(vendor, license, t);
        let items: Vec<(&Entitlement, &LicenseGrant)> = granting
            .iter()
            .map(|&i| {
                let e = &self.entitlements[i];
                (e, e.claims.grant_for(license).expect("split keeps holders"))
            })
            .collect();
        let max_of = |f: fn(&BorrowGrant) -> i64| {
            items
                .iter()
                .filter_map(|(_, g)| g.borrow.as_ref().map(f))
                .max()
        };
        let perpetual = items.iter().any(|(e, _)| e.claims.exp.is_none());
        Grant {
            seats: items.iter().map(|(_, g)| g.seats).sum(),
            overage: items.iter().map(|(_, g)| g.overage).sum(),
            borrow: max_of(|b| b.max_s).zip(max_of(|b| i64::from(b.seats))).map(
                |(max_s, seats)| BorrowGrant {
                    max_s,
                    seats: seats as u32,
                },
            ),
            versions: items.first().and_then(|(_, g)| g.versions.clone()),
            in_grace: granting
                .iter()
                .any(|&i| self.term_state(i, t) == State::Grace),
            lease_cap_ms: if perpetual {
                None
            } else {
                items
                    .iter()
                    .filter_map(|(e, _)| e.claims.ends_at_ms())
                    .max()
            },
            from: items.iter().map(|(e, _)| e.claims.jti.clone()).collect(),
        }
    }

    /// The entitlements that grant `license` at `t`, newest first (one per
    /// claims hash): what its vendor's application checks the chain with.
    pub fn granting(&self, vendor: &str, license: &str, t: i64) -> Vec<&Entitlement> {
        let (granting, _) = self.split(vendor, license, t);
        granting.iter().map(|&i| &self.entitlements[i]).collect()
    }

    /// The customer (`sub`) the newest entitlement granting `license` at
    /// `t` names.
    pub fn customer(&self, vendor: &str, license: &str, t: i64) -> Option<String> {
        let (granting, _) = self.split(vendor, license, t);
        granting
            .first()
            .and_then(|&i| self.entitlements[i].claims.sub.clone())
    }

    /// The first instant after `t` at which `license`'s entitled seats
    /// drop, counting every file (those not yet in force too, so a renewal
    /// already installed moves it); `None` if they never drop.
    pub fn next_drop(&self, vendor: &str, license: &str, t: i64) -> Option<i64> {
        let mut instants: Vec<i64> = self
            .entitlements
            .iter()
            .filter(|e| e.claims.iss == vendor)
            .flat_map(|e| [e.claims.nbf.map(|n| n * 1000), e.claims.ends_at_ms()])
            .chain(self.newest.values().map(|n| n.nbf.map(|n| n * 1000)))
            .flatten()
            .filter(|&i| i > t)
            .collect();
        instants.sort_unstable();
        instants.dedup();
        let mut before = self.grant(vendor, license, t).seats;
        for at in instants {
            let seats = self.grant(vendor, license, at).seats;
            if seats < before {
                return Some(at);
            }
            before = seats;
        }
        None
    }

    /// The state by term and replacement alone.
    fn term_state(&self, i: usize, t: i64) -> State {
        let c = &self.entitlements[i].claims;
        let newest = self.newest[&(c.iss.clone(), c.jti.clone())];
        let replaced = newest.iat > c.iat && newest.nbf.is_none_or(|n| n * 1000 <= t);
        if replaced {
            State::Replaced
        } else if c.nbf.is_some_and(|n| t < n * 1000) {
            State::NotYet
        } else if c.ends_at_ms().is_some_and(|end| t >= end) {
            State::Ended
        } else if c.exp.is_some_and(|exp| t >= exp * 1000) {
            State::Grace
        } else {
            State::Active
        }
    }

    /// For one license: the entitlements that grant it at `t` (newest
    /// first, one per claims hash), and those in force whose version range
    /// differs from the newest one's (they grant nothing while it differs).
    fn split(&self, vendor: &str, license: &str, t: i64) -> (Vec<usize>, Vec<usize>) {
        let mut in_force: Vec<usize> = (0..self.entitlements.len())
            .filter(|&i| {
                let c = &self.entitlements[i].claims;
                c.iss == vendor && c.grant_for(license).is_some() && self.term_state(i, t).grants()
            })
            .collect();
        in_force.sort_by_key(|&i| {
            let c = &self.entitlements[i].claims;
            (std::cmp::Reverse(c.iat), c.jti.clone())
        });
        let mut seen = BTreeSet::new();
        in_force.retain(|&i| seen.insert(self.entitlements[i].claims_hash.clone()));
        let range = |i: usize| {
            self.entitlements[i]
                .claims
                .grant_for(license)
                .and_then(|g| g.versions.clone())
        };
        let Some(&newest) = in_force.first() else {
            return (Vec::new(), Vec::new());
        };
        in_force
            .into_iter()
            .partition(|&i| range(i) == range(newest))
    }

    fn licenses_named(&self) -> BTreeSet<(String, String)> {
        self.entitlements
            .iter()
            .flat_map(|e| {
                e.claims
                    .licenses
                    .iter()
                    .map(|g| (e.claims.iss.clone(), g.id.clone()))
            })
            .collect()
    }
}
