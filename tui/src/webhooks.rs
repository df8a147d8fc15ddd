//! `leasehold webhooks`: the webhooks of the licenses file with their
//! delivery counts, and the alerts firing now; `webhooks deliveries` lists
//! deliveries (newest first), `webhooks test NAME` queues a test delivery.
//!
//! The formatting functions are pure, so the tests check the tables
//! without a server. Every server string is passed through
//! [`sanitize_for_terminal`] in the tables; the JSON keeps the data exact
//! but escapes what a terminal would act on ([`json_for_terminal`]).

use std::io::Write;

use clap::{Args, Subcommand};
use leasehold_common::api::{
    AlertView, AlertsResponse, DeliveriesResponse, DeliveryStatus, DeliveryView, WebhooksResponse,
};
use leasehold_common::text::sanitize_for_terminal;

use crate::api::{AdminClient, ApiError, DeliveriesQuery};
use crate::format::{ellipsize, json_for_terminal, table};

/// The most the server is asked for in one page of deliveries.
const PAGE: u32 = 500;
/// A last error longer than this ends in `…` in the tables (`--json` has
/// it whole).
const ERROR_CELLS: usize = 80;

#[derive(Debug, Args)]
pub struct WebhooksArgs {
    #[command(subcommand)]
    pub action: Option<WebhooksAction>,
    /// Print JSON instead of a table: the server's `{"webhooks": [...]}`
    /// with the alerts of `GET /v1/admin/alerts` added as `"alerts"`.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Subcommand)]
pub enum WebhooksAction {
    /// Deliveries, newest first: status, attempts, the last error.
    Deliveries {
        /// Only this webhook's.
        #[arg(long, value_name = "NAME")]
        webhook: Option<String>,
        /// Only those in this state: pending, delivered or failed.
        #[arg(long, value_name = "STATUS", value_parser = parse_status)]
        status: Option<DeliveryStatus>,
        /// At most this many (the newest).
        #[arg(long, value_name = "N", default_value_t = 50,
              value_parser = clap::value_parser!(u32).range(1..))]
        limit: u32,
        /// Only those older than this cursor (the `next` of a listing).
        #[arg(long, value_name = "CURSOR")]
        after: Option<String>,
        /// Print the server's JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Queue a delivery of type `test` to a webhook (retried and counted
    /// like any other) and print its id.
    Test {
        /// The webhook's name in the licenses file.
        name: String,
        /// Print {"id": ...}.
        #[arg(long)]
        json: bool,
    },
}

fn parse_status(s: &str) -> Result<DeliveryStatus, String> {
    DeliveryStatus::parse(s).ok_or_else(|| "expected pending, delivered or failed".to_string())
}

pub async fn run(
    args: WebhooksArgs,
    client: &AdminClient,
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    match args.action {
        None => {
            let (webhooks, alerts) = tokio::join!(client.webhooks(), client.alerts());
            let webhooks = webhooks?;
            let alerts = alerts?;
            if args.json {
                writeln!(out, "{}", webhooks_json(&webhooks, &alerts)?)?;
            } else {
                write!(out, "{}", format_webhooks(&webhooks))?;
                write!(out, "\n{}", format_alerts(&alerts))?;
            }
        }
        Some(WebhooksAction::Deliveries {
            webhook,
            status,
            limit,
            after,
            json,
        }) => {
            let q = DeliveriesQuery {
                webhook: webhook.as_deref(),
                status,
                after: after.as_deref(),
                limit: Some(limit),
            };
            let resp = newest_deliveries(client, q).await?;
            if json || args.json {
                writeln!(out, "{}", to_json(&resp)?)?;
            } else {
                write!(out, "{}", format_deliveries(&resp))?;
            }
        }
        Some(WebhooksAction::Test { name, json }) => {
            let id = client.test_webhook(&name).await?;
            tracing::info!(webhook = name, id, "test delivery queued");
            if json || args.json {
                let v = serde_json::json!({ "id": id });
                writeln!(out, "{}", json_for_terminal(&v.to_string()))?;
            } else {
                writeln!(
                    out,
                    "queued test delivery {} to webhook {}",
                    clean(&id),
                    clean(&name)
                )?;
            }
        }
    }
    out.flush()?;
    Ok(())
}

/// Up to `q.limit` deliveries, newest first, over as many pages as that
/// takes; `next` is where the listing would go on.
async fn newest_deliveries(
    client: &AdminClient,
    q: DeliveriesQuery<'_>,
) -> Result<DeliveriesResponse, ApiError> {
    let want = q.limit.unwrap_or(PAGE) as usize;
    let mut all = DeliveriesResponse {
        deliveries: Vec::new(),
        next: q.after.map(String::from),
    };
    loop {
        let left = want - all.deliveries.len();
        let page = client
            .deliveries(&DeliveriesQuery {
                after: all.next.as_deref(),
                limit: Some(u32::try_from(left).unwrap_or(PAGE).min(PAGE)),
                ..q
            })
            .await?;
        let got = page.deliveries.len();
        all.deliveries
            .extend(page.deliveries.into_iter().take(left));
        all.next = page.next;
        if got == 0 || all.deliveries.len() >= want || all.next.is_none() {
            return Ok(all);
        }
    }
}

