//! The webhook and alert endpoints: `GET /v1/admin/webhooks`,
//! `GET /v1/admin/webhooks/deliveries`, `POST /v1/admin/webhooks/{name}/test`
//! and `GET /v1/admin/alerts`.

use leasehold_common::api::{AlertsResponse, DeliveriesResponse, DeliveryStatus, WebhooksResponse};
use reqwest::Method;

use super::{AdminClient, ApiError, Query, encode_path};

/// The parameters of `GET /v1/admin/webhooks/deliveries`; absent ones are
/// left to the server (every webhook and status, its default page size).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DeliveriesQuery<'a> {
    pub webhook: Option<&'a str>,
    pub status: Option<DeliveryStatus>,
    /// The `next` of the page before.
    pub after: Option<&'a str>,
    pub limit: Option<u32>,
}

impl DeliveriesQuery<'_> {
    /// The query string, without the `?`.
    pub fn to_query(&self) -> String {
        let mut q = Query::default();
        if let Some(w) = self.webhook {
            q.push("webhook", w);
        }
        if let Some(s) = self.status {
            q.push("status", s.as_str());
        }
        if let Some(a) = self.after {
            q.push("after", a);
        }
        if let Some(n) = self.limit {
            q.push("limit", &n.to_string());
        }
        q.0
    }
}

/// The answer to `POST /v1/admin/webhooks/{name}/test`.
#[derive(Debug, serde::Deserialize)]
struct Queued {
    id: String,
}

impl AdminClient {
    /// `GET /v1/admin/webhooks`: every `[[webhook]]` with its delivery counts.
    pub async fn webhooks(&self) -> Result<WebhooksResponse, ApiError> {
        self.get_json("/v1/admin/webhooks").await
    }

    /// `GET /v1/admin/webhooks/deliveries`: one page, newest first.
    pub async fn deliveries(
        &self,
        q: &DeliveriesQuery<'_>,
    ) -> Result<DeliveriesResponse, ApiError> {
        let query = q.to_query();
        if query.is_empty() {
            self.get_json("/v1/admin/webhooks/deliveries").await
        } else {
            self.get_json(&format!("/v1/admin/webhooks/deliveries?{query}"))
                .await
        }
    }

    /// `GET /v1/admin/alerts`: every alert of the licenses file, firing or not.
    pub async fn alerts(&self) -> Result<AlertsResponse, ApiError> {
        self.get_json("/v1/admin/alerts").await
    }

    /// `POST /v1/admin/webhooks/{name}/test`: queue a delivery of type
    /// `test`; answers its id. An unknown webhook is the server's 404.
    pub async fn test_webhook(&self, name: &str) -> Result<String, ApiError> {
        let path = format!("/v1/admin/webhooks/{}/test", encode_path(name));
        let resp = self.send(self.request(Method::POST, &path)).await?;
        if !resp.status().is_success() {
            return Err(self.error_from(resp).await);
        }
        let bytes = resp.bytes().await.map_err(|e| self.unreachable(&e))?;
        let queued: Queued = serde_json::from_slice(&bytes).map_err(|e| ApiError::Protocol {
            server: self.base.clone(),
            detail: format!("{path}: {e}"),
        })?;
        Ok(queued.id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deliveries_query_sends_only_what_is_set() {
        assert_eq!(DeliveriesQuery::default().to_query(), "");
        let q = DeliveriesQuery {
            webhook: Some("ops team"),
            status: Some(DeliveryStatus::Failed),
            after: Some("42"),
            limit: Some(20),
        };
        assert_eq!(
            q.to_query(),
            "webhook=ops%20team&status=failed&after=42&limit=20"
        );
    }
}
