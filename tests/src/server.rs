//! A `leaseholdd` under test: started on a free port with a temp data dir
//! (on PostgreSQL, a fresh database; with two replicas, behind a
//! round-robin proxy), restarted, signalled, killed on drop. Its HTTP
//! helpers are in `http.rs`.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tempfile::TempDir;

use crate::process::{signal, spawn_until_listening};
use crate::round_robin;
use crate::store::TestStore;
use crate::tools::{forget_libfaketime_objects, leaseholdd_bin};

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
    /// Whether `database` was made for this server (then dropped with it).
    owns_database: bool,
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
        let owns_database = database.is_some() && options.database.is_none();
        let mut server = Server {
            child: None,
            other_replica: None,
            proxy: None,
            replica_addrs: Vec::new(),
            database,
            owns_database,
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

    /// Set (or replace) an environment variable for the next start (e.g. a
    /// new `LEASEHOLD_ADMIN_TOKEN` before [`Server::restart`]).
    pub fn set_env(&mut self, key: &str, value: &str) {
        self.options.env.retain(|(k, _)| k != key);
        self.options.env.push((key.to_string(), value.to_string()));
    }

    /// SIGKILL every replica: no chance to flush or clean up.
    pub fn kill9(&mut self) {
        self.proxy = None;
        for child in [self.child.take(), self.other_replica.take()]
            .into_iter()
            .flatten()
        {
            self.kill_child(child);
        }
    }

    /// SIGKILL and wait; then remove what libfaketime, if preloaded, left
    /// in /dev/shm under the dead pid (its cleanup never ran).
    fn kill_child(&self, mut child: Child) {
        let pid = child.id();
        let _ = child.kill();
        let _ = child.wait();
        if self.options.env.iter().any(|(k, _)| k == "LD_PRELOAD") {
            forget_libfaketime_objects(pid);
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
        if let Some(child) = self.replica_mut(i).take() {
            self.kill_child(child);
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
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill9();
        // A suite makes a database per test; keep only the live ones on
        // disk. Not while unwinding: a failed test's data stays to look at.
        if let Some(url) = self.database.as_deref()
            && self.owns_database
            && !std::thread::panicking()
        {
            leasehold_testkit::postgres::PgCluster::drop_shared_database_soon(url);
        }
    }
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
