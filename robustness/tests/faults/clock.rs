//! The clock stepped ahead: SQLite under libfaketime; every few seconds
//! the server gets kill -9 and comes back with its wall clock an hour
//! further ahead (`+1h`, `+2h`, ...). To the server each restart is an
//! hour-long outage, so the outage rule gives the leases live at the kill
//! one TTL from the restart; the clients turn the server's instants into
//! their own with the recorded clock step.

use std::time::{Duration, Instant};

use leasehold_tests::{Server, TestStore, faketime_env};

use crate::judge::{Expect, judge};
use crate::{LISTENING, Run, one_at_a_time, options};

const HOUR_US: i64 = 3_600_000_000;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn restarts_with_the_clock_an_hour_further_ahead() {
    let _alone = one_at_a_time().await;
    // Fails here, before any server, without faketime.
    faketime_env("+0");
    let mut s = Server::start_with(options(TestStore::Sqlite)).await;
    let began = Instant::now();
    let run = Run::start(&s.base, &s.auth());
    let mut hours = 0;
    while run
        .pause(Duration::from_secs(4), Duration::from_secs(4))
        .await
    {
        hours += 1;
        let what = format!("kill -9, restart with the clock {hours} h ahead");
        let fault = run.recorder.fault_began(&what, true);
        let killed = run.recorder.now().wall;
        s.kill9();
        // Before the restart: nothing answers on the new clock earlier.
        let offset = hours * HOUR_US;
        run.recorder.clock_step(offset);
        for (k, v) in faketime_env(&format!("+{hours}h")) {
            s.set_env(&k, &v);
        }
        s.restart().await;
        // It applied its outage rule before it listened.
        let ended = run
            .end_fault_from_log(fault, &s, LISTENING, (killed, offset))
            .await;
        assert!(ended, "the restarted server logged no {LISTENING:?}");
    }
    let history = run
        .finish(&s, "restarts with the clock stepped ahead (SQLite)")
        .await;
    let expect = Expect {
        faults: 2,
        uncertain: 1,
        clock_steps: 2,
        ..Expect::default()
    };
    judge("clock", &history, began.elapsed().as_secs_f64(), expect);
}
