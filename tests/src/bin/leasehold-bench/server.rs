//! The server under test: one the bench starts (temp data dir, generated
//! licenses file, the `leaseholdd` next to this binary or `--leaseholdd`), or
//! a running one given by `--server`, which must be on loopback. `--server`
//! may name several replicas (comma-separated): the connections go to them
//! round-robin, admin look-ups to the first.

use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, anyhow, bail};
use http::{Method, StatusCode};
use serde::Serialize;

use crate::args::CommonArgs;
use crate::client::Conn;
use crate::pools::{BIG, SMALL, licenses_toml};
use crate::procfs::proc_status_kib;

/// Where connections go: an address and the `Host` header it is called by.
#[derive(Debug, Clone)]
pub struct Endpoint {
    pub addr: SocketAddr,
    pub host: String,
}

pub struct Target {
    /// The first server: admin look-ups.
    pub addr: SocketAddr,
    pub host: String,
    /// Every server (the first included), for the connections round-robin.
    pub endpoints: Vec<Endpoint>,
    /// The servers' pids (CPU and RSS are added up over them).
    pub pids: Vec<u32>,
    db_pid: Option<u32>,
    binary: Option<PathBuf>,
    child: Option<Child>,
    _dir: Option<tempfile::TempDir>,
    log: Arc<Mutex<Vec<String>>>,
    admin_token: Option<String>,
}

impl Target {
    pub async fn open(args: &CommonArgs) -> anyhow::Result<Target> {
        match &args.server {
            Some(urls) => {
                let endpoints = urls
                    .split(',')
                    .map(|url| {
                        loopback_addr(url.trim()).map(|(addr, host)| Endpoint { addr, host })
                    })
                    .collect::<anyhow::Result<Vec<_>>>()?;
                let first = endpoints[0].clone();
                let target = Target {
                    addr: first.addr,
                    host: first.host,
                    endpoints,
                    pids: args.server_pid.clone(),
                    db_pid: args.db_pid,
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
        std::fs::write(&licenses, licenses_toml(args.policy_pool))?;
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
            endpoints: vec![Endpoint {
                addr,
                host: addr.to_string(),
            }],
            pids: vec![child.id()],
            db_pid: args.db_pid,
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
    pub async fn live_total(&self) -> Option<u64> {
        let v = self.admin_licenses(self.admin_token.as_ref()?).await.ok()?;
        Some(
            v["licenses"]
                .as_array()?
                .iter()
                .filter_map(|l| l["live"].as_u64())
                .sum(),
        )
    }

    /// Whether the server's CPU and RSS are known (its pid).
    pub fn has_pid(&self) -> bool {
        !self.pids.is_empty()
    }

    pub fn db_pid(&self) -> Option<u32> {
        self.db_pid
    }

    pub fn rss_kib(&self) -> Option<u64> {
        self.sum_status("VmRSS:")
    }

    fn hwm_kib(&self) -> Option<u64> {
        self.sum_status("VmHWM:")
    }

    fn sum_status(&self, field: &str) -> Option<u64> {
        let mut total = None;
        for &pid in &self.pids {
            *total.get_or_insert(0) += proc_status_kib(pid, field)?;
        }
        total
    }

    pub fn stop(&mut self) {
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

    /// Whether this run started the server (and so owns its log and stops it).
    pub fn started_by_bench(&self) -> bool {
        self.child.is_some()
    }

    pub fn server_info(&self) -> ServerInfo {
        ServerInfo {
            addr: self.addr.to_string(),
            replicas: (self.endpoints.len() > 1)
                .then(|| self.endpoints.iter().map(|e| e.addr.to_string()).collect()),
            started_by_bench: self.started_by_bench(),
            binary: self.binary.as_ref().map(|b| b.display().to_string()),
            pid: self.pids.first().copied(),
            pids: (self.pids.len() > 1).then(|| self.pids.clone()),
            rss_kib_end: self.rss_kib(),
            rss_hwm_kib: self.hwm_kib(),
        }
    }

    pub fn log_tail(&self) -> String {
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

#[derive(Debug, Serialize)]
pub struct ServerInfo {
    pub addr: String,
    /// Every server's address, when `--server` named several.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replicas: Option<Vec<String>>,
    pub started_by_bench: bool,
    pub binary: Option<String>,
    pub pid: Option<u32>,
    /// Every pid, when `--server-pid` named several (RSS is their sum).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pids: Option<Vec<u32>>,
    pub rss_kib_end: Option<u64>,
    pub rss_hwm_kib: Option<u64>,
}
