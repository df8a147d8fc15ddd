//! Each store outcome that turns a request down (a denial, a lost seat, an
//! unknown seat), as the [`ApiError`] the client gets (status, code,
//! message, `Retry-After`, the error's details). What is granted passes
//! through to the handler.

use std::time::Duration;

use leasehold_common::api::{SeatLostReason, code};
use leasehold_common::policy::format_duration;
use warp::http::StatusCode;

use super::common::Result;
use crate::AppState;
use crate::http::error::{ApiError, ErrorDetails};
use crate::store::{
    self, CheckoutOutcome, HeartbeatOutcome, LeaseRow, NotAllowedBecause, RevokeOutcome,
};

/// A checkout's outcome: the lease it grants and whether that seat is over
/// the pool's size, or the error it stands for.
pub(super) fn checkout<'a>(
    state: &AppState,
    license_id: &str,
    outcome: &'a CheckoutOutcome,
) -> Result<(&'a LeaseRow, bool)> {
    match outcome {
        CheckoutOutcome::Granted { lease, overage, .. } => Ok((lease, *overage)),
        CheckoutOutcome::Full {
            seats,
            live,
            reserved,
            retry_after,
        } => Err(full(license_id, *seats, *live, *reserved, *retry_after)),
        CheckoutOutcome::LimitReached {
            limit,
            max,
            group,
            retry_after,
        } => Err(limit_reached(
            license_id,
            *limit,
            *max,
            group.as_deref(),
            *retry_after,
        )),
        CheckoutOutcome::NotAllowed(because) => Err(not_allowed(license_id, because)),
        CheckoutOutcome::Blocked { until } => {
            let now = state.clock.now();
            Err(ApiError::new(
                StatusCode::FORBIDDEN,
                code::BLOCKED,
                format!("an admin revoked this seat and blocked re-checkout until {until}"),
            )
            .with_retry_after(ceil_secs(Duration::from_millis(
                until.millis_since(now).max(0) as u64,
            ))))
        }
        CheckoutOutcome::NotEntitled => Err(ApiError::new(
            StatusCode::FORBIDDEN,
            code::NOT_ENTITLED,
            format!(
                "no entitlement of {license_id:?}'s vendor grants it now (none installed, \
                 or its term ended); ask the server's admin"
            ),
        )),
        CheckoutOutcome::VersionNotEntitled { versions } => Err(ApiError::new(
            StatusCode::FORBIDDEN,
            code::VERSION_NOT_ENTITLED,
            format!(
                "{license_id:?} is entitled for versions {versions}: send the application's \
                 \"version\" within it"
            ),
        )
        .with_details(ErrorDetails {
            versions: Some(versions.clone()),
            ..ErrorDetails::default()
        })),
        CheckoutOutcome::InvalidVersion => Err(ApiError::invalid(
            "version must be a dotted numeric version such as \"2026.2\" or \"3.2.10\"",
        )),
        CheckoutOutcome::BorrowTooLong { max } => Err(ApiError::invalid(format!(
            "borrow_s must be 1 to {} (the license's borrow.max)",
            max.as_secs()
        ))),
        CheckoutOutcome::UnknownLicense => Err(ApiError::unknown_license(license_id)),
    }
}

/// `409 no_seats_available`: every seat live, or held back for other
/// groups' reservations.
fn full(license_id: &str, seats: u32, live: u32, reserved: u32, retry_after: Duration) -> ApiError {
    let message = if reserved == 0 {
        format!("all {seats} seats of {license_id:?} are in use; retry later")
    } else {
        format!(
            "no seat of {license_id:?} is free for you: {live} in use, {reserved} held \
             back for other groups' reservations; retry later"
        )
    };
    ApiError::new(StatusCode::CONFLICT, code::NO_SEATS_AVAILABLE, message)
        .with_retry_after(ceil_secs(retry_after))
        .with_details(ErrorDetails {
            seats: Some(seats),
            live: Some(live),
            reserved: Some(reserved),
            ..ErrorDetails::default()
        })
}

/// `409 limit_reached`: the holder's, the group's or the lending cap.
fn limit_reached(
    license_id: &str,
    limit: store::Limit,
    max: u32,
    group: Option<&str>,
    retry_after: Duration,
) -> ApiError {
    let message = match (limit, group) {
        (store::Limit::Borrow, _) => format!(
            "{max} seat(s) of {license_id:?} are borrowed, the most it lends at once; \
             retry later"
        ),
        (_, Some(group)) => format!(
            "group {group:?} already holds its {max} seat(s) of {license_id:?}; retry later"
        ),
        (_, None) => format!(
            "this holder already has {max} live seat(s) of {license_id:?}, the most \
             one holder may have; release one or retry later"
        ),
    };
    ApiError::new(StatusCode::CONFLICT, code::LIMIT_REACHED, message)
        .with_retry_after(ceil_secs(retry_after))
        .with_details(ErrorDetails {
            limit: Some(limit.as_str()),
            max: Some(max),
            group: group.map(str::to_owned),
            ..ErrorDetails::default()
        })
}

