//! Honest denials against the real `leaseholdd`: every counted refusal
//! recorded with its reason, holder, fingerprint and instant
//! (`GET /v1/admin/denials`, JSON pages and CSV), true denials at a
//! tolerance, and the same counts in `GET /v1/admin/usage`
//! (`denials_by_reason`, `true_denials`). Who may read, and bad input.

use std::time::{Duration, Instant};

use futures_util::{StreamExt, stream};
use leasehold_common::Timestamp;
use leasehold_tests::{Server, license_toml};
use serde_json::{Value, json};

/// `one`: a pool of one seat. `rules`: ten seats behind every other
/// refusal — a holder cap of 1, an allow list, a group `team` of at most
/// 1, and one seat to borrow.
const LICENSES: &str = concat!(
    license_toml!(
        "one",
        seats = 1,
        ttl = "60s",
        skew = "5s",
        reap_grace = "15s"
    ),
    r#"
[[license]]
id = "rules"
key = "rules-key"
seats = 10
ttl = "60s"
skew = "5s"
reap_grace = "15s"
max_per_holder = 1
allow = ["u-*", "@team"]

[[license.group]]
name = "team"
holders = ["t-*"]
max = 1

[license.borrow]
max = "1d"
seats = 1
"#
);

async fn checkout(s: &Server, license: &str, body: Value) -> (u16, Value) {
    let resp = s.checkout(license, &format!("{license}-key"), body).await;
    let status = resp.status().as_u16();
    (status, resp.json().await.expect("a JSON body"))
}

/// A checkout that must be refused with `status` and `error`. Refusals in
/// one millisecond are listed by holder; the pause after each keeps the
/// tests' refusals in the order they were made.
async fn refused(s: &Server, license: &str, body: Value, status: u16, error: &str) -> Value {
    let (got, answer) = checkout(s, license, body.clone()).await;
    tokio::time::sleep(Duration::from_millis(3)).await;
    assert_eq!(
        (got, answer["error"].as_str()),
        (status, Some(error)),
        "{license} {body}: {answer}"
    );
    answer
}

fn denials_of(v: &Value) -> &Vec<Value> {
    v["denials"].as_array().expect("denials")
}

/// `(holder, reason, true)` of each listed refusal, in order.
fn summary(v: &Value) -> Vec<(String, String, bool)> {
    denials_of(v)
        .iter()
        .map(|d| {
            (
                d["holder"].as_str().unwrap().to_string(),
                d["reason"].as_str().unwrap().to_string(),
                d["true"].as_bool().expect("true is a boolean"),
            )
        })
        .collect()
}

fn owned(rows: &[(&str, &str, bool)]) -> Vec<(String, String, bool)> {
    rows.iter()
        .map(|(h, r, t)| (h.to_string(), r.to_string(), *t))
        .collect()
}

