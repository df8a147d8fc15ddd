//! `leasehold report` against a scripted HTTP server (the real server's
//! usage and sessions endpoints are being built in parallel; the end-to-end
//! tests against `leaseholdd` come with them). It checks the I/O half the
//! unit tests cannot: the requests sent (range, `limit`, paging with
//! `after`), the top holders summed over pages, and `--csv` streaming every
//! license's CSV with the header once.

use std::sync::{Arc, Mutex};

use leasehold_tui::api::AdminClient;
use leasehold_tui::report::range::FromArg;
use leasehold_tui::report::{ReportArgs, run};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

const LICENSES: &str = r#"{"now":"2026-11-30T04:00:00.000Z","licenses":[
 {"id":"demo","seats":3,"live":1,"waiting":0,"ttl_s":60,"skew_s":5,"reap_grace_s":15},
 {"id":"cad","seats":10,"live":0,"waiting":0,"ttl_s":60,"skew_s":5,"reap_grace_s":15}]}"#;

/// `demo` was over its 3 seats for 90 s and denied once; `cad` neither.
fn usage(id: &str, denials: u64, over_s: f64) -> String {
    format!(
        r#"{{"license_id":"{id}","from":"2026-11-30T00:00:00.000Z","to":"2026-11-30T04:00:00.000Z","step_s":3600,
        "points":[{{"t":"2026-11-30T00:00:00.000Z","seats":3,"peak":3,"over_s":{over_s},"checkouts":2,"denials":{denials}}}],"summary":{{"seats":3,"peak":3,"peak_at":"2026-11-30T01:00:00.000Z","full_s":600,"over_s":{over_s},
        "denials":{denials},"seat_hours":4.5,"utilization":0.375,"holders":2}}}}"#
    )
}

fn session(holder: &str, start: &str, end: Option<&str>, duration_s: f64) -> String {
    let ended = end.map_or("null".to_string(), |e| format!("\"{e}\""));
    let how = if end.is_some() { "\"release\"" } else { "null" };
    format!(
        r#"{{"seat_id":"s-{holder}-{start}","license_id":"demo","holder":"{holder}","fingerprint":null,
        "started_at":"{start}","ended_at":{ended},"end":{how},"duration_s":{duration_s}}}"#
    )
}

/// The scripted answer to one request line (`GET /path?query`).
fn answer(target: &str) -> (u16, &'static str, String) {
    let json = "application/json";
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    let license = query
        .split('&')
        .find_map(|kv| kv.strip_prefix("license="))
        .unwrap_or("");
    match path {
        "/v1/admin/licenses" => (200, json, LICENSES.to_string()),
        "/v1/admin/usage" => (200, json, {
            let demo = license == "demo";
            usage(license, u64::from(demo), if demo { 90.0 } else { 0.0 })
        }),
        "/v1/admin/sessions" if license == "demo" && !query.contains("after=") => {
            // Page 1, newest first: bob still open (2 h so far, clipped at
            // `to`), alice 1 h inside the range.
            let body = format!(
                r#"{{"sessions":[{},{}],"next":"cur/1"}}"#,
                session("bob", "2026-11-30T03:00:00.000Z", None, 7200.0),
                session(
                    "alice",
                    "2026-11-30T01:00:00.000Z",
                    Some("2026-11-30T02:00:00.000Z"),
                    3600.0
                ),
            );
            (200, json, body)
        }
        "/v1/admin/sessions" if license == "demo" => {
            // Page 2: alice again, begun before `from`: 0.5 h inside.
            let body = format!(
                r#"{{"sessions":[{}],"next":null}}"#,
                session(
                    "alice",
                    "2026-11-29T23:00:00.000Z",
                    Some("2026-11-30T00:30:00.000Z"),
                    5400.0
                ),
            );
            (200, json, body)
        }
        "/v1/admin/sessions" => (200, json, r#"{"sessions":[],"next":null}"#.to_string()),
        "/v1/admin/usage/what-if" if license == "demo" => (200, json, WHAT_IF.to_string()),
        _ => (
            404,
            json,
            r#"{"error":"not_found","message":"no"}"#.to_string(),
        ),
    }
}

/// `demo`'s replay on 1..=2 seats: three requests, two sessions and one
/// holder's five true denials as one episode; `cad` has none (a 404
/// `not_found`, as from a server older than the endpoint).
const WHAT_IF: &str = r#"{"license_id":"demo","from":"2026-11-30T00:00:00.000Z",
 "covered_from":"2026-11-30T00:00:00.000Z","to":"2026-11-30T04:00:00.000Z","seats_now":3,
 "requests":3,"sessions":2,"true_denials":5,"episodes":1,"idle_cut":1,"curve":[
 {"seats":1,"denials":2,"denial_rate":66.7,"peak":1,"full_s":3600.0,"utilization":0.25},
 {"seats":2,"denials":0,"denial_rate":0.0,"peak":2,"full_s":0.0,"utilization":0.125}],
 "recommended":{"seats":2,"denial_rate":0.0}}"#;

