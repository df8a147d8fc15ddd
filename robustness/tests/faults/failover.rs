//! A PostgreSQL failover: a primary with a synchronous standby, two
//! replicas on the multi-host URL behind the round-robin proxy; the
//! primary gets SIGKILL, the standby is promoted 3 s later, and the
//! replicas follow it. Nobody can write meanwhile, so the outage rule may
//! run when the cluster is back.

use std::time::{Duration, Instant};

use leasehold_testkit::postgres::PgCluster;
use leasehold_tests::{Server, TestStore};
use tokio::task::block_in_place;

use crate::judge::{Expect, judge};
use crate::{Run, await_healthy, one_at_a_time, options};

/// What a replica logs when it applies the outage rule.
const RULE_LOGGED: &str = "the cluster made no progress";

/// The rule's line is logged a little after the instant it decided at
/// (after the statements that apply it): read as that much ahead.
const RULE_LOGGED_WITHIN: i64 = 100_000;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_primary_killed_and_its_standby_promoted() {
    let _alone = one_at_a_time().await;
    // Declared before the server, so the server goes first.
    let cluster = block_in_place(PgCluster::with_sync_standby);
    let mut opts = options(TestStore::Postgres { replicas: 2 });
    opts.database = Some(cluster.create_database());
    let s = Server::start_with(opts).await;
    let replicas = s.replica_addrs();
    let began = Instant::now();
    let run = Run::start(&s.base, &s.auth());
    // Once, however long the run (the standby, promoted, has no standby
    // of its own): after 5 s of load, or a quarter of a shorter run.
    let before = Duration::from_secs(5).min(run.length / 4);
    run.pause(before, Duration::ZERO).await;
    let killed = run.recorder.now().wall;
    let fault = run
        .recorder
        .fault_began("SIGKILL of the primary, standby promoted 3 s later", true);
    block_in_place(|| cluster.kill_primary());
    tokio::time::sleep(Duration::from_secs(3)).await;
    block_in_place(|| cluster.promote_standby());
    for replica in &replicas {
        await_healthy(&format!("http://{replica}")).await;
    }
    // The cluster's first commit after the outage applied the outage rule
    // (a later end would leave its renewals unexplained); without a rule
    // (a short outage), the replicas serving again ends it.
    let rule = (killed, RULE_LOGGED_WITHIN);
    if !run.end_fault_from_log(fault, &s, RULE_LOGGED, rule).await {
        run.recorder.fault_ended(fault);
    }
    let history = run
        .finish(&s, "a failover to the sync standby (PostgreSQL)")
        .await;
    let expect = Expect {
        faults: 1,
        uncertain: 1,
        ..Expect::default()
    };
    judge("failover", &history, began.elapsed().as_secs_f64(), expect);
}
