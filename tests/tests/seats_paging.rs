//! The admin seats list (`GET /v1/admin/seats`) against the real
//! `leaseholdd`: filters, sort, keyset pages and bad paging input, as the
//! store answers them. Runs on the store `LEASEHOLD_TEST_STORE` names.

use leasehold_tests::{Server, license_toml};
use reqwest::Method;
use serde_json::{Value, json};

#[rustfmt::skip]
const LICENSES: &str = concat!(
    license_toml!("small", seats = 5, ttl = "60s", skew = "5s", reap_grace = "15s"),
    license_toml!("big", seats = 1000, ttl = "60s", skew = "5s", reap_grace = "15s"),
);

fn seat_count(v: &Value) -> usize {
    v["seats"].as_array().expect("seats").len()
}

async fn error_code(resp: reqwest::Response) -> String {
    let v: Value = resp.json().await.expect("json error");
    v["error"].as_str().expect("error code").to_string()
}

/// Every page of `path` (which has `limit=`), following `next`.
async fn all_pages(server: &Server, path: &str) -> (Vec<Value>, usize) {
    let mut seats = Vec::new();
    let mut pages = 0;
    let mut url = path.to_string();
    loop {
        let v = server.admin_get(&url).await;
        pages += 1;
        assert_eq!(v["total"].as_u64(), Some(300), "{url}");
        seats.extend(v["seats"].as_array().unwrap().iter().cloned());
        match v["next"].as_str() {
            Some(next) => url = format!("{path}&after={next}"),
            None => return (seats, pages),
        }
        assert!(pages < 100, "paging does not end: {path}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn seats_are_filtered_sorted_and_paged_by_the_store() {
    let server = Server::start(LICENSES).await;
    for i in 0..300 {
        let holder = if i % 10 == 0 {
            format!("Alice-{i:03}")
        } else {
            format!("user-{:03}", (i * 7) % 300)
        };
        let license = if i % 3 == 0 { "small" } else { "big" };
        if license == "small" && i >= 15 {
            // small has 5 seats: the rest go to big.
            server
                .take_seat(
                    "big",
                    "big-key",
                    json!({"holder": holder, "fingerprint": format!("fp-{i}")}),
                )
                .await;
            continue;
        }
        server
            .take_seat(
                license,
                &format!("{license}-key"),
                json!({"holder": holder, "fingerprint": format!("fp-{i}")}),
            )
            .await;
    }

    // Without limit: everything, as before, plus total and next.
    let all = server.admin_get("/v1/admin/seats").await;
    assert_eq!(seat_count(&all), 300);
    assert_eq!(all["total"], 300);
    assert!(all["next"].is_null());
    let all: Vec<Value> = all["seats"].as_array().unwrap().clone();

    let key = |s: &Value, sort: &str| -> (String, i64, String) {
        let ms = |f: &str| {
            leasehold_common::Timestamp::parse_rfc3339(s[f].as_str().unwrap())
                .unwrap()
                .as_millis()
        };
        let id = s["seat_id"].as_str().unwrap().to_string();
        match sort {
            "license" => (
                s["license_id"].as_str().unwrap().into(),
                ms("checked_out_at"),
                id,
            ),
            "holder" => (s["holder"].as_str().unwrap().into(), 0, id),
            "expires_at" => (String::new(), ms("expires_at"), id),
            _ => (String::new(), ms("checked_out_at"), id),
        }
    };
    let ids = |v: &[Value]| -> Vec<String> {
        v.iter()
            .map(|s| s["seat_id"].as_str().unwrap().to_string())
            .collect()
    };
    {
        let mut expected = all.clone();
        expected.sort_by_key(|s| key(s, "license"));
        assert_eq!(ids(&all), ids(&expected), "the order without sort");
    }
    for sort in ["license", "holder", "expires_at", "checked_out_at"] {
        for order in ["asc", "desc"] {
            let mut expected = all.clone();
            expected.sort_by_key(|s| key(s, sort));
            if order == "desc" {
                expected.reverse();
            }
            let (got, pages) = all_pages(
                &server,
                &format!("/v1/admin/seats?sort={sort}&order={order}&limit=37"),
            )
            .await;
            assert_eq!(pages, 9, "{sort} {order}");
            assert_eq!(ids(&got), ids(&expected), "{sort} {order}");
        }
    }

    // Filters: q (case-insensitive, holder / fingerprint / license id /
    // seat id) and license, with total counting the matches.
    let v = server.admin_get("/v1/admin/seats?q=aLiCe&limit=7").await;
    assert_eq!(v["total"], 30);
    assert_eq!(seat_count(&v), 7);
    assert!(v["next"].is_string());
    let v = server.admin_get("/v1/admin/seats?q=FP-29").await;
    // fp-29, fp-290..fp-299
    assert_eq!(v["total"], 11);
    let one = all[123]["seat_id"].as_str().unwrap();
    let v = server
        .admin_get(&format!("/v1/admin/seats?q={}", &one[..16].to_uppercase()))
        .await;
    assert_eq!(v["total"], 1);
    assert_eq!(v["seats"][0]["seat_id"], one);
    let v = server
        .admin_get("/v1/admin/seats?license=small&sort=holder&limit=2")
        .await;
    assert_eq!(v["total"], 5);
    assert_eq!(seat_count(&v), 2);
    // No holder, fingerprint or (hex) seat id contains "small": the
    // license id's five seats.
    let v = server.admin_get("/v1/admin/seats?q=SmAlL").await;
    assert_eq!(v["total"], 5);
    assert!(
        v["seats"]
            .as_array()
            .unwrap()
            .iter()
            .all(|s| s["license_id"] == "small")
    );
    let v = server.admin_get("/v1/admin/seats?q=nobody-at-all").await;
    assert_eq!(v["total"], 0);
    assert_eq!(seat_count(&v), 0);
    assert!(v["next"].is_null());
    let v = server.admin_get("/v1/admin/seats?limit=10000").await;
    assert_eq!(seat_count(&v), 300);
    assert!(v["next"].is_null());

    // Bad input: 400, invalid_request.
    let holder_cursor = server
        .admin_get("/v1/admin/seats?sort=holder&limit=1")
        .await["next"]
        .as_str()
        .unwrap()
        .to_string();
    for bad in [
        "sort=name".to_string(),
        "sort=".to_string(),
        "order=up".to_string(),
        "limit=0".to_string(),
        "limit=10001".to_string(),
        "limit=-1".to_string(),
        "limit=ten".to_string(),
        "after=not-a-cursor".to_string(),
        "after=7b7d".to_string(),
        format!("sort=expires_at&limit=5&after={holder_cursor}"),
        format!("sort=holder&order=desc&limit=5&after={holder_cursor}"),
        format!("q={}", "x".repeat(300)),
    ] {
        let resp = server
            .admin(Method::GET, &format!("/v1/admin/seats?{bad}"))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 400, "{bad}");
        assert_eq!(error_code(resp).await, "invalid_request", "{bad}");
    }
}
