//! Late: arrives mid-run and waits in the license's line (`?wait=`, through
//! [`Client::checkout_waiting`]) for a seat, then holds it with the typed
//! client; back in line if the seat is lost.

use std::sync::Arc;
use std::time::{Duration, Instant};

use leasehold_common::api::{CheckoutRequest, Lease};
use leasehold_common::client::{Client, MAX_CHECKOUT_WAIT};

use super::manual::{HoldEnd, checkout_request, hold_manually};
use crate::format::short_id;
use crate::simulate::context::{Ctx, secs, sleep_for, sleep_until};
use crate::simulate::report::Kind;
use crate::simulate::slots::Slot;

/// A wait shorter than this counts as no wait at all.
const NO_WAIT: Duration = Duration::from_millis(300);

/// Arrives mid-run and waits in line (`?wait=`) for a seat.
pub(super) async fn late(ctx: &Arc<Ctx>, slot: &Arc<Slot>) {
    if !sleep_until(&ctx.stop, ctx.start + slot.plan.start).await {
        return;
    }
    let Ok(client) = Client::new(&ctx.server, &ctx.target.license, &ctx.target.key) else {
        return;
    };
    let req = checkout_request(slot);
    while let Some((lease, sent)) = wait_in_line(ctx, slot, &client, &req).await {
        let seat = lease.seat_id.clone();
        let waited = sent.elapsed();
        if waited >= NO_WAIT {
            ctx.reporter.event(
                &slot.plan,
                Kind::Granted,
                &format!("seat {} after {} in line", short_id(&seat), secs(waited)),
            );
        } else {
            ctx.reporter.event(
                &slot.plan,
                Kind::Checkout,
                &format!("seat {}, no wait needed", short_id(&seat)),
            );
        }
        match hold_manually(ctx, slot, &client, lease, sent, None).await {
            HoldEnd::Lost => {
                slot.clear();
                ctx.reporter.event(
                    &slot.plan,
                    Kind::Lost,
                    &format!("seat {} gone (410), back in line", short_id(&seat)),
                );
            }
            HoldEnd::Stopped | HoldEnd::Deadline => {
                slot.clear();
                let _ = client.release(&seat, Duration::from_secs(5)).await;
                ctx.reporter.event(
                    &slot.plan,
                    Kind::Release,
                    &format!("seat {} (end of the day)", short_id(&seat)),
                );
                return;
            }
        }
    }
}

/// Ask for a seat, willing to wait until shortly before the run ends, and
/// ask again each time a wait runs out. The lease and when it was asked
/// for, or `None` when the run is over or the server refuses for good.
async fn wait_in_line(
    ctx: &Ctx,
    slot: &Slot,
    client: &Client,
    req: &CheckoutRequest,
) -> Option<(Lease, Instant)> {
    loop {
        // Whole seconds, and the answer must come before the run ends.
        let margin = ctx
            .remaining()
            .mul_f64(0.1)
            .clamp(Duration::from_millis(300), Duration::from_millis(1500));
        let wait_s = ctx
            .remaining()
            .saturating_sub(margin)
            .min(MAX_CHECKOUT_WAIT)
            .as_secs();
        if wait_s == 0 {
            return None;
        }
        ctx.reporter.event(
            &slot.plan,
            Kind::Queued,
            &format!("asks for a seat, willing to wait up to {wait_s}s"),
        );
        let sent = Instant::now();
        let wait = Duration::from_secs(wait_s);
        let call = client.checkout_waiting(req, None, wait, Duration::from_secs(10));
        let mut stop = ctx.stop.clone();
        // On stop the request is dropped: the server takes us out of the line.
        let result = tokio::select! {
            r = call => r,
            _ = stop.wait_for(|s| *s) => return None,
        };
        match result {
            Ok(lease) => return Some((lease, sent)),
            Err(e) if e.seat_wait().is_some() => ctx.reporter.event(
                &slot.plan,
                Kind::WaitTimeout,
                &format!("no seat freed within {wait_s}s"),
            ),
            Err(e) if e.is_transient() => {
                ctx.reporter.event(&slot.plan, Kind::Error, &e.to_string());
                if !sleep_for(&ctx.stop, Duration::from_secs(1)).await {
                    return None;
                }
            }
            Err(e) => {
                ctx.reporter.event(&slot.plan, Kind::Error, &e.to_string());
                return None;
            }
        }
    }
}
