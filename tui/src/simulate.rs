//! `leasehold simulate`: simulated clients against a server, so the console
//! has something to show (and so a change to the server can be watched
//! under a realistic load).
//!
//! Each client is one task:
//! - steady, releaser and flaky clients hold their seat with the real
//!   [`LeaseKeeper`] (a flaky one talks through a [`proxy::FlakyProxy`] that
//!   goes down now and then);
//! - crashers and late arrivals use the typed [`Client`] where the keeper
//!   cannot express them: a crash must stop heartbeating *without* the
//!   release that dropping or shutting down a keeper does, and a late
//!   arrival queues with `?wait=` (a raw request; the keeper only polls).
//!
//! With an admin token, the simulator also revokes a stuck seat now and
//! then, reports reaps from the event log, and samples the server's live
//! count. Everything stops at `--duration` (or Ctrl-C): keepers release,
//! crashed clients stay crashed.
//!
//! [`plan`] (pure, seeded) decides who does what when; [`report`] prints.

pub mod plan;
pub mod proxy;
pub mod report;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::Args;
use leasehold_common::api::{CheckoutRequest, EventKind, Lease, RevokeRequest};
use leasehold_common::client::{Client, ClientError, KeeperConfig, KeeperState, LeaseKeeper};
use leasehold_common::policy::{Licenses, format_duration, parse_duration};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::api::{AdminClient, ApiError};
use crate::conn::{ConnArgs, DEFAULT_TOKEN_FILE, resolve_token};
use crate::format::short_id;
use plan::{Behaviour, ClientPlan, Plan, Rng};
use proxy::{FlakyProxy, Outage};
use report::{Kind, Reporter, Summary};

/// Where the quickstart server reads its pools, relative to the working
/// directory (the repository root in the README's quickstart).
pub const DEFAULT_LICENSES_FILE: &str = "assets/licenses.toml";
/// Used when no licenses file is found: `demo-ide` of the shipped demo pools.
pub const FALLBACK_LICENSE: (&str, &str) = ("demo-ide", "demo-ide-key");

/// Flags of `leasehold simulate`.
#[derive(Debug, Clone, Args)]
#[command(after_help = "\
Default license: the pool with the shortest TTL in the licenses file, which \
for the demo pools is demo-ide (3 seats, 30 s TTL): a crashed client's seat \
is reaped about 40 s after the crash (TTL + reap grace), inside the default \
60 s run. demo-cad (60 s TTL + 15 s grace) reaps at ~75 s, after the run; \
pass `--license demo-cad --duration 2m` to watch that.

Behaviours: steady (holds all run), releaser (works a while, releases, comes \
back; denied while the pool is full), crasher (stops heartbeating without \
releasing: reaped, or revoked), flaky (network outages it rides out; in a \
run of 3 x TTL or more, one outage outlasts the lease so it lapses), late (arrives mid-run and queues with \
?wait=). With an admin token (--token, LEASEHOLD_ADMIN_TOKEN or \
./data/admin.token) it also revokes a stuck seat now and then and reports reaps.

Same --seed, same plan (who does what, when, under which name); the \
network's and the server's timing still vary.")]
pub struct SimulateArgs {
    /// License to simulate on (default: the shortest-TTL pool of the
    /// licenses file, else demo-ide).
    #[arg(long, value_name = "ID")]
    pub license: Option<String>,

    /// Its license key (default: from the licenses file).
    #[arg(long, value_name = "KEY")]
    pub key: Option<String>,

    /// Simulated clients (default: seats + 5 when the pool size is known,
    /// else 15).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub clients: Option<u32>,

    /// How long to run; everything is released (or left crashed) at the end.
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = parse_run_duration)]
    pub duration: Duration,

    /// Seed for the plan (default: random, printed in the summary).
    #[arg(long, value_name = "S")]
    pub seed: Option<u64>,

    /// Licenses file to take the default license and key from.
    #[arg(long, value_name = "FILE", default_value = DEFAULT_LICENSES_FILE)]
    pub licenses: PathBuf,

    /// Print only the summary, not one line per event.
    #[arg(long)]
    pub quiet: bool,

    /// Print only the summary, as JSON.
    #[arg(long)]
    pub json: bool,
}

