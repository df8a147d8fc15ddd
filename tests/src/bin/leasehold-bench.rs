//! `leasehold-bench`: an HTTP/1.1 keep-alive load generator for `leaseholdd`.
//!
//! N connections, each a task with its own persistent connection (hyper's
//! client connection API directly, no pool, no reqwest), closed loop: a
//! connection sends its next request when the previous answer arrives. Every
//! run is bounded in time (warm-up + measured window) and refuses any server
//! that is not on the loopback interface.
//!
//! By default it starts its own server (temp data dir, generated licenses file
//! with the pools the scenarios need) from the `leaseholdd` binary next to its
//! own; `--server URL` targets a running one instead, which must have the
//! bench pools (`--print-licenses` prints them).
//!
//! Scenarios run in sequence against the same server, so each one's ratio to
//! `healthz` (the server's HTTP ceiling) is measured under the same conditions:
//!
//! - `healthz`: `GET /healthz`.
//! - `checkout`: checkouts into the huge pool, unique holders.
//! - `heartbeat`: `--held` seats checked out first, then heartbeated round-robin.
//! - `mixed`: ~90% heartbeats, 5% checkouts, 4% releases, 1% checkouts into the
//!   small pool that is kept full (409, counted as "denied", not errors).
//!
//! `leasehold-bench scale` measures how cost grows: checkout/heartbeat latency
//! with few vs many leases in the store, a 99%-full big pool vs a small pool,
//! and the server's RSS with many live leases.

use std::collections::BTreeMap;
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, anyhow, bail};
use bytes::Bytes;
use clap::{Parser, Subcommand};
use hdrhistogram::Histogram;
use http::header::{AUTHORIZATION, CONTENT_TYPE, HOST};
use http::{Method, Request, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1;
use hyper_util::rt::TokioIo;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::Serialize;
use tokio::net::TcpStream;

const BIG: &str = "bench-big";
const BIG_KEY: &str = "bench-big-key";
const SMALL: &str = "bench-small";
const SMALL_KEY: &str = "bench-small-key";
const SMALL_SEATS: usize = 10;
/// For `scale`: a 100,000-seat pool filled to 99%.
const FULLISH: &str = "bench-fullish";
const FULLISH_KEY: &str = "bench-fullish-key";
const FULLISH_SEATS: usize = 100_000;

fn licenses_toml() -> String {
    format!(
        r#"# Pools of leasehold-bench. Long TTLs so nothing lapses during a run.
[[license]]
id = "{BIG}"
key = "{BIG_KEY}"
seats = 10000000
ttl = "300s"
skew = "5s"
reap_grace = "15s"

[[license]]
id = "{SMALL}"
key = "{SMALL_KEY}"
seats = {SMALL_SEATS}
ttl = "300s"
skew = "5s"
reap_grace = "15s"

[[license]]
id = "{FULLISH}"
key = "{FULLISH_KEY}"
seats = {FULLISH_SEATS}
ttl = "300s"
skew = "5s"
reap_grace = "15s"
"#
    )
}

fn duration(s: &str) -> Result<Duration, String> {
    leasehold_common::policy::parse_duration(s)
}

#[derive(Debug, Parser)]
#[command(
    name = "leasehold-bench",
    about = "HTTP/1.1 keep-alive load generator for leaseholdd"
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Sub>,
    #[command(flatten)]
    common: CommonArgs,
    /// Scenarios: healthz, checkout, heartbeat, mixed, or all (comma-separated).
    #[arg(long, default_value = "all")]
    scenario: String,
    /// Seats checked out before `heartbeat` / `mixed`, heartbeated round-robin.
    #[arg(long, default_value_t = 5000)]
    held: usize,
}

#[derive(Debug, Subcommand)]
enum Sub {
    /// How cost grows: latency with few vs many leases, a 99%-full big pool
    /// vs a small one, RSS with many live leases.
    Scale {
        #[command(flatten)]
        common: CommonArgs,
        /// Leases in the store for the "many" measurements.
        #[arg(long, default_value_t = 1_000_000)]
        preload: usize,
        /// Leases in the store for the "few" measurements.
        #[arg(long, default_value_t = 1_000)]
        few: usize,
        /// Skip the 99%-full 100,000-seat pool measurement.
        #[arg(long)]
        no_fullish: bool,
    },
}

#[derive(Debug, Clone, clap::Args)]
struct CommonArgs {
    /// Target a running server (loopback only) instead of starting one.
    #[arg(long)]
    server: Option<String>,
    /// Admin token of `--server` (checks that the bench pools exist).
    #[arg(long, env = "LEASEHOLD_ADMIN_TOKEN", hide_env_values = true)]
    admin_token: Option<String>,
    /// Pid of `--server`, to report its CPU per thread and RSS.
    #[arg(long)]
    server_pid: Option<u32>,
    /// The `leaseholdd` to start (default: next to this binary).
    #[arg(long)]
    leaseholdd: Option<PathBuf>,
    /// Extra flag for the started server (repeatable), e.g. `--server-arg=--max-connections=8192`.
    #[arg(long = "server-arg", allow_hyphen_values = true)]
    server_args: Vec<String>,
    /// Concurrent keep-alive connections.
    #[arg(long, default_value_t = 64)]
    connections: usize,
    /// Measured time per scenario.
    #[arg(long, default_value = "10s", value_parser = duration)]
    duration: Duration,
    /// Unmeasured time before each scenario's window.
    #[arg(long, default_value = "2s", value_parser = duration)]
    warmup: Duration,
    /// Threads of the load generator's runtime (1 = current-thread runtime).
    #[arg(long, default_value_t = 1)]
    threads: usize,
    /// Write the results as JSON here.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Print the licenses file a `--server` needs, and exit.
    #[arg(long)]
    print_licenses: bool,
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let common = match &cli.command {
        Some(Sub::Scale { common, .. }) => common.clone(),
        None => cli.common.clone(),
    };
    if common.print_licenses {
        print!("{}", licenses_toml());
        return Ok(());
    }
    if common.connections == 0 {
        bail!("--connections must be at least 1");
    }
    let runtime = if common.threads <= 1 {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?
    } else {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(common.threads)
            .enable_all()
            .build()?
    };
    runtime.block_on(async move {
        match cli.command {
            Some(Sub::Scale {
                common,
                preload,
                few,
                no_fullish,
            }) => run_scale(common, preload, few, !no_fullish).await,
            None => run_scenarios(cli.common, &cli.scenario, cli.held).await,
        }
    })
}

