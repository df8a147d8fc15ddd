//! `GET /v1/admin/denials`: a license's recorded denials, newest first,
//! each with its reason and whether it was a true denial at the request's
//! `tolerance` (`store/denials.rs` decides). The range, the page limit,
//! the cursor and CSV work as `GET /v1/admin/sessions` does
//! ([`crate::http::query`], the CSV stream of `common.rs`).

use std::sync::Arc;

use leasehold_common::api::{DenialView, DenialsResponse};
use warp::http::StatusCode;
use warp::reply::Response;

use super::common::{CSV_PAGE, CsvFile, Result, json, store_err, stream_csv};
use super::usage::HISTORY_PAGE;
use crate::AppState;
use crate::http::csv;
use crate::http::query::{self, Query};
use crate::store::denials::{DenialCursor, DenialsQuery};

/// `GET /v1/admin/denials`: one JSON page, or the whole window as CSV.
pub async fn admin_denials(
    state: Arc<AppState>,
    accept: Option<String>,
    query: Query,
) -> Result<Response> {
    let w = query::window(&state, &query)?;
    let csv = query::wants_csv(&query, accept.as_deref())?;
    let limit = query::limit(&query, HISTORY_PAGE)?;
    let tolerance = query::tolerance(&query)?;
    let after = query::cursor(&query, DenialCursor::decode)?;
    let mut q = DenialsQuery {
        license_id: w.license.id,
        from: w.from,
        to: w.to,
        tolerance,
        after,
        limit: limit + 1,
    };
    if csv {
        // The whole range: no paging. Each page's cursor counts on from
        // the one before, as a client paging the JSON would.
        q.after = None;
        q.limit = CSV_PAGE;
        let file = CsvFile {
            header: csv::DENIALS_HEADER,
            record: csv::denial,
            what: "denials",
            disposition: "attachment; filename=\"denials.csv\"",
        };
        let reader = state.clone();
        return stream_csv(&state, file, move |page: Option<&[DenialView]>| {
            match page {
                Some(page) => q.after = DenialCursor::next(page, q.after.as_ref()),
                None => q.after = None,
            }
            let (state, q) = (reader.clone(), q.clone());
            async move { state.store.denials_page(q).await }
        })
        .await;
    }
    let asked = q.after.clone();
    let mut page = state
        .store
        .denials_page(q)
        .await
        .map_err(store_err(&state))?;
    let next = (page.len() > limit).then(|| {
        page.truncate(limit);
        DenialCursor::next(&page, asked.as_ref()).map(|c| c.encode())
    });
    Ok(json(
        StatusCode::OK,
        &DenialsResponse {
            denials: page,
            next: next.flatten(),
        },
    ))
}
