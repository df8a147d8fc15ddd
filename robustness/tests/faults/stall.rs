//! Stalled connections: the clients reach a SQLite server through a proxy
//! that every few seconds holds every byte for 3 s, longer than their 2 s
//! timeout. Their requests end `unknown` and may still reach the server
//! when the proxy lets go: operations that take effect after the client
//! gave up on them.

use std::time::{Duration, Instant};

use leasehold_robustness::stall::Stall;
use leasehold_tests::{Server, TestStore};

use crate::judge::{Expect, judge};
use crate::{Run, one_at_a_time, options};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn connections_stalled_longer_than_the_client_timeout() {
    let _alone = one_at_a_time().await;
    let s = Server::start_with(options(TestStore::Sqlite)).await;
    let stall = Stall::start(&s.addr).expect("the stall proxy");
    let began = Instant::now();
    let run = Run::start(&format!("http://{}", stall.addr), &s.auth());
    while run
        .pause(Duration::from_secs(1), Duration::from_secs(4))
        .await
    {
        let fault = run
            .recorder
            .fault_began("every connection stalled 3 s", false);
        stall.hold();
        tokio::time::sleep(Duration::from_secs(3)).await;
        stall.release();
        run.recorder.fault_ended(fault);
    }
    // The event log straight from the server, not through the proxy.
    let history = run.finish(&s, "connections stalled 3 s (SQLite)").await;
    let expect = Expect {
        faults: 2,
        uncertain: 1,
        ..Expect::default()
    };
    judge("stall", &history, began.elapsed().as_secs_f64(), expect);
}
