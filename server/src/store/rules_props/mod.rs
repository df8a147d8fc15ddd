//! Fast tests of the lease rules ([`Rules`](super::rules::Rules)) on the
//! in-memory store ([`MemoryStore`](super::memory::MemoryStore)): a
//! property test of random operation sequences against the reference
//! model ([`super::model`], the same model the store's model test in
//! `server/tests/model.rs` holds SQLite and PostgreSQL to), and named unit
//! tests of the checkout steps, the outage rule, the pool-size history
//! and idle reclaim.
//!
//! The property test drives the rules directly (no writer thread, no
//! database), so 1,000 sequences of up to 60 operations run in a few
//! seconds in a debug build (with the seat policies and idle reclaim:
//! ~2.2 s CPU, 2.5 s wall for `rules_match_the_model` on a 2-core box at
//! load 4; 1.7 s CPU before idle reclaim).
//!
//! After every operation it checks the answer, the events (exactly, the
//! throttled denied and lost ones included), the sessions, the denial
//! count, the blocks and the idle periods against the model, and these
//! invariants against the store's own state (the shared ones:
//! `Model::check_pools`, `Model::check_seats`):
//!
//! - live (by `is_live`) ≤ seats + overage for every license, and
//!   `live_counts` says the same (live, lingering, borrowed, per group); a
//!   fresh grant only when `live + ahead + others' unused reservations <
//!   seats + overage`, to an allowed holder below `max_per_holder`, into a
//!   group below its `max`, flagged `overage` exactly when `live >= seats`;
//! - until a policy change (which never evicts a seat, so seats granted
//!   before it may sit above a cap it lowered): no group above its `max`,
//!   no holder above `max_per_holder`, and the seats outside a group never
//!   reach into its reservation (`outside + reserve <= seats + overage`);
//! - never more than `borrow.seats` lent, never for longer than
//!   `borrow.max`, no new borrowed seat for a machine holding one;
//! - `Full` only when `live + ahead + reserved >= seats + overage` and the
//!   caller had no seat it may get back (by key or fingerprint);
//!   `retry_after` is the time until the earliest live lease lapses
//!   (`lapses_at`), one TTL when the reservations alone refuse;
//! - linger: a release keeps the seat (`lingering`, until now + linger), a
//!   heartbeat on it is lost, a second release changes nothing, only its
//!   holder on its machine (still allowed) takes it back, and its reap ends
//!   the session as a `Release` when the linger ended;
//! - a replay or re-claim returns the caller's seat, renewed, and adds no
//!   lease;
//! - reap takes exactly the reapable leases (`is_reapable`), oldest first,
//!   up to the limit, never a live one;
//! - every seat that left has exactly one session, ended as the rules say
//!   (`Lapse` at `live_until` for a lapsed seat, else `Release`/`Revoke`
//!   at now), and no seat in the table has one;
//! - event ids strictly increase, and the events the rules return are the
//!   ones the store appended;
//! - one live (not lingering) seat per fingerprint and holder, and one
//!   lease per Idempotency-Key; sane lease times.
//!
//! The generated licenses (`generate::rules_licenses`) carry seat policies
//! (parsed from a generated licenses file): 0-2 groups with
//! holder/fingerprint patterns matching some of the generated holders,
//! reserves and maxes, `max_per_holder`, `overage`, allow/deny, `linger`
//! and borrowing; a `Repolicy` step reloads the file with a group's max
//! lowered, a group dropped, linger dropped or added, a holder cap or a
//! deny added.
//!
//! Idle reclaim: some licenses have an `idle_timeout` (from 1 ms to 80 s
//! longer than the ttl), and heartbeats carry an idle report (none, 0, a
//! few seconds, the seat's idle time so far ± jitter, around the timeout,
//! or long). The model says when a heartbeat renews (with the new
//! `idle_since`) or reclaims, which seats the reaper reclaims (live, kept
//! by heartbeats, idle past the timeout; within its limit, before lapsed
//! seats), which idle periods (≥ 60 s) are recorded and when, and the
//! exact 410 reason for a seat that is not in the table. A `Clients` step
//! runs the clients of one license's seats for a while: heartbeats every
//! ttl (or half) reporting activity or an honest idle time, with or
//! without a reaper sweep between rounds, and may end with the idle
//! machines borrowing their seats. Explicit checks on the store's own
//! state, besides the model, for the four properties of issue 30
//! (`drive_idle.rs`).

mod drive;
mod drive_checkout;
mod drive_idle;
mod idle_steps;
mod steps;
mod world;