fn parse_run_duration(s: &str) -> Result<Duration, String> {
    let d = parse_duration(s)?;
    if d < Duration::from_millis(500) || d > Duration::from_secs(24 * 3600) {
        return Err("must be between 500ms and 24h".into());
    }
    Ok(d)
}

/// The license the simulation runs on and what is known about its pool.
#[derive(Debug, Clone, PartialEq)]
pub struct Target {
    pub license: String,
    pub key: String,
    pub seats: Option<u32>,
    pub ttl: Option<Duration>,
    pub skew: Option<Duration>,
}

/// Pick the license (pure): the one asked for, else the shortest TTL in the
/// licenses file (ties: the first by id), else [`FALLBACK_LICENSE`]. The
/// key comes from the flag, else the file.
pub fn choose_target(
    license: Option<&str>,
    key: Option<&str>,
    file: Option<&Licenses>,
    file_name: &Path,
) -> anyhow::Result<Target> {
    let entry = match license {
        Some(id) => file.and_then(|f| f.get(id)),
        None => file.and_then(|f| f.iter().min_by_key(|l| l.policy.ttl)),
    };
    let id = match (license, entry) {
        (Some(id), _) => id.to_string(),
        (None, Some(e)) => e.id.clone(),
        (None, None) => FALLBACK_LICENSE.0.to_string(),
    };
    let key = match (key, entry) {
        (Some(k), _) => k.to_string(),
        (None, Some(e)) => e.key.clone(),
        (None, None) if license.is_none() => FALLBACK_LICENSE.1.to_string(),
        (None, None) => bail!(
            "no key for license {id}: pass --key (it is not in {})",
            file_name.display()
        ),
    };
    Ok(Target {
        license: id,
        key,
        seats: entry.map(|e| e.policy.seats),
        ttl: entry.map(|e| e.policy.ttl),
        skew: entry.map(|e| e.policy.skew),
    })
}

fn read_licenses(path: &Path) -> Option<Licenses> {
    let text = std::fs::read_to_string(path).ok()?;
    match Licenses::parse(&text) {
        Ok(l) => Some(l),
        Err(e) => {
            eprintln!("leasehold simulate: ignoring {}: {e}", path.display());
            None
        }
    }
}

/// What every task shares.
struct Ctx {
    server: String,
    target: Target,
    start: Instant,
    deadline: Instant,
    duration: Duration,
    stop: watch::Receiver<bool>,
    reporter: Reporter,
    /// Every seat a simulated client held, to name the holder of a reap.
    seats: Mutex<HashMap<String, usize>>,
}

impl Ctx {
    fn remaining(&self) -> Duration {
        self.deadline.saturating_duration_since(Instant::now())
    }
}

/// One client's live state, shared with the samplers and the revoker.
struct Slot {
    plan: ClientPlan,
    inner: Mutex<SlotState>,
}

#[derive(Default)]
struct SlotState {
    /// The seat held and until when it is surely valid (local clock).
    held: Option<(String, Instant)>,
    /// Held by a LeaseKeeper (revoking it shows a re-acquire).
    keeper: bool,
    /// The keeper is shutting down: a renewal it published just before
    /// must not mark the seat held again after the release began.
    closing: bool,
    /// A crashed client's seat, still on the server until reaped or revoked.
    crashed: Option<String>,
    /// Seats an admin revoked: a heartbeat that raced the revoke must not
    /// count them as held again.
    revoked: Vec<String>,
}

impl Slot {
    fn hold(&self, ctx: &Ctx, seat: &str, valid_until: Instant, keeper: bool) {
        let mut s = self.inner.lock().expect("slot lock");
        if s.revoked.iter().any(|r| r == seat) || (keeper && s.closing) {
            return;
        }
        s.held = Some((seat.to_string(), valid_until));
        s.keeper = keeper;
        if let Ok(mut seats) = ctx.seats.lock() {
            seats.insert(seat.to_string(), self.plan.index);
        }
    }

