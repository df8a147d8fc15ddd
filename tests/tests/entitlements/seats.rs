//! Seats: what the vendor signed caps the pool, the licenses file only
//! narrows, ids add up, a renewal replaces its id for good (restarts
//! included), no entitlement is `403 not_entitled`, and seats a renewal
//! takes back are lost within a TTL, newest first.

use leasehold_tests::vendor::{Vendor, unix_now};
use serde_json::json;

use crate::{KEYRIGHT, Rig, claims, grant, vendor_license};

/// One entitlement of 3 seats: a license without `seats` grants 3, `seats =
/// 2` narrows to 2, `seats = 1000` still grants only 3.
#[tokio::test]
async fn entitled_seats_cap_the_pool_and_the_licenses_file_only_narrows() {
    let v = Vendor::generate(KEYRIGHT);
    let licenses = format!(
        "{}{}{}{}",
        v.toml(),
        vendor_license("cad", ""),
        vendor_license("narrow", "seats = 2"),
        vendor_license("wide", "seats = 1000"),
    );
    let items = json!([
        {"id": "cad", "seats": 3},
        {"id": "narrow", "seats": 3},
        {"id": "wide", "seats": 3},
    ]);
    let file = v.sign(&claims("acme", unix_now() - 60, items));
    let rig = Rig::start(&licenses, &[("acme.lic", file)]).await;
    rig.wait_file("acme.lic", &["active"]).await;

    for who in ["a", "b", "c"] {
        let (status, lease) = rig.checkout("cad", who, json!({})).await;
        assert_eq!(status, 201, "{who}: {lease}");
        assert!(lease.get("grace").is_none(), "not in grace: {lease}");
        assert_eq!(
            lease.get("entitlement_ends_at"),
            Some(&json!(null)),
            "a perpetual entitlement: the seats never drop: {lease}"
        );
    }
    let (status, body) = rig.checkout("cad", "d", json!({})).await;
    assert_eq!(status, 409, "the 4th seat: {body}");
    assert_eq!(body["error"], "no_seats_available");
    assert_eq!(body["seats"], 3, "{body}");

    assert_eq!(rig.capacity("narrow").await, 2, "the file's seats narrow");
    assert_eq!(
        rig.capacity("wide").await,
        3,
        "the file's seats never widen"
    );
    for (license, seats) in [("cad", 3), ("narrow", 2), ("wide", 3)] {
        let view = rig.s.license(license).await;
        assert_eq!(view["seats"], seats, "effective seats: {view}");
        assert_eq!(view["entitled_seats"], 3, "what was signed: {view}");
        assert_eq!(view["vendor"], KEYRIGHT, "{view}");
    }
}

/// Different ids add up (2 + 3); a renewal of one id (greater `iat`, 1
/// seat) replaces it (4, not 6); its older, richer file put back never
/// grants again, before or after a restart.
#[tokio::test]
async fn ids_add_up_and_a_renewal_replaces_its_id_for_good() {
    let v = Vendor::generate(KEYRIGHT);
    let licenses = format!("{}{}", v.toml(), vendor_license("cad", ""));
    let t0 = unix_now() - 600;
    let old_a = v.sign(&claims("a", t0, grant("cad", 2)));
    let b = v.sign(&claims("b", t0, grant("cad", 3)));
    let mut rig = Rig::start(&licenses, &[("a.lic", old_a.clone()), ("b.lic", b)]).await;
    rig.wait_file("a.lic", &["active"]).await;
    rig.wait_file("b.lic", &["active"]).await;
    assert_eq!(rig.capacity("cad").await, 5, "2 + 3: different ids add up");

    // The renewal, beside the old file: it replaces, it does not add.
    rig.put(
        "a-renewed.lic",
        &v.sign(&claims("a", t0 + 300, grant("cad", 1))),
    );
    rig.wait_file("a-renewed.lic", &["active"]).await;
    rig.wait_file("a.lic", &["replaced"]).await;
    rig.wait_entitled("cad", 4).await;
    assert_eq!(
        rig.capacity("cad").await,
        4,
        "1 + 3: the renewal replaced a"
    );
    rig.wait_event("replaced", &["keyright/a"]).await;

    // Both files of a gone, the older and richer one put back alone.
    rig.remove("a-renewed.lic");
    rig.remove("a.lic");
    rig.wait_unlisted("a-renewed.lic").await;
    rig.wait_unlisted("a.lic").await;
    rig.put("a.lic", &old_a);
    let back = rig.wait_file("a.lic", &["replaced", "rejected"]).await;
    rig.wait_entitled("cad", 3).await;
    assert_eq!(rig.capacity("cad").await, 3, "b only: {back}");

    // The store remembers the newest iat across a restart.
    rig.s.restart().await;
    rig.wait_file("b.lic", &["active"]).await;
    let after = rig.wait_file("a.lic", &["replaced", "rejected"]).await;
    assert_eq!(rig.capacity("cad").await, 3, "still b only: {after}");
    assert_eq!(rig.s.license("cad").await["entitled_seats"], 3);
}

