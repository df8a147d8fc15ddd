//! A throwaway PostgreSQL cluster: `initdb` into a temp dir, `pg_ctl start`
//! on a free loopback port, one fresh database per test.
//!
//! For failover tests, [`PgCluster::with_sync_standby`] adds a synchronous
//! streaming standby (`pg_basebackup -R`) on a port of its own; then
//! [`PgCluster::kill_primary`] (SIGKILL of the postmaster) and
//! [`PgCluster::promote_standby`] (`pg_ctl promote`) play an operator's
//! failover, and [`PgCluster::url`] names both hosts with
//! `target_session_attrs=read-write`, so clients follow the promotion.
//!
//! PostgreSQL refuses to run as root, so when the tests run as root (as CI
//! does) the cluster runs as the `postgres` user that Debian's package
//! creates. A missing PostgreSQL fails the test with how to install it: a
//! store test never passes without having run.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{OnceLock, mpsc};
use std::time::{Duration, Instant};

use tempfile::TempDir;

/// A running cluster. Dropping it stops the server (immediately: nothing in
/// it is worth a clean shutdown) and removes its files.
#[derive(Debug)]
pub struct PgCluster {
    dir: TempDir,
    bin: PathBuf,
    port: u16,
    /// The synchronous standby's port, when it has one.
    standby_port: Option<u16>,
    /// Whom the server runs as, when the tests run as root.
    run_as: Option<&'static str>,
}

/// The standby's `application_name` (from its `cluster_name`), which the
/// primary's `synchronous_standby_names` names.
const STANDBY_NAME: &str = "standby";

/// One cluster per test process, for tests that only need a database.
static SHARED: OnceLock<PgCluster> = OnceLock::new();
static DATABASES: AtomicU32 = AtomicU32::new(0);