    /// Stop counting the keeper's seat as held: it is being released.
    fn closing(&self, closing: bool) -> Option<String> {
        let mut s = self.inner.lock().expect("slot lock");
        s.closing = closing;
        s.held.take().map(|(seat, _)| seat)
    }

    fn clear(&self) -> Option<String> {
        self.inner
            .lock()
            .expect("slot lock")
            .held
            .take()
            .map(|(s, _)| s)
    }

    fn holding(&self, now: Instant) -> bool {
        self.inner
            .lock()
            .expect("slot lock")
            .held
            .as_ref()
            .is_some_and(|(_, until)| now < *until)
    }
}

/// A lease's window, `expires_at − issued_at`.
fn window(lease: &Lease) -> Duration {
    Duration::from_millis(lease.expires_at.millis_since(lease.issued_at).max(0) as u64)
}

/// Sleep until `until`; false if the run stopped first.
async fn sleep_until(stop: &watch::Receiver<bool>, until: Instant) -> bool {
    let mut stop = stop.clone();
    if *stop.borrow() {
        return false;
    }
    tokio::select! {
        _ = tokio::time::sleep_until(until.into()) => true,
        _ = stop.wait_for(|s| *s) => false,
    }
}

async fn sleep_for(stop: &watch::Receiver<bool>, d: Duration) -> bool {
    sleep_until(stop, Instant::now() + d).await
}

fn secs(d: Duration) -> String {
    format!("{:.1}s", d.as_secs_f64())
}

