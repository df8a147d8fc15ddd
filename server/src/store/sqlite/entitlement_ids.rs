//! The remembered entitlement ids on SQLite (see
//! `store/entitlement_ids.rs`): read on the read pool, written on the
//! sign-ins' connection, one transaction per scan's writes.

use rusqlite::{Connection, params};

use crate::store::entitlement_ids::{EntitlementId, SELECT_SQL, UPSERT_SQL};

pub fn read(c: &Connection) -> rusqlite::Result<Vec<EntitlementId>> {
    c.prepare_cached(SELECT_SQL)?
        .query_map([], |r| {
            Ok(EntitlementId {
                vendor: r.get(0)?,
                id: r.get(1)?,
                iat: r.get(2)?,
                nbf: r.get(3)?,
                claims_hash: r.get(4)?,
            })
        })?
        .collect()
}

pub fn remember(c: &Connection, ids: &[EntitlementId]) -> rusqlite::Result<usize> {
    let tx = c.unchecked_transaction()?;
    let mut changed = 0;
    {
        let mut upsert = tx.prepare_cached(UPSERT_SQL)?;
        for e in ids {
            changed += upsert.execute(params![e.vendor, e.id, e.iat, e.nbf, e.claims_hash])?;
        }
    }
    tx.commit()?;
    Ok(changed)
}