#[tokio::test]
async fn a_refusal_followed_by_a_grant_within_the_tolerance_is_not_a_true_denial() {
    let s = Server::start(LICENSES).await;
    let ann = s
        .take_seat(
            "one",
            "one-key",
            json!({"holder": "ann", "fingerprint": "a1"}),
        )
        .await;
    let full = json!({"holder": "bob", "fingerprint": "b1"});
    refused(&s, "one", full.clone(), 409, "no_seats_available").await;
    assert_eq!(
        s.release("one", "one-key", &ann.seat_id).await.status(),
        204
    );
    let bob = s.take_seat("one", "one-key", full).await;
    // cy never gets a seat: a true denial at any tolerance.
    refused(
        &s,
        "one",
        json!({"holder": "cy"}),
        409,
        "no_seats_available",
    )
    .await;
    // dee gets one more than two seconds after her refusal.
    refused(
        &s,
        "one",
        json!({"holder": "dee"}),
        409,
        "no_seats_available",
    )
    .await;
    tokio::time::sleep(Duration::from_millis(2100)).await;
    assert_eq!(
        s.release("one", "one-key", &bob.seat_id).await.status(),
        204
    );
    s.take_seat("one", "one-key", json!({"holder": "dee"}))
        .await;

    // The default tolerance is 60 s: bob's and dee's refusals were not
    // true denials; newest first.
    let v = s.admin_get("/v1/admin/denials?license=one").await;
    assert!(v["next"].is_null(), "{v}");
    let want = [
        ("dee", "full", false),
        ("cy", "full", true),
        ("bob", "full", false),
    ];
    assert_eq!(summary(&v), owned(&want), "{v}");
    let list = denials_of(&v);
    let bob_denial = &list[2];
    assert_eq!(bob_denial["license_id"], "one");
    assert_eq!(bob_denial["fingerprint"], "b1");
    assert!(list[1]["fingerprint"].is_null(), "cy sent none: {v}");
    let at = |d: &Value| Timestamp::parse_rfc3339(d["at"].as_str().unwrap()).expect("RFC 3339");
    assert!(at(&list[0]) >= at(&list[1]) && at(&list[1]) >= at(&list[2]));

    // At 0 s every refusal is true; at 2 s, dee's (granted 2.1 s later) too,
    // not bob's (granted at once).
    let v = s
        .admin_get("/v1/admin/denials?license=one&tolerance=0s")
        .await;
    let want = [
        ("dee", "full", true),
        ("cy", "full", true),
        ("bob", "full", true),
    ];
    assert_eq!(summary(&v), owned(&want), "{v}");
    let v = s
        .admin_get("/v1/admin/denials?license=one&tolerance=2s")
        .await;
    let want = [
        ("dee", "full", true),
        ("cy", "full", true),
        ("bob", "full", false),
    ];
    assert_eq!(summary(&v), owned(&want), "{v}");

    // A grant after the queried range still makes a refusal in it false.
    let dee_at = at(&denials_of(&s.admin_get("/v1/admin/denials?license=one").await)[0]);
    let to = dee_at
        .saturating_add(Duration::from_millis(500))
        .to_rfc3339();
    let v = s
        .admin_get(&format!("/v1/admin/denials?license=one&to={to}"))
        .await;
    assert_eq!(summary(&v)[0], ("dee".into(), "full".into(), false), "{v}");

    // The usage counts the same, by reason, at the same tolerances.
    for (tolerance, true_denials) in [("", 1), ("&tolerance=60s", 1), ("&tolerance=0s", 3)] {
        let u = s
            .admin_get(&format!("/v1/admin/usage?license=one{tolerance}"))
            .await;
        let sum = &u["summary"];
        assert_eq!(sum["denials"], 3, "{u}");
        assert_eq!(sum["true_denials"], true_denials, "{tolerance}: {u}");
        assert_eq!(sum["denials_by_reason"], by_reason(3, 0, 0, 0, 0, 0), "{u}");
        let points = u["points"].as_array().unwrap();
        let total = |f: &dyn Fn(&Value) -> u64| points.iter().map(f).sum::<u64>();
        assert_eq!(
            total(&|p| p["true_denials"].as_u64().unwrap()),
            true_denials
        );
        assert_eq!(
            total(&|p| p["denials_by_reason"]["full"].as_u64().unwrap()),
            3
        );
    }
}

fn by_reason(
    full: u64,
    holder: u64,
    group: u64,
    borrow: u64,
    not_allowed: u64,
    blocked: u64,
) -> Value {
    json!({
        "full": full, "holder": holder, "group": group, "borrow": borrow,
        "not_allowed": not_allowed, "blocked": blocked,
        // A license without a vendor: always zero, always present.
        "version": 0, "entitlement": 0,
    })
}