/// Run the simulation and print the summary.
pub async fn run(conn: &ConnArgs, args: SimulateArgs) -> anyhow::Result<()> {
    let server = conn.server.trim_end_matches('/').to_string();
    let file = read_licenses(&args.licenses);
    let mut target = choose_target(
        args.license.as_deref(),
        args.key.as_deref(),
        file.as_ref(),
        &args.licenses,
    )?;

    // The admin API is optional: revokes, reaps, the live count, the pool.
    let admin = match resolve_token(conn.token.as_deref(), Path::new(DEFAULT_TOKEN_FILE)) {
        Ok(token) => {
            let admin = AdminClient::new(&server, &token)?;
            match admin.licenses().await {
                Ok(resp) => {
                    if let Some(l) = resp.licenses.iter().find(|l| l.id == target.license) {
                        target.seats = Some(l.seats);
                        target.ttl = Some(Duration::from_secs_f64(l.ttl_s.max(0.0)));
                        target.skew = Some(Duration::from_secs_f64(l.skew_s.max(0.0)));
                    }
                    Some(admin)
                }
                Err(e @ ApiError::Unreachable { .. }) => return Err(e.into()),
                Err(e) => {
                    eprintln!("leasehold simulate: admin API not usable ({e}); no revokes");
                    None
                }
            }
        }
        Err(_) => {
            eprintln!(
                "leasehold simulate: no admin token (--token, LEASEHOLD_ADMIN_TOKEN or \
                 ./{DEFAULT_TOKEN_FILE}): no revokes, reaps not reported"
            );
            None
        }
    };

    preflight(&server, &target).await?;

    let n = args
        .clients
        .map(|c| c as usize)
        .unwrap_or_else(|| target.seats.map_or(15, |s| s as usize + 5));
    let seed = args.seed.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64)
            % 1_000_000
    });
    let plan = plan::plan(n, args.duration, seed);
    let quiet = args.quiet || args.json;
    if !quiet {
        println!("{}", header(&server, &target, &plan, args.duration, seed));
    }

    let (stop_tx, stop_rx) = watch::channel(false);
    let start = Instant::now();
    let ctx = Arc::new(Ctx {
        server: server.clone(),
        target: target.clone(),
        start,
        deadline: start + args.duration,
        duration: args.duration,
        stop: stop_rx,
        reporter: Reporter::new(start, quiet),
        seats: Mutex::new(HashMap::new()),
    });
    let slots: Vec<Arc<Slot>> = plan
        .clients
        .iter()
        .map(|p| {
            Arc::new(Slot {
                plan: p.clone(),
                inner: Mutex::new(SlotState::default()),
            })
        })
        .collect();
    let upstream = upstream_addr(&server).await;

    let mut clients: Vec<JoinHandle<()>> = Vec::new();
    for slot in &slots {
        let (ctx, slot) = (ctx.clone(), slot.clone());
        clients.push(tokio::spawn(async move {
            match slot.plan.behaviour {
                Behaviour::Steady => steady(&ctx, &slot).await,
                Behaviour::Releaser => releaser(&ctx, &slot).await,
                Behaviour::Crasher => crasher(&ctx, &slot).await,
                Behaviour::Flaky => flaky(&ctx, &slot, upstream).await,
                Behaviour::Late => late(&ctx, &slot).await,
            }
        }));
    }

    let max_held = Arc::new(Mutex::new(0u32));
    let mut background: Vec<JoinHandle<()>> = Vec::new();
    background.push(tokio::spawn(sample_held(slots.clone(), max_held.clone())));
    let max_live = Arc::new(Mutex::new(None::<u32>));
    if let Some(admin) = &admin {
        background.push(tokio::spawn(sample_live(
            ctx.clone(),
            admin.clone(),
            max_live.clone(),
        )));
        background.push(tokio::spawn(report_reaps(
            ctx.clone(),
            admin.clone(),
            slots.clone(),
        )));
        background.push(tokio::spawn(revoker(
            ctx.clone(),
            admin.clone(),
            slots.clone(),
            plan.clone(),
            Rng::new(seed ^ 0x5eed),
        )));
    }

    let interrupted = tokio::select! {
        _ = tokio::time::sleep_until(ctx.deadline.into()) => false,
        r = tokio::signal::ctrl_c() => r.is_ok(),
    };
    stop_tx.send_replace(true);
    // Keepers release (bounded by their request timeout); give up after that.
    let all = futures_util::future::join_all(clients.iter_mut());
    if tokio::time::timeout(Duration::from_secs(15), all)
        .await
        .is_err()
    {
        for c in &clients {
            c.abort();
        }
    }
    for b in &background {
        b.abort();
    }

    let counts = ctx.reporter.counts();
    let (behaviours, events) = Summary::tables(&plan.clients, &counts);
    let max_held = *max_held.lock().expect("lock");
    let max_live_server = *max_live.lock().expect("lock");
    let within_seats = target
        .seats
        .map(|s| max_held <= s && max_live_server.is_none_or(|l| l <= s));
    let summary = Summary {
        server,
        license: target.license.clone(),
        seats: target.seats,
        clients: n,
        seed,
        duration_s: args.duration.as_secs_f64(),
        elapsed_s: start.elapsed().as_secs_f64(),
        interrupted,
        admin: admin.is_some(),
        behaviours,
        events,
        max_held,
        max_live_server,
        within_seats,
    };
    if args.json {
        println!(
            "{}",
            crate::format::json_for_terminal(&serde_json::to_string_pretty(&summary)?)
        );
    } else {
        print!("{}", report::format_summary(&summary));
    }
    Ok(())
}

fn header(server: &str, target: &Target, plan: &Plan, duration: Duration, seed: u64) -> String {
    let pool = match (target.seats, target.ttl) {
        (Some(s), Some(t)) => format!(" ({s} seats, ttl {})", format_duration(t)),
        (Some(s), None) => format!(" ({s} seats)"),
        _ => String::new(),
    };
    let mix: Vec<String> = Behaviour::ALL
        .iter()
        .map(|b| (b, plan.count(*b)))
        .filter(|(_, n)| *n > 0)
        .map(|(b, n)| format!("{b} {n}"))
        .collect();
    format!(
        "simulating {} clients on {}{pool} at {} for {}, seed {seed}: {}",
        plan.clients.len(),
        leasehold_common::text::sanitize_for_terminal(&target.license),
        leasehold_common::text::sanitize_for_terminal(server),
        format_duration(duration),
        mix.join(", ")
    )
}

