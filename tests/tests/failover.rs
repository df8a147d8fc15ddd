//! A PostgreSQL failover under load, as an operator runs it: a primary with
//! a synchronous streaming standby, two replicas on a multi-host URL with
//! `target_session_attrs=read-write`, holders heartbeating and clients
//! churning checkouts, releases and revokes; SIGKILL of the primary, the
//! standby promoted 3 s later. Nothing acknowledged may be lost or come
//! back, no holder may lapse, the pool is never exceeded, the event ids stay
//! gap-free and both replicas serve again within 10 s of the promotion.
//! Also the start-up warning about a primary without a synchronous standby.
//! These run on PostgreSQL whatever `LEASEHOLD_TEST_STORE` says.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use leasehold_testkit::postgres::PgCluster;
use leasehold_tests::{Server, ServerOptions, TestStore, eventually};
use serde_json::{Value, json};
use tokio::task::{JoinHandle, block_in_place};
use tokio::time::{Instant, sleep};

/// A TTL well over the outage (3 s down, then reconnecting), so renewals
/// carry every holder through without the outage rule; `probe` is a pool of
/// its own to prove each replica writes again, whatever `fo`'s load.
const LICENSES: &str = r#"
[[license]]
id = "fo"
key = "fo-key"
seats = 12
ttl = "10s"
skew = "1s"
reap_grace = "3s"

[[license]]
id = "probe"
key = "probe-key"
seats = 2
ttl = "10s"
skew = "1s"
reap_grace = "3s"
"#;
const SEATS: u64 = 12;
const HOLDERS: usize = 6;
/// More clients than free seats: checkouts are refused too, so the count
/// is tested, not just the inserts.
const CHURNERS: usize = 8;
const WARNING: &str = "PostgreSQL has no synchronous standby";

/// What the clients were told, and what went wrong.
#[derive(Default)]
struct Ledger {
    /// Seats acknowledged to a holder or churner and not yet given back.
    held: BTreeSet<String>,
    /// Seats whose release or revoke was acknowledged.
    gone: BTreeSet<String>,
    /// Heartbeats answered 410: a holder lapsed.
    lapsed: Vec<String>,
    /// Answers no rule allows.
    wrong: Vec<String>,
    /// Requests that got no definite answer (transport error or 5xx).
    in_doubt: u64,
    /// Of those, the `503 unavailable` answers.
    unavailable: u64,
}

/// What every client task shares.
struct Ctx {
    client: reqwest::Client,
    replicas: Vec<String>,
    admin: String,
    ledger: Mutex<Ledger>,
    stop: AtomicBool,
    /// Round robin over the replicas, as a load balancer would.
    next: AtomicU64,
    /// Checkouts acknowledged after the promotion.
    after_promotion: AtomicU64,
    promoted: AtomicBool,
}

impl Ctx {
    fn replica(&self) -> &str {
        let i = self.next.fetch_add(1, Ordering::Relaxed) as usize;
        &self.replicas[i % self.replicas.len()]
    }

    fn stopping(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    fn ledger(&self) -> std::sync::MutexGuard<'_, Ledger> {
        self.ledger.lock().unwrap()
    }
}

/// Send until the answer is definite: a transport error or a 5xx says
/// nothing about whether the operation committed (the primary may die
/// inside `COMMIT`), and only a retry settles it. Returns the status, the
/// body, and whether an earlier attempt was in doubt.
async fn settle(
    ctx: &Ctx,
    what: &str,
    make: impl Fn(&reqwest::Client, &str) -> reqwest::RequestBuilder,
) -> (u16, Value, bool) {
    let deadline = Instant::now() + Duration::from_secs(45);
    let mut doubted = false;
    loop {
        let base = ctx.replica();
        let status = match make(&ctx.client, base).send().await {
            Ok(resp) if resp.status().as_u16() < 500 => {
                let status = resp.status().as_u16();
                let body = resp.json().await.unwrap_or(Value::Null);
                return (status, body, doubted);
            }
            Ok(resp) => Some(resp.status().as_u16()),
            Err(_) => None,
        };
        doubted = true;
        {
            let mut ledger = ctx.ledger();
            ledger.in_doubt += 1;
            ledger.unavailable += u64::from(status == Some(503));
        }
        assert!(
            Instant::now() < deadline,
            "{what}: no definite answer in 45 s"
        );
        sleep(Duration::from_millis(100)).await;
    }
}

