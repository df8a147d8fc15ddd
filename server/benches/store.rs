//! Store operations through the public `Store` API on a temp SQLite file
//! (WAL, synchronous=FULL, as in production): checkout, heartbeat and release
//! in rounds of 64 concurrent commands, so the writer's group commit shows,
//! with 1,000 vs 100,000 leases preloaded.
//!
//! Each measured round is 64 commands; the throughput line is commands/s.
//! Checkouts are released again (untimed) after each round, so the store
//! keeps its preloaded size however many rounds criterion runs.
//!
//! `cargo bench -p leasehold-server --bench store`

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use futures_util::future::join_all;
use leasehold_common::Licenses;
use leasehold_server::clock::{SharedClock, SystemClock};
use leasehold_server::licenses::LicensesHandle;
use leasehold_server::store::{
    CheckoutOutcome, CheckoutRequest, HeartbeatOutcome, Store, StoreOptions,
};
use tokio::runtime::Runtime;

const LICENSE: &str = "big";
const LICENSES: &str = r#"
[[license]]
id = "big"
key = "big-key"
seats = 10000000
ttl = "1h"
skew = "5s"
reap_grace = "15s"
"#;

/// Concurrent commands per measured round.
const ROUND: usize = 64;
/// Concurrent commands per preload round.
const PRELOAD_ROUND: usize = 1024;

static SERIAL: AtomicU64 = AtomicU64::new(0);

fn request() -> CheckoutRequest {
    CheckoutRequest {
        license_id: LICENSE.into(),
        holder: format!("bench-{}", SERIAL.fetch_add(1, Ordering::Relaxed)),
        fingerprint: None,
        idempotency_key: None,
        borrow: None,
        version: None,
    }
}

async fn checkout(store: &Store) -> String {
    match store.checkout(request()).await.expect("checkout") {
        CheckoutOutcome::Granted { lease, .. } => lease.seat_id,
        other => panic!("checkout into the big pool: {other:?}"),
    }
}

async fn checkouts(store: &Store, n: usize) -> Vec<String> {
    join_all((0..n).map(|_| checkout(store))).await
}

async fn releases(store: &Store, seats: &[String]) {
    for ok in join_all(seats.iter().map(|s| store.release(LICENSE, s))).await {
        ok.expect("release");
    }
}

fn open(path: &Path) -> Store {
    let licenses = LicensesHandle::new(Licenses::parse(LICENSES).expect("licenses"));
    let clock: SharedClock = Arc::new(SystemClock);
    Store::open(path, licenses, clock, StoreOptions::default()).expect("open store")
}

fn store_ops(c: &mut Criterion) {
    let rt = Runtime::new().expect("runtime");
    for preload in [1_000usize, 100_000] {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = open(&dir.path().join("leasehold.db"));
        let t = Instant::now();
        let mut held = Vec::new();
        rt.block_on(async {
            while held.len() < preload {
                let n = PRELOAD_ROUND.min(preload - held.len());
                held.extend(checkouts(&store, n).await);
            }
        });
        eprintln!(
            "preloaded {preload} leases in {:.2}s",
            t.elapsed().as_secs_f64()
        );

        let mut g = c.benchmark_group("store");
        g.throughput(Throughput::Elements(ROUND as u64));

        g.bench_function(BenchmarkId::new("checkout_x64", preload), |b| {
            b.iter_custom(|iters| {
                rt.block_on(async {
                    let mut total = Duration::ZERO;
                    for _ in 0..iters {
                        let t = Instant::now();
                        let seats = checkouts(&store, ROUND).await;
                        total += t.elapsed();
                        releases(&store, &seats).await;
                    }
                    total
                })
            })
        });

        let mut next = 0usize;
        g.bench_function(BenchmarkId::new("heartbeat_x64", preload), |b| {
            b.iter_custom(|iters| {
                rt.block_on(async {
                    let t = Instant::now();
                    for _ in 0..iters {
                        let round: Vec<&String> =
                            (0..ROUND).map(|i| &held[(next + i) % held.len()]).collect();
                        next = (next + ROUND) % held.len();
                        for r in join_all(round.iter().map(|s| store.heartbeat(LICENSE, s))).await {
                            assert!(matches!(
                                r.expect("heartbeat"),
                                HeartbeatOutcome::Renewed(_)
                            ));
                        }
                    }
                    t.elapsed()
                })
            })
        });

        g.bench_function(BenchmarkId::new("release_x64", preload), |b| {
            b.iter_custom(|iters| {
                rt.block_on(async {
                    let mut total = Duration::ZERO;
                    for _ in 0..iters {
                        let seats = checkouts(&store, ROUND).await;
                        let t = Instant::now();
                        releases(&store, &seats).await;
                        total += t.elapsed();
                    }
                    total
                })
            })
        });
        g.finish();
        rt.block_on(store.close());
    }
}

fn config() -> Criterion {
    // Short runs: a shared 2-core machine, and every round fsyncs.
    Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3))
}

criterion_group! {
    name = store;
    config = config();
    targets = store_ops
}
criterion_main!(store);
