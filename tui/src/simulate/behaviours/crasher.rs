//! Crasher: on the typed client, because a keeper always releases and a
//! crash must not. Its seat stays until the reaper (or an admin) frees it.

use std::sync::Arc;
use std::time::{Duration, Instant};

use leasehold_common::client::Client;

use super::manual::{HoldEnd, checkout_manually, hold_manually};
use crate::format::short_id;
use crate::simulate::context::{Ctx, secs, sleep_until, window};
use crate::simulate::report::Kind;
use crate::simulate::slots::Slot;

/// Checks out, heartbeats a while, then stops dead: no release.
pub(super) async fn crasher(ctx: &Arc<Ctx>, slot: &Arc<Slot>) {
    if !sleep_until(&ctx.stop, ctx.start + slot.plan.start).await {
        return;
    }
    let Ok(client) = Client::new(&ctx.server, &ctx.target.license, &ctx.target.key) else {
        return;
    };
    let crash_at = Instant::now() + slot.plan.crash_after;
    while let Some((lease, sent)) = checkout_manually(ctx, slot, &client, crash_at).await {
        let seat = lease.seat_id.clone();
        ctx.reporter.event(
            &slot.plan,
            Kind::Checkout,
            &format!("seat {}, lease {}", short_id(&seat), secs(window(&lease))),
        );
        match hold_manually(ctx, slot, &client, lease, sent, Some(crash_at)).await {
            HoldEnd::Deadline => {
                slot.clear();
                slot.crashed(&seat);
                ctx.reporter.event(
                    &slot.plan,
                    Kind::Crash,
                    &format!(
                        "seat {} stops heartbeating, not released: reaped after TTL + reap grace",
                        short_id(&seat)
                    ),
                );
                return;
            }
            HoldEnd::Stopped => {
                slot.clear();
                let _ = client.release(&seat, Duration::from_secs(5)).await;
                ctx.reporter.event(
                    &slot.plan,
                    Kind::Release,
                    &format!("seat {} (run over before the crash)", short_id(&seat)),
                );
                return;
            }
            HoldEnd::Lost => {
                slot.clear();
                ctx.reporter.event(
                    &slot.plan,
                    Kind::Lost,
                    &format!("seat {} gone (410), checking out again", short_id(&seat)),
                );
            }
        }
    }
}
