//! Borrower: a laptop that borrows its seat for a few minutes (offline: no
//! heartbeats), comes back early and returns it. On the typed `Client`, so
//! the borrow and the early return are each one request the event lines
//! can show. A license that lends nothing (403) makes it work online
//! instead: a plain seat, heartbeated, released at the same time.

use std::time::{Duration, Instant};

use leasehold_common::api::Lease;
use leasehold_common::client::{Client, ClientError};

use super::manual::{checkout_manually, hold_manually};
use crate::format::short_id;
use crate::simulate::context::{Ctx, secs, sleep_until, window};
use crate::simulate::plan::Rng;
use crate::simulate::report::Kind;
use crate::simulate::slots::Slot;

/// How long a borrow is asked for: minutes of simulated time, far longer
/// than any run, so the return is always early.
pub(super) const BORROW_FOR: Duration = Duration::from_secs(180);

const TIMEOUT: Duration = Duration::from_secs(10);

/// Borrows at its start, is offline for a while, returns the seat early.
pub(super) async fn borrower(ctx: &Ctx, slot: &Slot) {
    // Not the plan's own draw from this seed (that was its start).
    let mut rng = Rng::new(slot.plan.seed ^ 0xb0_77e5);
    if !sleep_until(&ctx.stop, ctx.start + slot.plan.start).await {
        return;
    }
    let client = match Client::new(&ctx.server, &ctx.target.license, &ctx.target.key) {
        Ok(c) => c,
        Err(e) => return ctx.reporter.event(&slot.plan, Kind::Error, &e.to_string()),
    };
    // Offline longer than any releaser works, so it crowds the pool too.
    let back = Instant::now() + rng.part_of(ctx.duration, 0.30, 0.50);
    match borrow(ctx, slot, &client, back).await {
        Some(Ok((lease, sent))) => {
            offline_then_return(ctx, slot, &client, &lease, sent, back).await
        }
        Some(Err(())) => online_instead(ctx, slot, &client, back).await,
        None => {}
    }
}

/// Borrow, retrying while the pool or the borrowable seats are all out.
/// `Some(Err(()))`: the license lends nothing to this client (403).
async fn borrow(
    ctx: &Ctx,
    slot: &Slot,
    client: &Client,
    until: Instant,
) -> Option<Result<(Lease, Instant), ()>> {
    let p = &slot.plan;
    loop {
        let sent = Instant::now();
        match client
            .borrow(&p.holder, &p.fingerprint, BORROW_FOR, TIMEOUT)
            .await
        {
            Ok(lease) => return Some(Ok((lease, sent))),
            Err(ClientError::NotAllowed(_)) => {
                let why = "the license lends no seats to it; working online instead";
                ctx.reporter.event(p, Kind::Denied, why);
                return Some(Err(()));
            }
            Err(e) if e.seat_wait().is_some() => {
                let wait = e
                    .seat_wait()
                    .flatten()
                    .unwrap_or(Duration::from_secs(1))
                    .clamp(Duration::from_millis(200), Duration::from_secs(5));
                let what = match e {
                    ClientError::LimitReached { ref limit, .. } if limit == "borrow" => {
                        "every seat it may borrow is out"
                    }
                    _ => "pool full",
                };
                let line = format!("borrow refused, {what}; retrying in {}", secs(wait));
                ctx.reporter.event(p, Kind::Denied, &line);
                let at = Instant::now() + wait;
                if at >= until || !sleep_until(&ctx.stop, at).await {
                    return None;
                }
            }
            Err(e) if e.is_transient() => {
                if !sleep_until(&ctx.stop, Instant::now() + Duration::from_secs(1)).await {
                    return None;
                }
            }
            Err(e) => {
                ctx.reporter.event(p, Kind::Error, &format!("borrow: {e}"));
                return None;
            }
        }
    }
}

/// Hold the borrow without a single request until `back` (or the run's
/// end), then return it early.
async fn offline_then_return(
    ctx: &Ctx,
    slot: &Slot,
    client: &Client,
    lease: &Lease,
    sent: Instant,
    back: Instant,
) {
    let seat = short_id(&lease.seat_id);
    let w = window(lease);
    // It counts for the pool the whole time it is out.
    slot.hold(ctx, &lease.seat_id, sent + w, false);
    let line = format!("seat {seat} borrowed for {}, offline", secs(w));
    ctx.reporter.event(&slot.plan, Kind::Borrow, &line);
    sleep_until(&ctx.stop, back).await;
    let out_for = sent.elapsed();
    match client.give_back(&lease.seat_id, TIMEOUT).await {
        Ok(()) => {
            slot.clear();
            let line = format!(
                "seat {seat} returned early, after {} of {}",
                secs(out_for),
                secs(w)
            );
            ctx.reporter.event(&slot.plan, Kind::Return, &line);
        }
        Err(e) => {
            let line = format!("returning seat {seat}: {e} (it stays out until it expires)");
            ctx.reporter.event(&slot.plan, Kind::Error, &line);
        }
    }
}

/// No borrowing on this license: a plain seat until `back`, then released.
async fn online_instead(ctx: &Ctx, slot: &Slot, client: &Client, back: Instant) {
    let Some((lease, sent)) = checkout_manually(ctx, slot, client, back).await else {
        return;
    };
    let seat = lease.seat_id.clone();
    let line = format!("seat {}, lease {}", short_id(&seat), secs(window(&lease)));
    ctx.reporter.event(&slot.plan, Kind::Checkout, &line);
    hold_manually(ctx, slot, client, lease, sent, Some(back)).await;
    slot.clear();
    if client.release(&seat, TIMEOUT).await.is_ok() {
        let line = format!("seat {} released", short_id(&seat));
        ctx.reporter.event(&slot.plan, Kind::Release, &line);
    }
}
