//! Idle and returner: a keeper told of every action of its user
//! (`LeaseKeeper::activity`, which opts in to reporting `idle_s`), then a
//! user who walks away with the application open. On a license with an
//! `idle_timeout` the server reclaims the seat once the reported idleness
//! reaches it (the keeper shows `Reclaimed`, reported by `watch_keeper`).
//! The idle client never comes back; the returner does, and its keeper
//! checks out again (or, back before the timeout, keeps its seat).

use std::sync::Arc;
use std::time::{Duration, Instant};

use leasehold_common::client::{KeeperState, LeaseKeeper};

use super::keeper::{release_keeper, start_keeper, watch_keeper};
use crate::simulate::context::{Ctx, secs, sleep_for, sleep_until};
use crate::simulate::report::Kind;
use crate::simulate::slots::Slot;

/// How often a busy user does something: well under a heartbeat interval.
const ACTIVITY_EVERY: Duration = Duration::from_millis(200);

/// Works a while, then walks away for good.
pub(super) async fn idle(ctx: &Arc<Ctx>, slot: &Arc<Slot>) {
    walk_away(ctx, slot, None).await;
}

/// Works a while, walks away for `away_for`, comes back and works again.
pub(super) async fn returner(ctx: &Arc<Ctx>, slot: &Arc<Slot>) {
    walk_away(ctx, slot, Some(slot.plan.away_for)).await;
}

async fn walk_away(ctx: &Arc<Ctx>, slot: &Arc<Slot>, back_after: Option<Duration>) {
    if !sleep_until(&ctx.stop, ctx.start + slot.plan.start).await {
        return;
    }
    let Some(k) = start_keeper(ctx, &ctx.server, slot) else {
        return;
    };
    k.activity();
    let w = watch_keeper(ctx.clone(), slot.clone(), &k);
    let mut stop = ctx.stop.clone();
    let got = tokio::select! {
        r = k.wait_for_lease() => r.is_ok(),
        _ = stop.wait_for(|s| *s) => false,
    };
    if got && busy(ctx, &k, slot.plan.idle_after).await {
        ctx.reporter.event(
            &slot.plan,
            Kind::Away,
            "user walked away, the app left open: heartbeats report idle_s from now",
        );
        if let Some(away) = back_after
            && sleep_for(&ctx.stop, away).await
        {
            let was = if matches!(k.state(), KeeperState::Reclaimed { .. }) {
                "the seat was reclaimed: checking out again"
            } else {
                "still holding a seat"
            };
            k.activity();
            ctx.reporter.event(
                &slot.plan,
                Kind::Back,
                &format!("user back after {}, {was}", secs(away)),
            );
            busy(ctx, &k, ctx.remaining()).await;
        }
    }
    sleep_until(&ctx.stop, ctx.deadline).await;
    release_keeper(ctx, slot, k, w, "(end of the day)").await;
}

/// The user works for `d`: an activity every [`ACTIVITY_EVERY`]. False if
/// the run stopped first.
async fn busy(ctx: &Ctx, k: &LeaseKeeper, d: Duration) -> bool {
    let until = Instant::now() + d;
    loop {
        k.activity();
        let next = (Instant::now() + ACTIVITY_EVERY).min(until);
        if !sleep_until(&ctx.stop, next).await {
            return false;
        }
        if Instant::now() >= until {
            return true;
        }
    }
}
