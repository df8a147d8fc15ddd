//! What the report asks the server: the licenses (and the server's `now`),
//! each license's usage summary, and its sessions page by page for the top
//! holders; with `--what-if`, each license's replay.

use leasehold_common::Timestamp;
use std::time::Duration;

use super::holders::{HolderHours, HolderTally, TOP_HOLDERS};
use super::range::Range;
use super::verdict::judge;
use super::{LicenseReport, ReportArgs, clean};
use crate::api::{
    AdminClient, ApiError, SESSIONS_PAGE_MAX, SessionsQuery, UsageQuery, WhatIfQuery,
};
use leasehold_common::api::{WhatIfResponse, code};

/// The licenses to report on (`only`, else every one the server lists) and
/// the server's clock, which `7d` counts back from.
pub async fn licenses(
    client: &AdminClient,
    only: Option<&str>,
) -> Result<(Vec<String>, Timestamp), ApiError> {
    let resp = client.licenses().await?;
    let ids = match only {
        Some(id) => vec![id.to_string()],
        None => resp.licenses.into_iter().map(|l| l.id).collect(),
    };
    Ok((ids, resp.now))
}

/// One license's usage, verdict and top holders over `range`.
pub async fn license_report(
    client: &AdminClient,
    license: &str,
    range: Range,
    step: Option<Duration>,
    tolerance: Option<Duration>,
) -> Result<LicenseReport, ApiError> {
    let query = UsageQuery {
        license,
        from: Some(range.from),
        to: Some(range.to),
        step,
    };
    let usage = client.usage_within(&query, tolerance).await?;
    // Judge the range as the server echoed it (over the part its history
    // covers).
    let judgement = judge(&usage.summary, usage.from, usage.to, tolerance);
    let top_holders = top_holders(client, license, range).await?;
    Ok(LicenseReport {
        usage,
        judgement,
        top_holders,
    })
}

/// Every session of the range, page by page (the largest pages the server
/// allows), summed per holder.
async fn top_holders(
    client: &AdminClient,
    license: &str,
    range: Range,
) -> Result<Vec<HolderHours>, ApiError> {
    let mut tally = HolderTally::new(range.from, range.to);
    let mut after: Option<String> = None;
    loop {
        let page = client
            .sessions_page(&SessionsQuery {
                license: Some(license),
                from: Some(range.from),
                to: Some(range.to),
                limit: Some(SESSIONS_PAGE_MAX),
                after: after.as_deref(),
                ..SessionsQuery::default()
            })
            .await?;
        for s in &page.sessions {
            tally.add(s);
        }
        match page.next {
            // A cursor that does not move would page forever.
            Some(next) if after.as_deref() == Some(next.as_str()) => {
                return Err(ApiError::Protocol {
                    server: client.base().to_string(),
                    detail: "sessions: the next cursor repeats the last one".into(),
                });
            }
            Some(next) if !page.sessions.is_empty() => after = Some(next),
            _ => break,
        }
    }
    Ok(tally.top(TOP_HOLDERS))
}

/// One license's replay over `range`, as `args` asks for it. A server
/// older than the endpoint answers the route's 404: said as such.
pub async fn what_if(
    client: &AdminClient,
    license: &str,
    range: Range,
    args: &ReportArgs,
) -> anyhow::Result<WhatIfResponse> {
    let query = WhatIfQuery {
        license,
        from: Some(range.from),
        to: Some(range.to),
        seats: args.seats,
        idle_timeout: args.idle_timeout,
        tolerance: args.tolerance,
        target: args.target,
    };
    match client.what_if(&query).await {
        Ok(answer) => Ok(answer),
        Err(ApiError::Server {
            status: 404, code, ..
        }) if code == code::NOT_FOUND => Err(anyhow::anyhow!(
            "the server at {} has no what-if replay (GET /v1/admin/usage/what-if answered 404): \
             it is older than this leasehold",
            client.base()
        )),
        Err(e) => Err(anyhow::Error::new(e).context(format!("the what-if of {}", clean(license)))),
    }
}
