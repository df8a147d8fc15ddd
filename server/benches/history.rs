//! The usage history at a year's scale (issue 12): 1,000,000 sessions of one
//! license over 365 days, then `leaseholdd` (the release build of this
//! package) started on that database and asked over HTTP, as a client
//! would:
//!
//! - `GET /v1/admin/usage` for the whole year at `step=1h` (target ≤ 1 s),
//!   and for the last 24 hours;
//! - `GET /v1/admin/sessions?format=csv` for the whole year, rows/s
//!   (target ≥ 100,000/s) and the server's RSS before, during (peak) and
//!   after (from `/proc/PID/status`), and for the last 24 hours.
//!
//! The history is written straight into the database (one transaction), as
//! `reap.rs` does with leases: the schema comes from opening the real store
//! once. Realistic shape: sessions of 20 minutes to 6 hours with random
//! starts over the year, ≈ 400 open at a time, holders from a pool of 300
//! names, three pool-size records, ≈ 5,000 seconds with denials, and a few
//! hundred sessions still open (with their live leases).
//!
//! `cargo bench -p leasehold-server --bench history`
//! (`HISTORY_SESSIONS=N`, `HISTORY_RUNS=N` timed runs per query, default 5;
//! `HISTORY_CSV_SECS=N` stops reading a CSV after N s, default 60;
//! `HISTORY_DB=DIR` keeps the data dir there and reuses it if it exists;
//! `HISTORY_LEASEHOLDD=PATH` runs another build of the server on it, for a
//! before/after pair on the same data; `HISTORY_STORE=postgres` writes the
//! same rows into a throwaway PostgreSQL cluster instead and runs the
//! server as a replica on it).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use leasehold_common::{Licenses, Timestamp};
use leasehold_server::clock::{SharedClock, SystemClock};
use leasehold_server::licenses::LicensesHandle;
use leasehold_server::store::{Store, StoreOptions, database_path};
use leasehold_testkit::postgres::PgCluster;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const LICENSE: &str = "design";
const SEATS: u32 = 450;
const HOLDERS: usize = 300;
const OPEN: usize = 300;
const DAY_MS: i64 = 86_400_000;
const TOKEN: &str = "history-bench-admin-token-0123456789";

fn licenses_toml() -> String {
    format!(
        r#"
[[license]]
id = "{LICENSE}"
key = "k1"
seats = {SEATS}
ttl = "1h"
skew = "5s"
reap_grace = "15s"
"#
    )
}

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock")
        .as_millis() as i64
}

/// The schema, through the real store.
fn create_schema(data_dir: &Path) {
    std::fs::create_dir_all(data_dir).expect("data dir");
    let licenses = LicensesHandle::new(Licenses::parse(&licenses_toml()).expect("licenses"));
    let clock: SharedClock = Arc::new(SystemClock);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        Store::open(
            &database_path(data_dir),
            licenses,
            clock,
            StoreOptions::default(),
        )
        .expect("open store")
        .close()
        .await
    });
}

/// An ended session of the generated history.
struct Ended<'a> {
    seat: String,
    holder: &'a str,
    fingerprint: Option<String>,
    start: i64,
    end: i64,
    kind: &'static str,
}

/// A live lease: an open session.
struct Open<'a> {
    seat: String,
    holder: &'a str,
    checked_out_at: i64,
    issued_at: i64,
    expires_at: i64,
}

