//! Holding a seat with the typed [`Client`] instead of a keeper: check out
//! (retrying on 409) and heartbeat, never releasing on their own, so a
//! caller can stop dead (a crash) or release when it chooses.

use std::time::{Duration, Instant};

use leasehold_common::api::{CheckoutRequest, Lease};
use leasehold_common::client::{Client, ClientError};

use crate::simulate::context::{Ctx, secs, sleep_until, window};
use crate::simulate::report::Kind;
use crate::simulate::slots::Slot;

/// How a manual hold ended.
pub(super) enum HoldEnd {
    /// The run stopped.
    Stopped,
    /// The `until` given to [`hold_manually`] came (a crash).
    Deadline,
    /// The seat is gone (410) or lapsed.
    Lost,
}

/// The checkout body of `slot`'s client.
pub(super) fn checkout_request(slot: &Slot) -> CheckoutRequest {
    CheckoutRequest {
        holder: slot.plan.holder.clone(),
        fingerprint: Some(slot.plan.fingerprint.clone()),
        borrow_s: None,
        version: None,
    }
}

/// Heartbeat `lease` with the typed client until the run stops, `until`
/// (a crash) or the seat is lost. Does not release.
pub(super) async fn hold_manually(
    ctx: &Ctx,
    slot: &Slot,
    client: &Client,
    mut lease: Lease,
    mut sent: Instant,
    until: Option<Instant>,
) -> HoldEnd {
    let mut next = sent + window(&lease) / 3;
    loop {
        let w = window(&lease);
        slot.hold(ctx, &lease.seat_id, sent + w, false);
        let wake = until.map_or(next, |u| u.min(next));
        if !sleep_until(&ctx.stop, wake).await {
            return HoldEnd::Stopped;
        }
        if until.is_some_and(|u| Instant::now() >= u) {
            return HoldEnd::Deadline;
        }
        let now = Instant::now();
        if now >= sent + w {
            return HoldEnd::Lost;
        }
        let timeout = (sent + w - now).max(Duration::from_millis(250));
        match client.heartbeat(&lease.seat_id, timeout).await {
            Ok(l) if l.seat_id == lease.seat_id => {
                lease = l;
                sent = now;
                next = sent + window(&lease) / 3;
            }
            Err(ClientError::SeatLost { .. }) => return HoldEnd::Lost,
            _ => next = Instant::now() + (w / 10).max(Duration::from_millis(50)),
        }
    }
}

/// Check out with the typed client, retrying on 409 until `until`.
pub(super) async fn checkout_manually(
    ctx: &Ctx,
    slot: &Slot,
    client: &Client,
    until: Instant,
) -> Option<(Lease, Instant)> {
    let req = checkout_request(slot);
    loop {
        let sent = Instant::now();
        let wait = match client.checkout(&req, None, Duration::from_secs(10)).await {
            Ok(lease) => return Some((lease, sent)),
            Err(e) if e.seat_wait().is_some() => {
                let retry_after = e.seat_wait().flatten();
                let what = match e {
                    ClientError::LimitReached { .. } => "limit reached",
                    _ => "pool full",
                };
                let wait = retry_after
                    .unwrap_or(Duration::from_secs(1))
                    .clamp(Duration::from_millis(200), Duration::from_secs(5));
                ctx.reporter.event(
                    &slot.plan,
                    Kind::Denied,
                    &format!("{what}, retrying in {}", secs(wait)),
                );
                wait
            }
            Err(e) if e.is_transient() => Duration::from_secs(1),
            Err(e) => {
                ctx.reporter.event(&slot.plan, Kind::Error, &e.to_string());
                return None;
            }
        };
        let at = Instant::now() + wait;
        if at >= until || !sleep_until(&ctx.stop, at).await {
            return None;
        }
    }
}
