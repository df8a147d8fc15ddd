//! `GET /v1/admin/seats` pages on SQLite (the query is built in
//! `store/seat_query.rs`): count and rows from one read transaction.

use rusqlite::types::Value;
use rusqlite::{Connection, params_from_iter};

use super::rows::lease_from_row;
use crate::store::seat_query::{Dialect, LICENSES_WITH_LEASES, Param, SeatQuery, SeatsPage};

fn sqlite_params(params: &[Param]) -> Vec<Value> {
    params
        .iter()
        .map(|p| match p {
            Param::Text(s) => Value::Text(s.clone()),
            Param::Int(n) => Value::Integer(*n),
        })
        .collect()
}

/// Register `lh_lower` (Unicode lowercase) on a read connection.
pub fn register_lower(c: &Connection) -> rusqlite::Result<()> {
    use rusqlite::functions::FunctionFlags;
    c.create_scalar_function(
        "lh_lower",
        1,
        FunctionFlags::SQLITE_UTF8 | FunctionFlags::SQLITE_DETERMINISTIC,
        |ctx| {
            let s: Option<String> = ctx.get(0)?;
            Ok(s.map(|s| s.to_lowercase()))
        },
    )
}

/// The page on SQLite, count and rows from one read transaction.
pub fn page(c: &Connection, query: &SeatQuery) -> rusqlite::Result<SeatsPage> {
    let tx = c.unchecked_transaction()?;
    let licenses: Vec<String> = if query.merges_licenses() {
        tx.prepare_cached(LICENSES_WITH_LEASES)?
            .query_map([], |r| r.get(0))?
            .collect::<rusqlite::Result<_>>()?
    } else {
        Vec::new()
    };
    let sql = query.sql(Dialect::Sqlite, &licenses);
    let total: i64 = tx
        .prepare_cached(&sql.count)?
        .query_row(params_from_iter(sqlite_params(&sql.count_params)), |r| {
            r.get(0)
        })?;
    let rows = tx
        .prepare_cached(&sql.page)?
        .query_map(
            params_from_iter(sqlite_params(&sql.page_params)),
            lease_from_row,
        )?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    tx.finish()?;
    Ok(query.finish(rows, total.max(0) as u64))
}