/// One row of the generated history.
enum Record<'a> {
    Session(Ended<'a>),
    Lease(Open<'a>),
    PoolSize { at: i64, seats: u32 },
    Denials { second_ms: i64, count: i64 },
}

/// `n` closed sessions over the year up to `now`, `OPEN` open ones (their
/// live leases), pool sizes and denials, in that order, the same rows for
/// either store (one seed).
fn generate(n: usize, now: i64, mut emit: impl FnMut(Record<'_>)) {
    let year_start = now - 365 * DAY_MS;
    let mut rng = StdRng::seed_from_u64(12);
    let holders: Vec<String> = (0..HOLDERS).map(|i| format!("user-{i:03}")).collect();
    for _ in 0..n {
        let h = rng.gen_range(0..HOLDERS);
        // 20 min to 6 h, ending at least a minute before now.
        let duration = rng.gen_range(1_200_000..21_600_000i64);
        let start = rng.gen_range(year_start..now - duration - 60_000);
        let kind = match rng.gen_range(0..100) {
            0..85 => "release",
            85..95 => "lapse",
            _ => "revoke",
        };
        emit(Record::Session(Ended {
            seat: format!("{:032x}", rng.r#gen::<u128>()),
            holder: &holders[h],
            fingerprint: (h % 4 != 0).then(|| format!("fp-{h:03}")),
            start,
            end: start + duration,
            kind,
        }));
    }
    for i in 0..OPEN {
        let seat = format!("{:032x}", rng.r#gen::<u128>());
        let start = now - rng.gen_range(60_000..6 * 3_600_000i64);
        // Heartbeats keep them live: expiring within the TTL.
        emit(Record::Lease(Open {
            seat,
            holder: &holders[i % HOLDERS],
            checked_out_at: start,
            issued_at: now - 60_000,
            expires_at: now + 3_000_000,
        }));
    }
    for (at, seats) in [
        (year_start - DAY_MS, 400),
        (year_start + 120 * DAY_MS, 500),
        (year_start + 240 * DAY_MS, SEATS),
    ] {
        emit(Record::PoolSize { at, seats });
    }
    let mut seen = std::collections::HashSet::new();
    for _ in 0..5_000 {
        let second_ms = rng.gen_range(year_start..now) / 1000 * 1000;
        let count = rng.gen_range(1..6i64);
        // The first count of a second stands, as `INSERT OR IGNORE` did.
        if seen.insert(second_ms) {
            emit(Record::Denials { second_ms, count });
        }
    }
}

fn report_written(n: usize, started: Instant) {
    println!(
        "history: {n} closed + {OPEN} open sessions, 3 pool sizes, ≈5,000 denial seconds \
         written in {:.1?}",
        started.elapsed()
    );
}

/// The history straight into the SQLite file, in one transaction.
fn write_sqlite(path: &Path, n: usize, now: i64) {
    let started = Instant::now();
    let mut conn = rusqlite::Connection::open(path).expect("raw connection");
    let tx = conn.transaction().expect("tx");
    {
        let mut session = tx
            .prepare(
                "INSERT INTO sessions (seat_id, license_id, holder, fingerprint,
                                       started_at, ended_at, end_kind)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            )
            .expect("prepare");
        // An open session is its lease row.
        let mut lease = tx
            .prepare(
                "INSERT INTO leases (seat_id, license_id, holder, fingerprint, idempotency_key,
                                     checked_out_at, issued_at, expires_at)
                 VALUES (?1, ?2, ?3, NULL, NULL, ?4, ?5, ?6)",
            )
            .expect("prepare");
        let mut pool = tx
            .prepare("INSERT INTO pool_sizes (license_id, at, seats) VALUES (?1, ?2, ?3)")
            .expect("prepare");
        let mut denial = tx
            .prepare("INSERT INTO denials (license_id, second_ms, count) VALUES (?1, ?2, ?3)")
            .expect("prepare");
        generate(n, now, |record| {
            let done = match record {
                Record::Session(s) => session.execute(rusqlite::params![
                    s.seat,
                    LICENSE,
                    s.holder,
                    s.fingerprint,
                    s.start,
                    s.end,
                    s.kind
                ]),
                Record::Lease(l) => lease.execute(rusqlite::params![
                    l.seat,
                    LICENSE,
                    l.holder,
                    l.checked_out_at,
                    l.issued_at,
                    l.expires_at
                ]),
                Record::PoolSize { at, seats } => {
                    pool.execute(rusqlite::params![LICENSE, at, seats])
                }
                Record::Denials { second_ms, count } => {
                    denial.execute(rusqlite::params![LICENSE, second_ms, count])
                }
            };
            done.expect("write a history row");
        });
    }
    tx.commit().expect("commit");
    report_written(n, started);
}

/// The history into PostgreSQL: the sessions by `COPY` (text format), the
/// few other rows by `INSERT`, in one transaction.
fn write_postgres(url: &str, n: usize, now: i64) {
    use std::io::Write as _;
    let started = Instant::now();
    let mut client = postgres::Client::connect(url, postgres::NoTls).expect("connect");
    leasehold_server::store::pg::schema::migrate(&mut client).expect("schema");
    let mut tx = client.transaction().expect("tx");
    let mut others = Vec::new();
    {
        let mut copy = tx
            .copy_in(
                "COPY sessions (seat_id, license_id, holder, fingerprint, started_at, ended_at,
                                end_kind) FROM STDIN",
            )
            .expect("copy");
        let mut line = String::new();
        generate(n, now, |record| match record {
            Record::Session(s) => {
                // Generated text has no tab, newline or backslash to escape.
                line.clear();
                let fingerprint = s.fingerprint.as_deref().unwrap_or("\\N");
                line.push_str(&format!(
                    "{}\t{LICENSE}\t{}\t{fingerprint}\t{}\t{}\t{}\n",
                    s.seat, s.holder, s.start, s.end, s.kind
                ));
                copy.write_all(line.as_bytes()).expect("copy a session");
            }
            Record::Lease(l) => others.push((
                "INSERT INTO leases (seat_id, license_id, holder, checked_out_at, issued_at,
                                     expires_at) VALUES ($1, $2, $3, $4, $5, $6)",
                vec![
                    Box::new(l.seat) as Box<dyn postgres::types::ToSql + Sync>,
                    Box::new(LICENSE),
                    Box::new(l.holder.to_string()),
                    Box::new(l.checked_out_at),
                    Box::new(l.issued_at),
                    Box::new(l.expires_at),
                ],
            )),
            Record::PoolSize { at, seats } => others.push((
                "INSERT INTO pool_sizes (license_id, at, seats) VALUES ($1, $2, $3)",
                vec![Box::new(LICENSE), Box::new(at), Box::new(seats as i32)],
            )),
            Record::Denials { second_ms, count } => others.push((
                "INSERT INTO denials (license_id, second_ms, count) VALUES ($1, $2, $3)",
                vec![Box::new(LICENSE), Box::new(second_ms), Box::new(count)],
            )),
        });
        copy.finish().expect("copy finished");
    }
    for (sql, params) in &others {
        let params: Vec<&(dyn postgres::types::ToSql + Sync)> =
            params.iter().map(|p| p.as_ref()).collect();
        tx.execute(*sql, &params).expect("insert");
    }
    tx.commit().expect("commit");
    // What autovacuum does after a bulk load: planner statistics, and the
    // visibility map that lets a scan read only the index.
    client.batch_execute("VACUUM ANALYZE").expect("vacuum");
    report_written(n, started);
}

