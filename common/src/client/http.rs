//! A typed client for the client endpoints of the HTTP contract (DESIGN.md,
//! `assets/openapi.yaml`): checkout, heartbeat, release and the JWKS.
//!
//! It does one request per call and no retries; what to retry is the
//! caller's decision, made easy by [`ClientError`], which sorts every outcome
//! into what an application can do about it. It does not verify tokens either:
//! [`super::LeaseKeeper`] does, against the JWKS from [`Client::jwks`].

use std::time::Duration;

use reqwest::StatusCode;
use reqwest::header::{HeaderMap, RETRY_AFTER};

use crate::api::{CheckoutRequest, ErrorBody, Lease, code};
use crate::token::Jwks;

/// Why a call did not produce what was asked for.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClientError {
    /// 401: the license key is missing or wrong. Retrying will not help.
    #[error("unauthorized: {0}")]
    Unauthorized(String),
    /// 404 `unknown_license`: the server has no such license.
    #[error("unknown license: {0}")]
    UnknownLicense(String),
    /// 409 `no_seats_available`: the pool is full. `retry_after` is the
    /// server's estimate of when the earliest live lease could lapse.
    #[error("no seats available ({live:?} of {seats:?} live); retry after {retry_after:?}")]
    NoSeats {
        retry_after: Option<Duration>,
        seats: Option<u32>,
        live: Option<u32>,
    },
    /// 403 `blocked`: an admin revoked this holder's seat and blocked
    /// re-checkout for a while.
    #[error("blocked: {message}")]
    Blocked {
        retry_after: Option<Duration>,
        message: String,
    },
    /// 410 `seat_lost`: released, revoked, reaped or lapsed. Check out again.
    #[error("seat lost: the server no longer holds this seat")]
    SeatLost,
    /// The request may not have reached the server or the server could not
    /// answer now: timeout, connection refused or reset, 5xx, 429. A lease
    /// already held stays valid until its signed expiry.
    #[error("transient failure: {0}")]
    Transient(String),
    /// Another 4xx (e.g. 400 `invalid_request`): this request is wrong and
    /// sending it again will not help.
    #[error("request rejected: {status} {code}: {message}")]
    Rejected {
        status: u16,
        code: String,
        message: String,
    },
    /// The response breaks the contract: unparseable body, or a lease whose
    /// token does not verify against the JWKS or does not match its body.
    #[error("invalid response: {0}")]
    Invalid(String),
}

impl ClientError {
    /// Worth sending again later as it is (the outcome may differ).
    pub fn is_transient(&self) -> bool {
        matches!(self, ClientError::Transient(_) | ClientError::Invalid(_))
    }
}

/// A client for one license on one server.
#[derive(Debug, Clone)]
pub struct Client {
    http: reqwest::Client,
    base: String,
    license: String,
    key: String,
}

impl Client {
    /// `server` is the base URL, e.g. `http://127.0.0.1:7400`.
    pub fn new(server: &str, license: &str, key: &str) -> Result<Self, ClientError> {
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(5))
            .build()
            .map_err(|e| ClientError::Invalid(format!("cannot build HTTP client: {e}")))?;
        Ok(Client {
            http,
            base: server.trim_end_matches('/').to_string(),
            license: license.to_string(),
            key: key.to_string(),
        })
    }

    pub fn server(&self) -> &str {
        &self.base
    }

    pub fn license(&self) -> &str {
        &self.license
    }

    fn seats_url(&self) -> String {
        format!("{}/v1/licenses/{}/seats", self.base, self.license)
    }

    /// `POST /v1/licenses/{license}/seats`. Send the same `idempotency_key`
    /// when retrying the same attempt after a transient error, so a checkout
    /// that did reach the server returns the same seat instead of a second.
    pub async fn checkout(
        &self,
        request: &CheckoutRequest,
        idempotency_key: Option<&str>,
        timeout: Duration,
    ) -> Result<Lease, ClientError> {
        let mut req = self
            .http
            .post(self.seats_url())
            .bearer_auth(&self.key)
            .timeout(timeout)
            .json(request);
        if let Some(k) = idempotency_key {
            req = req.header("idempotency-key", k);
        }
        let resp = req.send().await.map_err(transport)?;
        lease_or_error(resp, StatusCode::CREATED).await
    }

    /// `POST /v1/licenses/{license}/seats/{seat_id}/heartbeat`.
    pub async fn heartbeat(&self, seat_id: &str, timeout: Duration) -> Result<Lease, ClientError> {
        let resp = self
            .http
            .post(format!("{}/{seat_id}/heartbeat", self.seats_url()))
            .bearer_auth(&self.key)
            .timeout(timeout)
            .send()
            .await
            .map_err(transport)?;
        lease_or_error(resp, StatusCode::OK).await
    }

    /// `DELETE /v1/licenses/{license}/seats/{seat_id}` (idempotent).
    pub async fn release(&self, seat_id: &str, timeout: Duration) -> Result<(), ClientError> {
        let resp = self
            .http
            .delete(format!("{}/{seat_id}", self.seats_url()))
            .bearer_auth(&self.key)
            .timeout(timeout)
            .send()
            .await
            .map_err(transport)?;
        if resp.status().is_success() {
            Ok(())
        } else {
            Err(error_from(resp).await)
        }
    }

    /// `GET /.well-known/jwks.json`.
    pub async fn jwks(&self, timeout: Duration) -> Result<Jwks, ClientError> {
        let resp = self
            .http
            .get(format!("{}/.well-known/jwks.json", self.base))
            .timeout(timeout)
            .send()
            .await
            .map_err(transport)?;
        if resp.status() != StatusCode::OK {
            return Err(error_from(resp).await);
        }
        let bytes = resp.bytes().await.map_err(transport)?;
        serde_json::from_slice(&bytes).map_err(|e| ClientError::Invalid(format!("JWKS: {e}")))
    }
}