/// Check the server, license and key without taking a seat: releasing a seat
/// that does not exist is a 204 once the key is right.
async fn preflight(server: &str, target: &Target) -> anyhow::Result<()> {
    let client = Client::new(server, &target.license, &target.key)?;
    match client
        .release("00000000000000000000000000000000", Duration::from_secs(5))
        .await
    {
        Ok(()) => Ok(()),
        Err(ClientError::Transient(e)) => {
            bail!("cannot reach the server at {server} ({e}); is leaseholdd running?")
        }
        Err(ClientError::Unauthorized(_)) => bail!(
            "the server refused the key for license {} (401): pass the right --key",
            target.license
        ),
        Err(ClientError::UnknownLicense(_)) => bail!(
            "the server has no license {} (pass --license; see `leasehold status`)",
            target.license
        ),
        Err(e) => Err(e).context("checking the license key"),
    }
}

/// The server's socket address, for the flaky clients' proxies.
async fn upstream_addr(server: &str) -> Option<SocketAddr> {
    let url = reqwest::Url::parse(server).ok()?;
    let host = url.host_str()?.to_string();
    let port = url.port_or_known_default()?;
    tokio::net::lookup_host((host.trim_matches(['[', ']']), port))
        .await
        .ok()?
        .next()
}

fn keeper(ctx: &Ctx, server: &str, slot: &Slot) -> Option<LeaseKeeper> {
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
fn watch_keeper(ctx: Arc<Ctx>, slot: Arc<Slot>, keeper: &LeaseKeeper) -> JoinHandle<()> {
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
async fn release_keeper(
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

/// Holds a seat for the whole run.
async fn steady(ctx: &Arc<Ctx>, slot: &Arc<Slot>) {
    if !sleep_until(&ctx.stop, ctx.start + slot.plan.start).await {
        return;
    }
    let Some(k) = keeper(ctx, &ctx.server, slot) else {
        return;
    };
    let w = watch_keeper(ctx.clone(), slot.clone(), &k);
    sleep_until(&ctx.stop, ctx.deadline).await;
    release_keeper(ctx, slot, k, w, "(end of the day)").await;
}

/// Works a while, releases, takes a break, comes back.
async fn releaser(ctx: &Arc<Ctx>, slot: &Arc<Slot>) {
    let mut rng = Rng::new(slot.plan.seed);
    let mut next = ctx.start + slot.plan.start;
    loop {
        if !sleep_until(&ctx.stop, next).await {
            return;
        }
        let Some(k) = keeper(ctx, &ctx.server, slot) else {
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

/// How a manual hold ended.
enum HoldEnd {
    Stopped,
    Deadline,
    Lost,
}

/// Heartbeat `lease` with the typed client until the run stops, `until`
/// (a crash) or the seat is lost. Does not release.
async fn hold_manually(
    ctx: &Ctx,
    slot: &Slot,
    client: &Client,
    mut lease: Lease,
    mut sent: Instant,
    until: Option<Instant>,
) -> HoldEnd {
    let mut next = sent + window(&lease) / 3;
    loop {
        let w = window(&lease);
        slot.hold(ctx, &lease.seat_id, sent + w, false);
        let wake = until.map_or(next, |u| u.min(next));
        if !sleep_until(&ctx.stop, wake).await {
            return HoldEnd::Stopped;
        }
        if until.is_some_and(|u| Instant::now() >= u) {
            return HoldEnd::Deadline;
        }
        let now = Instant::now();
        if now >= sent + w {
            return HoldEnd::Lost;
        }
        let timeout = (sent + w - now).max(Duration::from_millis(250));
        match client.heartbeat(&lease.seat_id, timeout).await {
            Ok(l) if l.seat_id == lease.seat_id => {
                lease = l;
                sent = now;
                next = sent + window(&lease) / 3;
            }
            Err(ClientError::SeatLost) => return HoldEnd::Lost,
            _ => next = Instant::now() + (w / 10).max(Duration::from_millis(50)),
        }
    }
}

/// Check out with the typed client, retrying on 409 until `until`.
async fn checkout_manually(
    ctx: &Ctx,
    slot: &Slot,
    client: &Client,
    until: Instant,
) -> Option<(Lease, Instant)> {
    let req = CheckoutRequest {
        holder: slot.plan.holder.clone(),
        fingerprint: Some(slot.plan.fingerprint.clone()),
    };
    loop {
        let sent = Instant::now();
        let wait = match client.checkout(&req, None, Duration::from_secs(10)).await {
            Ok(lease) => return Some((lease, sent)),
            Err(ClientError::NoSeats { retry_after, .. }) => {
                let wait = retry_after
                    .unwrap_or(Duration::from_secs(1))
                    .clamp(Duration::from_millis(200), Duration::from_secs(5));
                ctx.reporter.event(
                    &slot.plan,
                    Kind::Denied,
                    &format!("pool full, retrying in {}", secs(wait)),
                );
                wait
            }
            Err(e) if e.is_transient() => Duration::from_secs(1),
            Err(e) => {
                ctx.reporter.event(&slot.plan, Kind::Error, &e.to_string());
                return None;
            }
        };
        let at = Instant::now() + wait;
        if at >= until || !sleep_until(&ctx.stop, at).await {
            return None;
        }
    }
}

/// Checks out, heartbeats a while, then stops dead: no release.
async fn crasher(ctx: &Arc<Ctx>, slot: &Arc<Slot>) {
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
                slot.inner.lock().expect("slot lock").crashed = Some(seat.clone());
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

/// Holds a seat with a LeaseKeeper through a proxy that drops out.
async fn flaky(ctx: &Arc<Ctx>, slot: &Arc<Slot>, upstream: Option<SocketAddr>) {
    if !sleep_until(&ctx.stop, ctx.start + slot.plan.start).await {
        return;
    }
    let proxy = match upstream {
        Some(addr) => FlakyProxy::start(addr).await.ok(),
        None => None,
    };
    let url = match &proxy {
        Some(p) => {
            let path = reqwest::Url::parse(&ctx.server)
                .map(|u| u.path().trim_end_matches('/').to_string())
                .unwrap_or_default();
            format!("http://{}{path}", p.addr)
        }
        None => ctx.server.clone(),
    };
    let Some(k) = keeper(ctx, &url, slot) else {
        return;
    };
    let w = watch_keeper(ctx.clone(), slot.clone(), &k);
    let mut rng = Rng::new(slot.plan.seed);
    let mut stop = ctx.stop.clone();
    let lease = tokio::select! {
        r = k.wait_for_lease() => r.ok(),
        _ = stop.wait_for(|s| *s) => None,
    };
    if let (Some(lease), Some(proxy)) = (lease, &proxy) {
        let win = window(&lease);
        let skew = ctx.target.skew.unwrap_or(win / 4);
        let mut long_pending = slot.plan.long_outage;
        let mut outages = 0;
        loop {
            let up = rng
                .part_of(win, 0.8, 1.6)
                .min(rng.part_of(ctx.duration, 0.1, 0.2));
            if !sleep_for(&ctx.stop, up).await {
                break;
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
                    break;
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
                break;
            }
            outages += 1;
            if long {
                long_pending = false;
            }
        }
        debug_assert!(!proxy.is_down());
    }
    sleep_until(&ctx.stop, ctx.deadline).await;
    release_keeper(ctx, slot, k, w, "(end of the day)").await;
    drop(proxy);
}

/// Arrives mid-run and waits in line (`?wait=`) for a seat.
async fn late(ctx: &Arc<Ctx>, slot: &Arc<Slot>) {
    if !sleep_until(&ctx.stop, ctx.start + slot.plan.start).await {
        return;
    }
    let Ok(client) = Client::new(&ctx.server, &ctx.target.license, &ctx.target.key) else {
        return;
    };
    let http = reqwest::Client::new();
    let url = format!("{}/v1/licenses/{}/seats", ctx.server, ctx.target.license);
    let req = CheckoutRequest {
        holder: slot.plan.holder.clone(),
        fingerprint: Some(slot.plan.fingerprint.clone()),
    };
    loop {
        // Whole seconds, and the answer must come before the run ends.
        let margin = ctx
            .remaining()
            .mul_f64(0.1)
            .clamp(Duration::from_millis(300), Duration::from_millis(1500));
        let wait_s = ctx.remaining().saturating_sub(margin).as_secs().min(60);
        if wait_s == 0 {
            return;
        }
        ctx.reporter.event(
            &slot.plan,
            Kind::Queued,
            &format!("asks for a seat, willing to wait up to {wait_s}s"),
        );
        let sent = Instant::now();
        let call = http
            .post(format!("{url}?wait={wait_s}"))
            .bearer_auth(&ctx.target.key)
            .timeout(Duration::from_secs(wait_s + 10))
            .json(&req)
            .send();
        let mut stop = ctx.stop.clone();
        // On stop the request is dropped: the server takes us out of the line.
        let resp = tokio::select! {
            r = call => r,
            _ = stop.wait_for(|s| *s) => return,
        };
        let lease = match resp {
            Ok(r) if r.status() == reqwest::StatusCode::CREATED => r.json::<Lease>().await.ok(),
            Ok(r) if r.status() == reqwest::StatusCode::CONFLICT => {
                ctx.reporter.event(
                    &slot.plan,
                    Kind::WaitTimeout,
                    &format!("no seat freed within {wait_s}s"),
                );
                continue;
            }
            Ok(r) => {
                let status = r.status();
                let body = r.text().await.unwrap_or_default();
                ctx.reporter.event(
                    &slot.plan,
                    Kind::Error,
                    &format!("HTTP {status}: {}", body.trim()),
                );
                return;
            }
            Err(e) => {
                ctx.reporter.event(&slot.plan, Kind::Error, &e.to_string());
                if !sleep_for(&ctx.stop, Duration::from_secs(1)).await {
                    return;
                }
                continue;
            }
        };
        let Some(lease) = lease else { continue };
        let seat = lease.seat_id.clone();
        let waited = sent.elapsed();
        if waited >= Duration::from_millis(300) {
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

/// The most simulated clients holding a valid lease at once.
async fn sample_held(slots: Vec<Arc<Slot>>, max: Arc<Mutex<u32>>) {
    loop {
        let now = Instant::now();
        let held = slots.iter().filter(|s| s.holding(now)).count() as u32;
        if let Ok(mut m) = max.lock() {
            *m = (*m).max(held);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The most live seats the server reports for the license.
async fn sample_live(ctx: Arc<Ctx>, admin: AdminClient, max: Arc<Mutex<Option<u32>>>) {
    loop {
        if let Ok(resp) = admin.licenses().await
            && let Some(l) = resp.licenses.iter().find(|l| l.id == ctx.target.license)
            && let Ok(mut m) = max.lock()
        {
            *m = Some(m.map_or(l.live, |v| v.max(l.live)));
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
            let index = ctx.seats.lock().ok().and_then(|s| s.get(&seat).copied());
            if let Some(slot) = index.and_then(|i| slots.get(i)) {
                {
                    let mut s = slot.inner.lock().expect("slot lock");
                    if s.crashed.as_deref() == Some(seat.as_str()) {
                        s.crashed = None;
                    }
                }
                ctx.reporter.event(
                    &slot.plan,
                    Kind::Reaped,
                    &format!("seat {} deleted by the reaper", short_id(&seat)),
                );
            }
        }
    }
}

/// Now and then an admin revokes a seat: a crashed client's stuck seat
/// when there is one marked for it, else someone's held seat (whose keeper
/// then checks out again).
async fn revoker(
    ctx: Arc<Ctx>,
    admin: AdminClient,
    slots: Vec<Arc<Slot>>,
    plan: Plan,
    mut rng: Rng,
) {
    for at in plan.revokes {
        if !sleep_until(&ctx.stop, ctx.start + at).await {
            return;
        }
        let crashed = slots.iter().find_map(|s| {
            let st = s.inner.lock().expect("slot lock");
            match (&st.crashed, s.plan.revocable) {
                (Some(seat), true) => Some((s.clone(), seat.clone(), true)),
                _ => None,
            }
        });
        let target = crashed.or_else(|| {
            let now = Instant::now();
            let mut held: Vec<(Arc<Slot>, String)> = slots
                .iter()
                .filter_map(|s| {
                    let st = s.inner.lock().expect("slot lock");
                    match &st.held {
                        Some((seat, until)) if st.keeper && now < *until => {
                            Some((s.clone(), seat.clone()))
                        }
                        _ => None,
                    }
                })
                .collect();
            // Spread the revokes: someone not revoked before, if possible.
            held.sort_by_key(|(s, _)| {
                (
                    !s.inner.lock().expect("slot lock").revoked.is_empty(),
                    s.plan.index,
                )
            });
            let fresh = held
                .iter()
                .filter(|(s, _)| s.inner.lock().expect("slot lock").revoked.is_empty())
                .count();
            if fresh > 0 {
                held.truncate(fresh);
            }
            if held.is_empty() {
                return None;
            }
            let (s, seat) = held.swap_remove(rng.below(held.len()));
            Some((s, seat, false))
        });
        let Some((slot, seat, was_crashed)) = target else {
            continue;
        };
        let reason = if was_crashed {
            format!("stuck seat: {}'s machine crashed", slot.plan.holder)
        } else {
            format!(
                "{}'s seat looked idle; freeing it for someone in line",
                slot.plan.holder
            )
        };
        {
            // From now on this seat does not count as held, whatever a
            // heartbeat in flight says.
            let mut st = slot.inner.lock().expect("slot lock");
            st.revoked.push(seat.clone());
            if st.held.as_ref().is_some_and(|(s, _)| *s == seat) {
                st.held = None;
            }
            if st.crashed.as_deref() == Some(seat.as_str()) {
                st.crashed = None;
            }
        }
        let body = RevokeRequest {
            reason: Some(reason.clone()),
            block_s: None,
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

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = r#"
[[license]]
id = "demo-cad"
key = "demo-cad-key"
seats = 10
ttl = "60s"
skew = "5s"
reap_grace = "15s"

[[license]]
id = "demo-ide"
key = "demo-ide-key"
seats = 3
ttl = "30s"
skew = "2s"
reap_grace = "10s"
"#;

    #[test]
    fn default_license_is_the_shortest_ttl_pool() {
        let f = Licenses::parse(FILE).unwrap();
        let p = Path::new("assets/licenses.toml");
        let t = choose_target(None, None, Some(&f), p).unwrap();
        assert_eq!(
            t,
            Target {
                license: "demo-ide".into(),
                key: "demo-ide-key".into(),
                seats: Some(3),
                ttl: Some(Duration::from_secs(30)),
                skew: Some(Duration::from_secs(2)),
            }
        );
        let t = choose_target(Some("demo-cad"), None, Some(&f), p).unwrap();
        assert_eq!((t.key.as_str(), t.seats), ("demo-cad-key", Some(10)));
        let t = choose_target(Some("demo-cad"), Some("k2"), Some(&f), p).unwrap();
        assert_eq!(t.key, "k2");
        // No file: the shipped demo pool.
        let t = choose_target(None, None, None, p).unwrap();
        assert_eq!(
            (t.license.as_str(), t.key.as_str(), t.seats),
            ("demo-ide", "demo-ide-key", None)
        );
        let err = choose_target(Some("other"), None, Some(&f), p)
            .unwrap_err()
            .to_string();
        assert!(err.contains("pass --key"), "{err}");
        let t = choose_target(Some("other"), Some("k"), Some(&f), p).unwrap();
        assert_eq!(t.seats, None);
    }

    #[test]
    fn run_duration_is_bounded() {
        assert_eq!(parse_run_duration("4s"), Ok(Duration::from_secs(4)));
        assert!(parse_run_duration("100ms").is_err());
        assert!(parse_run_duration("2d").is_err());
        assert!(parse_run_duration("soon").is_err());
    }
}
