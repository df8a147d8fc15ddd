//! API errors: every failure is `{"error": code, "message": sentence}` with a
//! fitting status, whether a handler produced it or warp's routing did.

use std::convert::Infallible;

use leasehold_common::api::{ErrorBody, code};
use warp::http::{HeaderValue, StatusCode, header};
use warp::reject::Rejection;
use warp::reply::{Reply, Response};

use crate::store::StoreError;

#[derive(Debug, Clone)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: &'static str,
    pub message: String,
    /// The figures of a refused checkout; boxed, so that every `Result`
    /// carrying an `ApiError` stays small.
    pub details: Option<Box<ErrorDetails>>,
    pub retry_after_s: Option<u64>,
}

/// What a `no_seats_available` or `limit_reached` body adds.
#[derive(Debug, Clone, Default)]
pub struct ErrorDetails {
    pub seats: Option<u32>,
    pub live: Option<u32>,
    pub reserved: Option<u32>,
    pub limit: Option<&'static str>,
    pub max: Option<u32>,
    pub group: Option<String>,
    /// Why a `410 seat_lost` seat is gone.
    pub reason: Option<leasehold_common::api::SeatLostReason>,
    /// The entitled range, on `version_not_entitled`.
    pub versions: Option<String>,
}

impl warp::reject::Reject for ApiError {}

impl ApiError {
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            status,
            code,
            message: message.into(),
            details: None,
            retry_after_s: None,
        }
    }

    pub fn invalid(message: impl Into<String>) -> Self {
        ApiError::new(StatusCode::BAD_REQUEST, code::INVALID_REQUEST, message)
    }

    pub fn unauthorized(message: impl Into<String>) -> Self {
        ApiError::new(StatusCode::UNAUTHORIZED, code::UNAUTHORIZED, message)
    }

    /// Authenticated, but the role may not do this.
    pub fn forbidden(message: impl Into<String>) -> Self {
        ApiError::new(StatusCode::FORBIDDEN, code::FORBIDDEN, message)
    }

    /// A cookie-authenticated state change without a matching
    /// `X-CSRF-Token`, or from another origin.
    pub fn csrf_failed(message: impl Into<String>) -> Self {
        ApiError::new(StatusCode::FORBIDDEN, code::CSRF_FAILED, message)
    }

    pub fn rate_limited(message: impl Into<String>, retry_after_s: u64) -> Self {
        ApiError::new(StatusCode::TOO_MANY_REQUESTS, code::RATE_LIMITED, message)
            .with_retry_after(retry_after_s)
    }

    pub fn unknown_license(id: &str) -> Self {
        ApiError::new(
            StatusCode::NOT_FOUND,
            code::UNKNOWN_LICENSE,
            format!("no license {id:?} is configured on this server"),
        )
    }

    pub fn too_large(limit: usize) -> Self {
        ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            code::PAYLOAD_TOO_LARGE,
            format!("request body is larger than {limit} bytes"),
        )
    }

    /// The body did not arrive in time; the connection is closed after this
    /// reply, since the rest of the body may still be on its way.
    pub fn body_timeout(after: std::time::Duration) -> Self {
        ApiError::new(
            StatusCode::REQUEST_TIMEOUT,
            code::REQUEST_TIMEOUT,
            format!(
                "the request body did not arrive within {} ms; nothing was changed",
                after.as_millis()
            ),
        )
    }

    pub fn store(e: StoreError) -> Self {
        tracing::error!("store: {e}");
        let mut err = ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            code::UNAVAILABLE,
            "the lease store cannot commit right now; nothing was changed, retry shortly",
        );
        err.retry_after_s = Some(1);
        err
    }

    pub fn with_retry_after(mut self, secs: u64) -> Self {
        self.retry_after_s = Some(secs);
        self
    }

    pub fn with_details(mut self, details: ErrorDetails) -> Self {
        self.details = Some(Box::new(details));
        self
    }

    pub fn into_response(self) -> Response {
        let details = self.details.map(|r| *r).unwrap_or_default();
        let body = ErrorBody {
            error: self.code.to_string(),
            message: self.message,
            seats: details.seats,
            live: details.live,
            reserved: details.reserved,
            limit: details.limit.map(str::to_string),
            max: details.max,
            group: details.group,
            reason: details.reason,
            versions: details.versions,
        };
        let mut resp =
            warp::reply::with_status(warp::reply::json(&body), self.status).into_response();
        let headers = resp.headers_mut();
        if let Some(secs) = self.retry_after_s {
            headers.insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        if self.status == StatusCode::UNAUTHORIZED {
            headers.insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        if self.status == StatusCode::REQUEST_TIMEOUT {
            headers.insert(header::CONNECTION, HeaderValue::from_static("close"));
        }
        resp
    }
}

/// The methods the routes of [`super::routes`] serve on `path` (for the
/// `Allow` header of a 405), matching paths the way warp's `path!` does:
/// segments verbatim, parameters non-empty, one trailing `/` tolerated.
pub fn allowed_methods(path: &str) -> Option<&'static str> {
    let path = path.strip_prefix('/').unwrap_or(path);
    let path = path.strip_suffix('/').unwrap_or(path);
    let segs: Vec<&str> = path.split('/').collect();
    let param = |s: &&str| !s.is_empty();
    match segs.as_slice() {
        ["healthz"] | ["metrics"] | [".well-known", "jwks.json"] => Some("GET"),
        [""] | ["ui", "session"] => Some("GET"),
        ["ui", "login" | "logout"] => Some("POST"),
        [
            "v1",
            "admin",
            "licenses" | "seats" | "events" | "usage" | "sessions" | "denials" | "webhooks"
            | "alerts" | "entitlements",
        ] => Some("GET"),
        ["v1", "admin", "webhooks", "deliveries"] => Some("GET"),
        ["v1", "admin", "webhooks", w, "test"] if param(w) => Some("POST"),
        ["v1", "admin", "events", "stream"] => Some("GET"),
        ["v1", "admin", "usage", "what-if" | "attestation"] => Some("GET"),
        ["v1", "admin", "seats", s] if param(s) => Some("DELETE"),
        ["v1", "licenses", l, "seats"] if param(l) => Some("POST"),
        ["v1", "licenses", l, "entitlements"] if param(l) => Some("GET"),
        ["v1", "licenses", l, "seats", s] if param(l) && param(s) => Some("DELETE"),
        ["v1", "licenses", l, "seats", s, "heartbeat"] if param(l) && param(s) => Some("POST"),
        _ => None,
    }
}