// ---------------------------------------------------------------------------
// The server under test

struct Target {
    addr: SocketAddr,
    host: String,
    pid: Option<u32>,
    binary: Option<PathBuf>,
    child: Option<Child>,
    _dir: Option<tempfile::TempDir>,
    log: Arc<Mutex<Vec<String>>>,
    admin_token: Option<String>,
}

impl Target {
    async fn open(args: &CommonArgs) -> anyhow::Result<Target> {
        match &args.server {
            Some(url) => {
                let (addr, host) = loopback_addr(url)?;
                let target = Target {
                    addr,
                    host,
                    pid: args.server_pid,
                    binary: None,
                    child: None,
                    _dir: None,
                    log: Arc::default(),
                    admin_token: args.admin_token.clone(),
                };
                target.check_pools(args.admin_token.as_deref()).await?;
                Ok(target)
            }
            None => Target::start(args),
        }
    }

    fn start(args: &CommonArgs) -> anyhow::Result<Target> {
        let binary = match &args.leaseholdd {
            Some(p) => p.clone(),
            None => std::env::current_exe()?
                .parent()
                .context("bench binary has no directory")?
                .join("leaseholdd"),
        };
        if !binary.exists() {
            bail!(
                "{} not found: build it (cargo build --release -p leasehold-server) or pass --leaseholdd",
                binary.display()
            );
        }
        if binary.components().any(|c| c.as_os_str() == "debug") {
            eprintln!(
                "warning: {} looks like a debug build; figures are meaningless",
                binary.display()
            );
        }
        let dir = tempfile::tempdir()?;
        let licenses = dir.path().join("licenses.toml");
        std::fs::write(&licenses, licenses_toml())?;
        let token = format!("bench-{:032x}", rand::random::<u128>());
        let mut cmd = Command::new(&binary);
        cmd.arg("--listen")
            .arg("127.0.0.1:0")
            .arg("--data-dir")
            .arg(dir.path().join("data"))
            .arg("--licenses")
            .arg(&licenses)
            .args(&args.server_args)
            .env("LEASEHOLD_ADMIN_TOKEN", &token)
            .env("LEASEHOLD_LOG", "info")
            .env_remove("LEASEHOLD_LISTEN")
            .env_remove("LEASEHOLD_DATA_DIR")
            .env_remove("LEASEHOLD_LICENSES")
            .stdin(Stdio::null())
            .stdout(Stdio::null());
        let log: Arc<Mutex<Vec<String>>> = Arc::default();
        let keep = log.clone();
        let (child, addr) = leasehold_tests::spawn_until_listening(
            &mut cmd,
            Duration::from_secs(30),
            move |line| {
                if let Ok(mut l) = keep.lock() {
                    if l.len() >= 200 {
                        l.remove(0);
                    }
                    l.push(line.to_string());
                }
            },
        )
        .map_err(|e| {
            let log = log.lock().map(|l| l.join("\n")).unwrap_or_default();
            anyhow!("{e}\n{log}")
        })?;
        let addr: SocketAddr = addr
            .parse()
            .with_context(|| format!("bad address {addr}"))?;
        Ok(Target {
            addr,
            host: addr.to_string(),
            pid: Some(child.id()),
            binary: Some(binary),
            child: Some(child),
            _dir: Some(dir),
            log,
            admin_token: Some(token),
        })
    }

    /// With an admin token, check that the running server has the pools.
    async fn check_pools(&self, token: Option<&str>) -> anyhow::Result<()> {
        let Some(token) = token else {
            eprintln!("note: no --admin-token; not checking that {BIG} and {SMALL} exist");
            return Ok(());
        };
        let v = self.admin_licenses(token).await?;
        for (id, need) in [(BIG, 1_000_000u64), (SMALL, 1)] {
            let seats = v["licenses"]
                .as_array()
                .and_then(|a| a.iter().find(|l| l["id"] == id))
                .and_then(|l| l["seats"].as_u64());
            match seats {
                Some(s) if s >= need => {}
                Some(s) => bail!("license {id} has {s} seats; the bench needs >= {need}"),
                None => bail!(
                    "the server has no license {id}; add the pools of `leasehold-bench --print-licenses`"
                ),
            }
        }
        Ok(())
    }

    /// `GET /v1/admin/licenses` with the admin token, as JSON.
    async fn admin_licenses(&self, token: &str) -> anyhow::Result<serde_json::Value> {
        let mut conn = Conn::connect(self.addr).await?;
        let auth = format!("Bearer {token}");
        let (status, body) = conn
            .send(
                &self.host,
                Method::GET,
                "/v1/admin/licenses",
                Some(&auth),
                None,
            )
            .await?;
        if status != StatusCode::OK {
            bail!("GET /v1/admin/licenses: {status}");
        }
        Ok(serde_json::from_slice(&body)?)
    }

    /// Live leases of all licenses, from the admin API (needs the token).
    async fn live_total(&self) -> Option<u64> {
        let v = self.admin_licenses(self.admin_token.as_ref()?).await.ok()?;
        Some(
            v["licenses"]
                .as_array()?
                .iter()
                .filter_map(|l| l["live"].as_u64())
                .sum(),
        )
    }

    fn rss_kib(&self) -> Option<u64> {
        proc_status_kib(self.pid?, "VmRSS:")
    }

    fn hwm_kib(&self) -> Option<u64> {
        proc_status_kib(self.pid?, "VmHWM:")
    }

    fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = Command::new("kill")
                .arg("-TERM")
                .arg(child.id().to_string())
                .status();
            let deadline = Instant::now() + Duration::from_secs(15);
            loop {
                if let Ok(Some(_)) = child.try_wait() {
                    break;
                }
                if Instant::now() > deadline {
                    let _ = child.kill();
                    let _ = child.wait();
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }

    fn server_info(&self) -> ServerInfo {
        ServerInfo {
            addr: self.addr.to_string(),
            started_by_bench: self.child.is_some(),
            binary: self.binary.as_ref().map(|b| b.display().to_string()),
            pid: self.pid,
            rss_kib_end: self.rss_kib(),
            rss_hwm_kib: self.hwm_kib(),
        }
    }

    fn log_tail(&self) -> String {
        self.log
            .lock()
            .map(|l| l[l.len().saturating_sub(20)..].join("\n"))
            .unwrap_or_default()
    }
}

impl Drop for Target {
    fn drop(&mut self) {
        self.stop();
    }
}

/// `http://127.0.0.1:7400` → its socket address, refusing anything that is
/// not loopback (the bench is a load generator; it must not hit real hosts).
fn loopback_addr(url: &str) -> anyhow::Result<(SocketAddr, String)> {
    let rest = url
        .strip_prefix("http://")
        .ok_or_else(|| anyhow!("--server must be an http:// URL, got {url:?}"))?;
    let authority = rest.split('/').next().unwrap_or_default();
    if authority.is_empty() {
        bail!("--server {url:?} has no host");
    }
    let with_port =
        if authority.starts_with('[') && authority.ends_with(']') || !authority.contains(':') {
            format!("{authority}:80")
        } else {
            authority.to_string()
        };
    let addrs: Vec<SocketAddr> = with_port
        .to_socket_addrs()
        .with_context(|| format!("cannot resolve {authority}"))?
        .collect();
    if addrs.is_empty() || !addrs.iter().all(|a| a.ip().is_loopback()) {
        bail!("refusing --server {url}: the bench only targets loopback addresses");
    }
    Ok((addrs[0], authority.to_string()))
}

fn proc_status_kib(pid: u32, field: &str) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    s.lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
}

/// utime + stime in clock ticks of `/proc/<pid>/task/<tid>/stat` or `/proc/<pid>/stat`.
fn stat_ticks(path: &Path) -> Option<(String, u64)> {
    let s = std::fs::read_to_string(path).ok()?;
    let open = s.find('(')?;
    let close = s.rfind(')')?;
    let comm = s[open + 1..close].to_string();
    let fields: Vec<&str> = s[close + 2..].split_whitespace().collect();
    // After "(comm) ": state is field 3, utime field 14, stime field 15.
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some((comm, utime + stime))
}

/// CPU ticks per thread name (threads of the same name added up).
fn thread_ticks(pid: u32) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return out;
    };
    for entry in dir.flatten() {
        if let Some((comm, ticks)) = stat_ticks(&entry.path().join("stat")) {
            *out.entry(comm).or_insert(0) += ticks;
        }
    }
    out
}

/// Clock ticks per second of /proc (USER_HZ; 100 on every Linux we run on).
const TICKS_PER_S: f64 = 100.0;

struct CpuSnapshot {
    at: Instant,
    server: BTreeMap<String, u64>,
    bench: u64,
    /// Machine-wide (busy, steal) ticks from /proc/stat.
    machine: (u64, u64),
}

/// (busy, steal) ticks of all CPUs: busy = everything but idle and iowait.
fn machine_ticks() -> (u64, u64) {
    let Ok(s) = std::fs::read_to_string("/proc/stat") else {
        return (0, 0);
    };
    let Some(line) = s.lines().find(|l| l.starts_with("cpu ")) else {
        return (0, 0);
    };
    let v: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .filter_map(|x| x.parse().ok())
        .collect();
    // user nice system idle iowait irq softirq steal guest guest_nice
    let busy = v.iter().take(8).sum::<u64>() - v.get(3).unwrap_or(&0) - v.get(4).unwrap_or(&0);
    (busy, *v.get(7).unwrap_or(&0))
}

/// CPU use over a window, in cores.
struct CpuUse {
    server_threads: BTreeMap<String, f64>,
    server: f64,
    bench: f64,
    machine_busy: f64,
    machine_steal: f64,
}

impl CpuSnapshot {
    fn take(pid: Option<u32>) -> CpuSnapshot {
        CpuSnapshot {
            at: Instant::now(),
            server: pid.map(thread_ticks).unwrap_or_default(),
            bench: stat_ticks(Path::new("/proc/self/stat"))
                .map(|(_, t)| t)
                .unwrap_or(0),
            machine: machine_ticks(),
        }
    }

    fn since(&self, before: &CpuSnapshot) -> CpuUse {
        let secs = self.at.duration_since(before.at).as_secs_f64().max(1e-9);
        let cores = |ticks: u64| round3(ticks as f64 / TICKS_PER_S / secs);
        let mut by_thread = BTreeMap::new();
        let mut total = 0;
        for (name, t) in &self.server {
            let d = t.saturating_sub(*before.server.get(name).unwrap_or(&0));
            total += d;
            if d > 0 {
                by_thread.insert(name.clone(), cores(d));
            }
        }
        CpuUse {
            server_threads: by_thread,
            server: cores(total),
            bench: cores(self.bench.saturating_sub(before.bench)),
            machine_busy: cores(self.machine.0.saturating_sub(before.machine.0)),
            machine_steal: cores(self.machine.1.saturating_sub(before.machine.1)),
        }
    }
}

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

// ---------------------------------------------------------------------------
// One keep-alive connection

struct Conn {
    addr: SocketAddr,
    sender: http1::SendRequest<Full<Bytes>>,
}

impl Conn {
    async fn connect(addr: SocketAddr) -> anyhow::Result<Conn> {
        let stream = TcpStream::connect(addr).await?;
        stream.set_nodelay(true)?;
        let (sender, conn) = http1::handshake(TokioIo::new(stream)).await?;
        tokio::spawn(async move {
            let _ = conn.await;
        });
        Ok(Conn { addr, sender })
    }

