//! What the simulator does with the admin API, when it has a token: learn
//! the pool (its idle timeout included), sample the server's live count, report reaps of our clients'
//! seats from the event log, and revoke a seat now and then.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use leasehold_common::api::{EventKind, RevokeRequest};
use tokio::task::JoinHandle;

use super::context::{Ctx, sleep_until};
use super::plan::{Behaviour, Plan, Rng};
use super::report::Kind;
use super::slots::Slot;
use super::target::Target;
use crate::api::{AdminClient, ApiError};
use crate::conn::ConnArgs;
use crate::format::short_id;

/// The admin client if a token is found and the admin API answers (the
/// simulation runs without one), with the pool's size and timing taken
/// from the server into `target`. An unreachable server is an error.
pub(super) async fn connect(
    conn: &ConnArgs,
    server: &str,
    target: &mut Target,
) -> anyhow::Result<Option<AdminClient>> {
    let Ok(token) = conn.admin_token() else {
        eprintln!(
            "leasehold simulate: no admin token (--token, LEASEHOLD_ADMIN_TOKEN or \
             {} from --data-dir/LEASEHOLD_DATA_DIR): no revokes, reaps not reported",
            conn.token_file().display()
        );
        return Ok(None);
    };
    let admin = AdminClient::new(server, &token)?;
    match admin.licenses().await {
        Ok(resp) => {
            if let Some(l) = resp.licenses.iter().find(|l| l.id == target.license) {
                target.seats = Some(l.seats);
                target.ttl = Some(Duration::from_secs_f64(l.ttl_s.max(0.0)));
                target.skew = Some(Duration::from_secs_f64(l.skew_s.max(0.0)));
                target.idle_timeout = l
                    .idle_timeout_s
                    .map(|t| Duration::from_secs_f64(t.max(0.0)));
            }
            Ok(Some(admin))
        }
        Err(e @ ApiError::Unreachable { .. }) => Err(e.into()),
        Err(e) => {
            eprintln!("leasehold simulate: admin API not usable ({e}); no revokes");
            Ok(None)
        }
    }
}

/// Start the admin-side tasks of a run; they run until aborted.
pub(super) fn spawn_tasks(
    ctx: &Arc<Ctx>,
    admin: &AdminClient,
    slots: &[Arc<Slot>],
    plan: &Plan,
    seed: u64,
    max_live: &Arc<Mutex<Option<LiveMax>>>,
) -> Vec<JoinHandle<()>> {
    vec![
        tokio::spawn(sample_live(ctx.clone(), admin.clone(), max_live.clone())),
        tokio::spawn(report_reaps(ctx.clone(), admin.clone(), slots.to_vec())),
        tokio::spawn(revoker(
            ctx.clone(),
            admin.clone(),
            slots.to_vec(),
            plan.revokes.clone(),
            Rng::new(seed ^ 0x5eed),
        )),
    ]
}

/// The most seats the server counted for the license (`live`: borrowed
/// ones included), and the most of them borrowed, each over the run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct LiveMax {
    pub live: u32,
    pub borrowed: u32,
}

