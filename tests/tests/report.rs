//! `leasehold report` against the real `leaseholdd`: the table, `--json`
//! and `--csv` answer "did we buy enough seats?" from the server's own
//! usage history.

use std::time::Duration;

use leasehold_common::Timestamp;
use leasehold_tests::{Run, Server, TEST_LICENSES, eventually, license_toml, run_leasehold};
use serde_json::{Value, json};

async fn report(s: &Server, args: &[&str]) -> Run {
    let mut all = vec!["report"];
    all.extend_from_slice(args);
    let run = run_leasehold(s, Some(&s.admin_token), &std::env::temp_dir(), &all).await;
    assert_eq!(
        run.code,
        Some(0),
        "leasehold {all:?}\nstdout:\n{}\nstderr:\n{}",
        run.stdout,
        run.stderr
    );
    run
}

/// `tiny` (1 seat): alice holds it, bob is refused twice (409), then alice
/// releases and `=SUM(A1)` takes it. `small` (5 seats): one holder.
async fn a_short_history() -> Server {
    let s = Server::start(TEST_LICENSES).await;
    let alice = s
        .take_seat("tiny", "tiny-key", json!({"holder": "alice"}))
        .await;
    for _ in 0..2 {
        let refused = s
            .checkout("tiny", "tiny-key", json!({"holder": "bob"}))
            .await;
        assert_eq!(refused.status(), 409);
    }
    assert_eq!(
        s.release("tiny", "tiny-key", &alice.seat_id).await.status(),
        204
    );
    s.take_seat("tiny", "tiny-key", json!({"holder": "=SUM(A1)"}))
        .await;
    s.take_seat("small", "small-key", json!({"holder": "carol"}))
        .await;
    s
}

#[tokio::test]
async fn the_table_names_each_license_its_figures_and_a_verdict() {
    let s = a_short_history().await;
    let out = report(&s, &["--from", "1h"]).await.stdout;
    let tiny = out
        .lines()
        .find(|l| l.trim_start().starts_with("tiny "))
        .unwrap_or_else(|| panic!("no row for tiny:\n{out}"));
    let cells: Vec<&str> = tiny.split_whitespace().collect();
    // LICENSE SEATS PEAK PEAK-AT FULL FULL-FOR DENIALS TRUE ...
    assert_eq!(&cells[..3], ["tiny", "1", "1"], "{out}");
    assert_eq!(cells[6], "2", "two denials: {out}");
    assert_eq!(cells[7], "2", "bob never got a seat: both true: {out}");
    assert_eq!(cells[8], "1", "both bob's: one denied holder: {out}");
    assert!(
        out.contains("tiny: short of seats"),
        "two true denials make tiny short of seats:\n{out}"
    );
    assert!(out.contains("small: about right"), "{out}");
    assert!(out.contains("alice") && out.contains("carol"), "{out}");
}

#[tokio::test]
async fn json_is_one_usage_object_per_license_with_its_verdict() {
    let s = a_short_history().await;
    let out = report(&s, &["--from", "1h", "--json"]).await.stdout;
    let all: Vec<Value> = serde_json::from_str(&out).expect("a JSON array");
    let tiny = all
        .iter()
        .find(|u| u["license_id"] == "tiny")
        .expect("tiny in the report");
    assert_eq!(tiny["summary"]["seats"], 1);
    assert_eq!(tiny["summary"]["peak"], 1);
    assert_eq!(tiny["summary"]["denials"], 2);
    assert_eq!(tiny["summary"]["holders"], 2, "alice and =SUM(A1)");
    assert_eq!(tiny["verdict"], "short_of_seats");
    // The new summary fields: bob's two refusals while full, never served.
    assert_eq!(tiny["summary"]["true_denials"], 2, "{tiny}");
    assert_eq!(
        tiny["summary"]["denials_by_reason"],
        json!({"full": 2, "holder": 0, "group": 0, "borrow": 0, "not_allowed": 0, "blocked": 0,
               "version": 0, "entitlement": 0}),
        "{tiny}"
    );
    let only_tiny = report(&s, &["--license", "tiny", "--from", "1h", "--json"])
        .await
        .stdout;
    let only: Vec<Value> = serde_json::from_str(&only_tiny).unwrap();
    assert_eq!(only.len(), 1);
    assert_eq!(only[0]["license_id"], "tiny");
}

