//! `GET /v1/admin/entitlements`: the server's `kid` and every file of its
//! entitlements directory (admin or viewer token).

use leasehold_common::api::EntitlementsResponse;

use super::{AdminClient, ApiError};

impl AdminClient {
    /// `GET /v1/admin/entitlements`.
    pub async fn entitlements(&self) -> Result<EntitlementsResponse, ApiError> {
        self.get_json("/v1/admin/entitlements").await
    }
}