async fn sample_live(ctx: Arc<Ctx>, admin: AdminClient, max: Arc<Mutex<Option<LiveMax>>>) {
    loop {
        if let Ok(resp) = admin.licenses().await
            && let Some(l) = resp.licenses.iter().find(|l| l.id == ctx.target.license)
            && let Ok(mut m) = max.lock()
        {
            let was = m.unwrap_or_default();
            *m = Some(LiveMax {
                live: was.live.max(l.live),
                borrowed: was.borrowed.max(l.borrowed),
            });
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Report the reaper deleting our clients' seats, from the event log.
async fn report_reaps(ctx: Arc<Ctx>, admin: AdminClient, slots: Vec<Arc<Slot>>) {
    // Start from the newest event: page to the end once.
    let mut after = 0;
    while let Ok(page) = admin.events(after, 10_000).await {
        match page.events.last() {
            Some(e) if page.events.len() == 10_000 => after = e.id,
            Some(e) => {
                after = e.id;
                break;
            }
            None => break,
        }
    }
    loop {
        tokio::time::sleep(Duration::from_millis(250)).await;
        let Ok(page) = admin.events(after, 1000).await else {
            continue;
        };
        for e in page.events {
            after = e.id;
            if e.kind != EventKind::Reap
                || e.license_id.as_deref() != Some(ctx.target.license.as_str())
            {
                continue;
            }
            let Some(seat) = e.seat_id else { continue };
            let owner = ctx
                .seat_owners
                .lock()
                .ok()
                .and_then(|s| s.get(&seat).copied());
            if let Some(slot) = owner.and_then(|i| slots.get(i)) {
                slot.reaped(&seat);
                ctx.reporter.event(
                    &slot.plan,
                    Kind::Reaped,
                    &format!("seat {} deleted by the reaper", short_id(&seat)),
                );
            }
        }
    }
}

/// The seat an admin revokes, and whose.
struct RevokeTarget {
    slot: Arc<Slot>,
    seat: String,
    crashed: bool,
}

/// A crashed client's stuck seat when there is one marked for it, else
/// someone's held seat (preferring clients not revoked before; never an
/// idle client's or a returner's).
fn pick_target(slots: &[Arc<Slot>], rng: &mut Rng) -> Option<RevokeTarget> {
    let crashed = slots.iter().find_map(|s| {
        s.revocable_crash().map(|seat| RevokeTarget {
            slot: s.clone(),
            seat,
            crashed: true,
        })
    });
    if crashed.is_some() {
        return crashed;
    }
    let now = Instant::now();
    // Idle seats are left to the server's idle timeout: that is what the
    // idle clients are there to show.
    let mut held: Vec<(Arc<Slot>, String, bool)> = slots
        .iter()
        .filter(|s| !matches!(s.plan.behaviour, Behaviour::Idle | Behaviour::Returner))
        .filter_map(|s| Some((s.clone(), s.keeper_seat(now)?, s.was_revoked())))
        .collect();
    // Spread the revokes: someone not revoked before, if possible.
    held.sort_by_key(|(s, _, revoked)| (*revoked, s.plan.index));
    let fresh = held.iter().filter(|(_, _, revoked)| !revoked).count();
    if fresh > 0 {
        held.truncate(fresh);
    }
    if held.is_empty() {
        return None;
    }
    let (slot, seat, _) = held.swap_remove(rng.below(held.len()));
    Some(RevokeTarget {
        slot,
        seat,
        crashed: false,
    })
}

/// Now and then (at the plan's `revokes` offsets) an admin revokes a seat;
/// a keeper whose seat it was then checks out again.
async fn revoker(
    ctx: Arc<Ctx>,
    admin: AdminClient,
    slots: Vec<Arc<Slot>>,
    revokes: Vec<Duration>,
    mut rng: Rng,
) {
    for at in revokes {
        if !sleep_until(&ctx.stop, ctx.start + at).await {
            return;
        }
        let Some(RevokeTarget {
            slot,
            seat,
            crashed,
        }) = pick_target(&slots, &mut rng)
        else {
            continue;
        };
        let reason = if crashed {
            format!("stuck seat: {}'s machine crashed", slot.plan.holder)
        } else {
            format!(
                "{}'s seat looked idle; freeing it for someone in line",
                slot.plan.holder
            )
        };
        slot.revoking(&seat);
        let body = RevokeRequest {
            reason: Some(reason.clone()),
            block_s: None,
            force: false,
        };
        match admin.revoke(&seat, &body).await {
            Ok(()) => ctx.reporter.event(
                &slot.plan,
                Kind::Revoked,
                &format!("seat {} by an admin: {reason}", short_id(&seat)),
            ),
            Err(ApiError::UnknownSeat { .. }) => {}
            Err(e) => ctx
                .reporter
                .event(&slot.plan, Kind::Error, &format!("revoke: {e}")),
        }
    }
}
