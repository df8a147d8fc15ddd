//! Which leases count: the one "live and in this scope" test, decided here
//! and used by every store (the in-memory store, SQLite's live index,
//! PostgreSQL's counts kept per batch); the stores' SQL binds the same
//! scope's values and the same threshold.

use leasehold_common::Timestamp;

use crate::store::{LeaseRow, SeatMode};

/// Which of a license's leases a count is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope<'a> {
    License(&'a str),
    /// The seats that count for a group (as recorded on each seat).
    Group {
        license_id: &'a str,
        group: &'a str,
    },
    Holder {
        license_id: &'a str,
        holder: &'a str,
    },
    /// The seats kept one way (lingering, borrowed).
    Mode {
        license_id: &'a str,
        mode: SeatMode,
    },
}

impl<'a> Scope<'a> {
    pub fn license_id(&self) -> &'a str {
        match *self {
            Scope::License(license_id)
            | Scope::Group { license_id, .. }
            | Scope::Holder { license_id, .. }
            | Scope::Mode { license_id, .. } => license_id,
        }
    }

    /// Every scope a lease counts in while it is live: its license, the
    /// group it counts for, its holder, and the way it is kept.
    pub fn all_of(lease: &'a LeaseRow) -> impl Iterator<Item = Scope<'a>> {
        let license_id = lease.license_id.as_str();
        [
            Some(Scope::License(license_id)),
            lease
                .group
                .as_deref()
                .map(|group| Scope::Group { license_id, group }),
            Some(Scope::Holder {
                license_id,
                holder: &lease.holder,
            }),
            Some(Scope::Mode {
                license_id,
                mode: lease.mode,
            }),
        ]
        .into_iter()
        .flatten()
    }

    /// Whether `lease` counts in this scope at `threshold`: live
    /// (`expires_at >= threshold`, as the stores' SQL binds it) and one of
    /// its scopes.
    pub fn counts(&self, lease: &LeaseRow, threshold: Timestamp) -> bool {
        lease.expires_at >= threshold && Scope::all_of(lease).any(|s| s == *self)
    }
}
