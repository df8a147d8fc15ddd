//! The usage history against the real `leaseholdd`: `GET /v1/admin/usage`
//! and `GET /v1/admin/sessions` (JSON pages and CSV), bad input, and
//! sessions across a kill -9.

use std::collections::HashSet;

use futures_util::{StreamExt, stream};
use leasehold_tests::{Server, TEST_LICENSES, license_toml};
use serde_json::{Value, json};

const BIG: &str = license_toml!(
    "big",
    seats = 2000,
    ttl = "60s",
    skew = "5s",
    reap_grace = "15s"
);

fn licenses() -> String {
    format!("{TEST_LICENSES}{BIG}")
}

fn sessions_of(v: &Value) -> &Vec<Value> {
    v["sessions"].as_array().expect("sessions")
}

#[tokio::test]
async fn usage_and_sessions_after_some_activity() {
    let s = Server::start(&licenses()).await;
    let alice = s
        .take_seat("small", "small-key", json!({"holder": "alice"}))
        .await;
    let bob = s
        .take_seat(
            "small",
            "small-key",
            json!({"holder": "bob", "fingerprint": "b1"}),
        )
        .await;
    assert_eq!(
        s.release("small", "small-key", &alice.seat_id)
            .await
            .status(),
        204
    );
    s.take_seat("tiny", "tiny-key", json!({"holder": "carol"}))
        .await;
    let refused = s
        .checkout("tiny", "tiny-key", json!({"holder": "dave"}))
        .await;
    assert_eq!(refused.status(), 409);

    // The last 24 hours by default, in 5-minute buckets.
    let u = s.admin_get("/v1/admin/usage?license=tiny").await;
    assert_eq!(u["license_id"], "tiny");
    assert_eq!(u["step_s"], 300.0);
    assert_eq!(u["points"].as_array().unwrap().len(), 288);
    let sum = &u["summary"];
    assert_eq!(
        (sum["seats"].as_u64(), sum["peak"].as_u64()),
        (Some(1), Some(1))
    );
    assert_eq!(
        (sum["denials"].as_u64(), sum["holders"].as_u64()),
        (Some(1), Some(1))
    );
    assert!(sum["peak_at"].is_string());
    assert!(sum["full_s"].as_f64().unwrap() >= 0.0);
    let last = u["points"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(
        (last["peak"].as_u64(), last["checkouts"].as_u64()),
        (Some(1), Some(1))
    );
    assert_eq!(last["denials"], 1);
    assert_eq!(last["seats"], 1);

    let v = s.admin_get("/v1/admin/sessions?license=small").await;
    let list = sessions_of(&v);
    assert_eq!(list.len(), 2, "{v}");
    assert!(v["next"].is_null());
    // Newest first (the two may share a millisecond: then by seat id).
    assert!(list[0]["started_at"].as_str() >= list[1]["started_at"].as_str());
    let find = |seat: &str| list.iter().find(|x| x["seat_id"] == seat).cloned().unwrap();
    let (b, a) = (find(&bob.seat_id), find(&alice.seat_id));
    assert_eq!(b["fingerprint"], "b1");
    assert!(
        b["ended_at"].is_null() && b["end"].is_null(),
        "bob still holds his seat"
    );
    assert_eq!(a["end"], "release");
    assert!(a["ended_at"].is_string());
    assert!(a["duration_s"].as_f64().unwrap() >= 0.0);
    let only_bob = s
        .admin_get("/v1/admin/sessions?license=small&holder=bob")
        .await;
    assert_eq!(sessions_of(&only_bob).len(), 1);
}

#[tokio::test]
async fn bad_input_is_400_an_unknown_license_404() {
    let s = Server::start(&licenses()).await;
    let cases: &[(&str, u16, &str)] = &[
        ("/v1/admin/usage", 400, "invalid_request"),
        ("/v1/admin/usage?license=", 400, "invalid_request"),
        ("/v1/admin/usage?license=nope", 404, "unknown_license"),
        (
            "/v1/admin/usage?license=small&from=2027-01-02T00:00:00Z&to=2027-01-01T00:00:00Z",
            400,
            "invalid_request",
        ),
        (
            "/v1/admin/usage?license=small&from=2027-01-01T00:00:00Z&to=2027-01-01T00:00:00Z",
            400,
            "invalid_request",
        ),
        (
            "/v1/admin/usage?license=small&step=1s",
            400,
            "invalid_request",
        ),
        (
            "/v1/admin/usage?license=small&step=0s",
            400,
            "invalid_request",
        ),
        (
            "/v1/admin/usage?license=small&step=soon",
            400,
            "invalid_request",
        ),
        (
            "/v1/admin/usage?license=small&step=99999999999999999h",
            400,
            "invalid_request",
        ),
        (
            "/v1/admin/usage?license=small&from=yesterday",
            400,
            "invalid_request",
        ),
        ("/v1/admin/sessions", 400, "invalid_request"),
        ("/v1/admin/sessions?license=nope", 404, "unknown_license"),
        (
            "/v1/admin/sessions?license=small&after=zz",
            400,
            "invalid_request",
        ),
        (
            "/v1/admin/sessions?license=small&after=3a",
            400,
            "invalid_request",
        ),
        (
            "/v1/admin/sessions?license=small&limit=10001",
            400,
            "invalid_request",
        ),
        (
            "/v1/admin/sessions?license=small&limit=0",
            400,
            "invalid_request",
        ),
        (
            "/v1/admin/sessions?license=small&limit=-1",
            400,
            "invalid_request",
        ),
        (
            "/v1/admin/sessions?license=small&format=xml",
            400,
            "invalid_request",
        ),
        (
            "/v1/admin/sessions?license=small&from=2027-01-02T00:00:00Z&to=2027-01-01T00:00:00Z",
            400,
            "invalid_request",
        ),
    ];
    for (path, status, code) in cases {
        let (got, body) = s.admin_try(path).await;
        assert_eq!(
            (got, body["error"].as_str()),
            (*status, Some(*code)),
            "{path}: {body}"
        );
    }
    // Absurd but valid: a step longer than the range, a range from year 1.
    let u = s
        .admin_get("/v1/admin/usage?license=small&step=100000000d")
        .await;
    assert_eq!(u["points"].as_array().unwrap().len(), 1);
    let u = s
        .admin_get("/v1/admin/usage?license=small&from=0001-01-01T00:00:00Z")
        .await;
    assert!(u["points"].as_array().unwrap().len() <= 500);
    assert_eq!(
        s.admin_get("/v1/admin/sessions?license=small&limit=10000")
            .await["sessions"],
        json!([])
    );
    // Without the admin token: 401 before any validation.
    let resp = s
        .client()
        .get(s.url("/v1/admin/usage"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 401);
}

/// Split CSV text into records of cells (RFC 4180, as a spreadsheet reads it).
fn parse_csv(text: &str) -> Vec<Vec<String>> {
    let (mut records, mut record, mut cell) = (Vec::new(), Vec::new(), String::new());
    let mut chars = text.chars().peekable();
    let mut quoted = false;
    while let Some(c) = chars.next() {
        match (quoted, c) {
            (true, '"') if chars.peek() == Some(&'"') => {
                chars.next();
                cell.push('"');
            }
            (true, '"') => quoted = false,
            (true, c) => cell.push(c),
            (false, '"') => quoted = true,
            (false, ',') => record.push(std::mem::take(&mut cell)),
            (false, '\r') if chars.peek() == Some(&'\n') => {
                chars.next();
                record.push(std::mem::take(&mut cell));
                records.push(std::mem::take(&mut record));
            }
            (false, c) => cell.push(c),
        }
    }
    assert!(
        cell.is_empty() && record.is_empty(),
        "the last record ends with CRLF"
    );
    records
}

async fn csv(s: &Server, path: &str, accept: Option<&str>) -> (String, Vec<Vec<String>>) {
    let mut req = s.admin(reqwest::Method::GET, path);
    if let Some(a) = accept {
        req = req.header("accept", a);
    }
    let resp = req.send().await.unwrap();
    assert_eq!(resp.status(), 200, "{path}");
    let content_type = resp.headers()["content-type"].to_str().unwrap().to_string();
    let text = resp.text().await.unwrap();
    (content_type, parse_csv(&text))
}

#[tokio::test]
async fn csv_is_safe_in_a_spreadsheet() {
    let s = Server::start(&licenses()).await;
    let holders = ["=HYPERLINK(\"x\")", "+1", "-2", "@a", "a,b \"c\"", "plain"];
    for h in holders {
        s.take_seat("big", "big-key", json!({"holder": h})).await;
    }
    let (content_type, records) = csv(&s, "/v1/admin/sessions?license=big", Some("text/csv")).await;
    assert!(content_type.starts_with("text/csv"), "{content_type}");
    assert_eq!(
        records[0],
        [
            "seat_id",
            "license_id",
            "holder",
            "fingerprint",
            "started_at",
            "ended_at",
            "end",
            "duration_s",
            "group",
            "borrowed",
            "idle_s"
        ]
    );
    let got: HashSet<&str> = records[1..].iter().map(|r| r[2].as_str()).collect();
    let want: HashSet<&str> = [
        "'=HYPERLINK(\"x\")",
        "'+1",
        "'-2",
        "'@a",
        "a,b \"c\"",
        "plain",
    ]
    .into();
    assert_eq!(got, want);
    assert!(records[1..].iter().all(|r| r.len() == 11
        && r[1] == "big"
        && r[5].is_empty()
        && r[8].is_empty()
        && r[9] == "false"
        && r[10] == "0"));
    let (_, same) = csv(&s, "/v1/admin/sessions?license=big&format=csv", None).await;
    assert_eq!(same.len(), records.len());
}

#[tokio::test]
async fn pages_and_csv_cover_the_range_once() {
    let s = Server::start(&licenses()).await;
    // More sessions than one CSV page (1000) of the store.
    let taken: Vec<String> = stream::iter(0..1100)
        .map(|i| {
            let s = &s;
            async move {
                s.take_seat("big", "big-key", json!({"holder": format!("h{i}")}))
                    .await
                    .seat_id
            }
        })
        .buffer_unordered(32)
        .collect()
        .await;
    let taken: HashSet<String> = taken.into_iter().collect();

    let mut paged = Vec::new();
    let mut path = "/v1/admin/sessions?license=big&limit=400".to_string();
    loop {
        let v = s.admin_get(&path).await;
        paged.extend(
            sessions_of(&v)
                .iter()
                .map(|x| x["seat_id"].as_str().unwrap().to_string()),
        );
        match v["next"].as_str() {
            Some(next) => path = format!("/v1/admin/sessions?license=big&limit=400&after={next}"),
            None => break,
        }
    }
    assert_eq!(paged.len(), 1100);
    assert_eq!(paged.iter().cloned().collect::<HashSet<_>>(), taken);

    let (_, records) = csv(&s, "/v1/admin/sessions?license=big", Some("text/csv")).await;
    let streamed: Vec<String> = records[1..].iter().map(|r| r[0].clone()).collect();
    assert_eq!(streamed, paged, "the same sessions in the same order");
}

#[tokio::test]
async fn sessions_survive_a_kill9_restart() {
    let mut s = Server::start(&licenses()).await;
    let a = s
        .take_seat("small", "small-key", json!({"holder": "a"}))
        .await;
    let b = s
        .take_seat("small", "small-key", json!({"holder": "b"}))
        .await;
    assert_eq!(
        s.release("small", "small-key", &a.seat_id).await.status(),
        204
    );
    s.restart().await;
    let c = s
        .take_seat("small", "small-key", json!({"holder": "c"}))
        .await;
    let v = s.admin_get("/v1/admin/sessions?license=small").await;
    let list = sessions_of(&v);
    let ids: Vec<&str> = list
        .iter()
        .map(|x| x["seat_id"].as_str().unwrap())
        .collect();
    // Neither lost nor doubled: c is newest; a and b may share a millisecond.
    assert_eq!(ids.len(), 3, "{v}");
    assert_eq!(ids[0], c.seat_id.as_str());
    let before: HashSet<&str> = ids[1..].iter().copied().collect();
    assert_eq!(before, [a.seat_id.as_str(), b.seat_id.as_str()].into());
    let end_of = |seat: &str| list.iter().find(|x| x["seat_id"] == seat).unwrap()["end"].clone();
    assert_eq!(end_of(&a.seat_id), "release");
    assert!(
        end_of(&b.seat_id).is_null() && end_of(&c.seat_id).is_null(),
        "{v}"
    );
    let u = s.admin_get("/v1/admin/usage?license=small").await;
    assert_eq!(u["summary"]["holders"], 3);
    assert_eq!(u["summary"]["peak"], 2);
}
