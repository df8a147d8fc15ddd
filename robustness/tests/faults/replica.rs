//! One replica of two killed: PostgreSQL, two replicas behind the
//! round-robin proxy; every few seconds one of them (in turn) gets kill -9
//! and is restarted a second later. The other keeps serving (and
//! writing), so the outage rule has no business running.

use std::time::{Duration, Instant};

use leasehold_tests::{Server, TestStore};

use crate::judge::{Expect, judge};
use crate::{Run, await_healthy, one_at_a_time, options};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_replica_killed_and_restarted_on_postgres() {
    let _alone = one_at_a_time().await;
    // Two replicas whatever LEASEHOLD_TEST_STORE says.
    let mut s = Server::start_with(options(TestStore::Postgres { replicas: 2 })).await;
    let replicas = s.replica_addrs();
    let began = Instant::now();
    let run = Run::start(&s.base, &s.auth());
    let mut kills = 0;
    while run
        .pause(Duration::from_secs(3), Duration::from_secs(4))
        .await
    {
        let i = kills % 2;
        let what = format!("kill -9 of replica {i}, restart 1 s later");
        let fault = run.recorder.fault_began(&what, false);
        s.kill9_replica(i);
        tokio::time::sleep(Duration::from_secs(1)).await;
        s.restart_replica(i).await;
        await_healthy(&format!("http://{}", replicas[i])).await;
        run.recorder.fault_ended(fault);
        kills += 1;
    }
    let history = run.finish(&s, "a replica of two killed (PostgreSQL)").await;
    let expect = Expect {
        faults: 2,
        ..Expect::default()
    };
    judge("replica", &history, began.elapsed().as_secs_f64(), expect);
}