#[tokio::test]
async fn csv_lists_the_sessions_and_never_a_formula() {
    let s = a_short_history().await;
    let out = report(&s, &["--license", "tiny", "--from", "1h", "--csv"])
        .await
        .stdout;
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines[0],
        "seat_id,license_id,holder,fingerprint,started_at,ended_at,end,duration_s,group,borrowed,idle_s"
    );
    assert_eq!(lines.len(), 3, "alice's and =SUM(A1)'s sessions:\n{out}");
    assert!(
        lines
            .iter()
            .any(|l| l.contains(",tiny,alice,") && l.contains(",release,")),
        "{out}"
    );
    assert!(
        lines.iter().any(|l| l.contains(",tiny,'=SUM(A1),")),
        "a holder that looks like a formula is prefixed with ':\n{out}"
    );
}

/// `shop`: 3 seats, 2 of them reserved for `d-*`, one seat per holder,
/// `guest` denied.
const SHOP: &str = r#"
[[license]]
id = "shop"
key = "shop-key"
seats = 3
ttl = "60s"
skew = "5s"
reap_grace = "15s"
max_per_holder = 1
deny = ["guest"]

[[license.group]]
name = "design"
holders = ["d-*"]
reserve = 2
"#;

/// Refused by the holder cap and the deny list, and once while full (the
/// free seats reserved) but served a moment later: none of it is a
/// shortage, and the verdict says so beside it. Read with no tolerance, the
/// same refusal while full is a true denial: short of seats.
#[tokio::test]
async fn refusals_by_caps_lists_or_served_soon_after_are_not_a_shortage() {
    let s = Server::start(SHOP).await;
    let x = s
        .take_seat("shop", "shop-key", json!({"holder": "x"}))
        .await;
    let server = &s;
    let refused = |holder: &'static str| async move {
        let r = server
            .checkout("shop", "shop-key", json!({ "holder": holder }))
            .await;
        let status = r.status().as_u16();
        let body: Value = r.json().await.unwrap();
        (
            status,
            body["error"].as_str().unwrap_or_default().to_string(),
        )
    };
    assert_eq!(refused("y").await, (409, "no_seats_available".into()));
    assert_eq!(refused("x").await, (409, "limit_reached".into()));
    assert_eq!(refused("guest").await, (403, "not_allowed".into()));
    assert_eq!(
        s.release("shop", "shop-key", &x.seat_id).await.status(),
        204
    );
    s.take_seat("shop", "shop-key", json!({"holder": "y"}))
        .await;

    let json = report(&s, &["--license", "shop", "--from", "1h", "--json"])
        .await
        .stdout;
    let all: Vec<Value> = serde_json::from_str(&json).expect("a JSON array");
    let sum = &all[0]["summary"];
    assert_eq!(sum["denials"], 3, "{json}");
    assert_eq!(sum["true_denials"], 0, "{json}");
    assert_eq!(
        sum["denials_by_reason"],
        json!({"full": 1, "holder": 1, "group": 0, "borrow": 0, "not_allowed": 1, "blocked": 0,
               "version": 0, "entitlement": 0}),
        "{json}"
    );
    assert_eq!(all[0]["verdict"], "about_right", "{json}");
    let table = report(&s, &["--license", "shop", "--from", "1h"])
        .await
        .stdout;
    assert!(
        table.contains("shop: about right — ")
            && table.contains("no true denials")
            && table.contains(
                "; 1 refused while full but served within 60s, 2 refused by caps or lists — not a shortage"
            ),
        "{table}"
    );
    let row: Vec<&str> = table
        .lines()
        .find(|l| l.starts_with("shop "))
        .expect(&table)
        .split_whitespace()
        .collect();
    assert_eq!(row[6..8], ["3", "0"], "3 denials, none true: {table}");

    let strict = report(
        &s,
        &["--license", "shop", "--from", "1h", "--tolerance", "0s"],
    )
    .await
    .stdout;
    assert!(
        strict.contains(
            "shop: short of seats — 1 true denial from 1 holder (full, not served within 0s); "
        ),
        "{strict}"
    );
}