fn transport(e: reqwest::Error) -> ClientError {
    // Timeouts, refused or reset connections and bodies cut short all mean
    // "we do not know what the server did": transient.
    ClientError::Transient(e.to_string())
}

async fn lease_or_error(
    resp: reqwest::Response,
    expected: StatusCode,
) -> Result<Lease, ClientError> {
    if resp.status() != expected {
        return Err(error_from(resp).await);
    }
    let bytes = resp.bytes().await.map_err(transport)?;
    serde_json::from_slice(&bytes).map_err(|e| ClientError::Invalid(format!("lease body: {e}")))
}

async fn error_from(resp: reqwest::Response) -> ClientError {
    let status = resp.status();
    let retry_after = retry_after(resp.headers());
    let body: Option<ErrorBody> = match resp.bytes().await {
        Ok(b) => serde_json::from_slice(&b).ok(),
        Err(e) if status.is_success() => return transport(e),
        Err(_) => None,
    };
    classify(status.as_u16(), body, retry_after)
}

/// Sort a non-success response into a [`ClientError`] (pure; unit-tested).
pub(crate) fn classify(
    status: u16,
    body: Option<ErrorBody>,
    retry_after: Option<Duration>,
) -> ClientError {
    let (error, message, seats, live) = match body {
        Some(b) => (b.error, b.message, b.seats, b.live),
        None => (String::new(), format!("HTTP {status}"), None, None),
    };
    match (status, error.as_str()) {
        (401, _) => ClientError::Unauthorized(message),
        (404, code::UNKNOWN_LICENSE) => ClientError::UnknownLicense(message),
        (409, _) => ClientError::NoSeats {
            retry_after,
            seats,
            live,
        },
        (403, code::BLOCKED) => ClientError::Blocked {
            retry_after,
            message,
        },
        (410, _) => ClientError::SeatLost,
        (408 | 429, _) | (500..=599, _) => {
            ClientError::Transient(format!("HTTP {status}: {message}"))
        }
        (400..=499, _) => ClientError::Rejected {
            status,
            code: error,
            message,
        },
        // 1xx/2xx/3xx where a specific status was expected.
        _ => ClientError::Invalid(format!("unexpected HTTP {status}: {message}")),
    }
}

/// `Retry-After` in delta-seconds (the only form the server sends).
fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    headers
        .get(RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim()
        .parse::<u64>()
        .ok()
        .map(Duration::from_secs)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(error: &str) -> Option<ErrorBody> {
        Some(ErrorBody {
            error: error.into(),
            message: "m".into(),
            seats: Some(3),
            live: Some(3),
        })
    }

    #[test]
    fn every_contract_status_has_its_variant() {
        let ra = Some(Duration::from_secs(7));
        assert!(matches!(
            classify(401, body("unauthorized"), None),
            ClientError::Unauthorized(_)
        ));
        assert!(matches!(
            classify(404, body("unknown_license"), None),
            ClientError::UnknownLicense(_)
        ));
        assert_eq!(
            classify(409, body("no_seats_available"), ra),
            ClientError::NoSeats {
                retry_after: ra,
                seats: Some(3),
                live: Some(3)
            }
        );
        assert!(matches!(
            classify(403, body("blocked"), ra),
            ClientError::Blocked { retry_after, .. } if retry_after == ra
        ));
        assert_eq!(
            classify(410, body("seat_lost"), None),
            ClientError::SeatLost
        );
        for s in [500, 502, 503, 504, 429, 408] {
            assert!(classify(s, None, None).is_transient(), "{s}");
        }
        assert!(matches!(
            classify(400, body("invalid_request"), None),
            ClientError::Rejected { status: 400, .. }
        ));
        // A 404 that is not unknown_license (wrong base URL) is not "unknown license".
        assert!(matches!(
            classify(404, body("not_found"), None),
            ClientError::Rejected { status: 404, .. }
        ));
        assert!(matches!(classify(302, None, None), ClientError::Invalid(_)));
    }

    #[test]
    fn retry_after_is_delta_seconds() {
        let mut h = HeaderMap::new();
        assert_eq!(retry_after(&h), None);
        h.insert(RETRY_AFTER, "12".parse().unwrap());
        assert_eq!(retry_after(&h), Some(Duration::from_secs(12)));
        h.insert(
            RETRY_AFTER,
            "Wed, 21 Oct 2015 07:28:00 GMT".parse().unwrap(),
        );
        assert_eq!(retry_after(&h), None);
    }
}