/// Serve until the test ends; every request head is recorded.
async fn fake_server() -> (String, Arc<Mutex<Vec<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    tokio::spawn(async move {
        loop {
            let (mut sock, _) = listener.accept().await.unwrap();
            let log = log.clone();
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut byte = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") {
                    if sock.read(&mut byte).await.unwrap_or(0) == 0 {
                        return;
                    }
                    head.push(byte[0]);
                }
                let head = String::from_utf8_lossy(&head).into_owned();
                let target = head.split(' ').nth(1).unwrap_or("").to_string();
                let csv = head.to_ascii_lowercase().contains("accept: text/csv");
                log.lock()
                    .unwrap()
                    .push(format!("{target}{}", if csv { " [csv]" } else { "" }));
                let (status, ctype, body) = if csv {
                    let license = if target.contains("license=demo") {
                        "demo"
                    } else {
                        "cad"
                    };
                    // The CSV arrives in small writes below, to cross chunks.
                    (
                        200,
                        "text/csv",
                        format!("seat_id,holder\r\ns-{license},'=x\r\n"),
                    )
                } else {
                    answer(&target)
                };
                let reply = format!(
                    "HTTP/1.1 {status} X\r\ncontent-type: {ctype}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                for piece in reply.as_bytes().chunks(7) {
                    let _ = sock.write_all(piece).await;
                }
            });
        }
    });
    (url, seen)
}

fn args(json: bool, csv: bool) -> ReportArgs {
    ReportArgs {
        license: None,
        from: FromArg::At(
            leasehold_common::Timestamp::parse_rfc3339("2026-11-30T00:00:00Z").unwrap(),
        ),
        to: None,
        step: None,
        json,
        csv,
        tolerance: None,
        what_if: false,
        idle_timeout: None,
        target: None,
        seats: None,
        attest: false,
        out: None,
    }
}

#[tokio::test]
async fn report_pages_sessions_and_sums_holders_inside_the_range() {
    let (url, seen) = fake_server().await;
    let client = AdminClient::new(&url, "t").unwrap();
    let mut out = Vec::new();
    run(args(false, false), &client, &mut out).await.unwrap();
    let text = String::from_utf8(out).unwrap();
    assert!(
        text.starts_with("usage from 2026-11-30T00:00:00.000Z to 2026-11-30T04:00:00.000Z (4h00m)"),
        "{text}"
    );
    assert!(
        text.contains("demo: short of seats — more seats in use than sold for 1m30s; 1 denial\n"),
        "{text}"
    );
    // bob: 03:00 to `to` (04:00) = 1 h; alice: 1 h + 0.5 h over two pages.
    assert!(
        text.contains("  alice         1.50\n  bob           1.00\n"),
        "{text}"
    );
    assert!(text.contains("cad: about right"), "{text}");
    let seen = seen.lock().unwrap().clone();
    let from_to = "from=2026-11-30T00%3A00%3A00.000Z&to=2026-11-30T04%3A00%3A00.000Z";
    assert!(
        seen.contains(&format!("/v1/admin/usage?license=demo&{from_to}")),
        "{seen:?}"
    );
    assert!(
        seen.contains(&format!(
            "/v1/admin/sessions?license=demo&{from_to}&limit=10000"
        )),
        "{seen:?}"
    );
    assert!(
        seen.contains(&format!(
            "/v1/admin/sessions?license=demo&{from_to}&limit=10000&after=cur%2F1"
        )),
        "{seen:?}"
    );
}

