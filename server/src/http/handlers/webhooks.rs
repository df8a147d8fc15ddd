//! The admin views of alerts and webhooks (issue 32):
//! `GET /v1/admin/webhooks`, `GET /v1/admin/webhooks/deliveries`,
//! `POST /v1/admin/webhooks/{name}/test` (the admin role) and
//! `GET /v1/admin/alerts`. What is configured comes from the licenses file,
//! what happened from the store (reads, beside the writer); a webhook's
//! secret is never part of an answer.

use std::collections::HashMap;

use leasehold_common::alerts::{
    AlertView, AlertsResponse, DeliveriesResponse, DeliveryStatus, WebhookView, WebhooksResponse,
};
use leasehold_common::api::code;
use serde::Serialize;
use warp::http::StatusCode;
use warp::reply::Response;

use super::common::{Result, json, store_err};
use crate::AppState;
use crate::http::error::ApiError;
use crate::http::query::{self, PageLimit, Query, short};
use crate::store::StoreError;
use crate::store::outbox::{DeliveriesQuery, WebhookStats};

/// Deliveries per page by default, and the most one page may hold.
const DELIVERIES_PAGE: PageLimit = PageLimit {
    default: 100,
    max: 1000,
};

/// The answer of `POST /v1/admin/webhooks/{name}/test`: the queued
/// delivery's id (its `Leasehold-Delivery` header and body `id`).
#[derive(Debug, Serialize)]
struct TestQueued {
    id: String,
}

fn unknown_webhook(name: &str) -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        code::NOT_FOUND,
        format!("no webhook {name:?} is configured on this server"),
    )
}

/// `GET /v1/admin/webhooks`: every configured webhook, in file order, with
/// its deliveries.
pub async fn admin_webhooks(state: &AppState) -> Result<Response> {
    let licenses = state.licenses.current();
    let mut stats: HashMap<String, WebhookStats> = if licenses.webhooks().is_empty() {
        HashMap::new()
    } else {
        state
            .store
            .webhook_stats()
            .await
            .map_err(store_err(state))?
            .into_iter()
            .map(|s| (s.webhook.clone(), s))
            .collect()
    };
    let webhooks = licenses
        .webhooks()
        .iter()
        .map(|w| {
            let s = stats.remove(&w.name).unwrap_or_default();
            WebhookView {
                name: w.name.clone(),
                url: without_userinfo(&w.url),
                format: w.format.as_str().to_string(),
                events: w.events.clone(),
                pending: s.pending,
                delivered: s.delivered,
                failed: s.failed,
                last_success_at: s.last_success_at,
                last_error: s.last_error,
            }
        })
        .collect();
    Ok(json(StatusCode::OK, &WebhooksResponse { webhooks }))
}

/// The URL without `user:password@` (the file refuses one; this keeps an
/// answer clean whatever the file held).
fn without_userinfo(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    match rest[..end].rfind('@') {
        Some(at) => format!("{scheme}://{}", &rest[at + 1..]),
        None => url.to_string(),
    }
}

/// `GET /v1/admin/webhooks/deliveries`: newest first, `limit` per page,
/// `next` is the `after` of the next page.
pub async fn admin_deliveries(state: &AppState, query: Query) -> Result<Response> {
    let limit = query::limit(&query, DELIVERIES_PAGE)?;
    let status = query
        .get("status")
        .map(|s| {
            DeliveryStatus::parse(s).ok_or_else(|| {
                ApiError::invalid(format!(
                    "status must be pending, delivered or failed, not {:?}",
                    short(s)
                ))
            })
        })
        .transpose()?;
    let after = query
        .get("after")
        .map(|a| {
            query::seq(a).ok_or_else(|| {
                ApiError::invalid(format!(
                    "after must be the next of a previous page, not {:?}",
                    short(a)
                ))
            })
        })
        .transpose()?;
    let webhook = query.get("webhook").cloned();
    if let Some(name) = &webhook {
        known_webhook(state, name).await?;
    }
    let mut rows = state
        .store
        .deliveries_page(DeliveriesQuery {
            webhook,
            status,
            after,
            limit: limit + 1,
        })
        .await
        .map_err(store_err(state))?;
    let next = (rows.len() > limit).then(|| {
        rows.truncate(limit);
        rows.last().map(|r| r.seq.to_string())
    });
    Ok(json(
        StatusCode::OK,
        &DeliveriesResponse {
            deliveries: rows.into_iter().map(|r| r.view).collect(),
            next: next.flatten(),
        },
    ))
}

/// A webhook filter names a configured webhook, or one removed from the
/// file whose deliveries are still stored; else 404.
async fn known_webhook(state: &AppState, name: &str) -> Result<()> {
    if state.licenses.current().webhook(name).is_some() {
        return Ok(());
    }
    let stats = state
        .store
        .webhook_stats()
        .await
        .map_err(store_err(state))?;
    if stats.iter().any(|s| s.webhook == name) {
        Ok(())
    } else {
        Err(unknown_webhook(name))
    }
}

/// `POST /v1/admin/webhooks/{name}/test`: queue an ordinary delivery of
/// type `test`; 202 with its id.
pub async fn admin_webhook_test(state: &AppState, name: String) -> Result<Response> {
    if state.licenses.current().webhook(&name).is_none() {
        return Err(unknown_webhook(&name));
    }
    match state.store.queue_test_delivery(name.clone()).await {
        Ok(id) => {
            tracing::info!("webhook {name}: test delivery {id} queued");
            Ok(json(StatusCode::ACCEPTED, &TestQueued { id }))
        }
        // The file changed between the check and the writer.
        Err(StoreError::UnknownWebhook(_)) => Err(unknown_webhook(&name)),
        Err(e) => Err(store_err(state)(e)),
    }
}

/// `GET /v1/admin/alerts`: every configured alert, in file order, with its
/// state.
pub async fn admin_alerts(state: &AppState) -> Result<Response> {
    let licenses = state.licenses.current();
    let mut states: HashMap<String, _> = if licenses.alerts().next().is_none() {
        HashMap::new()
    } else {
        state
            .store
            .alert_states()
            .await
            .map_err(store_err(state))?
            .into_iter()
            .map(|s| (s.alert.clone(), s))
            .collect()
    };
    let alerts = licenses
        .alerts()
        .map(|(license, alert)| {
            let s = states.remove(&alert.name);
            let firing_since = s.as_ref().and_then(|s| s.firing_since);
            let holding_since = s.as_ref().and_then(|s| s.holding_since);
            AlertView {
                license_id: license.id.clone(),
                alert: alert.settings(),
                firing: firing_since.is_some(),
                since: firing_since.or(holding_since),
            }
        })
        .collect();
    Ok(json(StatusCode::OK, &AlertsResponse { alerts }))
}

#[cfg(test)]
mod tests {
    use super::without_userinfo;

    #[test]
    fn userinfo_is_dropped_from_a_url() {
        assert_eq!(
            without_userinfo("https://u:p@hooks.example.com/x?a=b@c"),
            "https://hooks.example.com/x?a=b@c"
        );
        assert_eq!(
            without_userinfo("http://hooks.example.com:8080/a@b"),
            "http://hooks.example.com:8080/a@b"
        );
    }
}