/// Take a seat of `fo` for `holder`; `Idempotency-Key` makes the retries of
/// an in-doubt checkout return its seat instead of taking another.
async fn checkout(ctx: &Ctx, holder: &str) -> Option<String> {
    let (status, body, _) = settle(ctx, "checkout", |c, base| {
        c.post(format!("{base}/v1/licenses/fo/seats"))
            .bearer_auth("fo-key")
            .header("idempotency-key", holder)
            .json(&json!({ "holder": holder }))
    })
    .await;
    match status {
        201 => {
            let seat = body["seat_id"].as_str().expect("seat_id").to_string();
            ctx.ledger().held.insert(seat.clone());
            if ctx.promoted.load(Ordering::Relaxed) {
                ctx.after_promotion.fetch_add(1, Ordering::Relaxed);
            }
            Some(seat)
        }
        409 => None,
        _ => {
            ctx.ledger()
                .wrong
                .push(format!("checkout {holder}: {status} {body}"));
            None
        }
    }
}

/// Give `seat` back by release or admin revoke; acknowledged, it is gone.
async fn give_back(ctx: &Ctx, seat: &str, revoke: bool) {
    let (status, body, doubted) = settle(ctx, "release", |c, base| match revoke {
        true => c
            .delete(format!("{base}/v1/admin/seats/{seat}"))
            .header("authorization", &ctx.admin),
        false => c
            .delete(format!("{base}/v1/licenses/fo/seats/{seat}"))
            .bearer_auth("fo-key"),
    })
    .await;
    // A revoke retried after its first attempt committed finds no seat.
    let gone = status == 204 || (revoke && doubted && status == 404);
    let mut ledger = ctx.ledger();
    if gone {
        ledger.held.remove(seat);
        ledger.gone.insert(seat.to_string());
    } else {
        let how = if revoke { "revoke" } else { "release" };
        ledger.wrong.push(format!("{how} {seat}: {status} {body}"));
    }
}

/// A holder: one seat, a heartbeat every second until the test stops.
async fn hold(ctx: Arc<Ctx>, i: usize) -> Option<String> {
    let holder = format!("holder-{i}");
    let seat = checkout(&ctx, &holder).await?;
    while !ctx.stopping() {
        sleep(Duration::from_secs(1)).await;
        let base = ctx.replica();
        let answer = ctx
            .client
            .post(format!("{base}/v1/licenses/fo/seats/{seat}/heartbeat"))
            .bearer_auth("fo-key")
            .send()
            .await
            .map(|r| r.status().as_u16());
        match answer {
            Ok(200) => {}
            Ok(410) => ctx.ledger().lapsed.push(holder.clone()),
            Ok(s) if s < 500 => ctx.ledger().wrong.push(format!("heartbeat {holder}: {s}")),
            // The next beat, a second later, is the retry.
            _ => ctx.ledger().in_doubt += 1,
        }
    }
    Some(seat)
}

/// A churner: check out, hold briefly, give back (every third by revoke).
async fn churn(ctx: Arc<Ctx>, i: usize) {
    for round in 0.. {
        if ctx.stopping() {
            return;
        }
        match checkout(&ctx, &format!("churn-{i}-{round}")).await {
            Some(seat) => {
                sleep(Duration::from_millis(50 + 20 * i as u64)).await;
                give_back(&ctx, &seat, round % 3 == 0).await;
            }
            None => sleep(Duration::from_millis(100)).await,
        }
    }
}