struct Server {
    child: Child,
    addr: SocketAddr,
}

impl Server {
    /// On SQLite in `data_dir`, or as a replica of `database`.
    fn start(data_dir: &Path, licenses: &Path, database: Option<&str>) -> Server {
        let mut command = Command::new(leaseholdd());
        if let Some(url) = database {
            command.arg("--database").arg(url);
        }
        let mut child = command
            .arg("--listen")
            .arg("127.0.0.1:0")
            .arg("--data-dir")
            .arg(data_dir)
            .arg("--licenses")
            .arg(licenses)
            .env("LEASEHOLD_ADMIN_TOKEN", TOKEN)
            .env("LEASEHOLD_LOG", "info")
            .env_remove("LEASEHOLD_LISTEN")
            .env_remove("LEASEHOLD_DATA_DIR")
            .env_remove("LEASEHOLD_LICENSES")
            .env_remove("LEASEHOLD_DATABASE")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start leaseholdd");
        let stderr = child.stderr.take().expect("stderr");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            use std::io::BufRead;
            let mut tx = Some(tx);
            for line in std::io::BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                if let Some(rest) = line.split("listening on http://").nth(1)
                    && let Some(tx) = tx.take()
                {
                    let _ = tx.send(rest.trim().to_string());
                }
            }
        });
        let addr = rx
            .recv_timeout(Duration::from_secs(60))
            .expect("leaseholdd listening")
            .parse()
            .expect("address");
        Server { child, addr }
    }

    fn rss_kib(&self) -> u64 {
        rss_kib(self.child.id())
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `HISTORY_LEASEHOLDD`, else the `leaseholdd` built with this bench.
fn leaseholdd() -> PathBuf {
    std::env::var_os("HISTORY_LEASEHOLDD")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_leaseholdd")))
}

fn rss_kib(pid: u32) -> u64 {
    status_kib(pid, "VmRSS:")
}

/// A `kB` field of `/proc/PID/status`.
fn status_kib(pid: u32, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix(field))
                .and_then(|v| v.split_whitespace().next())
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}