#[tokio::test]
async fn what_if_sends_the_range_and_flags_and_prints_the_recommendation() {
    let (url, seen) = fake_server().await;
    let client = AdminClient::new(&url, "t").unwrap();
    let mut out = Vec::new();
    let args = ReportArgs {
        license: Some("demo".into()),
        what_if: true,
        idle_timeout: Some(std::time::Duration::from_secs(1800)),
        target: Some(0.5),
        ..args(false, false)
    };
    run(args.clone(), &client, &mut out).await.unwrap();
    let text = String::from_utf8(out).unwrap();
    assert!(
        text.contains("demo: 3 requests replayed: 2 sessions and 1 episode (5 true denials); an idle timeout of 30m cut 1 session\n"),
        "{text}"
    );
    assert!(
        text.contains("  2 seats would have denied none of 3 requests; you have 3\n"),
        "{text}"
    );
    let seen = seen.lock().unwrap().clone();
    assert_eq!(
        seen.last().unwrap(),
        "/v1/admin/usage/what-if?license=demo&from=2026-11-30T00%3A00%3A00.000Z\
         &to=2026-11-30T04%3A00%3A00.000Z&idle_timeout=30m&target=0.5"
    );
    // --json: the server's answers, one per license.
    let mut out = Vec::new();
    let json = ReportArgs { json: true, ..args };
    run(json, &client, &mut out).await.unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
    let want: serde_json::Value = serde_json::from_str(WHAT_IF).unwrap();
    assert_eq!(v, serde_json::json!([want]));
}

#[tokio::test]
async fn what_if_from_a_server_without_it_says_so() {
    let (url, _) = fake_server().await;
    let client = AdminClient::new(&url, "t").unwrap();
    let args = ReportArgs {
        license: Some("cad".into()),
        what_if: true,
        ..args(false, false)
    };
    let err = run(args, &client, &mut Vec::new()).await.unwrap_err();
    assert!(
        format!("{err:#}").contains("has no what-if replay"),
        "{err:#}"
    );
}

#[tokio::test]
async fn report_json_is_one_entry_per_license() {
    let (url, _) = fake_server().await;
    let client = AdminClient::new(&url, "t").unwrap();
    let mut out = Vec::new();
    run(args(true, false), &client, &mut out).await.unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
    let entries = v.as_array().unwrap();
    assert_eq!(entries.len(), 2);
    assert_eq!(entries[0]["license_id"], "demo");
    assert_eq!(entries[0]["verdict"], "short_of_seats");
    assert_eq!(
        entries[0]["top_holders"][0],
        serde_json::json!({"holder": "alice", "hours": 1.5})
    );
    assert_eq!(entries[0]["summary"]["over_s"], 90.0);
    assert_eq!(entries[0]["points"][0]["over_s"], 90.0);
    assert_eq!(entries[1]["summary"]["over_s"], 0.0);
    assert_eq!(entries[1]["verdict"], "about_right");
    assert_eq!(entries[1]["summary"]["seat_hours"], 4.5);
}

#[tokio::test]
async fn report_csv_streams_every_license_with_one_header() {
    let (url, seen) = fake_server().await;
    let client = AdminClient::new(&url, "t").unwrap();
    let mut out = Vec::new();
    run(args(false, true), &client, &mut out).await.unwrap();
    assert_eq!(
        String::from_utf8(out).unwrap(),
        "seat_id,holder\r\ns-demo,'=x\r\ns-cad,'=x\r\n"
    );
    let seen = seen.lock().unwrap().clone();
    let csv: Vec<&String> = seen.iter().filter(|s| s.ends_with("[csv]")).collect();
    assert_eq!(csv.len(), 2, "{seen:?}");
    assert!(
        csv.iter()
            .all(|s| !s.contains("limit=") && !s.contains("after=")),
        "{seen:?}"
    );
}
