//! The client behaviours, one file each (idle and returner share
//! [`idle`]), and what they share: [`keeper`] for the ones that hold their
//! seat with the real
//! [`LeaseKeeper`](leasehold_common::client::LeaseKeeper) (steady, releaser,
//! flaky, idle, returner), [`manual`] for the ones on the typed `Client` (crasher, late),
//! where the keeper cannot express them: a crash must stop heartbeating
//! *without* the release that dropping or shutting down a keeper does, and a
//! late arrival waits in line with `?wait=` while the keeper polls. The
//! borrower is on the typed `Client` too: its borrow and early return are
//! each one request.

mod borrower;
mod crasher;
mod flaky;
mod idle;
mod keeper;
mod late;
mod manual;
mod releaser;
mod steady;

use std::net::SocketAddr;
use std::sync::Arc;

pub(super) use flaky::upstream_addr;

use super::context::Ctx;
use super::plan::Behaviour;
use super::slots::Slot;

/// Run one client's part until the run stops. `upstream` is the server's
/// socket address, for a flaky client's proxy.
pub(super) async fn run_client(ctx: Arc<Ctx>, slot: Arc<Slot>, upstream: Option<SocketAddr>) {
    match slot.plan.behaviour {
        Behaviour::Steady => steady::steady(&ctx, &slot).await,
        Behaviour::Releaser => releaser::releaser(&ctx, &slot).await,
        Behaviour::Crasher => crasher::crasher(&ctx, &slot).await,
        Behaviour::Flaky => flaky::flaky(&ctx, &slot, upstream).await,
        Behaviour::Late => late::late(&ctx, &slot).await,
        Behaviour::Borrower => borrower::borrower(&ctx, &slot).await,
        Behaviour::Idle => idle::idle(&ctx, &slot).await,
        Behaviour::Returner => idle::returner(&ctx, &slot).await,
    }
}
