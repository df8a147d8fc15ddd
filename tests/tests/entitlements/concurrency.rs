//! Never over the entitled seats under concurrent checkouts (on two
//! replicas when the suite runs with `LEASEHOLD_TEST_STORE=postgres-2`);
//! the history's views of a vendor license count its entitled seats.

use serde_json::json;

use super::{KEYRIGHT, Rig, claims, grant, vendor_license};
use leasehold_tests::vendor::{Vendor, unix_now};

/// 40 clients at once on a 5-seat entitlement: exactly 5 granted, every
/// other answer `409 no_seats_available`, 5 live.
#[tokio::test]
async fn concurrent_checkouts_never_exceed_the_entitled_seats() {
    let v = Vendor::generate(KEYRIGHT);
    let licenses = format!("{}{}", v.toml(), vendor_license("cad", ""));
    let t0 = unix_now() - 60;
    let rig = Rig::start(
        &licenses,
        &[("acme.lic", v.sign(&claims("acme", t0, grant("cad", 5))))],
    )
    .await;
    rig.wait_entitled("cad", 5).await;
    let holders: Vec<String> = (0..40).map(|i| format!("c{i}")).collect();
    let answers = futures_util::future::join_all(
        holders
            .iter()
            .map(|holder| rig.checkout("cad", holder, json!({}))),
    )
    .await;
    let granted = answers.iter().filter(|(s, _)| *s == 201).count();
    let full = answers
        .iter()
        .filter(|(s, b)| *s == 409 && b["error"] == "no_seats_available")
        .count();
    assert_eq!((granted, full), (5, 35), "{answers:?}");
    assert_eq!(rig.s.live("cad").await, 5);
}

/// The what-if of a vendor license without `seats` in the file compares
/// with the entitled seats (never the file's "not narrowed" placeholder),
/// and answers at once.
#[tokio::test]
async fn the_what_if_of_a_vendor_license_counts_its_entitled_seats() {
    let v = Vendor::generate(KEYRIGHT);
    let licenses = format!("{}{}", v.toml(), vendor_license("cad", ""));
    let t0 = unix_now() - 60;
    let rig = Rig::start(
        &licenses,
        &[("acme.lic", v.sign(&claims("acme", t0, grant("cad", 7))))],
    )
    .await;
    rig.wait_entitled("cad", 7).await;
    let (status, _) = rig.checkout("cad", "ann", json!({})).await;
    assert_eq!(status, 201);
    let what_if = rig.s.admin_get("/v1/admin/usage/what-if?license=cad").await;
    assert_eq!(what_if["seats_now"], 7, "{what_if}");
    let curve = what_if["curve"].as_array().expect("curve");
    assert!(
        !curve.is_empty() && curve.len() <= 7,
        "a curve up to the entitled seats: {what_if}"
    );
}

/// Entitled seats below the groups' reserves: the later group's reserve
/// shrinks first, and a `config` event says so (once, on every store).
#[tokio::test]
async fn reserves_shrink_to_the_entitled_seats_and_a_config_event_says_so() {
    let v = Vendor::generate(KEYRIGHT);
    let groups = "[[license.group]]\nname = \"design\"\nholders = [\"d*\"]\nreserve = 2\n\
                  [[license.group]]\nname = \"ops\"\nholders = [\"o*\"]\nreserve = 2\n";
    let licenses = format!("{}{}", v.toml(), vendor_license("cad", groups));
    let t0 = unix_now() - 60;
    let rig = Rig::start(
        &licenses,
        &[("acme.lic", v.sign(&claims("acme", t0, grant("cad", 3))))],
    )
    .await;
    rig.wait_entitled("cad", 3).await;
    let said =
        leasehold_tests::eventually(super::SHOWS_WITHIN, "a reserves config event", || async {
            let events = rig.s.events_of("config").await;
            let saying: Vec<_> = events
                .into_iter()
                .filter(|e| {
                    e["detail"]
                        .as_str()
                        .is_some_and(|d| d.contains("fewer than the groups' reserves"))
                })
                .collect();
            (!saying.is_empty()).then_some(saying)
        })
        .await;
    assert_eq!(said.len(), 1, "once: {said:?}");
    assert!(
        said[0]["detail"]
            .as_str()
            .unwrap()
            .ends_with("reserves now ops 1"),
        "{said:?}"
    );
    // An ops member may use the one seat ops still holds back, a designer
    // two: three seats, all reserved.
    let (status, body) = rig.checkout("cad", "someone-else", json!({})).await;
    assert_eq!(status, 409, "every seat is reserved for a group: {body}");
}