/// "RSS r MiB (anon a, file f)": file pages are the database's memory map.
fn rss_parts(pid: u32) -> String {
    format!(
        "{} MiB (anon {}, file {})",
        status_kib(pid, "VmRSS:") / 1024,
        status_kib(pid, "RssAnon:") / 1024,
        status_kib(pid, "RssFile:") / 1024
    )
}

/// What one GET returned: status, body (kept only if asked), body bytes,
/// lines in the body, time to the first body byte and to the end.
struct Fetched {
    status: u16,
    body: Vec<u8>,
    bytes: u64,
    lines: u64,
    first_byte: Duration,
    took: Duration,
    /// Stopped at the deadline before the body ended.
    cut: bool,
}

/// An HTTP/1.0 GET (no chunking: the body ends at the connection's end),
/// read to the end in 64 KiB reads, or until `limit` has passed.
fn get(addr: SocketAddr, path: &str, keep_body: bool, limit: Option<Duration>) -> Fetched {
    let started = Instant::now();
    let mut cut = false;
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(300)))
        .expect("timeout");
    write!(
        s,
        "GET {path} HTTP/1.0\r\nHost: {addr}\r\nAuthorization: Bearer {TOKEN}\r\n\r\n"
    )
    .expect("send");
    let mut buf = vec![0u8; 64 * 1024];
    let mut head = Vec::new();
    let mut body = Vec::new();
    let (mut bytes, mut lines) = (0u64, 0u64);
    let mut in_body = false;
    let mut first_byte = None;
    loop {
        if limit.is_some_and(|l| started.elapsed() > l) {
            cut = true;
            break;
        }
        let n = s.read(&mut buf).expect("read");
        if n == 0 {
            break;
        }
        let mut chunk = &buf[..n];
        if !in_body {
            head.extend_from_slice(chunk);
            let Some(end) = head.windows(4).position(|w| w == b"\r\n\r\n") else {
                continue;
            };
            let rest = head.split_off(end + 4);
            in_body = true;
            // The rest is body: count it below from a copy.
            bytes += rest.len() as u64;
            lines += rest.iter().filter(|b| **b == b'\n').count() as u64;
            if !rest.is_empty() {
                first_byte.get_or_insert(started.elapsed());
            }
            if keep_body {
                body.extend_from_slice(&rest);
            }
            chunk = &[];
        }
        if !chunk.is_empty() {
            first_byte.get_or_insert(started.elapsed());
            bytes += chunk.len() as u64;
            lines += chunk.iter().filter(|b| **b == b'\n').count() as u64;
            if keep_body {
                body.extend_from_slice(chunk);
            }
        }
    }
    let took = started.elapsed();
    let status = std::str::from_utf8(&head)
        .ok()
        .and_then(|h| h.split_whitespace().nth(1))
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    Fetched {
        status,
        body,
        bytes,
        lines,
        first_byte: first_byte.unwrap_or(took),
        took,
        cut,
    }
}

