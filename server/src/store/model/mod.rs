//! The one reference model of the lease rules, for their tests only: the
//! rules' property test on the in-memory store (`store/rules_props/`, a
//! unit test) and the store's model test on SQLite and PostgreSQL
//! (`server/tests/model.rs`, which sees it through the crate's
//! `reference-model` feature). A rule changes in `store/rules/` and here,
//! and both tests hold every store to it.
//!
//! The model restates each rule from the one predicate
//! (`leasehold_common::liveness`: `is_live`, `is_reapable`, `lapses_at`,
//! `live_until`), never by calling the rules. From its state ([`Model`]:
//! the licenses in force, the leases the table must hold, blocks, the
//! seats issued and gone, how each session ended, the idle periods) it
//! predicts every answer and what each command leaves behind ([`Effects`]:
//! events, sessions, denials), and applies it:
//!
//! - a checkout ([`Model::checkout`]): unknown license; borrow terms
//!   (lends nothing, too long); a block in force; a replay by
//!   Idempotency-Key or a re-claim by fingerprint of a live seat (renewed,
//!   no lease added; a lingering seat only to its holder on its machine,
//!   still allowed); allow/deny; lending the machine's own seat or its
//!   borrow extended (within `borrow.seats`); the waiters ahead given the
//!   seats the rules would give them; `max_per_holder`, a group's `max`,
//!   then the pool: a fresh grant only when `live + ahead + others' unused
//!   reservations < seats + overage`, flagged `overage` exactly when
//!   `live >= seats`, else `Full` with `reserved`; `retry_after` the time
//!   until the earliest live lease concerned lapses (`lapses_at`), one TTL
//!   when the reservations alone refuse; a refusal counted (a `?wait=`
//!   attempt counts only final ones) and logged once per holder per
//!   throttle window;
//! - a heartbeat ([`Model::heartbeat`]): renewed while live, under its own
//!   license only, with the idle start by the brief's rule (its own
//!   restatement, not `idle::after_report`: `now − idle_s`, not before
//!   checkout; a start more than 2 s later than the last one's means the
//!   user came back; 0 or none is activity), or reclaimed (410 `idle`, the
//!   session `Idle` at `idle_since + timeout`, a `reclaim` event, no
//!   linger); a lingering seat is lost (`released`), a borrowed one answers
//!   `borrowed`, a lapsed one is lost (a throttled `lost` event); a seat not
//!   in the table gets the exact 410 reason of its session;
//! - a release ([`Model::release`]): with linger a live seat stays,
//!   lingering until now + linger, and a second release changes nothing;
//!   else the seat leaves; a revoke ([`Model::revoke`]): a live borrowed
//!   seat only with force, a block set;
//! - a sweep ([`Model::sweep`]): live seats kept by heartbeats idle past the
//!   timeout reclaimed first, then exactly the reapable leases
//!   (`is_reapable`), oldest first, within the one limit; a reaped
//!   lingering seat's session a `Release` when its linger ended, a lapsed
//!   seat's a `Lapse` at `live_until`;
//! - the outage rule ([`Model::outage`]) and policy reloads
//!   ([`Model::repolicy`], never evicting a seat);
//! - idle periods (≥ 60 s) recorded when the user came back, the session
//!   ended, the seat was released into linger, taken back by a checkout or
//!   turned into a borrow.
//!
//! The invariants both tests check after every step, on the store's own
//! seats, are [`Model::check_pools`] and [`Model::check_seats`]. The
//! generators ([`generate`]) make the licenses (timing, seats and seat
//! policies, written as a licenses file: [`policy`]) and the operations
//! ([`ops`]) for each driver.

/// `assert!` as an `Err(String)`, for checks that report a failing case
/// instead of panicking in it.
macro_rules! ensure {
    ($cond:expr, $($fmt:tt)+) => {
        if !$cond {
            return Err(format!($($fmt)+));
        }
    };
}

/// `assert_eq!` as an `Err(String)`, the rules' answer first.
#[allow(unused_macros)]
macro_rules! ensure_eq {
    ($got:expr, $want:expr, $($fmt:tt)+) => {{
        let (g, w) = (&$got, &$want);
        if g != w {
            return Err(format!("{}\n  rules: {:?}\n  model: {:?}", format!($($fmt)+), g, w));
        }
    }};
}

#[allow(unused_imports)]
pub(crate) use {ensure, ensure_eq};

mod checkout;
mod events;
pub mod generate;
mod invariants;
pub mod ops;
pub mod policy;
mod reap;
mod seat;
mod state;
mod time;

pub use checkout::{Expect, Spoken};
pub use events::{Denial, Effects, Session, WantEvent};
pub use ops::{Edge, Lic, Op, Report, Target, resolve_again};
pub use policy::{BorrowPol, Change, GroupPol, LICENSE_IDS, Pol, SeatPol, license_toml};
pub use reap::Sweep;
pub use seat::{Beat, MIN_IDLE_MS};
pub use state::{Held, IdlePeriodRow, Model, THROTTLE_MS};
pub use time::{Rel, T0, at, ms};
