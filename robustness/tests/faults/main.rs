//! The fault scenarios: at least 16 clients record every operation they
//! send to a real `leaseholdd` while one fault is injected again and
//! again (kill -9, a replica killed, a PostgreSQL failover, stalled
//! connections, the clock stepped ahead), then the history is checked
//! against the lease model. A violation writes the history (JSON) and its
//! timeline under `target/robustness/<scenario>/` and fails the test.
//!
//! Each run records for `LEASEHOLD_ROBUSTNESS_SECS` seconds (default 20).

mod clock;
mod failover;
mod judge;
mod kill9;
mod replica;
mod stall;

use std::sync::Arc;
use std::time::{Duration, Instant};

use leasehold_robustness::history::{History, Micros, Terms};
use leasehold_robustness::record::{Api, Crowd, FaultToken, Mix, Recorder, event_log};
use leasehold_tests::{Server, ServerOptions, TestStore};

/// One pool: 10 seats and 2 of overage for 17 clients who want one, so
/// checkouts are refused too; a TTL short enough that lapses, reaps and
/// the skew all happen within a run; borrows of a few seconds.
const LICENSES: &str = r#"
[[license]]
id = "pool"
key = "pool-key"
seats = 10
overage = 2
ttl = "3s"
skew = "1s"
reap_grace = "2s"

[license.borrow]
max = "1m"
seats = 2
"#;

/// The pool's terms as the checker needs them (the same numbers).
fn terms() -> Terms {
    Terms {
        license: "pool".to_string(),
        capacity: 10 + 2,
        ttl: 3_000_000,
        skew: 1_000_000,
        reap_grace: 2_000_000,
    }
}

/// The reaper sweeps often, so a lapsed seat goes soon after its
/// `expires_at + reap_grace` (the lapsers ask about theirs before then).
fn options(store: TestStore) -> ServerOptions {
    let mut options = ServerOptions::new(LICENSES)
        .arg("--reap-interval")
        .arg("200ms");
    options.store = store;
    options
}

/// One scenario at a time: on a small machine, five servers and their
/// clients at once would starve each other into stalls no fault caused
/// (a server paused past its stall threshold applies its outage rule
/// with no fault recorded to explain it).
async fn one_at_a_time() -> tokio::sync::MutexGuard<'static, ()> {
    static ONE: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    ONE.lock().await
}

/// How long each scenario records.
fn run_length() -> Duration {
    let secs = std::env::var("LEASEHOLD_ROBUSTNESS_SECS")
        .ok()
        .map(|s| {
            s.parse::<u64>()
                .unwrap_or_else(|_| panic!("LEASEHOLD_ROBUSTNESS_SECS={s:?}: whole seconds"))
        })
        .unwrap_or(20);
    Duration::from_secs(secs)
}

/// A recording in progress: the clients and what they record.
struct Run {
    recorder: Arc<Recorder>,
    crowd: Crowd,
    began: Instant,
    length: Duration,
}

impl Run {
    /// Start the clients on the server (or proxy) at `base`; `admin` is
    /// `Bearer <admin token>`.
    fn start(base: &str, admin: &str) -> Run {
        let recorder = Arc::new(Recorder::new());
        let api = Api::new(recorder.clone(), base, "pool", "pool-key", admin);
        let mix = Mix::default();
        assert!(mix.clients() >= 16, "at least 16 clients");
        Run {
            crowd: Crowd::start(&api, &terms(), &mix),
            recorder,
            began: Instant::now(),
            length: run_length(),
        }
    }

    fn left(&self) -> Duration {
        self.length.saturating_sub(self.began.elapsed())
    }

    /// Sleep for `d`, or less if the run ends first; whether the run has
    /// at least `then` left after it (time for the next fault).
    async fn pause(&self, d: Duration, then: Duration) -> bool {
        tokio::time::sleep(d.min(self.left())).await;
        self.left() > then
    }