/// Refuse one checkout of `rules` for each reason but `full` (and one
/// `?wait=` checkout of a holder not allowed); the holders, oldest first.
async fn refuse_for_every_cap(s: &Server) {
    let c = |holder: &str, fingerprint: &str| json!({"holder": holder, "fingerprint": fingerprint});
    s.take_seat("rules", "rules-key", c("u-ann", "f1")).await;
    let body = refused(s, "rules", c("u-ann", "f2"), 409, "limit_reached").await;
    assert_eq!(body["limit"], "holder");
    s.take_seat("rules", "rules-key", c("t-1", "t1")).await;
    let body = refused(s, "rules", c("t-2", "t2"), 409, "limit_reached").await;
    assert_eq!(body["limit"], "group");
    refused(s, "rules", c("outsider", "o1"), 403, "not_allowed").await;
    let borrow = |holder: &str, fingerprint: &str| json!({"holder": holder, "fingerprint": fingerprint, "borrow_s": 3600});
    s.take_seat("rules", "rules-key", borrow("u-bo", "b1"))
        .await;
    let body = refused(s, "rules", borrow("u-cy", "c1"), 409, "limit_reached").await;
    assert_eq!(body["limit"], "borrow");
    let dee = s.take_seat("rules", "rules-key", c("u-dee", "d1")).await;
    let revoke = s
        .revoke(&dee.seat_id)
        .json(&json!({"reason": "test", "block_s": 60}))
        .send()
        .await
        .unwrap();
    assert_eq!(revoke.status(), 204);
    refused(s, "rules", c("u-dee", "d1"), 403, "blocked").await;
    // A refusal that waiting cannot cure is final at once: counted once.
    let started = Instant::now();
    let resp = s
        .client()
        .post(s.url("/v1/licenses/rules/seats?wait=5"))
        .bearer_auth("rules-key")
        .json(&c("stranger", "s1"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 403);
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "refused at once"
    );
}

#[tokio::test]
async fn every_reason_is_recorded_listed_and_counted() {
    let s = Server::start(LICENSES).await;
    refuse_for_every_cap(&s).await;
    let v = s.admin_get("/v1/admin/denials?license=rules").await;
    // Newest first; none of these is a shortage, so none is true.
    let want = [
        ("stranger", "not_allowed", false),
        ("u-dee", "blocked", false),
        ("u-cy", "borrow", false),
        ("outsider", "not_allowed", false),
        ("t-2", "group", false),
        ("u-ann", "holder", false),
    ];
    assert_eq!(summary(&v), owned(&want), "{v}");
    let fingerprints: Vec<&str> = denials_of(&v)
        .iter()
        .map(|d| d["fingerprint"].as_str().unwrap())
        .collect();
    assert_eq!(fingerprints, ["s1", "d1", "c1", "o1", "t2", "f2"]);
    // Even at a tolerance of 0 s: only `full` refusals can be true.
    let zero = s
        .admin_get("/v1/admin/denials?license=rules&tolerance=0s")
        .await;
    assert_eq!(summary(&zero), owned(&want));

    let (content_type, records) = csv(&s, "/v1/admin/denials?license=rules&format=csv", None).await;
    assert!(content_type.starts_with("text/csv"), "{content_type}");
    assert_eq!(
        records[0],
        [
            "at",
            "license_id",
            "holder",
            "fingerprint",
            "reason",
            "true"
        ]
    );
    assert_eq!(records[1..], csv_of(&v)[..]);

    let u = s.admin_get("/v1/admin/usage?license=rules").await;
    let sum = &u["summary"];
    assert_eq!(sum["denials"], 6, "{u}");
    assert_eq!(sum["true_denials"], 0, "{u}");
    assert_eq!(sum["denials_by_reason"], by_reason(0, 1, 1, 1, 2, 1), "{u}");
    let points = u["points"].as_array().unwrap();
    let not_allowed: u64 = points
        .iter()
        .map(|p| p["denials_by_reason"]["not_allowed"].as_u64().unwrap())
        .sum();
    assert_eq!(not_allowed, 2, "the ?wait= refusal counted once");
}

