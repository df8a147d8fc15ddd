//! The `leases` table's row: [`LeaseRow`], how its seat is kept
//! ([`SeatMode`]), and its column list ([`lease_columns!`]) for both stores'
//! SQL.

use leasehold_common::Timestamp;

/// The columns of a [`LeaseRow`], in its fields' order, as both stores
/// name them. A macro, so queries can be `concat!`-ed at compile time (no
/// `format!` on the writer's hot path).
macro_rules! lease_columns {
    () => {
        "seat_id, license_id, holder, fingerprint, checked_out_at, issued_at, expires_at, grp, mode, idle_since"
    };
}
pub(crate) use lease_columns;

/// One row of the `leases` table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseRow {
    pub seat_id: String,
    pub license_id: String,
    pub holder: String,
    pub fingerprint: Option<String>,
    pub checked_out_at: Timestamp,
    pub issued_at: Timestamp,
    pub expires_at: Timestamp,
    /// The group the seat counts for, fixed when it was granted (`None`:
    /// ungrouped). A group the policy no longer has counts for nobody.
    pub group: Option<String>,
    pub mode: SeatMode,
    /// Since when its client has reported its user idle (server clock, to
    /// the millisecond; `None`: active, or never reported). Written with
    /// the heartbeat that reports it, never on its own.
    pub idle_since: Option<Timestamp>,
}

/// How a seat is kept until `expires_at`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SeatMode {
    /// Renewed by its client's heartbeats.
    #[default]
    Heartbeat,
    /// Released by its client on a license with `linger`: it counts until
    /// `expires_at`, and its machine may re-claim it meanwhile.
    Linger,
    /// Borrowed for offline use: no heartbeats until `expires_at`.
    Borrow,
}

impl SeatMode {
    /// As stored (`leases.mode`).
    pub fn code(self) -> i32 {
        match self {
            SeatMode::Heartbeat => 0,
            SeatMode::Linger => 1,
            SeatMode::Borrow => 2,
        }
    }

    pub fn from_code(code: i32) -> Option<SeatMode> {
        match code {
            0 => Some(SeatMode::Heartbeat),
            1 => Some(SeatMode::Linger),
            2 => Some(SeatMode::Borrow),
            _ => None,
        }
    }
}