/// A vendor license with no entitlement: `403 not_entitled` at once (a
/// `?wait=` waiter too), counted as reason `entitlement`, never a true
/// denial; a license without a vendor shows the new reasons as zeros.
#[tokio::test]
async fn no_entitlement_is_403_not_entitled_counted_as_entitlement() {
    let v = Vendor::generate(KEYRIGHT);
    let plain = "\n[[license]]\nid = \"plain\"\nkey = \"plain-key\"\nseats = 2\n\
                 ttl = \"60s\"\nskew = \"5s\"\nreap_grace = \"15s\"\n";
    let licenses = format!("{}{}{plain}", v.toml(), vendor_license("cad", ""));
    let rig = Rig::start(&licenses, &[]).await;

    let (status, body) = rig.checkout("cad", "ann", json!({})).await;
    assert_eq!(status, 403, "{body}");
    assert_eq!(body["error"], "not_entitled", "{body}");
    assert!(body["message"].as_str().is_some_and(|m| !m.is_empty()));

    // A waiter is told at once: nothing it could wait for.
    let started = std::time::Instant::now();
    let resp = rig
        .s
        .client()
        .post(rig.s.url("/v1/licenses/cad/seats?wait=30"))
        .bearer_auth("cad-key")
        .json(&json!({"holder": "bob"}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 403);
    assert!(
        started.elapsed() < std::time::Duration::from_secs(5),
        "answered at once, not after waiting: {:?}",
        started.elapsed()
    );
    let body: serde_json::Value = resp.json().await.unwrap();
    assert_eq!(body["error"], "not_entitled", "{body}");
    assert_eq!(rig.s.live("cad").await, 0);
    assert_eq!(rig.s.license("cad").await["seats"], 0, "no seats at all");

    let summary =
        crate::eventually_summary(&rig, "cad", |s| s["denials_by_reason"]["entitlement"] == 2)
            .await;
    assert_eq!(summary["denials"], 2, "{summary}");
    assert_eq!(summary["true_denials"], 0, "never a true denial: {summary}");
    assert_eq!(summary["denials_by_reason"]["version"], 0, "{summary}");
    assert_eq!(summary["denials_by_reason"]["full"], 0, "{summary}");
    let listed = rig.s.admin_get("/v1/admin/denials?license=cad").await;
    let reasons: Vec<_> = listed["denials"]
        .as_array()
        .expect("denials")
        .iter()
        .map(|d| (d["reason"].clone(), d["true"].clone()))
        .collect();
    assert_eq!(
        reasons,
        vec![(json!("entitlement"), json!(false)); 2],
        "{listed}"
    );

    // A plain license: the two new reasons, present as zeros.
    let plain = rig.s.admin_get("/v1/admin/usage?license=plain").await;
    let by_reason = &plain["summary"]["denials_by_reason"];
    assert_eq!(by_reason["entitlement"], 0, "{plain}");
    assert_eq!(by_reason["version"], 0, "{plain}");
}

/// Three live seats of a 3-seat entitlement, renewed in place with 1 seat:
/// the two newest seats' heartbeats are `410 seat_lost` (reason
/// `expired`), the oldest one renews, and the pool is full at 1.
#[tokio::test]
async fn seats_a_renewal_takes_back_are_lost_newest_first() {
    let v = Vendor::generate(KEYRIGHT);
    let licenses = format!("{}{}", v.toml(), vendor_license("cad", ""));
    let t0 = unix_now() - 600;
    let rig = Rig::start(
        &licenses,
        &[("acme.lic", v.sign(&claims("acme", t0, grant("cad", 3))))],
    )
    .await;
    rig.wait_file("acme.lic", &["active"]).await;
    let mut seats = Vec::new();
    for who in ["oldest", "middle", "newest"] {
        let (status, lease) = rig.checkout("cad", who, json!({})).await;
        assert_eq!(status, 201, "{lease}");
        seats.push(lease["seat_id"].as_str().unwrap().to_string());
    }

    rig.put(
        "acme.lic",
        &v.sign(&claims("acme", t0 + 60, grant("cad", 1))),
    );
    rig.wait_entitled("cad", 1).await;
    for (seat, who) in seats[1..].iter().zip(["middle", "newest"]) {
        let (status, body) = rig.heartbeat("cad", seat).await;
        assert_eq!(status, 410, "{who}'s seat is over the count: {body}");
        assert_eq!(body["error"], "seat_lost", "{body}");
        assert_eq!(body["reason"], "expired", "{body}");
    }
    let (status, lease) = rig.heartbeat("cad", &seats[0]).await;
    assert_eq!(status, 200, "the oldest seat renews: {lease}");
    assert_eq!(rig.s.live("cad").await, 1);
    let (status, body) = rig.checkout("cad", "late", json!({})).await;
    assert_eq!(status, 409, "1 seat, taken: {body}");
}
