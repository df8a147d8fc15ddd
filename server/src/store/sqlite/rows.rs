//! Rows as SQLite returns them, turned into the store's types.

use leasehold_common::Timestamp;
use leasehold_common::api::{Event, EventKind};
use rusqlite::Row;

use crate::store::{LeaseRow, SeatMode};

pub(crate) use crate::store::lease_columns;

pub fn lease_from_row(r: &Row<'_>) -> rusqlite::Result<LeaseRow> {
    Ok(LeaseRow {
        seat_id: r.get(0)?,
        license_id: r.get(1)?,
        holder: r.get(2)?,
        fingerprint: r.get(3)?,
        checked_out_at: Timestamp::from_millis(r.get(4)?),
        issued_at: Timestamp::from_millis(r.get(5)?),
        expires_at: Timestamp::from_millis(r.get(6)?),
        group: r.get(7)?,
        mode: mode_from(r.get(8)?)?,
        idle_since: r.get::<_, Option<i64>>(9)?.map(Timestamp::from_millis),
    })
}

pub const EVENT_COLUMNS: &str = "id, at, kind, license_id, seat_id, holder, detail";

pub fn event_from_row(r: &Row<'_>) -> rusqlite::Result<Event> {
    let kind: String = r.get(2)?;
    Ok(Event {
        id: r.get(0)?,
        at: Timestamp::from_millis(r.get(1)?),
        kind: EventKind::parse(&kind).ok_or_else(|| {
            rusqlite::Error::FromSqlConversionFailure(
                2,
                rusqlite::types::Type::Text,
                format!("unknown event kind {kind:?}").into(),
            )
        })?,
        license_id: r.get(3)?,
        seat_id: r.get(4)?,
        holder: r.get(5)?,
        detail: r.get(6)?,
    })
}

pub(crate) fn mode_from(code: i32) -> rusqlite::Result<SeatMode> {
    SeatMode::from_code(code).ok_or_else(|| {
        rusqlite::Error::FromSqlConversionFailure(
            8,
            rusqlite::types::Type::Integer,
            format!("unknown seat mode {code}").into(),
        )
    })
}