    /// Reconnect (uncounted) if the server closed this connection while idle.
    async fn ensure_ready(&mut self) -> anyhow::Result<()> {
        if self.sender.ready().await.is_err() {
            *self = Conn::connect(self.addr).await?;
        }
        Ok(())
    }

    async fn send(
        &mut self,
        host: &str,
        method: Method,
        path: &str,
        auth: Option<&str>,
        body: Option<Bytes>,
    ) -> anyhow::Result<(StatusCode, Bytes)> {
        self.sender.ready().await?;
        let mut req = Request::builder()
            .method(method)
            .uri(path)
            .header(HOST, host);
        if let Some(auth) = auth {
            req = req.header(AUTHORIZATION, auth);
        }
        let req = match body {
            Some(b) => req
                .header(CONTENT_TYPE, "application/json")
                .body(Full::new(b))?,
            None => req.body(Full::new(Bytes::new()))?,
        };
        let resp = self.sender.send_request(req).await?;
        let status = resp.status();
        let body = resp.into_body().collect().await?.to_bytes();
        Ok((status, body))
    }
}

/// `"seat_id":"..."` out of a lease body, without a JSON parse.
fn seat_id(body: &[u8]) -> Option<String> {
    const KEY: &[u8] = b"\"seat_id\":\"";
    let start = body.windows(KEY.len()).position(|w| w == KEY)? + KEY.len();
    let len = body[start..].iter().position(|&b| b == b'"')?;
    String::from_utf8(body[start..start + len].to_vec()).ok()
}

// ---------------------------------------------------------------------------
// Scenarios

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scenario {
    Healthz,
    Checkout,
    Heartbeat,
    Mixed,
}

impl Scenario {
    fn name(self) -> &'static str {
        match self {
            Scenario::Healthz => "healthz",
            Scenario::Checkout => "checkout",
            Scenario::Heartbeat => "heartbeat",
            Scenario::Mixed => "mixed",
        }
    }

    fn parse_list(s: &str) -> anyhow::Result<Vec<Scenario>> {
        let mut out = Vec::new();
        for part in s.split(',').map(str::trim) {
            match part {
                "all" => out.extend([
                    Scenario::Healthz,
                    Scenario::Checkout,
                    Scenario::Heartbeat,
                    Scenario::Mixed,
                ]),
                "healthz" => out.push(Scenario::Healthz),
                "checkout" => out.push(Scenario::Checkout),
                "heartbeat" => out.push(Scenario::Heartbeat),
                "mixed" => out.push(Scenario::Mixed),
                other => {
                    bail!("unknown scenario {other:?} (healthz, checkout, heartbeat, mixed, all)")
                }
            }
        }
        out.dedup();
        Ok(out)
    }
}

/// Shared, read-only request material.
struct Ctx {
    host: String,
    big_auth: String,
    small_auth: String,
    fullish_auth: String,
    checkout_big: String,
    checkout_small: String,
    checkout_fullish: String,
}

impl Ctx {
    fn new(host: &str) -> Ctx {
        Ctx {
            host: host.to_string(),
            big_auth: format!("Bearer {BIG_KEY}"),
            small_auth: format!("Bearer {SMALL_KEY}"),
            fullish_auth: format!("Bearer {FULLISH_KEY}"),
            checkout_big: format!("/v1/licenses/{BIG}/seats"),
            checkout_small: format!("/v1/licenses/{SMALL}/seats"),
            checkout_fullish: format!("/v1/licenses/{FULLISH}/seats"),
        }
    }
}

/// One connection and the seats it holds, kept across scenarios.
struct Worker {
    id: usize,
    conn: Conn,
    held: Vec<String>,
    next: usize,
    serial: u64,
    rng: StdRng,
    /// Every request is this op (scale measurements).
    fixed: Option<Op>,
    /// Keep the seats of big-pool checkouts in `held` (pre-checkout, mixed).
    keep_checkouts: bool,
    /// Keep them in every scenario (scale: released after the window).
    keep_always: bool,
}

#[derive(Debug, Clone, Copy)]
enum Op {
    Healthz,
    CheckoutBig,
    CheckoutSmall,
    CheckoutFullish,
    Heartbeat(usize),
    Release(usize),
}

/// What one connection saw in the measured window.
struct Tally {
    hist: Histogram<u64>,
    requests: u64,
    ok: u64,
    denied: u64,
    errors: BTreeMap<String, u64>,
    statuses: BTreeMap<u16, u64>,
}

impl Tally {
    fn new() -> Tally {
        Tally {
            // 1 µs .. 60 s, 3 significant digits.
            hist: Histogram::new_with_bounds(1, 60_000_000, 3).expect("histogram bounds"),
            requests: 0,
            ok: 0,
            denied: 0,
            errors: BTreeMap::new(),
            statuses: BTreeMap::new(),
        }
    }

    fn merge(&mut self, other: Tally) {
        self.hist.add(&other.hist).expect("same bounds");
        self.requests += other.requests;
        self.ok += other.ok;
        self.denied += other.denied;
        for (k, v) in other.errors {
            *self.errors.entry(k).or_insert(0) += v;
        }
        for (k, v) in other.statuses {
            *self.statuses.entry(k).or_insert(0) += v;
        }
    }
}

enum Outcome {
    Ok,
    Denied,
    Error(&'static str),
}

const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

impl Worker {
    async fn new(id: usize, addr: SocketAddr) -> anyhow::Result<Worker> {
        Ok(Worker {
            id,
            conn: Conn::connect(addr).await?,
            held: Vec::new(),
            next: 0,
            serial: 0,
            rng: StdRng::seed_from_u64(0x5eed ^ id as u64),
            fixed: None,
            keep_checkouts: false,
            keep_always: false,
        })
    }

