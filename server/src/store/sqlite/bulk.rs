//! Many history rows in one statement. A reap ends hundreds of sessions and
//! writes as many events at once; one INSERT per row paid SQLite's cost of
//! a statement each time (a statement savepoint opened and released, a
//! reset, and for events the AUTOINCREMENT sequence read and written back),
//! about a third of the writer's time in a bulk reap (perf). The rows go in
//! as one JSON array, so one cached statement takes any number of them.

use rusqlite::Connection;

use crate::store::rules::{EndedSession, NewEvent};

/// Fewer rows than this are inserted one statement each: for a handful,
/// writing and parsing the JSON costs more than the statements it saves.
pub const MIN_ROWS: usize = 8;

fn json(rows: &impl serde::Serialize) -> rusqlite::Result<String> {
    serde_json::to_string(rows).map_err(|e| rusqlite::Error::ToSqlConversionFailure(Box::new(e)))
}

/// The sessions, in the order given (their ids grow in it).
pub fn insert_sessions(conn: &Connection, sessions: &[EndedSession<'_>]) -> rusqlite::Result<()> {
    let rows: Vec<_> = sessions
        .iter()
        .map(|s| {
            (
                &s.lease.seat_id,
                &s.lease.license_id,
                &s.lease.holder,
                &s.lease.fingerprint,
                s.lease.checked_out_at.as_millis(),
                s.at.as_millis(),
                s.end.as_str(),
                &s.lease.group,
                s.lease.mode.code(),
            )
        })
        .collect();
    conn.prepare_cached(
        "INSERT INTO sessions (seat_id, license_id, holder, fingerprint, started_at,
                               ended_at, end_kind, grp, mode)
         SELECT value ->> 0, value ->> 1, value ->> 2, value ->> 3, value ->> 4,
                value ->> 5, value ->> 6, value ->> 7, value ->> 8
         FROM json_each(?1) ORDER BY key",
    )?
    .execute([json(&rows)?])?;
    Ok(())
}

/// The events, in the order given; their ids in that order.
pub fn insert_events(conn: &Connection, events: &[NewEvent<'_>]) -> rusqlite::Result<Vec<i64>> {
    let rows: Vec<_> = events
        .iter()
        .map(|e| {
            (
                e.at.as_millis(),
                e.kind.as_str(),
                e.license_id,
                e.seat_id,
                e.holder,
                e.detail,
            )
        })
        .collect();
    let mut ids: Vec<i64> = conn
        .prepare_cached(
            "INSERT INTO events (at, kind, license_id, seat_id, holder, detail)
             SELECT value ->> 0, value ->> 1, value ->> 2, value ->> 3, value ->> 4,
                    value ->> 5
             FROM json_each(?1) ORDER BY key RETURNING id",
        )?
        .query_map([json(&rows)?], |r| r.get(0))?
        .collect::<rusqlite::Result<_>>()?;
    // RETURNING has no order of its own; AUTOINCREMENT ids grow in the
    // order the rows went in.
    ids.sort_unstable();
    Ok(ids)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::sqlite::schema;
    use crate::store::{LeaseRow, SeatMode};
    use leasehold_common::Timestamp;
    use leasehold_common::api::{EventKind, SessionEnd};

    fn database() -> (tempfile::TempDir, Connection) {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut conn = Connection::open(dir.path().join("leasehold.db")).expect("open");
        schema::migrate(&mut conn).expect("schema");
        (dir, conn)
    }

    fn lease(i: i64) -> LeaseRow {
        LeaseRow {
            seat_id: format!("seat-{i}"),
            license_id: "cad".into(),
            holder: format!("ann \"{i}\" ü"),
            fingerprint: (i % 2 == 0).then(|| format!("fp-{i}")),
            checked_out_at: Timestamp::from_millis(1_000 + i),
            issued_at: Timestamp::from_millis(2_000 + i),
            expires_at: Timestamp::from_millis(3_000 + i),
            group: (i % 3 == 0).then(|| "lab".to_string()),
            mode: if i % 2 == 0 {
                SeatMode::Linger
            } else {
                SeatMode::Heartbeat
            },
            idle_since: None,
        }
    }

    #[test]
    fn sessions_go_in_whole_and_in_order() {
        let (_dir, conn) = database();
        let leases: Vec<LeaseRow> = (0..20).map(lease).collect();
        let sessions: Vec<EndedSession<'_>> = leases
            .iter()
            .map(|l| EndedSession {
                lease: l,
                end: SessionEnd::Lapse,
                at: l.expires_at,
            })
            .collect();
        insert_sessions(&conn, &sessions).expect("insert");
        let mut stmt = conn
            .prepare(
                "SELECT seat_id, license_id, holder, fingerprint, started_at, ended_at,
                        end_kind, grp, mode FROM sessions ORDER BY id",
            )
            .expect("select");
        type Row = (
            String,
            String,
            String,
            Option<String>,
            i64,
            i64,
            String,
            Option<String>,
            i32,
        );
        let got: Vec<Row> = stmt
            .query_map([], |r| {
                Ok((
                    r.get(0)?,
                    r.get(1)?,
                    r.get(2)?,
                    r.get(3)?,
                    r.get(4)?,
                    r.get(5)?,
                    r.get(6)?,
                    r.get(7)?,
                    r.get(8)?,
                ))
            })
            .expect("query")
            .collect::<rusqlite::Result<_>>()
            .expect("rows");
        let want: Vec<Row> = leases
            .iter()
            .map(|l| {
                (
                    l.seat_id.clone(),
                    l.license_id.clone(),
                    l.holder.clone(),
                    l.fingerprint.clone(),
                    l.checked_out_at.as_millis(),
                    l.expires_at.as_millis(),
                    "lapse".to_string(),
                    l.group.clone(),
                    l.mode.code(),
                )
            })
            .collect();
        assert_eq!(got, want);
    }

    #[test]
    fn events_get_ids_that_grow_in_the_order_given() {
        let (_dir, conn) = database();
        let leases: Vec<LeaseRow> = (0..20).map(lease).collect();
        let details: Vec<String> = (0..20).map(|i| format!("detail {i}")).collect();
        let events: Vec<NewEvent<'_>> = leases
            .iter()
            .zip(&details)
            .map(|(l, d)| NewEvent {
                at: Timestamp::from_millis(9_000),
                kind: EventKind::Reap,
                license_id: Some(&l.license_id),
                seat_id: Some(&l.seat_id),
                holder: Some(&l.holder),
                detail: Some(d),
            })
            .collect();
        let first = insert_events(&conn, &events[..10]).expect("insert");
        let second = insert_events(&conn, &events[10..]).expect("insert");
        let ids: Vec<i64> = first.into_iter().chain(second).collect();
        assert_eq!(ids, (1..=20).collect::<Vec<i64>>());
        for (id, e) in ids.iter().zip(&events) {
            let (kind, seat, holder, detail): (String, String, String, String) = conn
                .query_row(
                    "SELECT kind, seat_id, holder, detail FROM events WHERE id = ?1",
                    [id],
                    |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
                )
                .expect("event");
            assert_eq!(kind, "reap");
            assert_eq!(Some(seat.as_str()), e.seat_id);
            assert_eq!(Some(holder.as_str()), e.holder);
            assert_eq!(Some(detail.as_str()), e.detail);
        }
    }
}
