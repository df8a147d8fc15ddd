//! kill -9 and restart on SQLite: every few seconds the server dies with
//! whatever it had in flight and comes back on the same data dir, down
//! for a moment, a second, or longer than its stall threshold (so the
//! outage rule gives the leases live at the kill one TTL from the
//! restart).

use std::time::{Duration, Instant};

use leasehold_tests::{Server, TestStore};

use crate::judge::{Expect, judge};
use crate::{LISTENING, Run, one_at_a_time, options};

/// How long the server stays down, in turn: the last is over the default
/// stall threshold (3 s) and the TTL.
const DOWNTIMES: [Duration; 3] = [
    Duration::from_millis(200),
    Duration::from_millis(1_500),
    Duration::from_millis(3_500),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn kill9_and_restart_on_sqlite() {
    let _alone = one_at_a_time().await;
    let mut s = Server::start_with(options(TestStore::Sqlite)).await;
    let began = Instant::now();
    let run = Run::start(&s.base, &s.auth());
    let mut kills = 0;
    while run
        .pause(Duration::from_secs(3), Duration::from_secs(5))
        .await
    {
        let down = DOWNTIMES[kills % DOWNTIMES.len()];
        let what = format!("kill -9, down {down:?}, restart");
        let fault = run.recorder.fault_began(&what, true);
        let killed = run.recorder.now().wall;
        s.kill9();
        tokio::time::sleep(down).await;
        s.restart().await;
        // It applied its outage rule, if any, before it listened.
        let ended = run
            .end_fault_from_log(fault, &s, LISTENING, (killed, 0))
            .await;
        assert!(ended, "the restarted server logged no {LISTENING:?}");
        kills += 1;
    }
    let history = run.finish(&s, "kill -9 and restart (SQLite)").await;
    let expect = Expect {
        faults: 2,
        uncertain: 1,
        ..Expect::default()
    };
    judge("kill9", &history, began.elapsed().as_secs_f64(), expect);
}