const TRIO: &str = license_toml!(
    "trio",
    seats = 3,
    ttl = "60s",
    skew = "5s",
    reap_grace = "15s"
);

/// More seats in use than sold: the rules grant no overage yet, so the pool
/// shrinks below the seats held (a reload never evicts). `over_s` counts
/// from the reload on, in the summary and in the points after it, and the
/// report calls the license short of seats and says why.
#[tokio::test]
async fn seats_held_over_a_shrunk_pool_are_over_and_short_of_seats() {
    let s = Server::start(&format!("{TEST_LICENSES}{TRIO}")).await;
    for holder in ["a", "b", "c"] {
        s.take_seat("trio", "trio-key", json!({ "holder": holder }))
            .await;
    }
    let shrunk = format!("{TEST_LICENSES}{}", TRIO.replace("seats = 3", "seats = 2"));
    let tmp = s.licenses_path().with_extension("tmp");
    std::fs::write(&tmp, shrunk).unwrap();
    std::fs::rename(&tmp, s.licenses_path()).unwrap();
    let reload = eventually(
        Duration::from_secs(10),
        "the shrink's config event",
        || async {
            s.events_of("config").await.into_iter().find(|e| {
                e["detail"]
                    .as_str()
                    .is_some_and(|d| d.contains("trio: seats 3→2"))
            })
        },
    )
    .await;
    let reloaded_at = Timestamp::parse_rfc3339(reload["at"].as_str().unwrap()).unwrap();
    tokio::time::sleep(Duration::from_millis(1200)).await;

    let u = s.admin_get("/v1/admin/usage?license=trio&step=1m").await;
    let sum = &u["summary"];
    assert_eq!(
        (sum["seats"].as_u64(), sum["peak"].as_u64()),
        (Some(2), Some(3)),
        "{sum}"
    );
    let over = sum["over_s"].as_f64().unwrap();
    assert!(over > 0.0, "three seats on two since the reload: {sum}");
    assert!(
        sum["full_s"].as_f64().unwrap() >= over,
        "time over the pool is full time too: {sum}"
    );
    // The point holding now (the last) is over; none that ended well before
    // the reload is. (The new size is recorded by the first batch after the
    // file loads: on one node a moment before the `config` event, on a
    // cluster a moment after it; hence not "the point holding the event".)
    let points = u["points"].as_array().unwrap();
    let step_ms = (u["step_s"].as_f64().unwrap() * 1000.0) as i64;
    let last = points.last().unwrap();
    assert!(last["over_s"].as_f64().unwrap() > 0.0, "{last}");
    for p in points {
        let t = Timestamp::parse_rfc3339(p["t"].as_str().unwrap()).unwrap();
        if reloaded_at.millis_since(t) >= step_ms + 1000 {
            assert_eq!(p["over_s"], 0.0, "before the reload: {p}");
        }
    }
    let points_over: f64 = points.iter().map(|p| p["over_s"].as_f64().unwrap()).sum();
    assert!((points_over - over).abs() < 1e-6, "{points_over} vs {over}");

    let table = report(&s, &["--license", "trio", "--from", "1h"])
        .await
        .stdout;
    assert!(
        table.contains("trio: short of seats — more seats in use than sold for "),
        "{table}"
    );
    let json = report(&s, &["--license", "trio", "--from", "1h", "--json"])
        .await
        .stdout;
    let all: Vec<Value> = serde_json::from_str(&json).expect("a JSON array");
    assert_eq!(all[0]["verdict"], "short_of_seats");
    assert!(
        all[0]["summary"]["over_s"].as_f64().unwrap() > 0.0,
        "{json}"
    );
    assert!(
        all[0]["verdict_reason"]
            .as_str()
            .unwrap()
            .starts_with("more seats in use than sold for "),
        "{json}"
    );
}