fn to_json<T: serde::Serialize>(v: &T) -> anyhow::Result<String> {
    Ok(json_for_terminal(&serde_json::to_string_pretty(v)?))
}

/// `{"webhooks": [...], "alerts": [...]}`: the two answers in one object.
pub fn webhooks_json(w: &WebhooksResponse, a: &AlertsResponse) -> anyhow::Result<String> {
    let mut v = serde_json::to_value(w)?;
    v["alerts"] = serde_json::to_value(&a.alerts)?;
    to_json(&v)
}

fn clean(s: &str) -> String {
    sanitize_for_terminal(s).into_owned()
}

fn or_dash(s: Option<String>) -> String {
    s.unwrap_or_else(|| "-".into())
}

fn error_cell(e: Option<&str>) -> String {
    or_dash(e.map(|e| ellipsize(&clean(e), ERROR_CELLS).into_owned()))
}

/// The webhooks as a table.
pub fn format_webhooks(resp: &WebhooksResponse) -> String {
    if resp.webhooks.is_empty() {
        return "no webhooks configured\n".into();
    }
    let rows: Vec<Vec<String>> = resp
        .webhooks
        .iter()
        .map(|w| {
            vec![
                clean(&w.name),
                clean(&w.format),
                clean(&w.url),
                w.pending.to_string(),
                w.delivered.to_string(),
                w.failed.to_string(),
                or_dash(w.last_success_at.map(|t| t.to_string())),
                error_cell(w.last_error.as_deref()),
            ]
        })
        .collect();
    table(
        &[
            "NAME",
            "FORMAT",
            "URL",
            "PENDING",
            "DELIVERED",
            "FAILED",
            "LAST SUCCESS",
            "LAST ERROR",
        ],
        &rows,
    )
}

/// An alert's condition as the licenses file says it: `full for 5m`,
/// `usage ≥ 90% for 10m`, `3 denials within 15m`.
pub fn condition(a: &AlertView) -> String {
    let s = &a.alert;
    let for_ = s
        .for_
        .as_deref()
        .map(|f| format!(" for {}", clean(f)))
        .unwrap_or_default();
    match s.when.as_str() {
        "usage" => format!("usage ≥ {}%{for_}", s.percent.unwrap_or(0)),
        "denials" => format!(
            "{} denials within {}",
            s.count.unwrap_or(0),
            s.within.as_deref().map(clean).unwrap_or_default()
        ),
        other => format!("{}{for_}", clean(other)),
    }
}

/// The alerts firing now (those of every license), or a line saying none
/// is, with how many are configured.
pub fn format_alerts(resp: &AlertsResponse) -> String {
    let firing: Vec<&AlertView> = resp.alerts.iter().filter(|a| a.firing).collect();
    if firing.is_empty() {
        let n = resp.alerts.len();
        return format!("no alerts firing ({n} configured)\n",);
    }
    let rows: Vec<Vec<String>> = firing
        .iter()
        .map(|a| {
            vec![
                clean(&a.license_id),
                clean(&a.alert.name),
                condition(a),
                or_dash(a.since.map(|t| t.to_string())),
            ]
        })
        .collect();
    let mut out = format!(
        "alerts firing ({} of {}):\n",
        firing.len(),
        resp.alerts.len()
    );
    out.push_str(&table(
        &["LICENSE", "ALERT", "CONDITION", "FIRING SINCE"],
        &rows,
    ));
    out
}

/// The deliveries as a table; a last line says how to see older ones.
pub fn format_deliveries(resp: &DeliveriesResponse) -> String {
    if resp.deliveries.is_empty() {
        return "no deliveries\n".into();
    }
    let rows: Vec<Vec<String>> = resp.deliveries.iter().map(delivery_row).collect();
    let mut out = table(
        &[
            "ID",
            "WEBHOOK",
            "TYPE",
            "LICENSE",
            "STATUS",
            "ATTEMPTS",
            "CREATED",
            "LAST ATTEMPT",
            "NEXT ATTEMPT",
            "LAST ERROR",
        ],
        &rows,
    );
    if let Some(next) = &resp.next {
        out.push_str(&format!("older: --after {}\n", clean(next)));
    }
    out
}

fn delivery_row(d: &DeliveryView) -> Vec<String> {
    let next = match d.status {
        DeliveryStatus::Pending => d.next_attempt_at.map(|t| t.to_string()),
        _ => None,
    };
    vec![
        clean(&d.id),
        clean(&d.webhook),
        d.kind.as_str().to_string(),
        or_dash(d.license_id.as_deref().map(clean)),
        d.status.as_str().to_string(),
        d.attempts.to_string(),
        d.created_at.to_string(),
        or_dash(d.last_attempt_at.map(|t| t.to_string())),
        or_dash(next),
        error_cell(d.last_error.as_deref()),
    ]
}

#[cfg(test)]
#[path = "webhooks_tests.rs"]
mod tests;