/// Samples `fo`'s live count from the admin API, alternating replicas,
/// until the test stops: the highest seen and how many samples answered.
async fn sample_live(ctx: Arc<Ctx>) -> (u64, u64) {
    let (mut highest, mut samples) = (0, 0);
    while !ctx.stopping() {
        let base = ctx.replica();
        let resp = ctx
            .client
            .get(format!("{base}/v1/admin/licenses"))
            .header("authorization", &ctx.admin)
            .send()
            .await;
        if let Ok(resp) = resp
            && resp.status() == 200
            && let Ok(body) = resp.json::<Value>().await
        {
            let fo = body["licenses"].as_array().expect("licenses").iter();
            let live = fo
                .filter(|l| l["id"] == "fo")
                .find_map(|l| l["live"].as_u64())
                .expect("fo's live count");
            highest = highest.max(live);
            samples += 1;
        }
        sleep(Duration::from_millis(100)).await;
    }
    (highest, samples)
}

/// How long after `since` replica `base` answers `/healthz` 200 and takes
/// (and gives back) a seat: it reads and writes on the new primary.
async fn back_after(client: &reqwest::Client, base: &str, since: Instant) -> Duration {
    eventually(Duration::from_secs(30), "the replica back", || async {
        let health = client.get(format!("{base}/healthz")).send().await.ok()?;
        (health.status() == 200).then_some(())?;
        let lease: Value = client
            .post(format!("{base}/v1/licenses/probe/seats"))
            .bearer_auth("probe-key")
            .json(&json!({ "holder": "probe" }))
            .send()
            .await
            .ok()
            .filter(|r| r.status() == 201)?
            .json()
            .await
            .ok()?;
        let seat = lease["seat_id"].as_str()?;
        client
            .delete(format!("{base}/v1/licenses/probe/seats/{seat}"))
            .bearer_auth("probe-key")
            .send()
            .await
            .ok()
            .filter(|r| r.status() == 204)?;
        Some(since.elapsed())
    })
    .await
}

/// Every event id, read page by page from the admin API.
async fn event_ids(s: &Server) -> Vec<i64> {
    let mut ids: Vec<i64> = Vec::new();
    loop {
        let after = ids.last().copied().unwrap_or(0);
        let page = s
            .admin_get(&format!("/v1/admin/events?after={after}&limit=10000"))
            .await;
        let events = page["events"].as_array().expect("events").clone();
        if events.is_empty() {
            return ids;
        }
        ids.extend(events.iter().map(|e| e["id"].as_i64().expect("event id")));
    }
}

async fn two_replicas_on(database: String) -> Server {
    let mut options = ServerOptions::new(LICENSES);
    options.store = TestStore::Postgres { replicas: 2 };
    options.database = Some(database);
    Server::start_with(options).await
}

/// The clients' ledger and the sampler's figures once they have all stopped.
struct Outcome {
    ledger: Ledger,
    holders: BTreeSet<String>,
    highest_live: u64,
    samples: u64,
}

