//! Steady: holds a seat with a keeper for the whole run.

use std::sync::Arc;

use super::keeper::{release_keeper, start_keeper, watch_keeper};
use crate::simulate::context::{Ctx, sleep_until};
use crate::simulate::slots::Slot;

/// Holds a seat for the whole run.
pub(super) async fn steady(ctx: &Arc<Ctx>, slot: &Arc<Slot>) {
    if !sleep_until(&ctx.stop, ctx.start + slot.plan.start).await {
        return;
    }
    let Some(k) = start_keeper(ctx, &ctx.server, slot) else {
        return;
    };
    let w = watch_keeper(ctx.clone(), slot.clone(), &k);
    sleep_until(&ctx.stop, ctx.deadline).await;
    release_keeper(ctx, slot, k, w, "(end of the day)").await;
}
