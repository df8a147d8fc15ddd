//! Releaser: sessions of work with a keeper, a release and a break between;
//! denied (the keeper polls on 409) while the pool is full.

use std::sync::Arc;
use std::time::Instant;

use super::keeper::{release_keeper, start_keeper, watch_keeper};
use crate::simulate::context::{Ctx, secs, sleep_for, sleep_until};
use crate::simulate::plan::Rng;
use crate::simulate::slots::Slot;

/// Works a while, releases, takes a break, comes back.
pub(super) async fn releaser(ctx: &Arc<Ctx>, slot: &Arc<Slot>) {
    let mut rng = Rng::new(slot.plan.seed);
    let mut next = ctx.start + slot.plan.start;
    loop {
        if !sleep_until(&ctx.stop, next).await {
            return;
        }
        let Some(k) = start_keeper(ctx, &ctx.server, slot) else {
            return;
        };
        let w = watch_keeper(ctx.clone(), slot.clone(), &k);
        // Wait for a seat (the keeper retries on 409), but not forever.
        let give_up = rng.part_of(ctx.duration, 0.2, 0.35);
        let mut stop = ctx.stop.clone();
        let got = tokio::select! {
            r = k.wait_for_lease() => r.is_ok(),
            _ = tokio::time::sleep(give_up) => false,
            _ = stop.wait_for(|s| *s) => false,
        };
        if got {
            let began = Instant::now();
            let work = rng.part_of(ctx.duration, 0.10, 0.30);
            sleep_for(&ctx.stop, work).await;
            let why = format!("after {} of work", secs(began.elapsed()));
            release_keeper(ctx, slot, k, w, &why).await;
        } else {
            release_keeper(ctx, slot, k, w, "").await;
        }
        next = Instant::now() + rng.part_of(ctx.duration, 0.05, 0.15);
    }
}