impl PgCluster {
    /// The process's shared cluster, started on first use and stopped when
    /// the process exits.
    pub fn shared() -> &'static PgCluster {
        // Statics are never dropped: the watchdog every cluster gets stops
        // this one when the test process exits.
        SHARED.get_or_init(PgCluster::start)
    }

    /// A cluster of its own, for tests that stop and start the database.
    pub fn start() -> PgCluster {
        let bin = postgres_bin_dir();
        let dir = tempfile::Builder::new()
            .prefix("leasehold-pg-")
            .tempdir()
            .expect("a temp dir for the PostgreSQL cluster");
        let run_as = running_as_root().then_some("postgres");
        if let Some(user) = run_as {
            run(
                Command::new("chown").args(["-R", user]).arg(dir.path()),
                "chown",
            );
        }
        let mut cluster = PgCluster {
            dir,
            bin,
            port: 0,
            standby_port: None,
            run_as,
        };
        cluster.initdb();
        cluster.port = start_on_a_free_port("PostgreSQL", |port| {
            cluster.try_pg_ctl_start(&cluster.data_dir(), port, "server.log", "")
        });
        cluster.watch_parent();
        cluster
    }

    /// A cluster of its own with a synchronous streaming standby: every
    /// commit is acknowledged only once the standby has it, as an operator
    /// runs PostgreSQL to survive losing the primary. Returns once the
    /// primary reports the standby `sync`.
    pub fn with_sync_standby() -> PgCluster {
        let mut cluster = PgCluster::start();
        cluster.base_backup();
        let data = cluster.standby_dir();
        let port = start_on_a_free_port("the standby", |port| {
            let name = format!("-c cluster_name={STANDBY_NAME}");
            cluster.try_pg_ctl_start(&data, port, "standby.log", &name)
        });
        cluster.standby_port = Some(port);
        // Set after the base backup, so the standby does not inherit it: once
        // promoted, it must not wait for a standby of its own.
        cluster.psql(
            "postgres",
            &format!("ALTER SYSTEM SET synchronous_standby_names = '{STANDBY_NAME}'"),
        );
        cluster.psql("postgres", "SELECT pg_reload_conf()");
        cluster.wait_for_sync_standby();
        cluster
    }

    /// SIGKILL the primary's postmaster (a crash, no shutdown), and wait
    /// until it is gone.
    pub fn kill_primary(&self) {
        let pid_file = std::fs::read_to_string(self.data_dir().join("postmaster.pid"))
            .expect("the primary's postmaster.pid");
        let pid = pid_file
            .lines()
            .next()
            .expect("a pid line")
            .trim()
            .to_string();
        run(Command::new("kill").args(["-KILL", &pid]), "kill -KILL");
        let deadline = Instant::now() + Duration::from_secs(10);
        while Command::new("kill")
            .args(["-0", &pid])
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
        {
            assert!(Instant::now() < deadline, "the primary outlived SIGKILL");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// `pg_ctl promote` the standby, waiting until it accepts writes.
    pub fn promote_standby(&self) {
        let mut cmd = self.as_owner(&self.bin.join("pg_ctl"));
        cmd.arg("-D")
            .arg(self.standby_dir())
            .args(["-w", "-t", "30", "promote"]);
        run(&mut cmd, "pg_ctl promote");
    }

    /// The standby's port (panics without one).
    pub fn standby_port(&self) -> u16 {
        self.standby_port.expect("a cluster with a standby")
    }

    /// Run one SQL statement on the standby (before promotion: read-only).
    pub fn psql_standby(&self, database: &str, sql: &str) -> String {
        self.psql_at(self.standby_port(), database, sql)
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// A new, empty database; its connection URL.
    pub fn create_database(&self) -> String {
        let n = DATABASES.fetch_add(1, Ordering::Relaxed);
        let name = format!("t{}_{n}", std::process::id());
        self.psql("postgres", &format!("CREATE DATABASE {name}"));
        self.url(&name)
    }

    /// Drop a database [`PgCluster::create_database`] made (its URL), closing
    /// whatever connections it still has.
    pub fn drop_database(&self, url: &str) {
        self.psql("postgres", &drop_statement(url));
    }

    /// Drop a database of [`PgCluster::shared`] on a thread of its own: a
    /// test process that makes hundreds (a property test makes one per case)
    /// keeps only the live ones on disk, without waiting for the checkpoint
    /// each drop forces (about 0.4 s). Best effort: the watchdog removes
    /// the whole cluster anyway when the process ends.
    pub fn drop_shared_database_soon(url: &str) {
        static DROPPER: OnceLock<mpsc::Sender<String>> = OnceLock::new();
        let queue = DROPPER.get_or_init(|| {
            let (queue, urls) = mpsc::channel::<String>();
            std::thread::spawn(move || {
                let cluster = PgCluster::shared();
                for url in urls {
                    let _ = cluster
                        .psql_command(cluster.port, "postgres", &drop_statement(&url))
                        .output();
                }
            });
            queue
        });
        let _ = queue.send(url.to_string());
    }

    /// The URL of database `name` on this cluster. With a standby it names
    /// both hosts, and `target_session_attrs=read-write` makes a client
    /// connect to whichever is the primary.
    pub fn url(&self, name: &str) -> String {
        match self.standby_port {
            None => format!("postgres://postgres@127.0.0.1:{}/{name}", self.port),
            Some(standby) => format!(
                "postgres://postgres@127.0.0.1:{},127.0.0.1:{standby}/{name}\
                 ?target_session_attrs=read-write",
                self.port
            ),
        }
    }

    /// Run one SQL statement with psql, as the superuser; its output.
    pub fn psql(&self, database: &str, sql: &str) -> String {
        self.psql_at(self.port, database, sql)
    }

    fn psql_command(&self, port: u16, database: &str, sql: &str) -> Command {
        let mut cmd = Command::new(self.bin.join("psql"));
        cmd.args(["-X", "-q", "-t", "-A", "-v", "ON_ERROR_STOP=1"])
            .args(["-h", "127.0.0.1", "-U", "postgres", "-d", database])
            .arg("-p")
            .arg(port.to_string())
            .arg("-c")
            .arg(sql);
        cmd
    }

    fn psql_at(&self, port: u16, database: &str, sql: &str) -> String {
        let out = self
            .psql_command(port, database, sql)
            .output()
            .unwrap_or_else(|e| panic!("psql could not run: {e}"));
        // A failure says why the server failed too (a crashed backend puts
        // the cluster in recovery: its log names the cause).
        assert!(
            out.status.success(),
            "psql failed: {}{}\n--- the end of the server's log ---\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
            self.log_tail(port)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    /// The last lines of the log of the server on `port`.
    fn log_tail(&self, port: u16) -> String {
        let file = if Some(port) == self.standby_port {
            "standby.log"
        } else {
            "server.log"
        };
        let log = std::fs::read_to_string(self.dir.path().join(file)).unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        lines[lines.len().saturating_sub(40)..].join("\n")
    }

    /// Stop the server (immediate mode: like a crash).
    pub fn stop(&self) {
        let data = self.data_dir();
        let mut cmd = self.as_owner(&self.bin.join("pg_ctl"));
        cmd.arg("-D")
            .arg(&data)
            .args(["-m", "immediate", "-w", "stop"]);
        run(&mut cmd, "pg_ctl stop");
    }

    /// Start it again on the same port after [`PgCluster::stop`].
    pub fn restart(&self) {
        if let Err(e) = self.try_pg_ctl_start(&self.data_dir(), self.port, "server.log", "") {
            panic!("PostgreSQL did not start again: {e}");
        }
    }

    fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    fn standby_dir(&self) -> PathBuf {
        self.dir.path().join("standby")
    }

    /// Copy the primary into the standby's data dir; `-R` writes the
    /// connection to the primary and `standby.signal`, `-X stream` the WAL.
    fn base_backup(&self) {
        let tool = self.bin.join("pg_basebackup");
        assert!(
            tool.exists(),
            "this test needs pg_basebackup: install Debian's `postgresql` package \
             (`bash .ci/run` does)"
        );
        let mut cmd = self.as_owner(&tool);
        cmd.args(["-h", "127.0.0.1", "-U", "postgres", "-p"])
            .arg(self.port.to_string())
            .arg("-D")
            .arg(self.standby_dir())
            .args(["-R", "-X", "stream", "--no-sync"]);
        run(&mut cmd, "pg_basebackup");
    }

    fn wait_for_sync_standby(&self) {
        let deadline = Instant::now() + Duration::from_secs(30);
        let query = "SELECT count(*) FROM pg_stat_replication WHERE sync_state = 'sync'";
        while self.psql("postgres", query) != "1" {
            assert!(
                Instant::now() < deadline,
                "the standby did not become synchronous"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn initdb(&self) {
        let mut cmd = self.as_owner(&self.bin.join("initdb"));
        cmd.arg("-D")
            .arg(self.data_dir())
            .args(["-U", "postgres", "--auth=trust", "-E", "UTF8", "--locale=C"])
            // The cluster's own files need no fsync to be a test fixture; the
            // server itself keeps fsync on (leaseholdd refuses to run without).
            .arg("--no-sync");
        run(&mut cmd, "initdb");
    }

    /// `pg_ctl start` the server of `data` on `port`, logging to `log`.
    fn try_pg_ctl_start(
        &self,
        data: &Path,
        port: u16,
        log: &str,
        extra: &str,
    ) -> Result<(), String> {
        let options = format!(
            "-p {port} -k {} -c listen_addresses=127.0.0.1 -c max_connections=300 \
             -c shared_buffers=64MB -c log_min_messages=warning {extra}",
            self.dir.path().display()
        );
        let log = self.dir.path().join(log);
        let mut cmd = self.as_owner(&self.bin.join("pg_ctl"));
        cmd.arg("-D")
            .arg(data)
            .arg("-l")
            .arg(&log)
            .args(["-w", "-t", "30", "-o", &options, "start"]);
        let out = cmd.output().map_err(|e| format!("pg_ctl: {e}"))?;
        if out.status.success() {
            return Ok(());
        }
        let log = std::fs::read_to_string(log).unwrap_or_default();
        Err(format!(
            "{}{}\n{log}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ))
    }

    /// A watchdog process that stops the server (and its standby, if it has
    /// one by then) and removes their files once this test process is gone,
    /// however it ended (even by SIGKILL).
    fn watch_parent(&self) {
        let script = format!(
            "while kill -0 {pid} 2>/dev/null; do sleep 1; done; \
             for d in {data} {standby}; do \
             {owner}{pg_ctl} -D $d -m immediate -w stop >/dev/null 2>&1; done; rm -rf {dir}",
            pid = std::process::id(),
            owner = self
                .run_as
                .map(|u| format!("runuser -u {u} -- "))
                .unwrap_or_default(),
            pg_ctl = self.bin.join("pg_ctl").display(),
            data = self.data_dir().display(),
            standby = self.standby_dir().display(),
            dir = self.dir.path().display(),
        );
        let _ = Command::new("sh")
            .arg("-c")
            .arg(script)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn();
    }

    /// A command that runs as the cluster's owner.
    fn as_owner(&self, program: &Path) -> Command {
        match self.run_as {
            Some(user) => {
                let mut c = Command::new("runuser");
                c.args(["-u", user, "--"]).arg(program);
                c
            }
            None => Command::new(program),
        }
    }
}

impl Drop for PgCluster {
    fn drop(&mut self) {
        let standby = self.standby_port.map(|_| self.standby_dir());
        for data in std::iter::once(self.data_dir()).chain(standby) {
            let mut cmd = self.as_owner(&self.bin.join("pg_ctl"));
            cmd.arg("-D")
                .arg(data)
                .args(["-m", "immediate", "-w", "stop"]);
            let _ = cmd.output();
        }
    }
}

/// Start a server with `try_start(port)` on a free port: a free port can be
/// taken between our probe and the server's bind, so try a few.
fn start_on_a_free_port(what: &str, mut try_start: impl FnMut(u16) -> Result<(), String>) -> u16 {
    for attempt in 0.. {
        let port = free_port();
        match try_start(port) {
            Ok(()) => return port,
            Err(e) if attempt < 4 => eprintln!("{what} did not start, retrying: {e}"),
            Err(e) => panic!("{what} did not start: {e}"),
        }
    }
    unreachable!("the loop returns or panics")
}

/// Where Debian's package puts the server binaries (not on PATH).
fn postgres_bin_dir() -> PathBuf {
    let mut versions: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path().join("bin"))
        .filter(|bin| bin.join("initdb").exists())
        .collect();
    versions.sort();
    if let Some(newest) = versions.pop() {
        return newest;
    }
    if let Some(dir) = std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .find(|d| d.join("initdb").exists() && d.join("pg_ctl").exists())
    }) {
        return dir;
    }
    panic!(
        "this test needs PostgreSQL (initdb, pg_ctl): install Debian's `postgresql` package \
         (`bash .ci/run` does)"
    );
}

fn running_as_root() -> bool {
    // The effective uid is the second field of /proc's "Uid:" line.
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            let line = status.lines().find(|l| l.starts_with("Uid:"))?;
            line.split_whitespace().nth(2).map(|euid| euid == "0")
        })
        .unwrap_or(false)
}

fn drop_statement(url: &str) -> String {
    format!(
        "DROP DATABASE IF EXISTS {} WITH (FORCE)",
        database_name(url)
    )
}

/// The database a URL from [`PgCluster::url`] names.
fn database_name(url: &str) -> &str {
    let path = url.rsplit('/').next().unwrap_or(url);
    path.split('?').next().unwrap_or(path)
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}

fn run(cmd: &mut Command, what: &str) -> Output {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("{what} could not run: {e}"));
    assert!(
        out.status.success(),
        "{what} failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cluster_serves_fresh_databases_and_survives_a_restart() {
        let cluster = PgCluster::start();
        let url = cluster.create_database();
        let name = url.rsplit('/').next().unwrap().to_string();
        cluster.psql(&name, "CREATE TABLE t (x int); INSERT INTO t VALUES (7)");
        cluster.stop();
        cluster.restart();
        assert_eq!(cluster.psql(&name, "SELECT x FROM t"), "7");
        let other = cluster.create_database();
        assert_ne!(url, other);
        let count = format!("SELECT count(*) FROM pg_database WHERE datname = '{name}'");
        assert_eq!(cluster.psql("postgres", &count), "1");
        cluster.drop_database(&url);
        assert_eq!(cluster.psql("postgres", &count), "0");
    }

    #[test]
    fn a_promoted_sync_standby_has_every_commit_of_the_killed_primary() {
        let cluster = PgCluster::with_sync_standby();
        let url = cluster.create_database();
        assert!(url.ends_with("?target_session_attrs=read-write"), "{url}");
        let name = url.rsplit('/').next().unwrap().split('?').next().unwrap();
        cluster.psql(name, "CREATE TABLE t (x int); INSERT INTO t VALUES (7)");
        cluster.kill_primary();
        cluster.promote_standby();
        cluster.psql_standby(name, "INSERT INTO t VALUES (8)");
        assert_eq!(
            cluster.psql_standby(name, "SELECT string_agg(x::text, ',' ORDER BY x) FROM t"),
            "7,8"
        );
    }
}