    /// End `fault`, begun at our wall instant `began`, at the instant the
    /// server's log says `needle` (its clock `offset` ahead of ours): the
    /// server answered, or applied its outage rule, from that instant on,
    /// which our clocks learn only after requests may have been decided.
    /// Waits up to 15 s for the line; false (the fault not ended) without.
    async fn end_fault_from_log(
        &self,
        fault: FaultToken,
        server: &Server,
        needle: &str,
        (began, offset): (Micros, Micros),
    ) -> bool {
        let deadline = Instant::now() + Duration::from_secs(15);
        while Instant::now() < deadline {
            if let Some(at) = logged_at(&server.logs(), needle, began, offset) {
                self.recorder.fault_ended_at(fault, at);
                return true;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        false
    }

    /// Stop the clients (once the run's time is up), read the event log
    /// from `server` and build the history, with the outages its log
    /// reports that no injected fault explains.
    async fn finish(self, server: &Server, scenario: &str) -> History {
        tokio::time::sleep(self.left()).await;
        self.crowd.stop().await;
        record_reported_outages(&self.recorder, &server.logs());
        let events = event_log(&server.base, &server.auth())
            .await
            .unwrap_or_else(|e| panic!("reading the event log: {e}"));
        let recorder = Arc::into_inner(self.recorder).expect("every client has stopped");
        recorder.finish(scenario, vec![terms()], events)
    }
}

/// What `leaseholdd` logs when its outage rule ran: "… for 3.6s (…);
/// gave 4 lease(s) that were live when it stopped one TTL to renew".
const OUTAGE_RULE_RAN: &str = "lease(s) that were live when it stopped";

/// Record as faults the outages the server's log reports outside every
/// injected fault: a starved machine can stall the writer past its
/// threshold, and the rule it then applies is the model's too.
fn record_reported_outages(recorder: &Recorder, logs: &str) {
    let injected = recorder.outages_so_far();
    for line in logs.lines().filter(|l| l.contains(OUTAGE_RULE_RAN)) {
        let at = line.split_whitespace().next();
        let at = at.and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok());
        let gap = line
            .split(" for ")
            .nth(1)
            .and_then(|rest| rest.split("s (").next());
        let (Some(at), Some(Ok(gap))) = (at, gap.map(str::parse::<f64>)) else {
            continue;
        };
        // Each end by the clock step in force then: a restart an hour
        // ahead reports the hour as its gap.
        let ended = recorder.wall_of_server(at.timestamp_micros());
        let began = recorder.wall_of_server(at.timestamp_micros() - (gap * 1e6) as Micros);
        let explained = injected
            .iter()
            .any(|&(from, to)| began >= from - 1_000_000 && ended <= to + 1_000_000);
        if !explained {
            let what = format!("an outage of {gap:.1} s the server reported, not injected");
            println!("{what}");
            recorder.outage_reported(&what, began, ended);
        }
    }
}

/// What `leaseholdd` logs once it answers.
const LISTENING: &str = "listening on http://";

/// When the server's own log first has a line containing `needle` at or
/// after our wall instant `since`: on our wall clock (the log's instants
/// read `offset` ahead of it).
fn logged_at(logs: &str, needle: &str, since: Micros, offset: Micros) -> Option<Micros> {
    logs.lines()
        .filter(|line| line.contains(needle))
        .filter_map(|line| {
            let at = line.split_whitespace().next()?;
            let at = chrono::DateTime::parse_from_rfc3339(at).ok()?;
            Some(at.timestamp_micros() - offset)
        })
        .find(|&at| at >= since)
}

/// Poll `GET {base}/healthz` until it answers 200 (at most 30 s).
async fn await_healthy(base: &str) {
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(1))
        .pool_max_idle_per_host(0)
        .build()
        .expect("client");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let status = http.get(format!("{base}/healthz")).send().await;
        if status.is_ok_and(|r| r.status() == 200) {
            return;
        }
        assert!(Instant::now() < deadline, "{base} not healthy within 30 s");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
