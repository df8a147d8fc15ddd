//! A clock set back buys nothing: `leaseholdd` restarted under libfaketime
//! a day behind still ends a term about on time, because its decision
//! clock never runs back and never stands still.

use std::time::Duration;

use leasehold_tests::vendor::{Vendor, unix_now};
use leasehold_tests::{TestStore, faketime_env};
use serde_json::json;

use crate::{KEYRIGHT, Rig, claims, grant, metric, millis, vendor_license};

/// A term ending 30 s ahead; the server restarted with its wall clock a day
/// behind: it says its clock is behind (event and gauge), grants leases
/// dated by the real time and capped at `exp`, and refuses checkouts
/// (`403 not_entitled`) from about `exp` on the real clock.
#[tokio::test]
async fn a_clock_set_back_a_day_does_not_stretch_the_term() {
    let fake = faketime_env("-1d");
    let v = Vendor::generate(KEYRIGHT);
    let licenses = format!("{}{}", v.toml(), vendor_license("cad", ""));
    // SQLite: on PostgreSQL the database's clock is the wall clock, and
    // libfaketime only moves the server's.
    let mut rig = Rig::start_with(&licenses, &[], |o| o.store = TestStore::Sqlite).await;
    let exp = unix_now() + 30;
    // Issued an hour ago: less than 24 h ahead of the clock set back, so
    // it still loads there.
    let mut term = claims("acme", unix_now() - 3600, grant("cad", 5));
    term["exp"] = json!(exp);
    rig.put("acme.lic", &v.sign(&term));
    rig.wait_file("acme.lic", &["active"]).await;
    let (status, before) = rig.checkout("cad", "before", json!({})).await;
    assert_eq!(status, 201, "{before}");
    assert_eq!(
        millis(&before["expires_at"]),
        exp * 1000,
        "capped: {before}"
    );

    for (k, val) in &fake {
        rig.s.set_env(k, val);
    }
    rig.s.restart().await;
    rig.wait_event("clock behind by", &[]).await;
    let behind = metric(&rig.s, "leasehold_clock_behind_seconds").await;
    assert!(
        behind.is_some_and(|b| b > 3600.0),
        "the gauge says how far behind: {behind:?}"
    );
    rig.wait_file("acme.lic", &["active"]).await;
    assert!(
        unix_now() < exp - 2,
        "the restart took past the term's end: nothing left to test"
    );
    let (status, lease) = rig.checkout("cad", "after", json!({})).await;
    assert_eq!(status, 201, "{lease}");
    let issued = millis(&lease["issued_at"]);
    assert!(
        (issued - unix_now() * 1000).abs() < 60_000,
        "dated by the decision clock, not a day back: {lease}"
    );
    assert_eq!(millis(&lease["expires_at"]), exp * 1000, "capped: {lease}");
    rig.release("cad", lease["seat_id"].as_str().unwrap()).await;

    // Poll (bounded) until the term has ended by the server's clock.
    loop {
        let (status, body) = rig.checkout("cad", "poll", json!({})).await;
        if status == 403 {
            assert_eq!(body["error"], "not_entitled", "{body}");
            assert!(unix_now() >= exp - 1, "ended before exp: {body}");
            break;
        }
        assert_eq!(status, 201, "{body}");
        rig.release("cad", body["seat_id"].as_str().unwrap()).await;
        assert!(
            unix_now() <= exp + 15,
            "still granted 15 s after the term's end: the clock stood still"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    rig.wait_file("acme.lic", &["ended"]).await;
}
