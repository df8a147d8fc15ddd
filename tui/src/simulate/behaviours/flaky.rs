//! Flaky: a keeper behind a [`FlakyProxy`] that goes down now and then:
//! short outages it rides out and, once in a long enough run, one that
//! outlasts the lease so it lapses and recovers.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use leasehold_common::api::Lease;

use super::keeper::{release_keeper, start_keeper, watch_keeper};
use crate::simulate::context::{Ctx, secs, sleep_for, sleep_until, window};
use crate::simulate::plan::Rng;
use crate::simulate::proxy::{FlakyProxy, Outage};
use crate::simulate::report::Kind;
use crate::simulate::slots::Slot;

/// The server's socket address, for the flaky clients' proxies.
pub(in crate::simulate) async fn upstream_addr(server: &str) -> Option<SocketAddr> {
    let url = reqwest::Url::parse(server).ok()?;
    let host = url.host_str()?.to_string();
    let port = url.port_or_known_default()?;
    tokio::net::lookup_host((host.trim_matches(['[', ']']), port))
        .await
        .ok()?
        .next()
}

/// The server's URL as seen through `proxy` (same path prefix).
fn proxy_url(server: &str, proxy: &FlakyProxy) -> String {
    let path = reqwest::Url::parse(server)
        .map(|u| u.path().trim_end_matches('/').to_string())
        .unwrap_or_default();
    format!("http://{}{path}", proxy.addr)
}

/// Holds a seat with a LeaseKeeper through a proxy that drops out.
pub(super) async fn flaky(ctx: &Arc<Ctx>, slot: &Arc<Slot>, upstream: Option<SocketAddr>) {
    if !sleep_until(&ctx.stop, ctx.start + slot.plan.start).await {
        return;
    }
    let proxy = match upstream {
        Some(addr) => FlakyProxy::start(addr).await.ok(),
        None => None,
    };
    let url = match &proxy {
        Some(p) => proxy_url(&ctx.server, p),
        None => ctx.server.clone(),
    };
    let Some(k) = start_keeper(ctx, &url, slot) else {
        return;
    };
    let w = watch_keeper(ctx.clone(), slot.clone(), &k);
    let mut stop = ctx.stop.clone();
    let lease = tokio::select! {
        r = k.wait_for_lease() => r.ok(),
        _ = stop.wait_for(|s| *s) => None,
    };
    if let (Some(lease), Some(proxy)) = (lease, &proxy) {
        ride_outages(ctx, slot, proxy, &lease).await;
        debug_assert!(!proxy.is_down());
    }
    sleep_until(&ctx.stop, ctx.deadline).await;
    release_keeper(ctx, slot, k, w, "(end of the day)").await;
    drop(proxy);
}

/// Take the network down now and then until the run (nearly) ends.
async fn ride_outages(ctx: &Ctx, slot: &Slot, proxy: &FlakyProxy, lease: &Lease) {
    let mut rng = Rng::new(slot.plan.seed);
    let win = window(lease);
    let skew = ctx.target.skew.unwrap_or(win / 4);
    let mut long_pending = slot.plan.long_outage;
    let mut outages = 0;
    loop {
        let up = rng
            .part_of(win, 0.8, 1.6)
            .min(rng.part_of(ctx.duration, 0.1, 0.2));
        if !sleep_for(&ctx.stop, up).await {
            return;
        }
        // Short outages (longer than a heartbeat interval, well inside
        // the lease) first; then, once, one that outlasts the lease.
        let long = long_pending && outages >= 1;
        let len = if long {
            win + skew + win.mul_f64(0.2)
        } else {
            rng.part_of(win, 0.4, 0.5)
        };
        if Instant::now() + len + win.mul_f64(0.3) > ctx.deadline {
            if long {
                long_pending = false;
                continue;
            }
            if ctx.remaining() < win {
                return;
            }
            continue;
        }
        let mode = if rng.chance(0.5) {
            Outage::Refuse
        } else {
            Outage::Stall
        };
        ctx.reporter.event(
            &slot.plan,
            Kind::Outage,
            &format!(
                "network down for {} ({}){}",
                secs(len),
                if mode == Outage::Refuse {
                    "connections refused"
                } else {
                    "requests hang"
                },
                if long { ", longer than the lease" } else { "" }
            ),
        );
        proxy.set(mode);
        let up = sleep_for(&ctx.stop, len).await;
        proxy.set(Outage::Up);
        if !up {
            return;
        }
        outages += 1;
        if long {
            long_pending = false;
        }
    }
}