#[tokio::test]
async fn a_wait_that_runs_out_counts_once() {
    let s = Server::start(LICENSES).await;
    s.take_seat("one", "one-key", json!({"holder": "ann"}))
        .await;
    let started = Instant::now();
    let resp = s
        .client()
        .post(s.url("/v1/licenses/one/seats?wait=1"))
        .bearer_auth("one-key")
        .json(&json!({"holder": "eve"}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 409);
    assert!(started.elapsed() >= Duration::from_secs(1), "it waited");
    let v = s.admin_get("/v1/admin/denials?license=one").await;
    assert_eq!(summary(&v), owned(&[("eve", "full", true)]), "{v}");
    let u = s.admin_get("/v1/admin/usage?license=one").await;
    assert_eq!(
        u["summary"]["denials_by_reason"],
        by_reason(1, 0, 0, 0, 0, 0)
    );
}

#[tokio::test]
async fn pages_and_csv_list_every_refusal_once_and_csv_is_safe() {
    let s = Server::start(LICENSES).await;
    s.take_seat("one", "one-key", json!({"holder": "ann"}))
        .await;
    // A storm from one machine (many refusals with the same holder,
    // fingerprint and reason, some in the same millisecond; more than the
    // server's CSV reads at once), and holders a spreadsheet would run as
    // formulas.
    let storm: Vec<u16> = stream::iter(0..1050)
        .map(|_| {
            let s = &s;
            async move {
                checkout(s, "one", json!({"holder": "storm", "fingerprint": "s"}))
                    .await
                    .0
            }
        })
        .buffer_unordered(32)
        .collect()
        .await;
    assert!(storm.iter().all(|st| *st == 409));
    let formulas = ["=HYPERLINK(\"x\")", "+1", "-2", "@a", "a,b \"c\""];
    for h in formulas {
        refused(&s, "one", json!({"holder": h}), 409, "no_seats_available").await;
    }

    let all = s
        .admin_get("/v1/admin/denials?license=one&limit=10000")
        .await;
    assert_eq!(denials_of(&all).len(), 1055);
    assert!(all["next"].is_null());
    let mut paged = Vec::new();
    let mut path = "/v1/admin/denials?license=one&limit=300".to_string();
    let mut pages = 0;
    loop {
        let v = s.admin_get(&path).await;
        pages += 1;
        assert!(denials_of(&v).len() <= 300);
        paged.extend(denials_of(&v).iter().cloned());
        match v["next"].as_str() {
            Some(next) => path = format!("/v1/admin/denials?license=one&limit=300&after={next}"),
            None => break,
        }
    }
    assert_eq!(pages, 4);
    assert_eq!(
        &paged,
        denials_of(&all),
        "the same refusals in the same order"
    );

    let (_, records) = csv(&s, "/v1/admin/denials?license=one", Some("text/csv")).await;
    assert_eq!(records[1..], csv_of(&all)[..]);
    let holders: Vec<&str> = records[1..6].iter().map(|r| r[2].as_str()).collect();
    assert_eq!(
        holders,
        ["a,b \"c\"", "'@a", "'-2", "'+1", "'=HYPERLINK(\"x\")"]
    );
}

#[tokio::test]
async fn a_viewer_may_read_a_client_may_not() {
    let s = Server::start(LICENSES).await;
    s.take_seat("one", "one-key", json!({"holder": "ann"}))
        .await;
    refused(
        &s,
        "one",
        json!({"holder": "bob"}),
        409,
        "no_seats_available",
    )
    .await;
    let get =
        |token: String, path: &'static str| s.client().get(s.url(path)).bearer_auth(token).send();
    let viewer = get(s.viewer_token(), "/v1/admin/denials?license=one")
        .await
        .unwrap();
    assert_eq!(viewer.status(), 200);
    let v: Value = viewer.json().await.unwrap();
    assert_eq!(summary(&v), owned(&[("bob", "full", true)]));
    let viewer_csv = get(s.viewer_token(), "/v1/admin/denials?license=one&format=csv")
        .await
        .unwrap();
    assert_eq!(viewer_csv.status(), 200);
    for path in [
        "/v1/admin/denials?license=one",
        "/v1/admin/denials?license=one&format=csv",
    ] {
        let client = get("one-key".into(), path).await.unwrap();
        assert_eq!(client.status(), 401, "a license key is no admin token");
        let none = s.client().get(s.url(path)).send().await.unwrap();
        assert_eq!(none.status(), 401);
    }
    let post = s
        .admin(reqwest::Method::POST, "/v1/admin/denials?license=one")
        .send()
        .await
        .unwrap();
    assert_eq!(post.status(), 405);
    assert_eq!(post.headers()["allow"], "GET");
}

#[tokio::test]
async fn bad_input_is_400_naming_the_parameter() {
    let s = Server::start(LICENSES).await;
    let range = "from=2027-01-02T00:00:00Z&to=2027-01-01T00:00:00Z";
    let cases: &[(&str, &str)] = &[
        ("", "license"),
        ("license=", "license"),
        ("license=one&from=yesterday", "from"),
        ("license=one&to=soon", "to"),
        ("license=one&limit=0", "limit"),
        ("license=one&limit=10001", "limit"),
        ("license=one&limit=-1", "limit"),
        ("license=one&limit=x", "limit"),
        ("license=one&after=zz", "after"),
        ("license=one&after=3a", "after"),
        ("license=one&format=xml", "format"),
        ("license=one&tolerance=", "tolerance"),
        ("license=one&tolerance=soon", "tolerance"),
        ("license=one&tolerance=-1s", "tolerance"),
        ("license=one&tolerance=2h", "tolerance"),
        ("license=one&tolerance=3601s", "tolerance"),
        ("license=one&tolerance=1%20h", "tolerance"),
        ("license=one&tolerance=99999999999999999999h", "tolerance"),
    ];
    for (query, param) in cases {
        for endpoint in ["denials", "usage"] {
            // The usage endpoint has no page: only its range and tolerance.
            let paged = ["limit", "after", "format"].contains(param);
            if endpoint == "usage" && paged {
                continue;
            }
            let path = format!("/v1/admin/{endpoint}?{query}");
            let (status, body) = s.admin_try(&path).await;
            assert_eq!(
                (status, body["error"].as_str()),
                (400, Some("invalid_request")),
                "{path}: {body}"
            );
            let message = body["message"].as_str().unwrap();
            assert!(message.contains(param), "{path}: {message}");
        }
    }
    let (status, body) = s
        .admin_try(&format!("/v1/admin/denials?license=one&{range}"))
        .await;
    assert_eq!(
        (status, body["error"].as_str()),
        (400, Some("invalid_request"))
    );
    let (status, body) = s.admin_try("/v1/admin/denials?license=nope").await;
    assert_eq!(
        (status, body["error"].as_str()),
        (404, Some("unknown_license"))
    );
    // The edges of what is accepted.
    for tolerance in ["0s", "0", "3600s", "1h", "60m", "500ms"] {
        for endpoint in ["denials", "usage"] {
            s.admin_get(&format!(
                "/v1/admin/{endpoint}?license=one&tolerance={tolerance}"
            ))
            .await;
        }
    }
    let v = s
        .admin_get("/v1/admin/denials?license=one&limit=10000&after=")
        .await;
    assert_eq!(v, json!({"denials": [], "next": null}));
}

/// The JSON list as the CSV should hold it (formula cells prefixed).
fn csv_of(v: &Value) -> Vec<Vec<String>> {
    let safe = |s: &str| {
        if s.starts_with(['=', '+', '-', '@', '\t', '\r']) {
            format!("'{s}")
        } else {
            s.to_string()
        }
    };
    denials_of(v)
        .iter()
        .map(|d| {
            vec![
                d["at"].as_str().unwrap().to_string(),
                d["license_id"].as_str().unwrap().to_string(),
                safe(d["holder"].as_str().unwrap()),
                safe(d["fingerprint"].as_str().unwrap_or("")),
                d["reason"].as_str().unwrap().to_string(),
                d["true"].as_bool().unwrap().to_string(),
            ]
        })
        .collect()
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
