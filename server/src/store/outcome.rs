//! What the store's commands answer: a checkout's outcome and the reasons
//! it may be refused ([`Limit`], [`NotAllowedBecause`]), a heartbeat's and a
//! revoke's, a pool's counts, and [`Applied`], a decision held back until
//! its batch is durable.

use std::time::Duration;

use leasehold_common::Timestamp;
use leasehold_common::api::SeatLostReason;
use tokio::sync::watch;

use super::error::StoreError;
use super::lease::LeaseRow;

/// What a checkout did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CheckoutOutcome {
    /// A seat: freshly taken (`reused == false`), or the one this caller
    /// already holds, found by Idempotency-Key or fingerprint and renewed.
    /// `overage`: a fresh seat that left more seats live than sold.
    Granted {
        lease: LeaseRow,
        reused: bool,
        overage: bool,
    },
    /// No seat for this request: every seat live (with the overage), or
    /// held back for other groups (`reserved`: their unused reservations).
    /// `retry_after` is when the earliest live lease could lapse.
    Full {
        seats: u32,
        live: u32,
        reserved: u32,
        retry_after: Duration,
    },
    /// A cap the requester is at: its holder's or its group's live seats.
    LimitReached {
        limit: Limit,
        max: u32,
        group: Option<String>,
        retry_after: Duration,
    },
    /// The requester may not have this seat, and why.
    NotAllowed(NotAllowedBecause),
    /// An admin revoked this holder + fingerprint and blocked re-checkout.
    Blocked {
        until: Timestamp,
    },
    /// A license with a vendor that no entitlement grants now (`403
    /// not_entitled`).
    NotEntitled,
    /// The checkout's version is absent or outside the range the license's
    /// entitlement covers (`403 version_not_entitled`).
    VersionNotEntitled {
        versions: String,
    },
    /// A `version` that is not a dotted numeric version, sent to a license
    /// whose entitlement names a range (a 400).
    InvalidVersion,
    /// A borrow longer than the license's `borrow.max` (a 400: bad input,
    /// not a denial).
    BorrowTooLong {
        max: Duration,
    },
    UnknownLicense,
}

/// Which cap refused a checkout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    /// `max_per_holder`.
    Holder,
    /// The group's `max`.
    Group,
    /// `borrow.seats`: seats of the license borrowed at once.
    Borrow,
}

impl Limit {
    pub fn as_str(self) -> &'static str {
        match self {
            Limit::Holder => "holder",
            Limit::Group => "group",
            Limit::Borrow => "borrow",
        }
    }
}

/// What counts against one license's pool now, by the one predicate.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PoolCounts {
    /// Every seat that counts: live, lingering and borrowed.
    pub live: u32,
    pub lingering: u32,
    pub borrowed: u32,
    /// Live seats per group of the policy, in file order.
    pub groups: Vec<(String, u32)>,
}

/// What a heartbeat did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HeartbeatOutcome {
    Renewed(LeaseRow),
    /// Released, revoked, reaped, lapsed or reclaimed for idleness (the
    /// reason says which): the client must check out again.
    Lost(SeatLostReason),
    /// A borrowed seat is not renewed: its client returns it or lets it
    /// expire (at `expires_at`).
    Borrowed {
        expires_at: Timestamp,
    },
}

/// What an admin revoke did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RevokeOutcome {
    Revoked(LeaseRow),
    /// A live borrowed seat, kept: freeing it needs `force` (its token
    /// stays valid offline until it expires).
    Borrowed(LeaseRow),
    /// No such seat.
    Unknown,
}

impl RevokeOutcome {
    /// The seat, if it was freed.
    pub fn revoked(self) -> Option<LeaseRow> {
        match self {
            RevokeOutcome::Revoked(row) => Some(row),
            RevokeOutcome::Borrowed(_) | RevokeOutcome::Unknown => None,
        }
    }
}

/// Why a checkout is refused with `403 not_allowed`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotAllowedBecause {
    /// The license's `deny` matches the requester, or its `allow` does not.
    Lists,
    /// A borrow, and the license lends no seats (no `[license.borrow]`).
    LendsNothing,
    /// A borrow by a requester outside the license's `borrow.allow`.
    BorrowAllow,
}

/// What the writer decided for a command whose batch is not yet durable.
///
/// Prepare the answer from `value` (sign the token, build the body) while the
/// batch commits, and tell nobody anything before [`Applied::committed`]
/// says the batch is durable: the expensive part of a reply then overlaps
/// the fsync instead of following it.
#[derive(Debug)]
pub struct Applied<T> {
    pub value: T,
    /// The batch's commit signal (`command::CommitSignal`, spelled out so
    /// this file does not name `command`, which names it).
    pub(super) commit: watch::Receiver<Option<Result<(), String>>>,
}

impl<T> Applied<T> {
    /// A decision that waits for no commit (a denial repeated beside the
    /// writer: it wrote nothing).
    pub(super) fn settled(value: T) -> Self {
        let (_, commit) = watch::channel(Some(Ok(())));
        Applied { value, commit }
    }

    /// `value`, once the batch that decided it is committed.
    pub async fn committed(self) -> Result<T, StoreError> {
        let Applied { value, mut commit } = self;
        let outcome = commit
            .wait_for(Option::is_some)
            .await
            .map_err(|_| StoreError::Closed)?
            .clone();
        match outcome {
            Some(Ok(())) => Ok(value),
            Some(Err(msg)) => Err(StoreError::CommitFailed(msg)),
            None => Err(StoreError::Closed),
        }
    }
}
