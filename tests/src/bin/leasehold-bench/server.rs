//! The server under test: one the bench starts (temp data dir, generated
//! licenses file, the `leaseholdd` next to this binary or `--leaseholdd`), or
//! a running one given by `--server`, which must be on loopback.

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

pub struct Target {
    pub addr: SocketAddr,
    pub host: String,
    pub pid: Option<u32>,
    binary: Option<PathBuf>,
    child: Option<Child>,
    _dir: Option<tempfile::TempDir>,
    log: Arc<Mutex<Vec<String>>>,
    admin_token: Option<String>,
}

impl Target {
    pub async fn open(args: &CommonArgs) -> anyhow::Result<Target> {
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

    pub fn rss_kib(&self) -> Option<u64> {
        proc_status_kib(self.pid?, "VmRSS:")
    }

    fn hwm_kib(&self) -> Option<u64> {
        proc_status_kib(self.pid?, "VmHWM:")
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
            started_by_bench: self.started_by_bench(),
            binary: self.binary.as_ref().map(|b| b.display().to_string()),
            pid: self.pid,
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
    pub started_by_bench: bool,
    pub binary: Option<String>,
    pub pid: Option<u32>,
    pub rss_kib_end: Option<u64>,
    pub rss_hwm_kib: Option<u64>,
}
