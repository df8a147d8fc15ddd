//! Harness for the end-to-end tests: start the real `leaseholdd` binary on a
//! free loopback port with a temp data dir, and talk HTTP to it.
//!
//! The binaries are found next to the test executable (`target/<profile>/`),
//! where `cargo test --workspace` / `cargo nextest run --workspace` build
//! them; `LEASEHOLD_BIN_DIR` overrides that.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

use leasehold_common::api::Lease;
use tempfile::TempDir;

/// One `[[license]]` table of a licenses file, as a string literal (so
/// fixtures stay `const`); the key is always `"<id>-key"`.
#[macro_export]
macro_rules! license_toml {
    ($id:literal, seats = $seats:literal, ttl = $ttl:literal, skew = $skew:literal, reap_grace = $grace:literal) => {
        concat!(
            "\n[[license]]\nid = \"",
            $id,
            "\"\nkey = \"",
            $id,
            "-key\"\nseats = ",
            $seats,
            "\nttl = \"",
            $ttl,
            "\"\nskew = \"",
            $skew,
            "\"\nreap_grace = \"",
            $grace,
            "\"\n"
        )
    };
}

/// Demo-like pools for tests: `small` (5 seats), `tiny` (1 seat), `short`
/// (1 s TTL, reaped quickly).
#[rustfmt::skip]
pub const TEST_LICENSES: &str = concat!(
    license_toml!("small", seats = 5, ttl = "60s", skew = "5s", reap_grace = "15s"),
    license_toml!("tiny", seats = 1, ttl = "60s", skew = "5s", reap_grace = "15s"),
    license_toml!("short", seats = 2, ttl = "1s", skew = "0s", reap_grace = "300ms"),
);

/// Fails the test, saying how to get it, unless `check` runs and exits 0.
/// A test whose tool or permission is missing fails instead of passing
/// unseen; `bash .ci/run` installs everything the suite needs.
pub fn require_tool(check: &mut Command, need: &str, how: &str) {
    let detail = match check.stdin(Stdio::null()).output() {
        Ok(out) if out.status.success() => return,
        Ok(out) => format!(
            "{:?} exited with {}: {}",
            check.get_program(),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ),
        Err(e) => format!("cannot run {:?}: {e}", check.get_program()),
    };
    panic!(
        "needs {need}: {how} (bash .ci/run does)
{detail}"
    );
}

/// Directory holding the workspace's built binaries.
pub fn bin_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("LEASEHOLD_BIN_DIR") {
        return PathBuf::from(dir);
    }
    let exe = std::env::current_exe().expect("current exe");
    // target/debug/deps/<test>-<hash> → target/debug
    let mut dir = exe.parent().expect("exe dir").to_path_buf();
    if dir.ends_with("deps") {
        dir.pop();
    }
    dir
}

pub fn leaseholdd_bin() -> PathBuf {
    bin_dir().join("leaseholdd")
}

pub fn leasehold_bin() -> PathBuf {
    bin_dir().join("leasehold")
}

pub mod round_robin;
pub mod tmux;

/// Which store the end-to-end suites run on, from `LEASEHOLD_TEST_STORE`:
/// `sqlite` (the default), `postgres` (one replica) or `postgres-2` (two
/// replicas sharing a data dir, behind a loopback round-robin proxy). The
/// PostgreSQL cluster is the harness's own (`leasehold_testkit`), one
/// database per server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TestStore {
    Sqlite,
    Postgres { replicas: usize },
}

impl TestStore {
    pub fn from_env() -> TestStore {
        match std::env::var("LEASEHOLD_TEST_STORE").as_deref() {
            Err(_) | Ok("") | Ok("sqlite") => TestStore::Sqlite,
            Ok("postgres") => TestStore::Postgres { replicas: 1 },
            Ok("postgres-2") => TestStore::Postgres { replicas: 2 },
            Ok(other) => {
                panic!("LEASEHOLD_TEST_STORE={other:?}: expected sqlite, postgres or postgres-2")
            }
        }
    }
}

