//! `GET /v1/admin/usage/what-if` against the real `leaseholdd`: a small
//! recorded history replayed against 1 to 4 seats, checked against values
//! worked out by hand from the sessions' recorded times; the tolerance of a
//! true denial; a viewer may read it; bad input is a 400 naming the
//! parameter, an unknown license a 404. The replay's rules themselves are
//! property-tested in `server/src/usage/what_if/tests.rs`.

use std::time::Duration;

use leasehold_common::Timestamp;
use leasehold_tests::{Server, license_toml};
use serde_json::{Value, json};

/// Three seats; the history below uses them all and is refused once.
const WI: &str = license_toml!(
    "wi",
    seats = 3,
    ttl = "60s",
    skew = "5s",
    reap_grace = "15s"
);

fn ms(v: &Value) -> i64 {
    let text = v.as_str().unwrap_or_else(|| panic!("a time: {v}"));
    Timestamp::parse_rfc3339(text)
        .expect("RFC 3339")
        .as_millis()
}

/// Let the server's clock move on, so the events below have distinct
/// instants and their order is the order they were sent in.
async fn tick() {
    tokio::time::sleep(Duration::from_millis(25)).await;
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * b.abs().max(1.0)
}

/// `a` holds a seat over `[t1, t5)`, `b` over `[t2, t4)`, `c` from `t3` on
/// (still held); `d` is refused at `td` (`t3 < td < t4`), all three seats
/// taken, and never gets one: a true denial.
#[tokio::test]
async fn the_curve_replays_the_recorded_history() {
    let s = Server::start(WI).await;
    let a = s.take_seat("wi", "wi-key", json!({"holder": "a"})).await;
    tick().await;
    let b = s.take_seat("wi", "wi-key", json!({"holder": "b"})).await;
    tick().await;
    s.take_seat("wi", "wi-key", json!({"holder": "c"})).await;
    tick().await;
    let refused = s.checkout("wi", "wi-key", json!({"holder": "d"})).await;
    assert_eq!(refused.status(), 409);
    tick().await;
    assert_eq!(s.release("wi", "wi-key", &b.seat_id).await.status(), 204);
    tick().await;
    assert_eq!(s.release("wi", "wi-key", &a.seat_id).await.status(), 204);
    tick().await;

    let v = s
        .admin_get("/v1/admin/usage/what-if?license=wi&target=0")
        .await;
    let sessions = s.admin_get("/v1/admin/sessions?license=wi").await;
    let started = |holder: &str| -> (i64, Option<i64>) {
        let row = sessions["sessions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["holder"] == holder)
            .unwrap_or_else(|| panic!("{holder}'s session in {sessions}"));
        (
            ms(&row["started_at"]),
            row["ended_at"].as_str().map(|_| ms(&row["ended_at"])),
        )
    };
    let ((t1, t5), (t2, t4), (t3, open)) = (started("a"), started("b"), started("c"));
    let (t4, t5) = (t4.unwrap(), t5.unwrap());
    assert!(
        open.is_none() && t1 < t2 && t2 < t3 && t3 < t4 && t4 < t5,
        "{sessions}"
    );

    assert_eq!(v["license_id"], "wi");
    assert_eq!(v["seats_now"], 3);
    assert_eq!(
        (
            &v["sessions"],
            &v["true_denials"],
            &v["idle_cut"],
            &v["requests"]
        ),
        (&json!(3), &json!(1), &json!(0), &json!(4)),
        "{v}"
    );
    let (covered_from, to) = (ms(&v["covered_from"]), ms(&v["to"]));
    assert!(covered_from <= t1 && to >= t5, "{v}");
    let span = (to - covered_from) as f64;
    // k = 1: a only. k = 2: a and b; c and d refused. k = 3: d refused
    // with a, b and c in use. k = 4: nothing refused.
    let curve = v["curve"].as_array().expect("curve");
    let seats: Vec<&Value> = curve.iter().map(|p| &p["seats"]).collect();
    assert_eq!(
        seats,
        [&json!(1), &json!(2), &json!(3), &json!(4)],
        "default 1..=peak"
    );
    let expected: [(u64, f64, u64, i64, i64); 3] = [
        (3, 75.0, 1, t5 - t1, t5 - t1),
        (2, 50.0, 2, t4 - t2, (t5 - t1) + (t4 - t2)),
        (1, 25.0, 3, t4 - t3, (t5 - t1) + (t4 - t2) + (to - t3)),
    ];
    for (k, (p, (denials, rate, peak, full_ms, used_ms))) in curve.iter().zip(expected).enumerate()
    {
        let k = k as f64 + 1.0;
        assert_eq!(p["denials"], denials, "{p}");
        assert_eq!(p["denial_rate"].as_f64(), Some(rate), "{p}");
        assert_eq!(p["peak"], peak, "{p}");
        assert!(
            close(p["full_s"].as_f64().unwrap(), full_ms as f64 / 1000.0),
            "{p}"
        );
        let utilization = used_ms as f64 / (k * span);
        assert!(
            close(p["utilization"].as_f64().unwrap(), utilization),
            "{p}: {utilization}"
        );
    }
    let four = &curve[3];
    assert_eq!(
        (&four["denials"], &four["peak"]),
        (&json!(0), &json!(4)),
        "{four}"
    );
    assert_eq!(v["recommended"], json!({"seats": 4, "denial_rate": 0.0}));

    // A target met by three seats; an explicit range; no recorded idleness
    // to cut.
    let v = s
        .admin_get("/v1/admin/usage/what-if?license=wi&seats=2..3&target=25&idle_timeout=1s")
        .await;
    assert_eq!(v["curve"].as_array().unwrap().len(), 2);
    assert_eq!(v["recommended"], json!({"seats": 3, "denial_rate": 25.0}));
    assert_eq!(v["idle_cut"], 0);

    // d gets a seat a moment later: within the default 60 s, not a true
    // denial (and one more session); with no tolerance at all, still one.
    s.take_seat("wi", "wi-key", json!({"holder": "d"})).await;
    let v = s.admin_get("/v1/admin/usage/what-if?license=wi").await;
    assert_eq!(
        (&v["true_denials"], &v["sessions"]),
        (&json!(0), &json!(4)),
        "{v}"
    );
    let v = s
        .admin_get("/v1/admin/usage/what-if?license=wi&tolerance=0s")
        .await;
    assert_eq!(v["true_denials"], 1, "{v}");

    // The viewer role may read it.
    let resp = s
        .client()
        .get(s.url("/v1/admin/usage/what-if?license=wi"))
        .bearer_auth(s.viewer_token())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
}

#[tokio::test]
async fn bad_input_is_a_400_naming_the_parameter_an_unknown_license_404() {
    let s = Server::start(WI).await;
    let base = "/v1/admin/usage/what-if?license=wi";
    let cases: &[(&str, &str)] = &[
        ("seats=", "seats"),
        ("seats=5..2", "seats"),
        ("seats=0..3", "seats"),
        ("seats=1..1001", "seats"),
        ("seats=1..x", "seats"),
        ("seats=..", "seats"),
        ("idle_timeout=0s", "idle_timeout"),
        ("idle_timeout=500ms", "idle_timeout"),
        ("idle_timeout=soon", "idle_timeout"),
        ("tolerance=2h", "tolerance"),
        ("tolerance=-1s", "tolerance"),
        ("target=101", "target"),
        ("target=-1", "target"),
        ("target=lots", "target"),
        ("from=yesterday", "from"),
        ("to=soon", "to"),
        ("from=2027-01-02T00:00:00Z&to=2027-01-01T00:00:00Z", "from"),
        // A `to` after now is now: a `from` after now leaves nothing.
        ("from=2999-01-01T00:00:00Z&to=2999-01-02T00:00:00Z", "from"),
    ];
    for (params, name) in cases {
        let path = format!("{base}&{params}");
        let (status, body) = s.admin_try(&path).await;
        assert_eq!(
            (status, body["error"].as_str()),
            (400, Some("invalid_request")),
            "{path}: {body}"
        );
        let message = body["message"].as_str().unwrap();
        assert!(
            message.starts_with(name),
            "{path}: the message names {name}: {body}"
        );
    }
    let (status, body) = s.admin_try("/v1/admin/usage/what-if").await;
    assert_eq!(
        (status, body["error"].as_str()),
        (400, Some("invalid_request"))
    );
    let (status, body) = s.admin_try("/v1/admin/usage/what-if?license=nope").await;
    assert_eq!(
        (status, body["error"].as_str()),
        (404, Some("unknown_license"))
    );
    // Valid edges: a thousand seat counts, a target of 0 and 100, a far `to`.
    let v = s
        .admin_get(&format!("{base}&seats=1..1000&target=100"))
        .await;
    assert_eq!(v["curve"].as_array().unwrap().len(), 1000);
    assert_eq!(v["recommended"]["seats"], 1);
    let v = s
        .admin_get(&format!(
            "{base}&from=2020-01-01T00:00:00Z&to=2999-01-01T00:00:00Z&target=0"
        ))
        .await;
    assert!(ms(&v["to"]) < ms(&json!("2999-01-01T00:00:00Z")), "{v}");
    assert_eq!((&v["requests"], &v["sessions"]), (&json!(0), &json!(0)));
    // Nothing recorded: 1 to the 3 seats there are, nothing refused.
    let curve = v["curve"].as_array().unwrap();
    assert_eq!(curve.len(), 3);
    assert_eq!(
        curve[0],
        json!({"seats": 1, "denials": 0, "denial_rate": 0.0, "peak": 0, "full_s": 0.0,
            "utilization": 0.0})
    );
    let resp = s
        .admin(reqwest::Method::POST, "/v1/admin/usage/what-if?license=wi")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 405);
    assert_eq!(resp.headers()["allow"], "GET");
}
