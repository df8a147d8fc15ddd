//! Read-side queries, on read-only connections from a small pool.

use std::path::PathBuf;
use std::sync::Mutex;

use leasehold_common::api::Event;
use rusqlite::{Connection, params};

use super::open_connection;
use super::rows::{EVENT_COLUMNS, event_from_row, lease_columns, lease_from_row};
use crate::store::{LeaseRow, StoreError};

/// Idle connections kept for reuse; more are opened on demand under load.
const POOL_KEEP: usize = 8;

pub struct ReadPool {
    path: PathBuf,
    idle: Mutex<Vec<Connection>>,
}

impl ReadPool {
    pub fn new(path: PathBuf) -> Self {
        ReadPool {
            path,
            idle: Mutex::new(Vec::new()),
        }
    }

    /// Run `f` on a pooled read-only connection (blocking; call from
    /// `spawn_blocking`).
    pub fn with<T>(
        &self,
        f: impl FnOnce(&Connection) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let pooled = self.idle.lock().ok().and_then(|mut idle| idle.pop());
        let conn = match pooled {
            Some(c) => c,
            None => {
                let c = open_connection(&self.path, true)?;
                super::seat_query::register_lower(&c)?;
                c
            }
        };
        let result = f(&conn);
        if let Ok(mut idle) = self.idle.lock()
            && idle.len() < POOL_KEEP
        {
            idle.push(conn);
        }
        result
    }
}

pub(super) fn seats(c: &Connection, license_id: Option<&str>) -> rusqlite::Result<Vec<LeaseRow>> {
    let mut stmt = c.prepare_cached(concat!(
        "SELECT ",
        lease_columns!(),
        " FROM leases WHERE (?1 IS NULL OR license_id = ?1)
         ORDER BY license_id, checked_out_at, seat_id"
    ))?;
    stmt.query_map(params![license_id], lease_from_row)?
        .collect()
}

pub(super) fn find_seat(c: &Connection, seat_id: &str) -> rusqlite::Result<Option<LeaseRow>> {
    let mut stmt = c.prepare_cached(concat!(
        "SELECT ",
        lease_columns!(),
        " FROM leases WHERE seat_id = ?1"
    ))?;
    let mut rows = stmt.query_map(params![seat_id], lease_from_row)?;
    rows.next().transpose()
}

pub(super) fn events_after(
    c: &Connection,
    after: i64,
    limit: usize,
) -> rusqlite::Result<Vec<Event>> {
    let sql = format!("SELECT {EVENT_COLUMNS} FROM events WHERE id > ?1 ORDER BY id LIMIT ?2");
    let mut stmt = c.prepare_cached(&sql)?;
    stmt.query_map(params![after, limit as i64], event_from_row)?
        .collect()
}