/// How to start a server.
#[derive(Debug, Clone)]
pub struct ServerOptions {
    pub licenses: String,
    /// Extra flags, e.g. `["--reap-interval", "200ms"]`.
    pub args: Vec<String>,
    pub env: Vec<(String, String)>,
    /// Use this data dir instead of one in the temp dir.
    pub data_dir: Option<PathBuf>,
    pub store: TestStore,
    /// PostgreSQL: this database instead of a fresh one on the shared
    /// cluster (a test that stops its own cluster).
    pub database: Option<String>,
}

impl ServerOptions {
    pub fn new(licenses: &str) -> Self {
        ServerOptions {
            licenses: licenses.to_string(),
            args: Vec::new(),
            env: Vec::new(),
            data_dir: None,
            store: TestStore::from_env(),
            database: None,
        }
    }

    pub fn arg(mut self, a: &str) -> Self {
        self.args.push(a.to_string());
        self
    }
}

/// A running `leaseholdd` (on PostgreSQL with two replicas: both, behind
/// one address). Killed on drop.
pub struct Server {
    child: Option<Child>,
    /// The second replica, when there is one.
    other_replica: Option<Child>,
    proxy: Option<round_robin::RoundRobin>,
    replica_addrs: Vec<String>,
    /// The PostgreSQL URL this server (all its replicas, across restarts)
    /// runs on.
    database: Option<String>,
    pub addr: String,
    /// `http://127.0.0.1:PORT`
    pub base: String,
    pub admin_token: String,
    dir: TempDir,
    options: ServerOptions,
    log: Arc<Mutex<String>>,
}

impl Server {
    /// Start with the given licenses file content, on a free port.
    pub async fn start(licenses: &str) -> Server {
        Server::start_with(ServerOptions::new(licenses)).await
    }

