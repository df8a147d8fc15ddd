//! [`ClientError`]: every outcome of a client call sorted into what an
//! application can do about it, and [`classify`], the pure mapping from a
//! non-success response to it (the I/O is in [`super::http`]).

use std::time::Duration;

use crate::api::{ErrorBody, SeatLostReason, code};
use crate::entitlement::NotEntitled;

/// Why a call did not produce what was asked for.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClientError {
    /// 401: the license key is missing or wrong. Retrying will not help.
    #[error("unauthorized: {0}")]
    Unauthorized(String),
    /// 404 `unknown_license`: the server has no such license.
    #[error("unknown license: {0}")]
    UnknownLicense(String),
    /// 409 `no_seats_available`: the pool is full (for this holder: seats
    /// held back for other groups' reservations are in `reserved`).
    /// `retry_after` is the server's estimate of when the earliest live
    /// lease could lapse.
    #[error("no seats available ({live:?} of {seats:?} live); retry after {retry_after:?}")]
    NoSeats {
        retry_after: Option<Duration>,
        seats: Option<u32>,
        live: Option<u32>,
        reserved: Option<u32>,
    },
    /// 409 `limit_reached`: the holder is at the license's `max_per_holder`
    /// (`limit` `holder`) or its group at its `max` (`limit` `group`,
    /// `group`). Like [`ClientError::NoSeats`]: retry after `retry_after`.
    #[error("limit reached ({limit} max {max:?}{}); retry after {retry_after:?}",
        group.as_deref().map(|g| format!(", group {g:?}")).unwrap_or_default())]
    LimitReached {
        retry_after: Option<Duration>,
        limit: String,
        max: Option<u32>,
        group: Option<String>,
    },
    /// 403 `not_allowed`: the license's allow/deny lists refuse this
    /// holder. Permanent for this holder: retrying will not help.
    #[error("not allowed: {0}")]
    NotAllowed(String),
    /// 403 `blocked`: an admin revoked this holder's seat and blocked
    /// re-checkout for a while.
    #[error("blocked: {message}")]
    Blocked {
        retry_after: Option<Duration>,
        message: String,
    },
    /// 409 `borrowed` on a heartbeat: the seat is borrowed for offline use
    /// and is not renewed; it is held until its expiry or its early return.
    #[error("borrowed: {0}")]
    Borrowed(String),
    /// 410 `seat_lost`: the server no longer holds this seat. `reason`
    /// says why (`None` from a server older than idle reclaim, or a 410
    /// without a readable body): revoked, lapsed (reaped) or released, check
    /// out again; `idle`, reclaimed because the user was away for the
    /// license's `idle_timeout` (`message` names it), check out again when
    /// the user is back.
    #[error("seat lost: the server no longer holds this seat ({}): {message}",
        reason_name(*reason))]
    SeatLost {
        reason: Option<SeatLostReason>,
        message: String,
    },
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
    /// The application pins its vendor's key
    /// ([`super::KeeperConfig::vendor_key`]) and the lease the server gave
    /// is not entitled: the reason names the first link of the chain (vendor
    /// key → entitlement → the server's key → the lease) that fails. The
    /// keeper released the seat and stopped; asking again helps only once
    /// the server has an entitlement for this lease (or the application
    /// another version).
    #[error("not entitled: {0}")]
    NotEntitled(NotEntitled),
}

impl ClientError {
    /// Worth sending again later as it is (the outcome may differ).
    pub fn is_transient(&self) -> bool {
        matches!(self, ClientError::Transient(_) | ClientError::Invalid(_))
    }

    /// A 410 `seat_lost` with reason `idle`: the server reclaimed the seat
    /// because its user was away for the license's `idle_timeout`.
    pub fn is_idle_reclaim(&self) -> bool {
        matches!(
            self,
            ClientError::SeatLost {
                reason: Some(SeatLostReason::Idle),
                ..
            }
        )
    }

    /// A 409 of a checkout (`no_seats_available` or `limit_reached`): no
    /// seat for this holder now; `Some(retry_after)` says when to try
    /// again (the server's `Retry-After`, if it sent one).
    pub fn seat_wait(&self) -> Option<Option<Duration>> {
        match self {
            ClientError::NoSeats { retry_after, .. }
            | ClientError::LimitReached { retry_after, .. } => Some(*retry_after),
            _ => None,
        }
    }
}

/// A 410's `reason` as the contract spells it, for messages.
fn reason_name(reason: Option<SeatLostReason>) -> &'static str {
    match reason {
        Some(SeatLostReason::Revoked) => "revoked",
        Some(SeatLostReason::Lapsed) => "lapsed",
        Some(SeatLostReason::Released) => "released",
        Some(SeatLostReason::Idle) => "idle",
        Some(SeatLostReason::Expired) => "expired",
        None => "no reason given",
    }
}

