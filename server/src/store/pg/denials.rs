//! Recorded denials on PostgreSQL: the same questions as SQLite's
//! `sqlite/denials.rs`, in the same words (`store/denials.rs` says how rows
//! pack them and what makes one true). Every holder's grants come in one
//! statement, so a page or a sweep is a fixed number of round trips.

use std::collections::HashMap;
use std::time::Duration;

use futures_util::{TryStreamExt, pin_mut};
use leasehold_common::Timestamp;
use leasehold_common::api::{DenialReason, DenialView};
use tokio_postgres::GenericClient;
use tokio_postgres::Row;
use tokio_postgres::types::ToSql;

use super::pool::PgPool;
use crate::store::StoreError;
use crate::store::denials::{
    DenialRow, DenialsQuery, Page, TrueDenialsByWho, each_denial, full_spans, grant_spans,
    mark_true, second_of, true_denials_by_who,
};
use crate::store::history::UsageQuery;
use crate::usage::Sweep;

const ROW_COLUMNS: &str = "license_id, second_ms, holder, fingerprint, reason, offsets";

fn denial_row(r: &Row) -> Result<DenialRow, StoreError> {
    let reason: String = r.get(4);
    Ok(DenialRow {
        license_id: r.get(0),
        second: Timestamp::from_millis(r.get(1)),
        holder: r.get(2),
        fingerprint: r.get(3),
        reason: DenialReason::parse(&reason).ok_or(StoreError::UnknownDenialReason(reason))?,
        offsets: r.get(5),
    })
}

/// The rows that may hold a denial of the license in `[from, to)`.
async fn rows_in(
    client: &impl GenericClient,
    license_id: &str,
    from: Timestamp,
    to: Timestamp,
) -> Result<Vec<DenialRow>, StoreError> {
    let sql = format!(
        "SELECT {ROW_COLUMNS} FROM denials
         WHERE license_id = $1 AND second_ms >= $2 AND second_ms < $3"
    );
    let (lo, hi) = (second_of(from).as_millis(), to.as_millis());
    client
        .query(&sql, &[&license_id, &lo, &hi])
        .await?
        .iter()
        .map(denial_row)
        .collect()
}

/// Each holder's grants of the license (new seats: sessions that started)
/// in its span `(from, to]`, sorted; one statement for every holder.
async fn grants(
    client: &impl GenericClient,
    license_id: &str,
    spans: &HashMap<String, (Timestamp, Timestamp)>,
) -> Result<HashMap<String, Vec<Timestamp>>, StoreError> {
    if spans.is_empty() {
        return Ok(HashMap::new());
    }
    let holders: Vec<&str> = spans.keys().map(String::as_str).collect();
    let los: Vec<i64> = spans.values().map(|(lo, _)| lo.as_millis()).collect();
    let his: Vec<i64> = spans.values().map(|(_, hi)| hi.as_millis()).collect();
    let rows = client
        .query(
            "SELECT w.holder, s.started_at
             FROM unnest($2::text[], $3::bigint[], $4::bigint[]) AS w(holder, lo, hi)
             JOIN sessions s ON s.license_id = $1 AND s.holder = w.holder
                 AND s.started_at > w.lo AND s.started_at <= w.hi
             UNION ALL
             SELECT w.holder, l.checked_out_at
             FROM unnest($2::text[], $3::bigint[], $4::bigint[]) AS w(holder, lo, hi)
             JOIN leases l ON l.holder = w.holder AND l.license_id = $1
                 AND l.checked_out_at > w.lo AND l.checked_out_at <= w.hi",
            &[&license_id, &holders, &los, &his],
        )
        .await?;
    let mut all: HashMap<String, Vec<Timestamp>> = HashMap::with_capacity(spans.len());
    for r in &rows {
        all.entry(r.get(0))
            .or_default()
            .push(Timestamp::from_millis(r.get(1)));
    }
    for times in all.values_mut() {
        times.sort();
    }
    Ok(all)
}

/// One page of the license's denials, newest first: rows streamed by
/// second, newest first, until a whole second fills the page.
pub(crate) async fn denials_page(
    reads: &PgPool,
    q: &DenialsQuery,
) -> Result<Vec<DenialView>, StoreError> {
    if q.limit == 0 || q.from >= q.to {
        return Ok(Vec::new());
    }
    let client = reads.client().await?;
    let mut page = Page::new(q);
    let (lo, hi) = (
        second_of(q.from).as_millis(),
        page.newest_second().as_millis(),
    );
    let params: [&(dyn ToSql + Sync); 3] = [&q.license_id, &lo, &hi];
    let sql = format!(
        "SELECT {ROW_COLUMNS} FROM denials
         WHERE license_id = $1 AND second_ms >= $2 AND second_ms <= $3
         ORDER BY second_ms DESC"
    );
    let rows = client.query_raw(&sql, params).await?;
    pin_mut!(rows);
    while let Some(r) = rows.try_next().await? {
        if !page.push(&denial_row(&r)?) {
            break;
        }
    }
    let mut views = page.finish();
    let grants = grants(&**client, &q.license_id, &grant_spans(&views, q.tolerance)).await?;
    mark_true(&mut views, &grants, q.tolerance);
    Ok(views)
}

/// The license's denials in the usage range, by reason and truth, into
/// the sweep (in the usage read's snapshot).
pub(super) async fn sweep_denials(
    tx: &impl GenericClient,
    q: &UsageQuery,
    sweep: &mut Sweep,
) -> Result<(), StoreError> {
    let (from, to) = (q.range.from, q.range.to);
    let rows = rows_in(tx, &q.license_id, from, to).await?;
    let spans = full_spans(&rows, from, to, q.tolerance);
    let grants = grants(tx, &q.license_id, &spans).await?;
    each_denial(&rows, from, to, &grants, q.tolerance, |at, row, is_true| {
        sweep.denials(at, row.reason, &row.holder, 1, u64::from(is_true));
    });
    Ok(())
}

/// The license's true denials in `[from, to)`, by holder and fingerprint.
pub(crate) async fn true_denials(
    client: &impl GenericClient,
    license_id: &str,
    from: Timestamp,
    to: Timestamp,
    tolerance: Duration,
) -> Result<TrueDenialsByWho, StoreError> {
    let rows = rows_in(client, license_id, from, to).await?;
    let grants = grants(client, license_id, &full_spans(&rows, from, to, tolerance)).await?;
    Ok(true_denials_by_who(&rows, from, to, &grants, tolerance))
}