async fn stop(
    ctx: &Arc<Ctx>,
    holders: Vec<JoinHandle<Option<String>>>,
    churners: Vec<JoinHandle<()>>,
    sampler: JoinHandle<(u64, u64)>,
) -> Outcome {
    ctx.stop.store(true, Ordering::Relaxed);
    let mut held = BTreeSet::new();
    for h in holders {
        held.insert(h.await.unwrap().expect("every holder got a seat"));
    }
    for c in churners {
        c.await.unwrap();
    }
    let (highest_live, samples) = sampler.await.unwrap();
    Outcome {
        ledger: std::mem::take(&mut *ctx.ledger()),
        holders: held,
        highest_live,
        samples,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn killing_the_primary_and_promoting_its_sync_standby_loses_nothing() {
    let run = tokio::time::timeout(Duration::from_secs(110), failover());
    run.await.expect("the failover test finished within 110 s");
}

async fn failover() {
    let cluster = block_in_place(PgCluster::with_sync_standby);
    let s = two_replicas_on(cluster.create_database()).await;
    assert!(!s.logs().contains(WARNING), "warned wrongly:\n{}", s.logs());
    let ctx = Arc::new(Ctx {
        client: reqwest::Client::builder()
            .timeout(Duration::from_secs(3))
            .build()
            .unwrap(),
        replicas: s
            .replica_addrs()
            .iter()
            .map(|a| format!("http://{a}"))
            .collect(),
        admin: s.auth(),
        ledger: Mutex::default(),
        stop: AtomicBool::new(false),
        next: AtomicU64::new(0),
        after_promotion: AtomicU64::new(0),
        promoted: AtomicBool::new(false),
    });
    let holders: Vec<_> = (0..HOLDERS)
        .map(|i| tokio::spawn(hold(ctx.clone(), i)))
        .collect();
    eventually(Duration::from_secs(20), "every holder seated", || async {
        (ctx.ledger().held.len() == HOLDERS).then_some(())
    })
    .await;
    let churners: Vec<_> = (0..CHURNERS)
        .map(|i| tokio::spawn(churn(ctx.clone(), i)))
        .collect();
    let sampler = tokio::spawn(sample_live(ctx.clone()));

    sleep(Duration::from_secs(3)).await;
    block_in_place(|| cluster.kill_primary());
    sleep(Duration::from_secs(3)).await;
    block_in_place(|| cluster.promote_standby());
    let promoted = Instant::now();
    ctx.promoted.store(true, Ordering::Relaxed);
    let probe = reqwest::Client::builder()
        .timeout(Duration::from_secs(2))
        .build()
        .unwrap();
    for base in &ctx.replicas {
        let took = back_after(&probe, base, promoted).await;
        eprintln!("{base} served again {took:?} after the promotion");
        assert!(took < Duration::from_secs(10), "{base} back after {took:?}");
    }
    // Heartbeats and churn on the new primary for a while.
    sleep(Duration::from_secs(5)).await;
    let out = stop(&ctx, holders, churners, sampler).await;

    let ledger = &out.ledger;
    assert_eq!(ledger.wrong, Vec::<String>::new(), "answers no rule allows");
    assert_eq!(ledger.lapsed, Vec::<String>::new(), "holders lapsed");
    assert!(
        ledger.in_doubt > 0,
        "the failover went unnoticed: no failed request"
    );
    assert!(
        ctx.after_promotion.load(Ordering::Relaxed) > 0,
        "no checkout acknowledged after the promotion"
    );
    assert!(
        out.highest_live <= SEATS,
        "live {} > {SEATS}",
        out.highest_live
    );
    assert!(out.samples > 20, "only {} live samples", out.samples);
    // Churners gave back what they took: the holders' seats remain, exactly.
    assert_eq!(ledger.held, out.holders, "churn seats left in the ledger");
    let on_server: BTreeSet<String> = s
        .seats(Some("fo"))
        .await
        .iter()
        .map(|seat| seat["seat_id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        on_server, out.holders,
        "acknowledged seats lost or extra ones"
    );
    let resurrected: Vec<_> = ledger.gone.intersection(&on_server).collect();
    assert!(
        resurrected.is_empty(),
        "given back, yet held: {resurrected:?}"
    );
    assert!(
        ledger.gone.len() > 20,
        "only {} seats churned",
        ledger.gone.len()
    );

    let ids = event_ids(&s).await;
    let gaps: Vec<_> = ids.windows(2).filter(|w| w[1] != w[0] + 1).collect();
    assert!(gaps.is_empty(), "event id gaps: {gaps:?}");
    assert_eq!(ids.first(), Some(&1), "the log starts at id 1");
    eprintln!(
        "{} seats churned, {} requests in doubt ({} of them 503), highest live {}, {} events",
        ledger.gone.len(),
        ledger.in_doubt,
        ledger.unavailable,
        out.highest_live,
        ids.len()
    );
}

#[tokio::test]
async fn a_primary_without_a_synchronous_standby_is_warned_about_at_start() {
    let mut options = ServerOptions::new(LICENSES);
    options.store = TestStore::Postgres { replicas: 1 };
    let s = Server::start_with(options).await;
    let logs = s.logs();
    let warnings: Vec<&str> = logs.lines().filter(|l| l.contains(WARNING)).collect();
    assert_eq!(warnings.len(), 1, "one warning line:\n{logs}");
    assert!(warnings[0].contains("WARN"), "{}", warnings[0]);
    assert!(
        warnings[0].contains("synchronous_standby_names is empty"),
        "{}",
        warnings[0]
    );
    assert!(
        warnings[0].contains("docs/src/replicas.md"),
        "{}",
        warnings[0]
    );
}