fn rfc3339(ms: i64) -> String {
    Timestamp::from_millis(ms).to_rfc3339()
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn fmt_runs(v: &[Duration]) -> String {
    v.iter()
        .map(|d| format!("{:.0}", d.as_secs_f64() * 1000.0))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `usage` over `[from, to)` at `step`, `runs` times: the median and every run.
fn time_usage(server: &Server, label: &str, from: i64, to: i64, step: &str, runs: usize) {
    let path = format!(
        "/v1/admin/usage?license={LICENSE}&from={}&to={}&step={step}",
        rfc3339(from),
        rfc3339(to)
    );
    let mut times = Vec::new();
    let mut last = None;
    for _ in 0..runs {
        let f = get(server.addr, &path, true, None);
        assert_eq!(
            f.status,
            200,
            "{path}: {}",
            String::from_utf8_lossy(&f.body)
        );
        times.push(f.took);
        last = Some(f);
    }
    let f = last.expect("a run");
    let v: serde_json::Value = serde_json::from_slice(&f.body).expect("usage JSON");
    let s = &v["summary"];
    println!(
        "usage {label} step={step}: median {:.0} ms (runs {} ms); {} points, {} bytes; \
         peak {} seat-hours {:.0} holders {} denials {} utilization {:.3}",
        median(times.clone()).as_secs_f64() * 1000.0,
        fmt_runs(&times),
        v["points"].as_array().map_or(0, Vec::len),
        f.bytes,
        s["peak"],
        s["seat_hours"].as_f64().unwrap_or(0.0),
        s["holders"],
        s["denials"],
        s["utilization"].as_f64().unwrap_or(0.0),
    );
}

/// The CSV of `[from, to)`, with the server's RSS sampled every 20 ms
/// while it streams.
fn time_csv(server: &Server, label: &str, from: i64, to: i64, expect_rows: Option<u64>) {
    let path = format!(
        "/v1/admin/sessions?license={LICENSE}&from={}&to={}&format=csv",
        rfc3339(from),
        rfc3339(to)
    );
    let pid = server.child.id();
    let before = server.rss_kib();
    let before_parts = rss_parts(pid);
    let stop = Arc::new(AtomicBool::new(false));
    let peak = Arc::new(AtomicU64::new(before));
    let sampler = {
        let (stop, peak) = (stop.clone(), peak.clone());
        std::thread::spawn(move || {
            let mut samples = Vec::new();
            while !stop.load(Ordering::Relaxed) {
                let r = rss_kib(pid);
                peak.fetch_max(r, Ordering::Relaxed);
                samples.push(r);
                std::thread::sleep(Duration::from_millis(20));
            }
            samples
        })
    };
    let limit = Duration::from_secs(env_usize("HISTORY_CSV_SECS", 60) as u64);
    let f = get(server.addr, &path, false, Some(limit));
    stop.store(true, Ordering::Relaxed);
    let samples = sampler.join().expect("sampler");
    assert_eq!(f.status, 200, "{path}");
    let rows = f.lines.saturating_sub(1);
    match expect_rows {
        Some(want) if !f.cut => assert_eq!(rows, want, "every session of the range, once"),
        _ => {}
    }
    // RSS settles once the stream's buffers are freed.
    std::thread::sleep(Duration::from_millis(500));
    let after_parts = rss_parts(pid);
    let mid = samples.get(samples.len() / 2).copied().unwrap_or(0);
    println!(
        "sessions CSV {label}: {rows} rows{}, {:.1} MB in {:.2?} (first byte {:.0?}): \
         {:.0} rows/s, {:.1} MB/s; server RSS before {}, during {} MiB (midway) / {} MiB (peak \
         of {} samples), after {}",
        if f.cut {
            " (CUT OFF at HISTORY_CSV_SECS)"
        } else {
            ""
        },
        f.bytes as f64 / 1e6,
        f.took,
        f.first_byte,
        rows as f64 / f.took.as_secs_f64(),
        f.bytes as f64 / 1e6 / f.took.as_secs_f64(),
        before_parts,
        mid / 1024,
        peak.load(Ordering::Relaxed) / 1024,
        samples.len(),
        after_parts,
    );
}

fn main() {
    let n = env_usize("HISTORY_SESSIONS", 1_000_000);
    let runs = env_usize("HISTORY_RUNS", 5).max(1);
    let dir = tempfile::tempdir().expect("tempdir");
    let data_dir: PathBuf = match std::env::var("HISTORY_DB") {
        Ok(p) => PathBuf::from(p),
        Err(_) => dir.path().join("data"),
    };
    let licenses = dir.path().join("licenses.toml");
    std::fs::write(&licenses, licenses_toml()).expect("licenses file");

    let now = now_ms();
    let postgres = match std::env::var("HISTORY_STORE").as_deref() {
        Ok("postgres") => true,
        Ok("sqlite") | Err(_) => false,
        Ok(other) => panic!("HISTORY_STORE={other}: sqlite or postgres"),
    };
    // PostgreSQL: a throwaway cluster, written afresh every run.
    let cluster = postgres.then(PgCluster::start);
    let database = cluster.as_ref().map(PgCluster::create_database);
    let reused = match &database {
        Some(url) => {
            write_postgres(url, n, now);
            let size = cluster.as_ref().expect("cluster").psql(
                url.rsplit('/').next().expect("database name"),
                "SELECT pg_database_size(current_database())",
            );
            println!(
                "database: {:.0} MB (PostgreSQL)",
                size.parse::<f64>().unwrap_or(0.0) / 1e6
            );
            false
        }
        None => {
            let db = database_path(&data_dir);
            let reused = db.exists();
            if reused {
                println!("reusing {}", db.display());
            } else {
                create_schema(&data_dir);
                write_sqlite(&db, n, now);
            }
            let size = std::fs::metadata(&db).map(|m| m.len()).unwrap_or(0);
            println!("database: {:.0} MB", size as f64 / 1e6);
            reused
        }
    };

    let started = Instant::now();
    let server = Server::start(&data_dir, &licenses, database.as_deref());
    println!(
        "leaseholdd {} up in {:.1?} on {}; RSS {}",
        leaseholdd().display(),
        started.elapsed(),
        server.addr,
        rss_parts(server.child.id())
    );

    let to = (now_ms() / 1000 + 1) * 1000;
    // The year and a day: a reused database's year ended when it was written.
    let year_from = to - 366 * DAY_MS;
    // A first, untimed pass reads the database into the page cache.
    let _ = get(
        server.addr,
        &format!(
            "/v1/admin/usage?license={LICENSE}&from={}&to={}&step=1h",
            rfc3339(year_from),
            rfc3339(to)
        ),
        false,
        None,
    );
    time_usage(&server, "year", year_from, to, "1h", runs);
    time_usage(&server, "last 24 h", to - DAY_MS, to, "1h", runs);
    time_usage(&server, "last 24 h", to - DAY_MS, to, "1m", runs);
    let expect = (!reused).then_some((n + OPEN) as u64);
    for _ in 0..2 {
        time_csv(&server, "year", year_from, to, expect);
    }
    time_csv(&server, "last 24 h", to - DAY_MS, to, None);
    println!("server RSS at the end: {}", rss_parts(server.child.id()));
}