/// A session idle for a minute (the shortest period recorded): the report
/// shows its idle seat-hours in the table and `--json`, and the sessions
/// CSV its `idle_s`. Takes a minute of real time: a period starts no
/// earlier than its checkout.
#[tokio::test]
async fn idle_hours_and_idle_seconds_from_a_reported_idle_minute() {
    let s = Server::start(concat!(
        "\n[[license]]\nid = \"desk\"\nkey = \"desk-key\"\nseats = 2\n",
        "ttl = \"90s\"\nskew = \"5s\"\nreap_grace = \"15s\"\nidle_timeout = \"30m\"\n",
    ))
    .await;
    let seat = s
        .take_seat("desk", "desk-key", json!({"holder": "ida"}))
        .await
        .seat_id;
    tokio::time::sleep(Duration::from_secs(63)).await;
    let beat = |idle_s: u64| {
        s.client()
            .post(s.url(&format!("/v1/licenses/desk/seats/{seat}/heartbeat")))
            .bearer_auth("desk-key")
            .json(&json!({ "idle_s": idle_s }))
            .send()
    };
    // Idle since a moment after the checkout; back now: a period of ≥ 60 s.
    assert_eq!(beat(62).await.unwrap().status(), 200);
    assert_eq!(beat(0).await.unwrap().status(), 200);
    assert_eq!(s.release("desk", "desk-key", &seat).await.status(), 204);

    let json = report(&s, &["--license", "desk", "--from", "1h", "--json"])
        .await
        .stdout;
    let all: Vec<Value> = serde_json::from_str(&json).expect("a JSON array");
    let idle_hours = all[0]["summary"]["idle_hours"].as_f64().expect(&json);
    assert!(
        (60.0 / 3600.0..=64.0 / 3600.0).contains(&idle_hours),
        "about a minute idle: {json}"
    );
    let table = report(&s, &["--license", "desk", "--from", "1h"])
        .await
        .stdout;
    let header: Vec<&str> = table
        .lines()
        .nth(2)
        .expect(&table)
        .split_whitespace()
        .collect();
    let row: Vec<&str> = table
        .lines()
        .find(|l| l.starts_with("desk "))
        .expect(&table)
        .split_whitespace()
        .collect();
    // Counted from the end: PEAK AT and FULL FOR are one cell each in the
    // row but two words in the header.
    let from_end = header.len()
        - header
            .iter()
            .position(|h| *h == "IDLE-HOURS")
            .expect(&table);
    assert_eq!(row[row.len() - from_end], "0.02", "{table}");

    let csv = report(&s, &["--license", "desk", "--from", "1h", "--csv"])
        .await
        .stdout;
    let mut lines = csv.lines();
    let columns: Vec<&str> = lines.next().unwrap().split(',').collect();
    let at = columns.iter().position(|c| *c == "idle_s").expect(&csv);
    let session: Vec<&str> = lines.next().expect(&csv).split(',').collect();
    let idle_s: f64 = session[at].parse().expect(&csv);
    assert!((60.0..=64.0).contains(&idle_s), "{csv}");
}

/// A server started a moment ago has seen a moment, not the week asked
/// about: no license with idle seats is called a surplus over it, the
/// reason says how little the history covers, and `--json` gives
/// `covered_from` (the server's first start, inside the range).
#[tokio::test]
async fn a_fresh_server_never_calls_a_surplus_over_a_week_it_never_saw() {
    let s = Server::start(TEST_LICENSES).await;
    // The first batch records the pool sizes the history starts with.
    eventually(Duration::from_secs(10), "the first pool sizes", || async {
        let u = s.admin_get("/v1/admin/usage?license=small").await;
        (u["summary"]["covered_from"] != u["to"]).then_some(())
    })
    .await;
    let table = report(&s, &[]).await.stdout;
    assert!(table.contains("(7d00h)"), "the default week: {table}");
    assert!(!table.contains("more seats than needed"), "{table}");
    assert!(
        table.contains("history covers only ") && table.contains(" of the 7d00h asked"),
        "{table}"
    );
    let json = report(&s, &["--json"]).await.stdout;
    let all: Vec<Value> = serde_json::from_str(&json).expect("a JSON array");
    assert!(!all.is_empty(), "{json}");
    for u in &all {
        assert_ne!(u["verdict"], "more_than_needed", "{u}");
        let at =
            |v: &Value| Timestamp::parse_rfc3339(v.as_str().expect("a time")).expect("RFC 3339");
        let (from, to, covered) = (
            at(&u["from"]),
            at(&u["to"]),
            at(&u["summary"]["covered_from"]),
        );
        assert!(from < covered && covered <= to, "{u}");
        assert!(
            to.millis_since(covered) < 3_600_000,
            "covered since the start: {u}"
        );
    }
}
