//! Reaping a large backlog of expired leases (issue 6): how long the reaper
//! takes to delete 1,000,000 of them, and the longest a concurrent checkout
//! waits meanwhile (the write stall the reaper causes).
//!
//! The backlog is written straight into the database (one transaction), then
//! the real `Store` is opened on it and reaped by `reaper::reap_backlog`, the
//! reaper's own loop, while a prober task checks out seats of another license
//! one after the other.
//!
//! `cargo bench -p leasehold-server --bench reap` (`REAP_LEASES=N` to change
//! the backlog; `REAP_BACKLOG_COPY=file` keeps the written backlog in `file`
//! and later runs start from a copy of it, the same leases each time;
//! `REAP_STORE=postgres` reaps on one replica over a throwaway PostgreSQL
//! cluster instead).

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use leasehold_common::Licenses;
use leasehold_server::clock::{SharedClock, SystemClock};
use leasehold_server::licenses::LicensesHandle;
use leasehold_server::reaper::reap_backlog;
use leasehold_server::store::pg::{self, writer::DecisionClock};
use leasehold_server::store::{
    CheckoutOutcome, CheckoutRequest, Store, StoreOptions, database_path,
};
use leasehold_testkit::postgres::PgCluster;

const LICENSES: &str = r#"
[[license]]
id = "expired"
key = "k1"
seats = 10000000
ttl = "60s"
skew = "5s"
reap_grace = "15s"

[[license]]
# Its seats outlive the slowest reap: none of them becomes reapable.
id = "probe"
key = "k2"
seats = 10000000
ttl = "1h"
skew = "5s"
reap_grace = "15s"
"#;

/// `n` leases lapsed as on SQLite, in a fresh PostgreSQL database.
fn write_pg_backlog(url: &str, n: usize, expired_at: i64) {
    let started = Instant::now();
    let mut client = postgres::Client::connect(url, postgres::NoTls).expect("connect");
    leasehold_server::store::pg::schema::migrate(&mut client).expect("schema");
    let n = i64::try_from(n).expect("backlog size");
    client
        .execute(
            "INSERT INTO leases (seat_id, license_id, holder, checked_out_at, issued_at,
                                 expires_at)
             SELECT md5(i::text), 'expired', 'gone-' || i, $1, $1, $2 + i % 1000
             FROM generate_series(0, $3::bigint - 1) AS i",
            &[&(expired_at - 60_000), &expired_at, &n],
        )
        .expect("backlog");
    client.batch_execute("VACUUM ANALYZE").expect("vacuum");
    println!(
        "backlog: {n} expired leases written in {:.1?}",
        started.elapsed()
    );
}

/// The backlog on PostgreSQL, and one replica's store on it, deciding on
/// the database's clock.
fn open_postgres(url: &str, n: usize, clock: &SharedClock) -> Store {
    let expired_at = clock.now().as_millis() - 3_600_000;
    // The synchronous client runs its own runtime: keep it off this one.
    let written = url.to_string();
    std::thread::spawn(move || write_pg_backlog(&written, n, expired_at))
        .join()
        .expect("backlog written");
    let licenses = LicensesHandle::new(Licenses::parse(LICENSES).expect("licenses"));
    let config = pg::config(url).expect("config");
    let identity = pg::ReplicaIdentity {
        signing_kid: "reap-bench-kid".into(),
        admin_token_sha256: "reap-bench-token".into(),
        viewer_token_sha256: "reap-bench-viewer-token".into(),
        rotate_tokens: false,
    };
    let start = pg::prepare(&config, &identity, LICENSES, &licenses.current()).expect("prepare");
    let options = StoreOptions {
        stall_threshold: Duration::from_secs(3600),
        ..StoreOptions::default()
    };
    Store::open_postgres(config, DecisionClock::Database, start, licenses, options)
        .expect("open store")
}

