//! Hot pieces of `common` on every request: the liveness predicate (every
//! checkout count, heartbeat, admin view and reap), token sign (every
//! checkout and heartbeat reply) and token verify (every client).
//!
//! `cargo bench -p leasehold-common --bench hot`

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use leasehold_common::Timestamp;
use leasehold_common::liveness::{is_live, is_reapable, live_threshold};
use leasehold_common::token::{LeaseClaims, TokenSigner, verify};

fn claims() -> LeaseClaims {
    LeaseClaims {
        iss: "leasehold".into(),
        sub: "alice@workstation-17".into(),
        lic: "demo-cad".into(),
        sid: "6f1c2b9a0d4e4f7a8b3c5d6e7f809112".into(),
        iat: 1_800_000_000,
        exp: 1_800_000_060,
        borrowed: false,
        grace: false,
    }
}

fn liveness(c: &mut Criterion) {
    let now = Timestamp::from_millis(1_800_000_000_000);
    let skew = Duration::from_secs(5);
    let grace = Duration::from_secs(15);
    // 1,024 expiries around `now`, so the branch is not predictable.
    let expiries: Vec<Timestamp> = (0..1024)
        .map(|i| Timestamp::from_millis(1_800_000_000_000 + (i * 7919 % 40_000) - 20_000))
        .collect();
    let mut g = c.benchmark_group("liveness");
    g.bench_function("is_live", |b| {
        b.iter(|| is_live(black_box(expiries[17]), black_box(now), black_box(skew)))
    });
    g.bench_function("is_live_x1024", |b| {
        b.iter(|| {
            expiries
                .iter()
                .filter(|&&e| is_live(e, black_box(now), skew))
                .count()
        })
    });
    g.bench_function("is_reapable_x1024", |b| {
        b.iter(|| {
            expiries
                .iter()
                .filter(|&&e| is_reapable(e, black_box(now), grace))
                .count()
        })
    });
    g.bench_function("live_threshold", |b| {
        b.iter(|| live_threshold(black_box(now), black_box(skew)))
    });
    g.finish();
}

fn tokens(c: &mut Criterion) {
    let signer = TokenSigner::from_seed(&[7u8; 32]);
    let jwks = signer.jwks();
    let claims = claims();
    let token = signer.sign(&claims);
    assert_eq!(verify(&token, &jwks).expect("verifies"), claims);
    let mut g = c.benchmark_group("token");
    g.bench_function("sign", |b| b.iter(|| signer.sign(black_box(&claims))));
    g.bench_function("verify", |b| {
        b.iter(|| verify(black_box(&token), black_box(&jwks)).expect("valid"))
    });
    g.finish();
}

fn config() -> Criterion {
    // Short runs: a shared 2-core machine.
    Criterion::default()
        .sample_size(30)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
}

criterion_group! {
    name = hot;
    config = config();
    targets = liveness, tokens
}
criterion_main!(hot);