/// Sort a non-success response into a [`ClientError`] (pure; unit-tested).
pub(crate) fn classify(
    status: u16,
    body: Option<ErrorBody>,
    retry_after: Option<Duration>,
) -> ClientError {
    let body = body.unwrap_or_else(|| ErrorBody {
        error: String::new(),
        message: format!("HTTP {status}"),
        seats: None,
        live: None,
        reserved: None,
        limit: None,
        max: None,
        group: None,
        reason: None,
        versions: None,
    });
    let ErrorBody {
        error,
        message,
        seats,
        live,
        reserved,
        limit,
        max,
        group,
        reason,
        ..
    } = body;
    match (status, error.as_str()) {
        (401, _) => ClientError::Unauthorized(message),
        (404, code::UNKNOWN_LICENSE) => ClientError::UnknownLicense(message),
        (409, code::BORROWED) => ClientError::Borrowed(message),
        (409, code::LIMIT_REACHED) => ClientError::LimitReached {
            retry_after,
            limit: limit.unwrap_or_default(),
            max,
            group,
        },
        // `no_seats_available`, or a 409 of an older or unknown kind: wait.
        (409, _) => ClientError::NoSeats {
            retry_after,
            seats,
            live,
            reserved,
        },
        (403, code::NOT_ALLOWED) => ClientError::NotAllowed(message),
        (403, code::BLOCKED) => ClientError::Blocked {
            retry_after,
            message,
        },
        (410, _) => ClientError::SeatLost { reason, message },
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

#[cfg(test)]
mod tests {
    use super::*;

    fn body(error: &str) -> Option<ErrorBody> {
        Some(ErrorBody {
            error: error.into(),
            message: "m".into(),
            seats: Some(3),
            live: Some(3),
            reserved: None,
            limit: None,
            max: None,
            group: None,
            reason: None,
            versions: None,
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
                live: Some(3),
                reserved: None,
            }
        );
        assert!(matches!(
            classify(403, body("blocked"), ra),
            ClientError::Blocked { retry_after, .. } if retry_after == ra
        ));
        assert!(matches!(
            classify(409, body("borrowed"), None),
            ClientError::Borrowed(m) if m == "m"
        ));
        assert_eq!(
            classify(410, body("seat_lost"), None),
            ClientError::SeatLost {
                reason: None,
                message: "m".into()
            }
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
    fn a_seat_lost_carries_its_reason_and_message() {
        let read = |json: &str| classify(410, serde_json::from_str(json).ok(), None);
        let idle = read(
            r#"{"error":"seat_lost","message":"idle for 30m (idle_timeout)","reason":"idle"}"#,
        );
        assert_eq!(
            idle,
            ClientError::SeatLost {
                reason: Some(SeatLostReason::Idle),
                message: "idle for 30m (idle_timeout)".into(),
            }
        );
        assert!(idle.is_idle_reclaim());
        assert!(!idle.is_transient() && idle.seat_wait().is_none());
        assert!(idle.to_string().contains("(idle): idle for 30m"), "{idle}");
        for (json, reason) in [
            ("revoked", SeatLostReason::Revoked),
            ("lapsed", SeatLostReason::Lapsed),
            ("released", SeatLostReason::Released),
        ] {
            let e = read(&format!(
                r#"{{"error":"seat_lost","message":"m","reason":"{json}"}}"#
            ));
            assert!(
                matches!(e, ClientError::SeatLost { reason: Some(r), .. } if r == reason),
                "{e:?}"
            );
            assert!(!e.is_idle_reclaim());
            assert!(e.to_string().contains(&format!("({json})")), "{e}");
        }
        // An older server's 410 (no reason), or one without a body.
        let old = read(r#"{"error":"seat_lost","message":"gone"}"#);
        assert!(matches!(old, ClientError::SeatLost { reason: None, .. }));
        assert!(!old.is_idle_reclaim());
        assert!(matches!(
            classify(410, None, None),
            ClientError::SeatLost { reason: None, .. }
        ));
    }

    #[test]
    fn policy_denials_have_their_variants() {
        let ra = Some(Duration::from_secs(9));
        let mut full = body("no_seats_available").unwrap();
        full.reserved = Some(2);
        let e = classify(409, Some(full), ra);
        assert!(matches!(
            e,
            ClientError::NoSeats {
                reserved: Some(2),
                ..
            }
        ));
        assert_eq!(e.seat_wait(), Some(ra));

        let group = ErrorBody {
            error: "limit_reached".into(),
            message: "m".into(),
            seats: None,
            live: None,
            reserved: None,
            limit: Some("group".into()),
            max: Some(6),
            group: Some("design".into()),
            reason: None,
            versions: None,
        };
        let e = classify(409, Some(group), ra);
        assert_eq!(
            e,
            ClientError::LimitReached {
                retry_after: ra,
                limit: "group".into(),
                max: Some(6),
                group: Some("design".into()),
            }
        );
        assert_eq!(e.seat_wait(), Some(ra), "waits like a full pool");
        assert!(!e.is_transient());
        assert!(e.to_string().contains("\"design\""), "{e}");

        let e = classify(403, body("not_allowed"), None);
        assert_eq!(e, ClientError::NotAllowed("m".into()));
        assert_eq!(e.seat_wait(), None);
        assert!(!e.is_transient(), "permanent for this holder");
        // blocked stays blocked; another 403 is rejected as before.
        assert!(matches!(
            classify(403, body("forbidden"), None),
            ClientError::Rejected { status: 403, .. }
        ));
        // A 409 without a body (or of an unknown kind) still means: wait.
        assert!(classify(409, None, ra).seat_wait().is_some());
    }
}