    fn pick(&mut self, scenario: Scenario) -> Op {
        if let Some(op) = self.fixed {
            return op;
        }
        match scenario {
            Scenario::Healthz => Op::Healthz,
            Scenario::Checkout => Op::CheckoutBig,
            Scenario::Heartbeat => self.next_heartbeat(),
            Scenario::Mixed => {
                let r = self.rng.gen_range(0..100u32);
                if self.held.is_empty() || (90..95).contains(&r) {
                    Op::CheckoutBig
                } else if r < 90 {
                    self.next_heartbeat()
                } else if r < 99 {
                    Op::Release(self.rng.gen_range(0..self.held.len()))
                } else {
                    Op::CheckoutSmall
                }
            }
        }
    }

    fn next_heartbeat(&mut self) -> Op {
        if self.held.is_empty() {
            return Op::CheckoutBig;
        }
        self.next = (self.next + 1) % self.held.len();
        Op::Heartbeat(self.next)
    }

    async fn execute(&mut self, ctx: &Ctx, op: Op) -> anyhow::Result<(StatusCode, Outcome)> {
        let (method, path, auth, body) = match op {
            Op::Healthz => (Method::GET, "/healthz".to_string(), None, None),
            Op::CheckoutBig | Op::CheckoutSmall | Op::CheckoutFullish => {
                self.serial += 1;
                let body = Bytes::from(format!(
                    r#"{{"holder":"bench-{}-{}-{}"}}"#,
                    std::process::id(),
                    self.id,
                    self.serial
                ));
                let (path, auth) = match op {
                    Op::CheckoutBig => (&ctx.checkout_big, &ctx.big_auth),
                    Op::CheckoutSmall => (&ctx.checkout_small, &ctx.small_auth),
                    _ => (&ctx.checkout_fullish, &ctx.fullish_auth),
                };
                (Method::POST, path.clone(), Some(auth.as_str()), Some(body))
            }
            Op::Heartbeat(i) => (
                Method::POST,
                format!("/v1/licenses/{BIG}/seats/{}/heartbeat", self.held[i]),
                Some(ctx.big_auth.as_str()),
                None,
            ),
            Op::Release(i) => (
                Method::DELETE,
                format!("/v1/licenses/{BIG}/seats/{}", self.held[i]),
                Some(ctx.big_auth.as_str()),
                None,
            ),
        };
        let (status, body) = self.conn.send(&ctx.host, method, &path, auth, body).await?;
        let outcome = match (op, status.as_u16()) {
            (Op::Healthz, 200) | (Op::Heartbeat(_), 200) => Outcome::Ok,
            (Op::CheckoutBig, 201) => {
                if self.keep_checkouts
                    && let Some(id) = seat_id(&body)
                {
                    self.held.push(id);
                }
                Outcome::Ok
            }
            (Op::CheckoutSmall | Op::CheckoutFullish, 201) => Outcome::Ok,
            (Op::CheckoutSmall | Op::CheckoutFullish, 409) => Outcome::Denied,
            (Op::Release(i), 204) => {
                self.held.swap_remove(i);
                Outcome::Ok
            }
            (_, s) if (400..500).contains(&s) => Outcome::Error("4xx"),
            (_, s) if (500..600).contains(&s) => Outcome::Error("5xx"),
            _ => Outcome::Error("other_status"),
        };
        Ok((status, outcome))
    }

