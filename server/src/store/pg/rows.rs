//! Rows as PostgreSQL returns them, turned into the store's types (the
//! writer's synchronous client and the pool's async one return the same
//! `tokio_postgres::Row`).

use leasehold_common::Timestamp;
use leasehold_common::api::{Event, EventKind};
use tokio_postgres::Row;

use crate::store::{LeaseRow, SeatMode, StoreError, Waiter};

/// A lease of `lease_columns!()`.
pub fn lease_from_row(r: &Row) -> LeaseRow {
    LeaseRow {
        seat_id: r.get(0),
        license_id: r.get(1),
        holder: r.get(2),
        fingerprint: r.get(3),
        checked_out_at: Timestamp::from_millis(r.get(4)),
        issued_at: Timestamp::from_millis(r.get(5)),
        expires_at: Timestamp::from_millis(r.get(6)),
        group: r.get(7),
        // The schema check refuses a database newer than this build, so
        // every stored mode is one it knows.
        mode: SeatMode::from_code(r.get(8)).unwrap_or_default(),
        idle_since: r.get::<_, Option<i64>>(9).map(Timestamp::from_millis),
    }
}

/// An event of `id, at, kind, license_id, seat_id, holder, detail`.
pub fn event_from_row(r: &Row) -> Result<Event, StoreError> {
    let kind: String = r.get(2);
    Ok(Event {
        id: r.get(0),
        at: Timestamp::from_millis(r.get(1)),
        kind: EventKind::parse(&kind).ok_or(StoreError::UnknownEventKind(kind))?,
        license_id: r.get(3),
        seat_id: r.get(4),
        holder: r.get(5),
        detail: r.get(6),
    })
}

/// The waiters of the waiting line's rows (`statements::waiters_ahead_sql`).
pub fn waiters(rows: &[Row]) -> Vec<Waiter> {
    rows.iter()
        .map(|row| Waiter {
            holder: row.get(0),
            fingerprint: row.get(1),
        })
        .collect()
}