fn open(path: &Path, clock: &SharedClock) -> Store {
    let licenses = LicensesHandle::new(Licenses::parse(LICENSES).expect("licenses"));
    let options = StoreOptions {
        stall_threshold: Duration::from_secs(3600),
        ..StoreOptions::default()
    };
    Store::open(path, licenses, clock.clone(), options).expect("open store")
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

/// Checks out seats of `probe` one after the other until stopped, recording
/// how long each waited: the latency a client sees while the writer is busy.
struct Prober {
    stop: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<Vec<Duration>>,
}

impl Prober {
    fn start(store: &Store) -> Prober {
        let stop = Arc::new(AtomicBool::new(false));
        let task = tokio::spawn(probe(store.clone(), stop.clone()));
        Prober { stop, task }
    }

    /// Stop probing; the waits, sorted.
    async fn finish(self) -> Vec<Duration> {
        self.stop.store(true, Ordering::Relaxed);
        let mut waits = self.task.await.expect("prober");
        waits.sort();
        waits
    }
}

async fn probe(store: Store, stop: Arc<AtomicBool>) -> Vec<Duration> {
    let mut waits = Vec::new();
    let mut i = 0u64;
    while !stop.load(Ordering::Relaxed) {
        let started = Instant::now();
        let outcome = store
            .checkout(CheckoutRequest {
                license_id: "probe".into(),
                holder: format!("probe-{i}"),
                fingerprint: None,
                idempotency_key: None,
                borrow: None,
                version: None,
            })
            .await
            .expect("probe checkout");
        assert!(matches!(outcome, CheckoutOutcome::Granted { .. }));
        waits.push(started.elapsed());
        i += 1;
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    waits
}

/// `REAP_LEASES`, else 1,000,000.
fn backlog_size() -> usize {
    std::env::var("REAP_LEASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000)
}

/// Experiment hook: `REAP_PAGE_SIZE` sets the page size of the new database.
fn apply_page_size_hook(path: &Path) {
    if let Ok(size) = std::env::var("REAP_PAGE_SIZE") {
        let c = rusqlite::Connection::open(path).expect("raw");
        c.execute_batch(&format!("PRAGMA page_size={size}; VACUUM;"))
            .expect("page size");
    }
}

/// Experiment hook: `REAP_DROP_INDEXES=a,b` drops those indexes before the
/// backlog is written, to see what each costs a reap. Not a shippable
/// schema: reads that name a dropped index fail.
fn apply_drop_indexes_hook(path: &Path) {
    if let Ok(names) = std::env::var("REAP_DROP_INDEXES") {
        let c = rusqlite::Connection::open(path).expect("raw");
        for name in names.split(',').filter(|n| !n.is_empty()) {
            c.execute_batch(&format!("DROP INDEX {name}"))
                .expect("drop index");
        }
    }
}

/// SplitMix64: a fixed pseudo-random value for each `i`.
fn mix(i: u64) -> u64 {
    let mut z = i.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Lease `i` of the backlog as (seat id, holder, checked out, expires).
/// By default seat ids, holders and insertion order all follow `i` and
/// expiries cycle through 1,000 values, so leases reaped one after the
/// other often share pages. `REAP_SHAPE=random`: random seat ids and
/// holders, checkouts spread over a week, expiries over one minute, as
/// when many clients vanish at once; then no two B-trees agree on order.
fn backlog_lease(i: u64, expired_at: i64, random: bool) -> (String, String, i64, i64) {
    if !random {
        let seat = (u128::from(i)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        let expires = expired_at + (i % 1000) as i64;
        return (
            format!("{seat:032x}"),
            format!("gone-{i}"),
            expired_at - 60_000,
            expires,
        );
    }
    let seat = (u128::from(mix(3 * i)) << 64) | u128::from(mix(3 * i + 1));
    let r = mix(3 * i + 2);
    let checked_out = expired_at - 3_600_000 - (r % 604_800_000) as i64;
    let expires = expired_at + ((r >> 32) % 60_000) as i64;
    (
        format!("{seat:032x}"),
        format!("user-{:012x}", r >> 16),
        checked_out,
        expires,
    )
}

/// `n` leases of `expired`, lapsed an hour ago, written straight into the
/// database in one transaction (through the store it would take longer than
/// the reaping it sets up).
fn write_backlog(path: &Path, n: usize, clock: &SharedClock) {
    let expired_at = clock.now().as_millis() - 3_600_000;
    let random = std::env::var("REAP_SHAPE").is_ok_and(|s| s == "random");
    let started = Instant::now();
    // Closing the connection (its checkpoint) is part of the timed write.
    {
        let mut conn = rusqlite::Connection::open(path).expect("raw connection");
        let tx = conn.transaction().expect("tx");
        {
            let mut insert = tx
                .prepare(
                    "INSERT INTO leases (seat_id, license_id, holder, fingerprint, idempotency_key,
                                         checked_out_at, issued_at, expires_at)
                     VALUES (?1, 'expired', ?2, NULL, NULL, ?3, ?3, ?4)",
                )
                .expect("prepare");
            for i in 0..n as u64 {
                let (seat, holder, checked_out, expires) = backlog_lease(i, expired_at, random);
                insert
                    .execute(rusqlite::params![seat, holder, checked_out, expires])
                    .expect("insert");
            }
        }
        tx.commit().expect("commit");
    }
    println!(
        "backlog: {n} expired leases ({}) written in {:.1?}",
        if random { "random" } else { "ordered" },
        started.elapsed()
    );
}

/// The schema, through the store, then the backlog written directly, or a
/// copy of the one kept by an earlier run (`REAP_BACKLOG_COPY`).
fn prepare_backlog(rt: &tokio::runtime::Runtime, path: &Path, n: usize, clock: &SharedClock) {
    let kept = std::env::var_os("REAP_BACKLOG_COPY").map(std::path::PathBuf::from);
    if let Some(kept) = kept.as_deref().filter(|k| k.exists()) {
        std::fs::copy(kept, path).expect("copy the kept backlog");
        println!("backlog: copied from {}", kept.display());
        return;
    }
    apply_page_size_hook(path);
    rt.block_on(open(path, clock).close());
    apply_drop_indexes_hook(path);
    write_backlog(path, n, clock);
    if let Some(kept) = kept {
        std::fs::copy(path, &kept).expect("keep the backlog");
    }
}

/// Checkout latency with nothing else going on, for one second.
async fn probe_baseline(store: &Store) -> Vec<Duration> {
    let prober = Prober::start(store);
    tokio::time::sleep(Duration::from_secs(1)).await;
    prober.finish().await
}

/// Reap the whole backlog with the reaper's own loop while probing; the
/// probes' waits, sorted.
async fn reap_while_probing(store: &Store, n: usize) -> Vec<Duration> {
    let prober = Prober::start(store);
    let started = Instant::now();
    let mut batches = 0;
    let reaped = reap_backlog(store, |_| batches += 1).await.expect("reap");
    let took = started.elapsed();
    let during = prober.finish().await;
    println!(
        "reaped {reaped} leases in {took:.2?} ({batches} writer transactions of {:.0} on average; \
         {:.0} leases/s)",
        reaped as f64 / batches.max(1) as f64,
        reaped as f64 / took.as_secs_f64()
    );
    assert_eq!(reaped, n, "every expired lease reaped");
    during
}

fn print_probe_latencies(baseline: &[Duration], during: &[Duration]) {
    println!(
        "concurrent checkout latency: before reaping p50 {:.2?} p99 {:.2?} max {:.2?} ({} probes); \
         while reaping p50 {:.2?} p99 {:.2?} max {:.2?} ({} probes)",
        percentile(baseline, 0.5),
        percentile(baseline, 0.99),
        baseline.last().copied().unwrap_or_default(),
        baseline.len(),
        percentile(during, 0.5),
        percentile(during, 0.99),
        during.last().copied().unwrap_or_default(),
        during.len(),
    );
}

fn print_writer_stats(store: &Store) {
    let w = store.writer_stats();
    println!(
        "writer: {} transactions, {:.2} s applying, {:.2} s in COMMIT, {} WAL catch-ups in {:.2} s",
        w.batches.load(Ordering::Relaxed),
        w.apply_us.load(Ordering::Relaxed) as f64 / 1e6,
        w.commit_us.load(Ordering::Relaxed) as f64 / 1e6,
        w.wal_catch_ups.load(Ordering::Relaxed),
        w.wal_catch_up_us.load(Ordering::Relaxed) as f64 / 1e6
    );
}

/// CPU seconds (user + system) the writer thread has used so far: on a
/// shared machine a steadier measure of its work than the wall clock.
fn writer_cpu_secs() -> f64 {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return f64::NAN;
    };
    let ticks: u64 = tasks
        .flatten()
        .filter(|t| {
            std::fs::read_to_string(t.path().join("comm")).is_ok_and(|c| c.trim() == "store-writer")
        })
        .filter_map(|t| std::fs::read_to_string(t.path().join("stat")).ok())
        .map(|stat| {
            // Fields after the command name's closing parenthesis; utime
            // and stime are the 14th and 15th of the whole line.
            let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
            let f: Vec<&str> = rest.split_whitespace().collect();
            let field = |i: usize| f.get(i).and_then(|x| x.parse::<u64>().ok()).unwrap_or(0);
            field(11) + field(12)
        })
        .sum();
    ticks as f64 / 100.0
}

fn main() {
    let n = backlog_size();
    let dir = tempfile::tempdir().expect("tempdir");
    let path = database_path(dir.path());
    let clock: SharedClock = Arc::new(SystemClock);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");

    let on_postgres = std::env::var("REAP_STORE").is_ok_and(|s| s == "postgres");
    let cluster = on_postgres.then(PgCluster::start);
    let url = cluster.as_ref().map(PgCluster::create_database);
    if url.is_none() {
        prepare_backlog(&rt, &path, n, &clock);
    }

    rt.block_on(async {
        let opened = Instant::now();
        let store = match &url {
            Some(url) => open_postgres(url, n, &clock),
            None => open(&path, &clock),
        };
        println!(
            "store opened (live index loaded) in {:.1?}",
            opened.elapsed()
        );
        let baseline = probe_baseline(&store).await;
        let cpu_before = writer_cpu_secs();
        let during = reap_while_probing(&store, n).await;
        println!(
            "writer thread CPU while reaping: {:.2} s",
            writer_cpu_secs() - cpu_before
        );
        print_probe_latencies(&baseline, &during);
        print_writer_stats(&store);
        store.close().await;
    });
}
