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
//! the backlog).

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use leasehold_common::Licenses;
use leasehold_server::clock::{SharedClock, SystemClock};
use leasehold_server::licenses::LicensesHandle;
use leasehold_server::reaper::{REAP_BATCH, reap_backlog};
use leasehold_server::store::{
    CheckoutOutcome, CheckoutRequest, Store, StoreOptions, database_path,
};

const LICENSES: &str = r#"
[[license]]
id = "expired"
key = "k1"
seats = 10000000
ttl = "60s"
skew = "5s"
reap_grace = "15s"

[[license]]
id = "probe"
key = "k2"
seats = 10000000
ttl = "60s"
skew = "5s"
reap_grace = "15s"
"#;

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

/// `n` leases of `expired`, lapsed an hour ago, written straight into the
/// database in one transaction (through the store it would take longer than
/// the reaping it sets up).
fn write_backlog(path: &Path, n: usize, clock: &SharedClock) {
    let expired_at = clock.now().as_millis() - 3_600_000;
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
            for i in 0..n {
                insert
                    .execute(rusqlite::params![
                        format!("{:032x}", (i as u128).wrapping_mul(0x9e37_79b9_7f4a_7c15)),
                        format!("gone-{i}"),
                        expired_at - 60_000,
                        expired_at + (i % 1000) as i64,
                    ])
                    .expect("insert");
            }
        }
        tx.commit().expect("commit");
    }
    println!(
        "backlog: {n} expired leases written in {:.1?}",
        started.elapsed()
    );
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
    assert_eq!(reaped, n, "every expired lease reaped");
    println!(
        "reaped {reaped} leases in {took:.2?} ({batches} writer transactions of up to {REAP_BATCH}; \
         {:.0} leases/s)",
        reaped as f64 / took.as_secs_f64()
    );
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

    apply_page_size_hook(&path);
    // Schema first, through the store; then the backlog, written directly.
    rt.block_on(open(&path, &clock).close());
    write_backlog(&path, n, &clock);

    rt.block_on(async {
        let opened = Instant::now();
        let store = open(&path, &clock);
        println!(
            "store opened (live index loaded) in {:.1?}",
            opened.elapsed()
        );
        let baseline = probe_baseline(&store).await;
        let during = reap_while_probing(&store, n).await;
        print_probe_latencies(&baseline, &during);
        print_writer_stats(&store);
        store.close().await;
    });
}
