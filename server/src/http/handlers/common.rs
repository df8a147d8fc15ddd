//! What the handlers share: JSON replies and request bodies, store errors
//! (counted), freshly signed leases, the license pools and CSV downloads
//! streamed a store page at a time. A leaf: it uses no other handler
//! module. (The query parameters they share are parsed in
//! [`crate::http::query`].)

use std::collections::HashMap;
use std::future::Future;

use bytes::Bytes;
use leasehold_common::api::Lease;
use leasehold_common::token::LeaseClaims;
use leasehold_common::{LicenseConfig, Timestamp};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use warp::http::{HeaderValue, StatusCode, header};
use warp::reply::{Reply, Response};

use crate::AppState;
use crate::http::error::ApiError;
use crate::metrics::Metrics;
use crate::store::{self, LeaseRow, PoolCounts, SeatMode};

pub type Result<T> = std::result::Result<T, ApiError>;

/// The lease as the client sees it, with a fresh signature. A license
/// with a vendor adds whether it is in grace and when its entitled seats
/// next drop, as of the lease's issue.
pub(super) fn signed(state: &AppState, row: LeaseRow, overage: bool) -> Lease {
    let (grace, entitlement_ends_at) = entitlement_terms(state, &row);
    let mut lease = Lease {
        grace,
        entitlement_ends_at,
        overage,
        borrowed: row.mode == SeatMode::Borrow,
        license_id: row.license_id,
        seat_id: row.seat_id,
        holder: row.holder,
        fingerprint: row.fingerprint,
        issued_at: row.issued_at,
        expires_at: row.expires_at,
        token: String::new(),
    };
    lease.token = state.signer.sign(&LeaseClaims::for_lease(&lease));
    lease
}

/// `(grace, entitlement_ends_at)` of a lease: `(false, None)` for a
/// license without a vendor.
fn entitlement_terms(state: &AppState, row: &LeaseRow) -> (bool, Option<Option<Timestamp>>) {
    let licenses = state.licenses.current();
    let Some(lic) = licenses.get(&row.license_id) else {
        return (false, None);
    };
    let Some(vendor) = lic.vendor.as_deref() else {
        return (false, None);
    };
    let at = row.issued_at.as_millis();
    let ledger = licenses.entitled().ledger();
    let grant = ledger.grant(vendor, &lic.id, at);
    let drop = ledger.next_drop(vendor, &lic.id, at);
    (grant.in_grace, Some(drop.map(Timestamp::from_millis)))
}

pub(super) fn json(status: StatusCode, body: &impl serde::Serialize) -> Response {
    warp::reply::with_status(warp::reply::json(body), status).into_response()
}

pub(super) fn parse_json<T: serde::de::DeserializeOwned>(body: &Bytes, what: &str) -> Result<T> {
    // serde would also read a struct from a JSON array (`["bob"]`); the
    // contract is an object.
    if body.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'{') {
        return Err(ApiError::invalid(format!(
            "request body must be a JSON object ({what})"
        )));
    }
    serde_json::from_slice(body)
        .map_err(|e| ApiError::invalid(format!("request body is not a valid {what}: {e}")))
}

pub(super) fn store_err(state: &AppState) -> impl Fn(store::StoreError) -> ApiError + '_ {
    |e| {
        Metrics::inc(&state.metrics.store_errors);
        ApiError::store(e)
    }
}

/// One configured license as it decides now (a license with a vendor
/// narrowed to what its entitlements grant), what counts against it (from
/// the writer's index) and how many `?wait=` checkouts stand in its line.
pub(super) struct Pool {
    pub license: LicenseConfig,
    pub counts: PoolCounts,
    pub waiting: u32,
    /// A license with a vendor: what its entitlements grant now.
    pub entitlement: Option<PoolEntitlement>,
}

/// What a license's vendor's entitlements grant it now.
pub(super) struct PoolEntitlement {
    pub vendor: String,
    pub customer: Option<String>,
    pub seats: u32,
    pub ends_at: Option<Timestamp>,
    pub in_grace: bool,
    pub versions: Option<String>,
}

pub(super) async fn pools(state: &AppState) -> std::result::Result<Vec<Pool>, store::StoreError> {
    let mut counts: HashMap<String, PoolCounts> =
        state.store.live_counts().await?.into_iter().collect();
    let now = state.store.decision_time(state.clock.now());
    let licenses = state.licenses.current();
    let mut pools = Vec::new();
    for l in licenses.iter() {
        let waiting = state.lines.waiting(&l.id).await?;
        let effective = store::rules::effective(&licenses, l, now);
        let entitlement = effective.grant.as_ref().map(|grant| {
            let vendor = l.vendor.clone().unwrap_or_default();
            let ledger = licenses.entitled().ledger();
            PoolEntitlement {
                customer: ledger.customer(&vendor, &l.id, now.as_millis()),
                ends_at: ledger
                    .next_drop(&vendor, &l.id, now.as_millis())
                    .map(Timestamp::from_millis),
                vendor,
                seats: grant.seats,
                in_grace: grant.in_grace,
                versions: grant.versions.as_ref().map(ToString::to_string),
            }
        });
        pools.push(Pool {
            license: effective.lic.into_owned(),
            counts: counts.remove(&l.id).unwrap_or_default(),
            waiting: u32::try_from(waiting).unwrap_or(u32::MAX),
            entitlement,
        });
    }
    Ok(pools)
}

/// Rows per store read while streaming CSV: memory stays at one page
/// (and the channel's two) however long the range.
pub(super) const CSV_PAGE: usize = 1000;

/// One CSV download: its header row, the record of one row, what it is
/// (for the log) and the `Content-Disposition` that names its file.
pub(super) struct CsvFile<T> {
    pub header: &'static str,
    pub record: fn(&mut String, &T),
    pub what: &'static str,
    pub disposition: &'static str,
}

/// Stream a range as CSV, one store page ([`CSV_PAGE`] rows) at a time:
/// `read` answers the page after the one it is given (`None`: the first). The first
/// page is read before answering, so a store that cannot answer is a 503
/// rather than a 200 cut short; a later failure ends the body unfinished
/// (the client sees a broken transfer, never a short file that looks whole).
pub(super) async fn stream_csv<T, F, Fut>(
    state: &AppState,
    file: CsvFile<T>,
    mut read: F,
) -> Result<Response>
where
    T: Send + 'static,
    F: FnMut(Option<&[T]>) -> Fut + Send + 'static,
    Fut: Future<Output = std::result::Result<Vec<T>, store::StoreError>> + Send,
{
    let first = read(None).await.map_err(store_err(state))?;
    let (tx, rx) = mpsc::channel::<std::io::Result<Bytes>>(2);
    tokio::spawn(async move {
        let mut body = String::from(file.header);
        let mut page = first;
        loop {
            for row in &page {
                (file.record)(&mut body, row);
            }
            if tx.send(Ok(Bytes::from(body))).await.is_err() {
                return; // The client hung up.
            }
            body = String::new();
            if page.len() < CSV_PAGE {
                return;
            }
            page = match read(Some(&page)).await {
                Ok(page) => page,
                Err(e) => {
                    tracing::warn!("{} CSV: cannot read the next page: {e}", file.what);
                    let _ = tx.send(Err(std::io::Error::other(e.to_string()))).await;
                    return;
                }
            };
        }
    });
    let mut resp = warp::reply::stream(ReceiverStream::new(rx)).into_response();
    let headers = resp.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/csv; charset=utf-8"),
    );
    headers.insert(
        header::CONTENT_DISPOSITION,
        HeaderValue::from_static(file.disposition),
    );
    Ok(resp)
}