/// `403 not_allowed`, saying which rule of the license refused.
fn not_allowed(license_id: &str, because: &NotAllowedBecause) -> ApiError {
    ApiError::new(
        StatusCode::FORBIDDEN,
        code::NOT_ALLOWED,
        match because {
            NotAllowedBecause::Lists => {
                format!("this holder may not use {license_id:?} (the license's allow/deny lists)")
            }
            NotAllowedBecause::LendsNothing => format!(
                "{license_id:?} lends no seats for offline use (the license has no \
                 [license.borrow]); check out without borrow_s"
            ),
            NotAllowedBecause::BorrowAllow => format!(
                "this holder may not borrow from {license_id:?} (the license's \
                 borrow.allow); it may still check out without borrow_s"
            ),
        },
    )
}

/// A heartbeat's outcome: the renewed lease, or the error it stands for.
/// `idle_timeout` is the license's, for the words of an idle reclaim.
pub(super) fn heartbeat(
    outcome: &HeartbeatOutcome,
    idle_timeout: Option<Duration>,
) -> Result<&LeaseRow> {
    match outcome {
        HeartbeatOutcome::Renewed(row) => Ok(row),
        HeartbeatOutcome::Lost(reason) => Err(seat_lost(*reason, idle_timeout)),
        HeartbeatOutcome::Borrowed { expires_at } => Err(ApiError::new(
            StatusCode::CONFLICT,
            code::BORROWED,
            format!("a borrowed seat is not renewed; return it or let it expire (at {expires_at})"),
        )),
    }
}

/// `410 seat_lost`, saying why.
fn seat_lost(reason: SeatLostReason, idle_timeout: Option<Duration>) -> ApiError {
    let message = match reason {
        SeatLostReason::Revoked => "this seat was revoked by an admin; check out again".to_string(),
        SeatLostReason::Lapsed => {
            "this seat lapsed (not renewed in time) or is unknown; check out again".to_string()
        }
        SeatLostReason::Released => "this seat was released; check out again".to_string(),
        SeatLostReason::Expired => "this seat is over what the license's entitlement grants \
             now (its term ended or its seats dropped); check out again"
            .to_string(),
        SeatLostReason::Idle => format!(
            "this seat was reclaimed: its user was idle for the license's idle_timeout ({}); \
             check out again when the user is back",
            idle_timeout
                .map(format_duration)
                .unwrap_or_else(|| "unknown".into())
        ),
    };
    ApiError::new(StatusCode::GONE, code::SEAT_LOST, message).with_details(ErrorDetails {
        reason: Some(reason),
        ..ErrorDetails::default()
    })
}

/// A revoke's outcome: done, or the error it stands for.
pub(super) fn revoke(seat_id: &str, outcome: &RevokeOutcome) -> Result<()> {
    match outcome {
        RevokeOutcome::Revoked(_) => Ok(()),
        RevokeOutcome::Borrowed(row) => Err(ApiError::new(
            StatusCode::CONFLICT,
            code::BORROWED,
            format!(
                "seat {seat_id:?} is borrowed until {}: its holder's token stays valid offline \
                 until then, so freeing it now can put one seat more in use than sold; send \
                 {{\"force\": true}} to free it anyway",
                row.expires_at
            ),
        )),
        RevokeOutcome::Unknown => Err(ApiError::new(
            StatusCode::NOT_FOUND,
            code::UNKNOWN_SEAT,
            format!("no seat {seat_id:?} is held (already released, revoked or reaped?)"),
        )),
    }
}

/// Whole seconds, rounded up, at least 1 (a `Retry-After` of 0 invites a
/// busy loop).
fn ceil_secs(d: Duration) -> u64 {
    d.as_millis().div_ceil(1000).max(1) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_rounds_up_and_is_never_zero() {
        assert_eq!(ceil_secs(Duration::ZERO), 1);
        assert_eq!(ceil_secs(Duration::from_millis(1)), 1);
        assert_eq!(ceil_secs(Duration::from_millis(1001)), 2);
        assert_eq!(ceil_secs(Duration::from_secs(60)), 60);
    }
}