use std::collections::BTreeMap;

use proptest::prelude::*;
use proptest::test_runner::TestCaseError;

use super::model::generate::{rules_licenses, rules_op};
use super::model::{Op, Pol, Rel, SeatPol, resolve_again};
use drive::Run;

fn run(lics: &[(Pol, SeatPol)], ops: &[Op]) -> std::result::Result<(), TestCaseError> {
    let mut run = Run::new(lics);
    for (i, op) in resolve_again(ops) {
        let now = Rel(run.m.now).to_string();
        run.step(&op)
            .map_err(|e| TestCaseError::fail(format!("step {i} {op:?} at {now}: {e}")))?;
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig {
        // 1,000 sequences of up to 60 operations. XorShift rather than the
        // default ChaCha: unoptimized ChaCha was half of the test's time.
        cases: 1000,
        max_shrink_iters: 4096,
        failure_persistence: None,
        rng_algorithm: proptest::test_runner::RngAlgorithm::XorShift,
        ..ProptestConfig::default()
    })]

    /// Random operation sequences on one or two small pools: every answer,
    /// event and session matches the model and the invariants hold after
    /// every step.
    #[test]
    fn rules_match_the_model(
        lics in rules_licenses(),
        ops in proptest::collection::vec(rules_op(), 1..=60),
    ) {
        run(&lics, &ops)?;
    }
}

/// The generator's own check: a fixed sample of the sequences the property
/// test draws takes every rule step, so a change to the generator cannot
/// quietly stop testing one (replays, re-claims, waiters, blocks, lapses,
/// reaps, outages...).
#[test]
fn the_generated_sequences_reach_every_rule_step() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};

    let mut runner = TestRunner::new_with_rng(
        Config::default(),
        TestRng::deterministic_rng(RngAlgorithm::XorShift),
    );
    let strategy = (
        rules_licenses(),
        proptest::collection::vec(rules_op(), 1..=60),
    );
    let mut stats: BTreeMap<&'static str, usize> = BTreeMap::new();
    const SEQUENCES: usize = 500;
    for _ in 0..SEQUENCES {
        let (pols, ops) = strategy.new_tree(&mut runner).unwrap().current();
        let mut run = Run::new(&pols);
        for op in &ops {
            run.step(op).unwrap();
        }
        for (what, n) in run.m.stats {
            *stats.entry(what).or_default() += n;
        }
    }
    for what in [
        "checkout: replay",
        "checkout: re-claim",
        "checkout: full",
        "checkout: full by waiters ahead",
        "checkout: past a waiter who cannot use the seat",
        "checkout: blocked",
        "checkout: unknown license",
        "heartbeat: renewed",
        "heartbeat: lapsed",
        "revoke: blocked",
        "outage: extended",
        "event: checkout",
        "event: release",
        "event: revoke",
        "event: reap",
        "event: denied",
        "event: lost",
        "session: release",
        "session: revoke",
        "session: lapse",
        "checkout: not allowed",
        "checkout: holder limit",
        "checkout: group limit",
        "checkout: full with reservations",
        "checkout: overage",
        "checkout: grouped",
        "checkout: lingering seat back",
        "release: lingering",
        "release: again while lingering",
        "heartbeat: lingering",
        "reap: lingering",
        "policy change",
        "checkout: borrow",
        "checkout: borrow turned",
        "checkout: borrow extended",
        "checkout: borrow limit",
        "checkout: borrow too long",
        "heartbeat: borrowed",
        "revoke: borrowed, kept",
        "revoke: borrowed, forced",
        "heartbeat: idle",
        "heartbeat: still idle",
        "heartbeat: came back",
        "heartbeat: reclaimed",
        "heartbeat (not here): idle",
        "heartbeat (not here): released",
        "heartbeat (not here): revoked",
        "reap: reclaimed",
        "event: reclaim",
        "session: idle",
        "idle period recorded",
        "clients: active seat kept",
        "clients: told idle",
        "clients: idle seat lent",
        "denial counted",
        "denial final at once on a ?wait= attempt",
    ] {
        let n = stats.get(what).copied().unwrap_or(0);
        assert!(
            n >= 10,
            "{what}: only {n} times in {SEQUENCES} sequences: {stats:#?}"
        );
    }
    // Rare by nature: a report that moves the idle start back (or sets the
    // first one) and reaches the timeout at once.
    let rare = "heartbeat: reclaimed by its report";
    let n = stats.get(rare).copied().unwrap_or(0);
    assert!(n >= 5, "{rare}: only {n} times in {SEQUENCES} sequences");
}