    /// Closed loop until `end`; counts what completed inside [`measure`, `end`].
    async fn run(
        &mut self,
        ctx: &Ctx,
        scenario: Scenario,
        measure: Instant,
        end: Instant,
    ) -> Tally {
        let mut tally = Tally::new();
        self.keep_checkouts = scenario == Scenario::Mixed || self.keep_always;
        loop {
            if self.conn.ensure_ready().await.is_err() {
                if Instant::now() >= end {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
            let t0 = Instant::now();
            if t0 >= end {
                break;
            }
            let op = self.pick(scenario);
            let result = tokio::time::timeout(REQUEST_TIMEOUT, self.execute(ctx, op)).await;
            let t1 = Instant::now();
            let counted = t0 >= measure && t1 <= end;
            let outcome = match result {
                Ok(Ok((status, outcome))) => {
                    if counted {
                        *tally.statuses.entry(status.as_u16()).or_insert(0) += 1;
                    }
                    outcome
                }
                Ok(Err(_)) => Outcome::Error("io"),
                Err(_) => Outcome::Error("timeout"),
            };
            if let Outcome::Error("io" | "timeout") = outcome {
                // The connection is in an unknown state: start a new one.
                if let Ok(c) = Conn::connect(self.conn.addr).await {
                    self.conn = c;
                }
            }
            if counted {
                tally.requests += 1;
                let us = (t1 - t0).as_micros().clamp(1, 60_000_000) as u64;
                tally.hist.saturating_record(us);
                match outcome {
                    Outcome::Ok => tally.ok += 1,
                    Outcome::Denied => tally.denied += 1,
                    Outcome::Error(class) => *tally.errors.entry(class.into()).or_insert(0) += 1,
                }
            }
        }
        tally
    }

    /// Check out (unmeasured) until this worker holds `want` big-pool seats.
    async fn top_up(&mut self, ctx: &Ctx, want: usize) -> anyhow::Result<()> {
        let mut failures = 0;
        self.keep_checkouts = true;
        while self.held.len() < want {
            self.conn.ensure_ready().await?;
            match self.execute(ctx, Op::CheckoutBig).await {
                Ok((s, _)) if s == StatusCode::CREATED => {}
                Ok((s, _)) => {
                    failures += 1;
                    if failures > 100 {
                        bail!("pre-checkout into {BIG} keeps failing: {s}");
                    }
                }
                Err(e) => {
                    failures += 1;
                    if failures > 100 {
                        return Err(e.context("pre-checkout"));
                    }
                    self.conn = Conn::connect(self.conn.addr).await?;
                }
            }
        }
        Ok(())
    }
}

/// Run `f` on every worker concurrently and hand the workers back.
async fn on_all<F, Fut, T>(workers: Vec<Worker>, f: F) -> (Vec<Worker>, Vec<T>)
where
    F: Fn(Worker) -> Fut,
    Fut: std::future::Future<Output = (Worker, T)> + Send + 'static,
    T: Send + 'static,
{
    let handles: Vec<_> = workers.into_iter().map(|w| tokio::spawn(f(w))).collect();
    let mut ws = Vec::with_capacity(handles.len());
    let mut outs = Vec::with_capacity(handles.len());
    for h in handles {
        let (w, o) = h.await.expect("worker task panicked");
        ws.push(w);
        outs.push(o);
    }
    (ws, outs)
}

/// Give each worker its share of `total` held seats.
async fn top_up_all(
    workers: Vec<Worker>,
    ctx: &Arc<Ctx>,
    total: usize,
) -> anyhow::Result<Vec<Worker>> {
    let n = workers.len();
    let (workers, results) = on_all(workers, |mut w| {
        let ctx = ctx.clone();
        let want = total / n + usize::from(w.id < total % n);
        async move {
            let r = w.top_up(&ctx, want).await;
            (w, r)
        }
    })
    .await;
    for r in results {
        r?;
    }
    Ok(workers)
}

/// Fill the small pool so that its checkouts are denied (409).
async fn fill_small(worker: &mut Worker, ctx: &Ctx) -> anyhow::Result<()> {
    for _ in 0..SMALL_SEATS {
        worker.conn.ensure_ready().await?;
        let (status, _) = worker.execute(ctx, Op::CheckoutSmall).await?;
        if status != StatusCode::CREATED && status != StatusCode::CONFLICT {
            bail!("filling {SMALL}: {status}");
        }
    }
    Ok(())
}

struct Window {
    warmup: Duration,
    duration: Duration,
}

async fn measure(
    workers: Vec<Worker>,
    ctx: &Arc<Ctx>,
    scenario: Scenario,
    window: &Window,
    target: &Target,
    label: String,
) -> (Vec<Worker>, ScenarioResult) {
    let start = Instant::now();
    let measure_at = start + window.warmup;
    let end = measure_at + window.duration;
    let cpu_task = {
        let pid = target.pid;
        tokio::spawn(async move {
            tokio::time::sleep_until(measure_at.into()).await;
            let before = CpuSnapshot::take(pid);
            tokio::time::sleep_until(end.into()).await;
            CpuSnapshot::take(pid).since(&before)
        })
    };
    let (workers, tallies) = on_all(workers, |mut w| {
        let ctx = ctx.clone();
        async move {
            let t = w.run(&ctx, scenario, measure_at, end).await;
            (w, t)
        }
    })
    .await;
    let cpu = cpu_task.await.expect("cpu task");
    let mut total = Tally::new();
    for t in tallies {
        total.merge(t);
    }
    let secs = window.duration.as_secs_f64();
    let h = &total.hist;
    let ms = |us: u64| round3(us as f64 / 1000.0);
    let pid = target.pid;
    let result = ScenarioResult {
        name: label,
        requests: total.requests,
        ok: total.ok,
        denied: total.denied,
        errors_total: total.errors.values().sum(),
        errors: total.errors,
        statuses: total.statuses,
        throughput_rps: round3(total.requests as f64 / secs),
        ratio_to_healthz: None,
        latency_ms: Latency {
            p50: ms(h.value_at_quantile(0.50)),
            p99: ms(h.value_at_quantile(0.99)),
            p999: ms(h.value_at_quantile(0.999)),
            max: ms(h.max()),
            mean: round3(h.mean() / 1000.0),
        },
        server_cpu_cores: pid.map(|_| cpu.server),
        server_threads_cores: cpu.server_threads,
        bench_cpu_cores: cpu.bench,
        machine_busy_cores: cpu.machine_busy,
        other_cores: pid.map(|_| round3((cpu.machine_busy - cpu.server - cpu.bench).max(0.0))),
        machine_steal_cores: cpu.machine_steal,
        server_rss_kib: target.rss_kib(),
        leases_in_store: None,
        leases_at_end: None,
    };
    (workers, result)
}

#[derive(Debug, Serialize)]
struct Latency {
    p50: f64,
    p99: f64,
    p999: f64,
    max: f64,
    mean: f64,
}

#[derive(Debug, Serialize)]
struct ScenarioResult {
    name: String,
    requests: u64,
    ok: u64,
    denied: u64,
    errors_total: u64,
    errors: BTreeMap<String, u64>,
    statuses: BTreeMap<u16, u64>,
    throughput_rps: f64,
    ratio_to_healthz: Option<f64>,
    latency_ms: Latency,
    server_cpu_cores: Option<f64>,
    server_threads_cores: BTreeMap<String, f64>,
    bench_cpu_cores: f64,
    /// All CPUs of the machine, busy (not idle/iowait), in cores: shows
    /// whether something else was running during the window.
    machine_busy_cores: f64,
    machine_steal_cores: f64,
    /// Busy cores not used by the server or the generator (other processes
    /// on a shared machine, kernel threads): figures with a high value here
    /// were measured on a contended machine.
    other_cores: Option<f64>,
    server_rss_kib: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    leases_in_store: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    leases_at_end: Option<u64>,
}

#[derive(Debug, Serialize)]
struct ServerInfo {
    addr: String,
    started_by_bench: bool,
    binary: Option<String>,
    pid: Option<u32>,
    rss_kib_end: Option<u64>,
    rss_hwm_kib: Option<u64>,
}

#[derive(Debug, Serialize)]
struct RunConfig {
    connections: usize,
    duration_s: f64,
    warmup_s: f64,
    held: usize,
    bench_threads: usize,
    cpus: usize,
}

#[derive(Debug, Serialize)]
struct Report {
    tool: &'static str,
    mode: &'static str,
    config: RunConfig,
    server: ServerInfo,
    scenarios: Vec<ScenarioResult>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    notes: Vec<String>,
}

async fn connect_all(n: usize, addr: SocketAddr) -> anyhow::Result<Vec<Worker>> {
    let mut workers = Vec::with_capacity(n);
    for id in 0..n {
        workers.push(
            Worker::new(id, addr)
                .await
                .with_context(|| format!("connection {id} to {addr}"))?,
        );
    }
    Ok(workers)
}

async fn run_scenarios(args: CommonArgs, scenarios: &str, held: usize) -> anyhow::Result<()> {
    let scenarios = Scenario::parse_list(scenarios)?;
    let mut target = Target::open(&args).await?;
    let ctx = Arc::new(Ctx::new(&target.host));
    let window = Window {
        warmup: args.warmup,
        duration: args.duration,
    };
    let mut workers = connect_all(args.connections, target.addr).await?;
    let mut results = Vec::new();
    for scenario in scenarios {
        if matches!(scenario, Scenario::Heartbeat | Scenario::Mixed) {
            let t = Instant::now();
            workers = top_up_all(workers, &ctx, held).await?;
            eprintln!(
                "[{}] holding {held} seats (pre-checkout took {:.1}s)",
                scenario.name(),
                t.elapsed().as_secs_f64()
            );
        }
        if scenario == Scenario::Mixed {
            fill_small(&mut workers[0], &ctx).await?;
        }
        eprintln!(
            "[{}] {} connections, {:?} warm-up + {:?}",
            scenario.name(),
            args.connections,
            window.warmup,
            window.duration
        );
        let (w, result) = measure(
            workers,
            &ctx,
            scenario,
            &window,
            &target,
            scenario.name().to_string(),
        )
        .await;
        workers = w;
        results.push(result);
    }
    drop(workers);
    finish(&mut target, &args, held, "scenarios", results, Vec::new())
}

fn finish(
    target: &mut Target,
    args: &CommonArgs,
    held: usize,
    mode: &'static str,
    mut results: Vec<ScenarioResult>,
    notes: Vec<String>,
) -> anyhow::Result<()> {
    if let Some(base) = results
        .iter()
        .find(|r| r.name == "healthz")
        .map(|r| r.throughput_rps)
        .filter(|&b| b > 0.0)
    {
        for r in &mut results {
            r.ratio_to_healthz = Some(round3(r.throughput_rps / base));
        }
    }
    let report = Report {
        tool: "leasehold-bench",
        mode,
        config: RunConfig {
            connections: args.connections,
            duration_s: args.duration.as_secs_f64(),
            warmup_s: args.warmup.as_secs_f64(),
            held,
            bench_threads: args.threads.max(1),
            cpus: std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1),
        },
        server: target.server_info(),
        scenarios: results,
        notes,
    };
    print_table(&report);
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_string_pretty(&report)? + "\n")
            .with_context(|| format!("writing {}", path.display()))?;
    }
    let errors: u64 = report.scenarios.iter().map(|r| r.errors_total).sum();
    if errors > 0 && target.child.is_some() {
        eprintln!("--- last server log lines ---\n{}", target.log_tail());
    }
    target.stop();
    Ok(())
}

