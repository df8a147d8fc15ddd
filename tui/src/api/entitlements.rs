//! `GET /v1/admin/entitlements`: the server's `kid` and every file of its
//! entitlements directory; `GET /v1/admin/usage/attestation`: a license's
//! usage summary signed by the server (both with an admin or viewer token).

use std::time::Duration;

use leasehold_common::api::EntitlementsResponse;
use leasehold_common::policy::format_duration;
use reqwest::Method;

use super::{AdminClient, ApiError, Query, UsageQuery};

impl AdminClient {
    /// `GET /v1/admin/entitlements`.
    pub async fn entitlements(&self) -> Result<EntitlementsResponse, ApiError> {
        self.get_json("/v1/admin/entitlements").await
    }

    /// `GET /v1/admin/usage/attestation`: the compact JWS the server
    /// answers (`application/jose`), unchecked; `q.step` is not sent.
    pub async fn usage_attestation(
        &self,
        q: &UsageQuery<'_>,
        tolerance: Option<Duration>,
    ) -> Result<String, ApiError> {
        let mut query = Query(UsageQuery { step: None, ..*q }.to_query());
        if let Some(t) = tolerance {
            query.push("tolerance", &format_duration(t));
        }
        let path = format!("/v1/admin/usage/attestation?{}", query.0);
        let resp = self.send(self.request(Method::GET, &path)).await?;
        if !resp.status().is_success() {
            return Err(self.error_from(resp).await);
        }
        let text = resp.text().await.map_err(|e| self.unreachable(&e))?;
        Ok(text.trim().to_string())
    }
}
