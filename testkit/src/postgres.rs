//! A throwaway PostgreSQL cluster: `initdb` into a temp dir, `pg_ctl start`
//! on a free loopback port, one fresh database per test.
//!
//! PostgreSQL refuses to run as root, so when the tests run as root (as CI
//! does) the cluster runs as the `postgres` user that Debian's package
//! creates. A missing PostgreSQL fails the test with how to install it: a
//! store test never passes without having run.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, Ordering};

use tempfile::TempDir;

/// A running cluster. Dropping it stops the server (immediately: nothing in
/// it is worth a clean shutdown) and removes its files.
#[derive(Debug)]
pub struct PgCluster {
    dir: TempDir,
    bin: PathBuf,
    port: u16,
    /// Whom the server runs as, when the tests run as root.
    run_as: Option<&'static str>,
}

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
            run_as,
        };
        cluster.initdb();
        // A free port can be taken between our probe and the server's bind:
        // try a few.
        for attempt in 0.. {
            cluster.port = free_port();
            match cluster.try_pg_ctl_start() {
                Ok(()) => break,
                Err(e) if attempt < 4 => eprintln!("PostgreSQL did not start, retrying: {e}"),
                Err(e) => panic!("PostgreSQL did not start: {e}"),
            }
        }
        cluster.watch_parent();
        cluster
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

    /// The URL of database `name` on this cluster.
    pub fn url(&self, name: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{name}", self.port)
    }

    /// Run one SQL statement with psql, as the superuser; its output.
    pub fn psql(&self, database: &str, sql: &str) -> String {
        let out = run(
            Command::new(self.bin.join("psql"))
                .args(["-X", "-q", "-t", "-A", "-v", "ON_ERROR_STOP=1"])
                .args(["-h", "127.0.0.1", "-U", "postgres", "-d", database])
                .arg("-p")
                .arg(self.port.to_string())
                .arg("-c")
                .arg(sql),
            "psql",
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
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
        if let Err(e) = self.try_pg_ctl_start() {
            panic!("PostgreSQL did not start again: {e}");
        }
    }

    fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
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

    fn try_pg_ctl_start(&self) -> Result<(), String> {
        let options = format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1 -c max_connections=300 \
             -c shared_buffers=64MB -c log_min_messages=warning",
            self.port,
            self.dir.path().display()
        );
        let mut cmd = self.as_owner(&self.bin.join("pg_ctl"));
        cmd.arg("-D")
            .arg(self.data_dir())
            .arg("-l")
            .arg(self.dir.path().join("server.log"))
            .args(["-w", "-t", "30", "-o", &options, "start"]);
        let out = cmd.output().map_err(|e| format!("pg_ctl: {e}"))?;
        if out.status.success() {
            return Ok(());
        }
        let log = std::fs::read_to_string(self.dir.path().join("server.log")).unwrap_or_default();
        Err(format!(
            "{}{}\n{log}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ))
    }

    /// A watchdog process that stops the server and removes its files once
    /// this test process is gone, however it ended (even by SIGKILL).
    fn watch_parent(&self) {
        let script = format!(
            "while kill -0 {pid} 2>/dev/null; do sleep 1; done; \
             {owner}{pg_ctl} -D {data} -m immediate -w stop >/dev/null 2>&1; rm -rf {dir}",
            pid = std::process::id(),
            owner = self
                .run_as
                .map(|u| format!("runuser -u {u} -- "))
                .unwrap_or_default(),
            pg_ctl = self.bin.join("pg_ctl").display(),
            data = self.data_dir().display(),
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
        let mut cmd = self.as_owner(&self.bin.join("pg_ctl"));
        cmd.arg("-D")
            .arg(self.data_dir())
            .args(["-m", "immediate", "-w", "stop"]);
        let _ = cmd.output();
    }
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
    }
}
