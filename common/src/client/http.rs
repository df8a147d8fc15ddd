//! A typed client for the client endpoints of the HTTP contract
//! (`assets/openapi.yaml`): checkout (optionally waiting in line), borrow,
//! heartbeat (optionally reporting idleness), release (a borrow's early return), the JWKS and
//! a license's entitlements.
//!
//! It does one request per call and no retries; what to retry is the
//! caller's decision, made easy by [`ClientError`], which sorts every outcome
//! into what an application can do about it. It does not verify tokens either:
//! [`super::LeaseKeeper`] does, against the JWKS from [`Client::jwks`].

use std::time::Duration;

use reqwest::StatusCode;
use reqwest::header::{HeaderMap, RETRY_AFTER};

use super::error::{ClientError, classify};
use crate::api::{
    CheckoutRequest, ErrorBody, HeartbeatRequest, Lease, LicenseEntitlements, MAX_IDLE_S,
};
use crate::token::Jwks;

/// The longest `?wait=` the server honours (`assets/openapi.yaml`: values
/// above 60 seconds are treated as 60).
pub const MAX_CHECKOUT_WAIT: Duration = Duration::from_secs(60);

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

    /// `POST /v1/licenses/{license}/seats`: a seat now, or
    /// [`ClientError::NoSeats`] when the pool is full
    /// ([`ClientError::LimitReached`] when the holder or its group is at its
    /// cap, [`ClientError::NotAllowed`] when the license refuses the holder
    /// for good). Send the same
    /// `idempotency_key` when retrying the same attempt after a transient
    /// error, so a checkout that did reach the server returns the same seat
    /// instead of a second.
    pub async fn checkout(
        &self,
        request: &CheckoutRequest,
        idempotency_key: Option<&str>,
        timeout: Duration,
    ) -> Result<Lease, ClientError> {
        self.checkout_waiting(request, idempotency_key, Duration::ZERO, timeout)
            .await
    }

    /// `POST /v1/licenses/{license}/seats?wait=`: when the pool is full, wait
    /// in the license's first-come-first-served line for up to `wait` (whole
    /// seconds, rounded down, at most [`MAX_CHECKOUT_WAIT`]) and get the
    /// first seat that frees, or [`ClientError::NoSeats`] (or
    /// [`ClientError::LimitReached`]) when the wait runs out. `timeout` is for the answer once the wait is over: the request
    /// is given `wait + timeout`. Dropping the future hangs up, and the
    /// server then takes the request out of the line without a seat.
    pub async fn checkout_waiting(
        &self,
        request: &CheckoutRequest,
        idempotency_key: Option<&str>,
        wait: Duration,
        timeout: Duration,
    ) -> Result<Lease, ClientError> {
        let wait_s = wait.min(MAX_CHECKOUT_WAIT).as_secs();
        let mut req = self
            .http
            .post(self.seats_url())
            .bearer_auth(&self.key)
            .timeout(Duration::from_secs(wait_s) + timeout)
            .json(request);
        if wait_s > 0 {
            req = req.query(&[("wait", wait_s)]);
        }
        if let Some(k) = idempotency_key {
            req = req.header("idempotency-key", k);
        }
        let resp = req.send().await.map_err(transport)?;
        lease_or_error(resp, StatusCode::CREATED).await
    }

    /// `POST /v1/licenses/{license}/seats` with `borrow_s`: a seat for
    /// offline use until now + `duration` (whole seconds, rounded up), with
    /// no heartbeats. If this machine (`fingerprint`) holds a live seat, that
    /// seat becomes the borrow (or its borrow is extended). Denials:
    /// [`ClientError::NotAllowed`] (the license lends nothing, or not to
    /// this holder), [`ClientError::LimitReached`] with `limit` `borrow`
    /// (all `borrow.seats` are out), [`ClientError::Rejected`] (400: longer
    /// than `borrow.max`). The answer is checked to be a borrowed lease; its
    /// token is not verified here.
    pub async fn borrow(
        &self,
        holder: &str,
        fingerprint: &str,
        duration: Duration,
        timeout: Duration,
    ) -> Result<Lease, ClientError> {
        let request = CheckoutRequest {
            holder: holder.to_string(),
            fingerprint: Some(fingerprint.to_string()),
            borrow_s: None,
            version: None,
        };
        self.borrow_with(&request, duration, timeout).await
    }

    /// [`Client::borrow`] with the other fields of `request` (its
    /// `version`); its `borrow_s` is `duration`'s, and it needs a
    /// fingerprint.
    pub async fn borrow_with(
        &self,
        request: &CheckoutRequest,
        duration: Duration,
        timeout: Duration,
    ) -> Result<Lease, ClientError> {
        let request = CheckoutRequest {
            borrow_s: Some(borrow_secs(duration)),
            ..request.clone()
        };
        let lease = self.checkout(&request, None, timeout).await?;
        if !lease.borrowed {
            return Err(ClientError::Invalid(format!(
                "asked to borrow, but seat {} is not borrowed",
                lease.seat_id
            )));
        }
        Ok(lease)
    }

    /// The early return of a borrowed seat: the same `DELETE` as
    /// [`Client::release`], which frees a borrowed seat at once.
    pub async fn give_back(&self, seat_id: &str, timeout: Duration) -> Result<(), ClientError> {
        self.release(seat_id, timeout).await
    }

    /// `POST /v1/licenses/{license}/seats/{seat_id}/heartbeat`, reporting
    /// nothing about idleness (the seat counts as active).
    pub async fn heartbeat(&self, seat_id: &str, timeout: Duration) -> Result<Lease, ClientError> {
        self.heartbeat_idle(seat_id, None, timeout).await
    }

    /// A heartbeat that reports, with `Some(idle_s)`, the whole seconds
    /// since the user last used the application (body `{"idle_s": N}`;
    /// values above [`MAX_IDLE_S`] are sent as it). On a license with an
    /// `idle_timeout` the answer may be [`ClientError::SeatLost`] with reason
    /// `idle`. `None` sends no body, like [`Client::heartbeat`].
    pub async fn heartbeat_idle(
        &self,
        seat_id: &str,
        idle_s: Option<u64>,
        timeout: Duration,
    ) -> Result<Lease, ClientError> {
        let mut req = self
            .http
            .post(format!("{}/{seat_id}/heartbeat", self.seats_url()))
            .bearer_auth(&self.key)
            .timeout(timeout);
        if let Some(idle_s) = idle_s {
            req = req.json(&HeartbeatRequest {
                idle_s: idle_s.min(MAX_IDLE_S),
            });
        }
        let resp = req.send().await.map_err(transport)?;
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
        body_or_error(resp, StatusCode::OK, "JWKS").await
    }

    /// `GET /v1/licenses/{license}/entitlements` (the license key): the
    /// compact JWS of each entitlement that grants the license now (none
    /// for a license without a vendor), for
    /// [`crate::entitlement::check_chain`].
    pub async fn entitlements(&self, timeout: Duration) -> Result<Vec<String>, ClientError> {
        let resp = self
            .http
            .get(format!(
                "{}/v1/licenses/{}/entitlements",
                self.base, self.license
            ))
            .bearer_auth(&self.key)
            .timeout(timeout)
            .send()
            .await
            .map_err(transport)?;
        body_or_error::<LicenseEntitlements>(resp, StatusCode::OK, "entitlements")
            .await
            .map(|list| list.entitlements)
    }
}

/// A borrow's `borrow_s`: whole seconds rounded up, so a borrow is never
/// shorter than asked for.
pub fn borrow_secs(d: Duration) -> u64 {
    d.as_millis().div_ceil(1000) as u64
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
    body_or_error(resp, expected, "lease body").await
}

/// The body of a `expected` answer as a `T` (`what` names it in the
/// error), or the error the answer carries.
async fn body_or_error<T: serde::de::DeserializeOwned>(
    resp: reqwest::Response,
    expected: StatusCode,
    what: &str,
) -> Result<T, ClientError> {
    if resp.status() != expected {
        return Err(error_from(resp).await);
    }
    let bytes = resp.bytes().await.map_err(transport)?;
    serde_json::from_slice(&bytes).map_err(|e| ClientError::Invalid(format!("{what}: {e}")))
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

    #[test]
    fn borrow_seconds_round_up() {
        assert_eq!(borrow_secs(Duration::from_secs(259_200)), 259_200);
        assert_eq!(borrow_secs(Duration::from_millis(1_001)), 2);
        assert_eq!(borrow_secs(Duration::ZERO), 0);
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