fn print_table(report: &Report) {
    println!(
        "{:<22} {:>9} {:>11} {:>7} {:>8} {:>8} {:>8} {:>7} {:>7} {:>9} {:>9} {:>9}",
        "scenario",
        "requests",
        "req/s",
        "ratio",
        "p50 ms",
        "p99 ms",
        "p99.9 ms",
        "denied",
        "errors",
        "srv cores",
        "gen cores",
        "others"
    );
    for r in &report.scenarios {
        println!(
            "{:<22} {:>9} {:>11.0} {:>7} {:>8.3} {:>8.3} {:>8.3} {:>7} {:>7} {:>9} {:>9.2} {:>9.2}",
            r.name,
            r.requests,
            r.throughput_rps,
            r.ratio_to_healthz
                .map(|x| format!("{x:.3}"))
                .unwrap_or_else(|| "-".into()),
            r.latency_ms.p50,
            r.latency_ms.p99,
            r.latency_ms.p999,
            r.denied,
            r.errors_total,
            r.server_cpu_cores
                .map(|x| format!("{x:.2}"))
                .unwrap_or_else(|| "-".into()),
            r.bench_cpu_cores,
            r.other_cores
                .unwrap_or(r.machine_busy_cores - r.bench_cpu_cores),
        );
        if r.errors_total > 0 {
            println!("    errors: {:?}  statuses: {:?}", r.errors, r.statuses);
        }
        if !r.server_threads_cores.is_empty() {
            let mut threads: Vec<_> = r.server_threads_cores.iter().collect();
            threads.sort_by(|a, b| b.1.total_cmp(a.1));
            let list: Vec<String> = threads
                .iter()
                .take(5)
                .map(|(n, c)| format!("{n}={c:.2}"))
                .collect();
            println!("    server threads (cores): {}", list.join(" "));
        }
    }
    let s = &report.server;
    if let Some(rss) = s.rss_kib_end {
        println!(
            "server rss at end: {:.1} MiB (peak {:.1} MiB)",
            rss as f64 / 1024.0,
            s.rss_hwm_kib.unwrap_or(0) as f64 / 1024.0
        );
    }
    for n in &report.notes {
        println!("note: {n}");
    }
}

// ---------------------------------------------------------------------------
// Scale: how cost grows with leases in the store and pool fullness

