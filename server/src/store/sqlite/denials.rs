//! Recorded denials on SQLite: the page of `GET /v1/admin/denials`, the
//! usage sweep's denials and the instants of a license's true denials
//! (`store/denials.rs` says how rows pack them and what makes one true).

use std::collections::HashMap;
use std::time::Duration;

use leasehold_common::Timestamp;
use leasehold_common::api::{DenialReason, DenialView};
use rusqlite::{Connection, Row, params};

use crate::store::StoreError;
use crate::store::denials::{
    DenialRow, DenialsQuery, Page, TrueDenialsByWho, each_denial, full_spans, grant_spans,
    mark_true, second_of, true_denials_by_who,
};
use crate::store::history::UsageQuery;
use crate::usage::Sweep;

const ROW_COLUMNS: &str = "license_id, second_ms, holder, fingerprint, reason, offsets";

fn denial_row(r: &Row<'_>) -> rusqlite::Result<(DenialRow, String)> {
    let reason: String = r.get(4)?;
    Ok((
        DenialRow {
            license_id: r.get(0)?,
            second: Timestamp::from_millis(r.get(1)?),
            holder: r.get(2)?,
            fingerprint: r.get(3)?,
            // Replaced below once the text is known to be a reason.
            reason: DenialReason::Full,
            offsets: r.get(5)?,
        },
        reason,
    ))
}

fn with_reason((mut row, reason): (DenialRow, String)) -> Result<DenialRow, StoreError> {
    row.reason = DenialReason::parse(&reason).ok_or(StoreError::UnknownDenialReason(reason))?;
    Ok(row)
}

/// The rows that may hold a denial of the license in `[from, to)`.
fn rows_in(
    c: &Connection,
    license_id: &str,
    from: Timestamp,
    to: Timestamp,
) -> Result<Vec<DenialRow>, StoreError> {
    let mut stmt = c.prepare_cached(&format!(
        "SELECT {ROW_COLUMNS} FROM denials
         WHERE license_id = ?1 AND second_ms >= ?2 AND second_ms < ?3"
    ))?;
    let rows = stmt.query_map(
        params![license_id, second_of(from).as_millis(), to.as_millis()],
        denial_row,
    )?;
    rows.map(|r| with_reason(r?)).collect()
}

/// Each holder's grants of the license (new seats: sessions that started)
/// in its span `(from, to]`, sorted.
fn grants(
    c: &Connection,
    license_id: &str,
    spans: &HashMap<String, (Timestamp, Timestamp)>,
) -> Result<HashMap<String, Vec<Timestamp>>, StoreError> {
    let mut stmt = c.prepare_cached(
        "SELECT started_at FROM sessions INDEXED BY sessions_by_license_holder
         WHERE license_id = ?1 AND holder = ?2 AND started_at > ?3 AND started_at <= ?4
         UNION ALL
         SELECT checked_out_at FROM leases INDEXED BY leases_by_holder
         WHERE holder = ?2 AND license_id = ?1 AND checked_out_at > ?3 AND checked_out_at <= ?4",
    )?;
    let mut all = HashMap::with_capacity(spans.len());
    for (holder, (from, to)) in spans {
        let rows = stmt.query_map(
            params![license_id, holder, from.as_millis(), to.as_millis()],
            |r| r.get::<_, i64>(0).map(Timestamp::from_millis),
        )?;
        let mut times = rows.collect::<rusqlite::Result<Vec<_>>>()?;
        times.sort();
        all.insert(holder.clone(), times);
    }
    Ok(all)
}

/// One page of the license's denials, newest first: rows read by second,
/// newest first, until a whole second fills the page.
pub(crate) fn denials_page(
    c: &Connection,
    q: &DenialsQuery,
) -> Result<Vec<DenialView>, StoreError> {
    let mut page = Page::new(q);
    if q.limit == 0 || q.from >= q.to {
        return Ok(Vec::new());
    }
    let mut stmt = c.prepare_cached(&format!(
        "SELECT {ROW_COLUMNS} FROM denials
         WHERE license_id = ?1 AND second_ms >= ?2 AND second_ms <= ?3
         ORDER BY second_ms DESC"
    ))?;
    let mut rows = stmt.query(params![
        q.license_id,
        second_of(q.from).as_millis(),
        page.newest_second().as_millis()
    ])?;
    while let Some(r) = rows.next()? {
        if !page.push(&with_reason(denial_row(r)?)?) {
            break;
        }
    }
    let mut views = page.finish();
    let grants = grants(c, &q.license_id, &grant_spans(&views, q.tolerance))?;
    mark_true(&mut views, &grants, q.tolerance);
    Ok(views)
}

/// The license's denials in the usage range, by reason and truth, into
/// the sweep.
pub(super) fn sweep_denials(
    c: &Connection,
    q: &UsageQuery,
    sweep: &mut Sweep,
) -> Result<(), StoreError> {
    let (from, to) = (q.range.from, q.range.to);
    let rows = rows_in(c, &q.license_id, from, to)?;
    let spans = full_spans(&rows, from, to, q.tolerance);
    let grants = grants(c, &q.license_id, &spans)?;
    each_denial(&rows, from, to, &grants, q.tolerance, |at, row, is_true| {
        sweep.denials(at, row.reason, &row.holder, 1, u64::from(is_true));
    });
    Ok(())
}

/// The license's true denials in `[from, to)`, by holder and fingerprint.
pub(crate) fn true_denials(
    conn: &Connection,
    license_id: &str,
    from: Timestamp,
    to: Timestamp,
    tolerance: Duration,
) -> Result<TrueDenialsByWho, StoreError> {
    let rows = rows_in(conn, license_id, from, to)?;
    let grants = grants(conn, license_id, &full_spans(&rows, from, to, tolerance))?;
    Ok(true_denials_by_who(&rows, from, to, &grants, tolerance))
}