    pub async fn start_with(options: ServerOptions) -> Server {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("licenses.toml"), &options.licenses)
            .expect("write licenses");
        let database = match options.store {
            TestStore::Sqlite => None,
            TestStore::Postgres { .. } => Some(options.database.clone().unwrap_or_else(|| {
                leasehold_testkit::postgres::PgCluster::shared().create_database()
            })),
        };
        let mut server = Server {
            child: None,
            other_replica: None,
            proxy: None,
            replica_addrs: Vec::new(),
            database,
            addr: String::new(),
            base: String::new(),
            admin_token: String::new(),
            dir,
            options,
            log: Arc::new(Mutex::new(String::new())),
        };
        server.spawn("127.0.0.1:0");
        server
    }

    pub fn data_dir(&self) -> PathBuf {
        self.options
            .data_dir
            .clone()
            .unwrap_or_else(|| self.dir.path().join("data"))
    }

    pub fn licenses_path(&self) -> PathBuf {
        self.dir.path().join("licenses.toml")
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    pub fn client(&self) -> reqwest::Client {
        let builder = reqwest::Client::builder().timeout(Duration::from_secs(20));
        // A fresh connection per request, so the proxy spreads requests
        // over both replicas.
        let builder = match self.proxy {
            Some(_) => builder.pool_max_idle_per_host(0),
            None => builder,
        };
        builder.build().expect("client")
    }

    /// Each replica's own address (one on SQLite), bypassing the proxy.
    pub fn replica_addrs(&self) -> Vec<String> {
        self.replica_addrs.clone()
    }

    /// A `/metrics` counter summed over every replica.
    pub async fn counter_sum(&self, series: &str) -> u64 {
        let client = self.client();
        let mut total = 0;
        for addr in &self.replica_addrs {
            let text = client
                .get(format!("http://{addr}/metrics"))
                .send()
                .await
                .expect("metrics")
                .text()
                .await
                .expect("metrics text");
            total += text
                .lines()
                .find_map(|l| l.strip_prefix(series)?.trim().parse::<u64>().ok())
                .unwrap_or_else(|| panic!("no {series} in\n{text}"));
        }
        total
    }

    /// The PostgreSQL URL its replicas run on (`None` on SQLite).
    pub fn database_url(&self) -> Option<String> {
        self.database.clone()
    }

    /// The store this server runs on.
    pub fn store(&self) -> TestStore {
        self.options.store
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("running").id()
    }

    /// Everything the server has logged so far.
    pub fn logs(&self) -> String {
        self.log.lock().map(|l| l.clone()).unwrap_or_default()
    }

    fn spawn(&mut self, listen: &str) {
        let replicas = match self.options.store {
            TestStore::Postgres { replicas } if replicas > 1 => replicas,
            _ => 1,
        };
        let own_listen = if replicas > 1 { "127.0.0.1:0" } else { listen };
        let (child, addr) = self.spawn_replica(own_listen);
        self.child = Some(child);
        self.replica_addrs = vec![addr.clone()];
        let addr = if replicas > 1 {
            let (other, other_addr) = self.spawn_replica("127.0.0.1:0");
            self.other_replica = Some(other);
            self.replica_addrs.push(other_addr.clone());
            let proxy = round_robin::RoundRobin::start(listen, vec![addr, other_addr])
                .unwrap_or_else(|e| panic!("cannot start the round-robin proxy: {e}"));
            let addr = proxy.addr.clone();
            self.proxy = Some(proxy);
            addr
        } else {
            addr
        };
        self.base = format!("http://{addr}");
        self.addr = addr;
        self.admin_token = self
            .options
            .env
            .iter()
            .find(|(k, _)| k == "LEASEHOLD_ADMIN_TOKEN")
            .map(|(_, v)| v.clone())
            .unwrap_or_else(|| {
                std::fs::read_to_string(self.data_dir().join("admin.token"))
                    .expect("admin.token created on first start")
                    .trim()
                    .to_string()
            });
    }

    fn spawn_replica(&self, listen: &str) -> (Child, String) {
        spawn_leaseholdd(
            self.dir.path(),
            &self.data_dir(),
            listen,
            &self.options,
            self.database.as_deref(),
            self.log.clone(),
        )
        .unwrap_or_else(|e| panic!("{e}\n--- server log ---\n{}", self.logs()))
    }

    /// SIGKILL every replica: no chance to flush or clean up.
    pub fn kill9(&mut self) {
        self.proxy = None;
        for mut child in [self.child.take(), self.other_replica.take()]
            .into_iter()
            .flatten()
        {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// SIGTERM and wait for a clean exit.
    pub fn terminate(&mut self) -> Option<ExitStatus> {
        let mut child = self.child.take()?;
        signal(child.id(), "TERM");
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            if let Ok(Some(status)) = child.try_wait() {
                return Some(status);
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                return child.wait().ok();
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Start again on the same data dir and, if it is still free, the same port.
    pub async fn restart(&mut self) {
        self.kill9();
        let same = self.addr.clone();
        for _ in 0..50 {
            if std::net::TcpListener::bind(&same).is_ok() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        self.spawn(&same);
    }

    fn replica_mut(&mut self, i: usize) -> &mut Option<Child> {
        match i {
            0 => &mut self.child,
            _ => &mut self.other_replica,
        }
    }

    /// SIGKILL replica `i` alone (the proxy sends its clients to the others).
    pub fn kill9_replica(&mut self, i: usize) {
        if let Some(mut child) = self.replica_mut(i).take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Start replica `i` again on its own address.
    pub async fn restart_replica(&mut self, i: usize) {
        self.kill9_replica(i);
        let addr = self.replica_addrs[i].clone();
        for _ in 0..50 {
            if std::net::TcpListener::bind(&addr).is_ok() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let (child, _) = self.spawn_replica(&addr);
        *self.replica_mut(i) = Some(child);
    }

    /// Send a signal to replica `i` alone.
    pub fn signal_replica(&self, i: usize, name: &str) {
        let child = if i == 0 {
            &self.child
        } else {
            &self.other_replica
        };
        if let Some(child) = child {
            signal(child.id(), name);
        }
    }

    /// Send a signal (`"STOP"`, `"CONT"`, ...) to every replica.
    pub fn signal(&self, name: &str) {
        for child in [&self.child, &self.other_replica].into_iter().flatten() {
            signal(child.id(), name);
        }
    }

    pub fn auth(&self) -> String {
        format!("Bearer {}", self.admin_token)
    }

    /// The viewer (read-only) token: `LEASEHOLD_VIEWER_TOKEN` if the test
    /// set it, else the one the server created in its data dir.
    pub fn viewer_token(&self) -> String {
        self.options
            .env
            .iter()
            .find(|(k, _)| k == "LEASEHOLD_VIEWER_TOKEN")
            .map(|(_, v)| v.clone())
            .unwrap_or_else(|| {
                std::fs::read_to_string(self.data_dir().join("viewer.token"))
                    .expect("viewer.token created on first start")
                    .trim()
                    .to_string()
            })
    }

    /// `POST /v1/licenses/{license}/seats` with `Bearer key` and a JSON body.
    pub async fn checkout(
        &self,
        license: &str,
        key: &str,
        body: serde_json::Value,
    ) -> reqwest::Response {
        self.client()
            .post(self.url(&format!("/v1/licenses/{license}/seats")))
            .bearer_auth(key)
            .json(&body)
            .send()
            .await
            .expect("checkout request")
    }

    pub async fn heartbeat(&self, license: &str, key: &str, seat_id: &str) -> reqwest::Response {
        self.client()
            .post(self.url(&format!("/v1/licenses/{license}/seats/{seat_id}/heartbeat")))
            .bearer_auth(key)
            .send()
            .await
            .expect("heartbeat request")
    }

    pub async fn release(&self, license: &str, key: &str, seat_id: &str) -> reqwest::Response {
        self.client()
            .delete(self.url(&format!("/v1/licenses/{license}/seats/{seat_id}")))
            .bearer_auth(key)
            .send()
            .await
            .expect("release request")
    }

    /// Check out with `body` and return the new lease; panics unless 201.
    pub async fn take_seat(&self, license: &str, key: &str, body: serde_json::Value) -> Lease {
        let resp = self.checkout(license, key, body.clone()).await;
        assert_eq!(resp.status(), 201, "checkout {license} {body}");
        resp.json().await.expect("lease json")
    }

    /// `n` holders `user-000000`, `user-000001`, … each take a seat of
    /// `license` (key `<license>-key`), 64 checkouts in flight; panics
    /// unless every one is granted.
    pub async fn preload(&self, license: &str, n: usize) {
        use futures_util::StreamExt;
        let client = self.client();
        let url = self.url(&format!("/v1/licenses/{license}/seats"));
        let key = format!("Bearer {license}-key");
        let granted = futures_util::stream::iter(0..n)
            .map(|i| {
                let req = client
                    .post(&url)
                    .header("authorization", &key)
                    .json(&serde_json::json!({ "holder": format!("user-{i:06}") }));
                async move { req.send().await.map(|r| r.status().as_u16()) }
            })
            .buffer_unordered(64)
            .filter(|r| std::future::ready(matches!(r, Ok(201))))
            .count()
            .await;
        assert_eq!(granted, n, "every preload checkout granted");
    }

    /// A request to an admin endpoint, carrying the admin token.
    pub fn admin(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        self.client()
            .request(method, self.url(path))
            .header("authorization", self.auth())
    }

    /// The admin revoke of `seat_id`, not yet sent (a reason or block goes in
    /// the body).
    pub fn revoke(&self, seat_id: &str) -> reqwest::RequestBuilder {
        self.admin(
            reqwest::Method::DELETE,
            &format!("/v1/admin/seats/{seat_id}"),
        )
    }

    /// GET a public endpoint (no credentials); panics unless 200.
    pub async fn get_json(&self, path: &str) -> serde_json::Value {
        json_200(self.client().get(self.url(path)), path).await
    }

    /// GET an admin endpoint with the admin token; panics unless 200.
    pub async fn admin_get(&self, path: &str) -> serde_json::Value {
        json_200(self.admin(reqwest::Method::GET, path), path).await
    }

    /// GET an admin endpoint with the admin token: the status and the JSON
    /// body (for answers that may be errors).
    pub async fn admin_try(&self, path: &str) -> (u16, serde_json::Value) {
        let resp = self
            .admin(reqwest::Method::GET, path)
            .send()
            .await
            .expect("request");
        let status = resp.status().as_u16();
        (status, resp.json().await.expect("json"))
    }

    /// The admin view of `license` (seats, live, policy).
    pub async fn license(&self, license: &str) -> serde_json::Value {
        let v = self.admin_get("/v1/admin/licenses").await;
        v["licenses"]
            .as_array()
            .expect("licenses")
            .iter()
            .find(|l| l["id"] == license)
            .cloned()
            .unwrap_or_else(|| panic!("license {license} listed"))
    }

    /// Live seats of `license` according to the admin API.
    pub async fn live(&self, license: &str) -> u64 {
        self.license(license).await["live"].as_u64().expect("live")
    }

    /// The seats the admin API lists, of one license or all.
    pub async fn seats(&self, license: Option<&str>) -> Vec<serde_json::Value> {
        let path = match license {
            Some(l) => format!("/v1/admin/seats?license={l}"),
            None => "/v1/admin/seats".to_string(),
        };
        let mut v = self.admin_get(&path).await;
        serde_json::from_value(v["seats"].take()).expect("seats")
    }

    /// Every event so far (up to 10,000), oldest first.
    pub async fn events(&self) -> Vec<serde_json::Value> {
        let mut v = self.admin_get("/v1/admin/events?limit=10000").await;
        serde_json::from_value(v["events"].take()).expect("events")
    }

    /// The events of one kind (`"reap"`, `"config"`, ...), oldest first.
    pub async fn events_of(&self, kind: &str) -> Vec<serde_json::Value> {
        let mut events = self.events().await;
        events.retain(|e| e["kind"] == kind);
        events
    }
}

/// Send `req`, assert 200, parse the JSON body.
async fn json_200(req: reqwest::RequestBuilder, path: &str) -> serde_json::Value {
    let resp = req.send().await.expect("request");
    assert_eq!(resp.status(), 200, "GET {path}");
    resp.json().await.expect("json")
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill9();
    }
}

fn signal(pid: u32, name: &str) {
    let _ = Command::new("kill")
        .arg(format!("-{name}"))
        .arg(pid.to_string())
        .status();
}

/// Spawn `leaseholdd` in `dir` and wait for its "listening on" line.
fn spawn_leaseholdd(
    dir: &Path,
    data_dir: &Path,
    listen: &str,
    options: &ServerOptions,
    database: Option<&str>,
    log: Arc<Mutex<String>>,
) -> Result<(Child, String), String> {
    let mut cmd = Command::new(leaseholdd_bin());
    if let Some(url) = database {
        cmd.arg("--database").arg(url);
    }
    cmd.arg("--listen")
        .arg(listen)
        .arg("--data-dir")
        .arg(data_dir)
        .arg("--licenses")
        .arg(dir.join("licenses.toml"))
        .args(&options.args)
        .env_remove("LEASEHOLD_ADMIN_TOKEN")
        .env_remove("LEASEHOLD_VIEWER_TOKEN")
        .env_remove("LEASEHOLD_LISTEN")
        .env_remove("LEASEHOLD_DATA_DIR")
        .env_remove("LEASEHOLD_LICENSES")
        .env_remove("LEASEHOLD_DATABASE")
        .env("LEASEHOLD_LOG", "info")
        .envs(options.env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    spawn_until_listening(&mut cmd, Duration::from_secs(30), move |line| {
        if let Ok(mut l) = log.lock() {
            l.push_str(line);
            l.push('\n');
        }
    })
}

/// Spawn `cmd` (a `leaseholdd`) with stderr piped and wait until it logs
/// `listening on http://ADDR`; returns the child and ADDR. Its stderr keeps
/// being drained into `on_line` for the whole run, so it never blocks on a
/// full pipe.
pub fn spawn_until_listening(
    cmd: &mut Command,
    timeout: Duration,
    mut on_line: impl FnMut(&str) + Send + 'static,
) -> Result<(Child, String), String> {
    let mut child = cmd
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start {:?}: {e}", cmd.get_program()))?;
    let stderr = child.stderr.take().expect("piped stderr");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut tx = Some(tx);
        for line in BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            if let Some(rest) = line.split("listening on http://").nth(1)
                && let Some(tx) = tx.take()
            {
                let _ = tx.send(rest.trim().to_string());
            }
            on_line(&line);
        }
    });
    let deadline = Instant::now() + timeout;
    loop {
        if let Ok(addr) = rx.recv_timeout(Duration::from_millis(50)) {
            return Ok((child, addr));
        }
        if let Ok(Some(status)) = child.try_wait() {
            return Err(format!("leaseholdd exited during start-up: {status}"));
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            return Err(format!(
                "leaseholdd did not report 'listening on' within {timeout:?}"
            ));
        }
    }
}

/// Run `leaseholdd` with `args` to completion (for start-up failures) and
/// return (exit status, stderr).
pub fn run_leaseholdd_expecting_exit(args: &[&str], timeout: Duration) -> (ExitStatus, String) {
    let mut child = Command::new(leaseholdd_bin())
        .args(args)
        .env_remove("LEASEHOLD_ADMIN_TOKEN")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn leaseholdd");
    let deadline = Instant::now() + timeout;
    loop {
        if let Ok(Some(_)) = child.try_wait() {
            break;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let out = child.wait_with_output().expect("output");
            panic!(
                "leaseholdd {args:?} did not exit within {timeout:?}; stderr:\n{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().expect("output");
    (
        out.status,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Poll `check` until it returns `Some`, or panic after `timeout`.
pub async fn eventually<T, F, Fut>(timeout: Duration, what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = check().await {
            return v;
        }
        if Instant::now() > deadline {
            panic!("timed out after {timeout:?} waiting for {what}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The next `n` messages of an SSE response, as (id, JSON data); fails
/// the test if they do not arrive within 10 s.
pub async fn read_sse(resp: &mut reqwest::Response, n: usize) -> Vec<(i64, serde_json::Value)> {
    let mut buf = String::new();
    let mut out = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while out.len() < n {
        let chunk = tokio::time::timeout_at(deadline, resp.chunk())
            .await
            .expect("SSE message in time")
            .expect("stream ok")
            .expect("stream open");
        buf.push_str(std::str::from_utf8(&chunk).unwrap());
        while let Some(end) = buf.find("\n\n") {
            let msg: String = buf.drain(..end + 2).collect();
            let mut id = None;
            let mut data = None;
            for line in msg.lines() {
                if let Some(v) = line.strip_prefix("id:") {
                    id = Some(v.trim().parse::<i64>().unwrap());
                } else if let Some(v) = line.strip_prefix("data:") {
                    data = Some(serde_json::from_str::<serde_json::Value>(v.trim()).unwrap());
                }
            }
            if let (Some(id), Some(data)) = (id, data) {
                out.push((id, data));
            }
        }
    }
    out
}

/// What a finished `leasehold` run printed.
#[derive(Debug)]
pub struct Run {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl From<std::process::Output> for Run {
    fn from(out: std::process::Output) -> Run {
        Run {
            code: out.status.code(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }
}

/// Run `leasehold ARGS` against `server` (with `--server`, plus `--token`
/// unless `token` is None) in `cwd`, with a clean environment for the token;
/// bounded to 30 s.
pub async fn run_leasehold(server: &Server, token: Option<&str>, cwd: &Path, args: &[&str]) -> Run {
    let bin = leasehold_bin();
    assert!(
        bin.exists(),
        "{} not built: run `cargo build -p leasehold-tui` first",
        bin.display()
    );
    let mut cmd = tokio::process::Command::new(&bin);
    cmd.args(args)
        .arg("--server")
        .arg(&server.base)
        .current_dir(cwd)
        .env_remove("LEASEHOLD_ADMIN_TOKEN")
        .env("NO_COLOR", "1")
        .stdin(Stdio::null());
    if let Some(t) = token {
        cmd.arg("--token").arg(t);
    }
    let out = tokio::time::timeout(Duration::from_secs(30), cmd.output())
        .await
        .expect("leasehold finished within 30 s")
        .expect("run leasehold");
    Run::from(out)
}