/// Turn warp's own rejections (no route, wrong method, bad query, oversized
/// body...) into the same JSON error shape. Never a 5xx for client input.
pub async fn recover(r: Rejection) -> Result<Response, Infallible> {
    use warp::reject::{
        InvalidHeader, InvalidQuery, LengthRequired, MethodNotAllowed, MissingHeader,
        PayloadTooLarge, UnsupportedMediaType,
    };
    let err = if let Some(e) = r.find::<ApiError>() {
        e.clone()
    } else if r.is_not_found() {
        ApiError::new(StatusCode::NOT_FOUND, code::NOT_FOUND, "no such endpoint")
    } else if r.find::<MethodNotAllowed>().is_some() {
        ApiError::new(
            StatusCode::METHOD_NOT_ALLOWED,
            code::METHOD_NOT_ALLOWED,
            "this endpoint does not accept that method",
        )
    } else if r.find::<PayloadTooLarge>().is_some() {
        ApiError::too_large(super::MAX_BODY)
    } else if r.find::<LengthRequired>().is_some() {
        ApiError::new(
            StatusCode::LENGTH_REQUIRED,
            code::INVALID_REQUEST,
            "Content-Length is required",
        )
    } else if r.find::<UnsupportedMediaType>().is_some() {
        ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            code::UNSUPPORTED_MEDIA_TYPE,
            "unsupported content type",
        )
    } else if let Some(e) = r.find::<InvalidHeader>() {
        ApiError::invalid(format!("invalid header: {e}"))
    } else if let Some(e) = r.find::<MissingHeader>() {
        ApiError::invalid(format!("missing header: {e}"))
    } else if r.find::<InvalidQuery>().is_some() {
        ApiError::invalid("the query string is not valid")
    } else {
        tracing::debug!("unhandled rejection: {r:?}");
        ApiError::invalid("the request could not be understood")
    };
    Ok(err.into_response())
}
