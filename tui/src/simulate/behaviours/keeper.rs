//! Running a [`LeaseKeeper`] for a simulated client: start it, turn its
//! state changes into event lines and the slot's "held", shut it down.

use std::sync::Arc;
use std::time::Instant;

use leasehold_common::client::{KeeperConfig, KeeperState, LeaseKeeper};
use tokio::task::JoinHandle;

use crate::format::short_id;
use crate::simulate::context::{Ctx, secs, window};
use crate::simulate::report::Kind;
use crate::simulate::slots::Slot;

/// Start a keeper for `slot` against `server` (the server itself, or a
/// flaky client's proxy); an error is reported and gives `None`.
pub(super) fn start_keeper(ctx: &Ctx, server: &str, slot: &Slot) -> Option<LeaseKeeper> {
    slot.closing(false);
    let cfg = KeeperConfig::new(
        server,
        &ctx.target.license,
        &ctx.target.key,
        &slot.plan.holder,
        &slot.plan.fingerprint,
    );
    match LeaseKeeper::start(cfg) {
        Ok(k) => Some(k),
        Err(e) => {
            ctx.reporter.event(&slot.plan, Kind::Error, &e.to_string());
            None
        }
    }
}

/// Report a keeper's state changes and keep its slot's "held" current.
pub(super) fn watch_keeper(ctx: Arc<Ctx>, slot: Arc<Slot>, keeper: &LeaseKeeper) -> JoinHandle<()> {
    let mut rx = keeper.subscribe();
    tokio::spawn(async move {
        let mut seat: Option<String> = None;
        let mut lapsed = false;
        while rx.changed().await.is_ok() {
            let state = rx.borrow_and_update().clone();
            let r = &ctx.reporter;
            match state {
                KeeperState::Held(lease) => {
                    let w = window(&lease);
                    // Observed after the answer: keep a margin below the window.
                    slot.hold(&ctx, &lease.seat_id, Instant::now() + w.mul_f64(0.9), true);
                    if seat.as_deref() != Some(lease.seat_id.as_str()) {
                        r.event(
                            &slot.plan,
                            Kind::Checkout,
                            &format!("seat {}, lease {}", short_id(&lease.seat_id), secs(w)),
                        );
                    } else if lapsed {
                        r.event(
                            &slot.plan,
                            Kind::Recovered,
                            &format!("seat {} renewed", short_id(&lease.seat_id)),
                        );
                    }
                    lapsed = false;
                    seat = Some(lease.seat_id);
                }
                KeeperState::Waiting { retry_after } => {
                    slot.clear();
                    r.event(
                        &slot.plan,
                        Kind::Denied,
                        &format!("pool full, retrying in {}", secs(retry_after)),
                    );
                }
                KeeperState::Acquiring => {
                    slot.clear();
                    if let Some(s) = seat.take() {
                        r.event(
                            &slot.plan,
                            Kind::Lost,
                            &format!(
                                "seat {} gone (410: revoked or reaped), checking out again",
                                short_id(&s)
                            ),
                        );
                    }
                }
                KeeperState::Lapsed => {
                    slot.clear();
                    if !lapsed {
                        r.event(
                            &slot.plan,
                            Kind::Lapsed,
                            "lease expired before a renewal got through; app degrades",
                        );
                    }
                    lapsed = true;
                }
                KeeperState::Reclaimed { message } => {
                    slot.clear();
                    let gone = seat.take().map(|s| short_id(&s).to_string());
                    r.event(
                        &slot.plan,
                        Kind::Reclaimed,
                        &format!(
                            "seat {} reclaimed (410 idle: {message}); no seat until the user is back",
                            gone.as_deref().unwrap_or("?")
                        ),
                    );
                }
                KeeperState::Blocked { message, .. } => {
                    slot.clear();
                    r.event(&slot.plan, Kind::Error, &format!("blocked: {message}"));
                }
                KeeperState::Failed(e) => {
                    slot.clear();
                    r.event(&slot.plan, Kind::Error, &e);
                }
                KeeperState::Stopped => {
                    slot.clear();
                    break;
                }
            }
        }
    })
}

/// Shut a keeper down (it releases), reporting the release.
pub(super) async fn release_keeper(
    ctx: &Ctx,
    slot: &Slot,
    keeper: LeaseKeeper,
    watcher: JoinHandle<()>,
    why: &str,
) {
    let held = slot
        .closing(true)
        .or_else(|| keeper.state().lease().map(|l| l.seat_id.clone()));
    keeper.shutdown().await;
    let _ = watcher.await;
    if let Some(seat) = held {
        ctx.reporter.event(
            &slot.plan,
            Kind::Release,
            &format!("seat {} {why}", short_id(&seat)),
        );
    }
}