async fn run_scale(
    args: CommonArgs,
    preload: usize,
    few: usize,
    fullish: bool,
) -> anyhow::Result<()> {
    let mut target = Target::open(&args).await?;
    let ctx = Arc::new(Ctx::new(&target.host));
    let window = Window {
        warmup: args.warmup,
        duration: args.duration,
    };
    let mut notes = Vec::new();
    let mut results = Vec::new();
    let mut workers = connect_all(args.connections, target.addr).await?;

    // Heartbeats go round-robin over `few` seats in both phases, so the only
    // difference between the two is how many leases the store holds.
    let hb_seats = few.max(args.connections);
    workers = top_up_all(workers, &ctx, hb_seats).await?;
    let mut in_store = hb_seats as u64;
    for (phase, leases) in [("few", few), ("many", preload)] {
        if leases > hb_seats && in_store < leases as u64 {
            let t = Instant::now();
            let extra = leases - in_store as usize;
            preload_big(&mut workers, &ctx, extra).await?;
            in_store = target.live_total().await.unwrap_or(leases as u64);
            let secs = t.elapsed().as_secs_f64();
            eprintln!("[scale] preloaded {extra} leases in {secs:.1}s");
            notes.push(format!(
                "preloaded {extra} leases in {secs:.1}s ({:.0}/s, unmeasured checkouts)",
                extra as f64 / secs
            ));
        }
        for scenario in [Scenario::Heartbeat, Scenario::Checkout] {
            eprintln!("[scale] {} with ~{in_store} leases", scenario.name());
            let label = format!("{}@{}", scenario.name(), phase);
            let rotation: Vec<usize> = workers.iter().map(|w| w.held.len()).collect();
            for w in &mut workers {
                w.keep_always = scenario == Scenario::Checkout;
            }
            let (w, mut r) = measure(workers, &ctx, scenario, &window, &target, label).await;
            workers = w;
            r.leases_in_store = Some(in_store);
            if scenario == Scenario::Checkout {
                // Give back (unmeasured) what the window took, so each phase
                // measures the store size it names.
                r.leases_at_end = target.live_total().await;
                workers = release_extra(workers, &ctx, &rotation).await?;
            }
            if let Some(live) = target.live_total().await {
                in_store = live;
            }
            results.push(r);
        }
        if let Some(rss) = target.rss_kib() {
            notes.push(format!(
                "server RSS with ~{in_store} live leases: {:.1} MiB",
                rss as f64 / 1024.0
            ));
        }
    }

    if fullish {
        // 99% of a 100,000-seat pool, then checkouts into it (each succeeds
        // or, once full, is denied) vs the same into the full 10-seat pool.
        let fill = FULLISH_SEATS * 99 / 100;
        let t = Instant::now();
        fill_pool(&mut workers, &ctx, Op::CheckoutFullish, fill).await?;
        eprintln!(
            "[scale] filled {FULLISH} to {fill} seats in {:.1}s",
            t.elapsed().as_secs_f64()
        );
        fill_small(&mut workers[0], &ctx).await?;
        for (op, label) in [
            (Op::CheckoutFullish, format!("checkout@{FULLISH}99%")),
            (Op::CheckoutSmall, format!("checkout@{SMALL}-full")),
        ] {
            eprintln!("[scale] {label}");
            let (w, r) = measure_op(workers, &ctx, op, &window, &target, label).await;
            workers = w;
            results.push(r);
        }
        notes.push(format!(
            "{FULLISH}: 99% full at the start; once its last 1% is taken its checkouts are denied (409) like {SMALL}'s"
        ));
    }
    drop(workers);
    finish(&mut target, &args, hb_seats, "scale", results, notes)
}

/// Release (unmeasured) every seat a worker holds beyond its first `keep[i]`.
async fn release_extra(
    workers: Vec<Worker>,
    ctx: &Arc<Ctx>,
    keep: &[usize],
) -> anyhow::Result<Vec<Worker>> {
    let (workers, results) = on_all(workers, |mut w| {
        let ctx = ctx.clone();
        let keep = keep[w.id];
        async move {
            w.keep_always = false;
            let mut result = Ok(());
            while w.held.len() > keep {
                let i = w.held.len() - 1;
                if let Err(e) = w.conn.ensure_ready().await {
                    result = Err(e);
                    break;
                }
                match w.execute(&ctx, Op::Release(i)).await {
                    Ok((s, _)) if s == StatusCode::NO_CONTENT => {}
                    Ok((s, _)) => {
                        result = Err(anyhow!("release: {s}"));
                        break;
                    }
                    Err(e) => {
                        result = Err(e);
                        break;
                    }
                }
            }
            (w, result)
        }
    })
    .await;
    for r in results {
        r?;
    }
    Ok(workers)
}

/// Many checkouts into the big pool without keeping their seat ids.
async fn preload_big(
    workers: &mut Vec<Worker>,
    ctx: &Arc<Ctx>,
    total: usize,
) -> anyhow::Result<()> {
    fill_pool(workers, ctx, Op::CheckoutBig, total).await
}

async fn fill_pool(
    workers: &mut Vec<Worker>,
    ctx: &Arc<Ctx>,
    op: Op,
    total: usize,
) -> anyhow::Result<()> {
    let n = workers.len();
    let taken = std::mem::take(workers);
    let (ws, results) = on_all(taken, |mut w| {
        let ctx = ctx.clone();
        let want = total / n + usize::from(w.id < total % n);
        async move {
            w.keep_checkouts = false;
            let mut done = 0;
            let mut failures = 0u32;
            let mut result = Ok(());
            while done < want {
                if let Err(e) = w.conn.ensure_ready().await {
                    result = Err(e);
                    break;
                }
                match w.execute(&ctx, op).await {
                    Ok((s, _)) if s == StatusCode::CREATED => done += 1,
                    Ok((s, _)) => {
                        failures += 1;
                        if failures > 100 {
                            result = Err(anyhow!("filling: {s}"));
                            break;
                        }
                    }
                    Err(e) => {
                        failures += 1;
                        if failures > 100 {
                            result = Err(e);
                            break;
                        }
                        if let Ok(c) = Conn::connect(w.conn.addr).await {
                            w.conn = c;
                        }
                    }
                }
            }
            (w, result)
        }
    })
    .await;
    *workers = ws;
    for r in results {
        r?;
    }
    Ok(())
}

/// Like [`measure`], but every request is `op`.
async fn measure_op(
    mut workers: Vec<Worker>,
    ctx: &Arc<Ctx>,
    op: Op,
    window: &Window,
    target: &Target,
    label: String,
) -> (Vec<Worker>, ScenarioResult) {
    for w in &mut workers {
        w.fixed = Some(op);
    }
    let (mut workers, r) = measure(workers, ctx, Scenario::Checkout, window, target, label).await;
    for w in &mut workers {
        w.fixed = None;
    }
    (workers, r)
}
