//! Versions: a license whose entitlement names a range grants only a
//! checkout that sends a version in it; one without a range ignores the
//! version.

use leasehold_tests::vendor::{Vendor, unix_now};
use serde_json::json;

use crate::{KEYRIGHT, Rig, claims, eventually_summary, vendor_license};

const RANGE: &str = ">=2025.1, <2027";

/// `versions: ">=2025.1, <2027"`: no version or `2027` is `403
/// version_not_entitled` naming the range (reason `version`), `2026.2` is
/// granted, `abc` is `400 invalid_request` naming `version`; a license
/// without a range grants whatever version is sent, or none.
#[tokio::test]
async fn a_version_range_grants_only_versions_in_it() {
    let v = Vendor::generate(KEYRIGHT);
    let licenses = format!(
        "{}{}{}",
        v.toml(),
        vendor_license("cad", ""),
        vendor_license("ide", "")
    );
    let items = json!([
        {"id": "cad", "seats": 5, "versions": RANGE},
        {"id": "ide", "seats": 5},
    ]);
    let rig = Rig::start(
        &licenses,
        &[("acme.lic", v.sign(&claims("acme", unix_now() - 60, items)))],
    )
    .await;
    rig.wait_file("acme.lic", &["active"]).await;

    for (who, body) in [
        ("no-version", json!({})),
        ("too-new", json!({"version": "2027"})),
        ("too-old", json!({"version": "2024.12.9"})),
    ] {
        let (status, answer) = rig.checkout("cad", who, body).await;
        assert_eq!(status, 403, "{who}: {answer}");
        assert_eq!(answer["error"], "version_not_entitled", "{who}: {answer}");
        let message = answer["message"].as_str().unwrap_or_default();
        assert!(message.contains(RANGE), "{who}: names the range: {answer}");
        assert_eq!(answer["versions"], RANGE, "{who}: {answer}");
    }
    let (status, lease) = rig
        .checkout("cad", "current", json!({"version": "2026.2"}))
        .await;
    assert_eq!(status, 201, "{lease}");
    for bad in ["abc", "2026.x", "", "1..2"] {
        let (status, answer) = rig.checkout("cad", "typo", json!({"version": bad})).await;
        assert_eq!(status, 400, "{bad:?}: {answer}");
        assert_eq!(answer["error"], "invalid_request", "{bad:?}: {answer}");
        let message = answer["message"].as_str().unwrap_or_default();
        assert!(message.contains("version"), "{bad:?}: names it: {answer}");
    }

    // No range: the version is not looked at.
    for (who, body) in [
        ("none", json!({})),
        ("any", json!({"version": "1999.1"})),
        ("odd", json!({"version": "abc"})),
    ] {
        let (status, lease) = rig.checkout("ide", who, body).await;
        assert_eq!(status, 201, "{who}: {lease}");
    }

    assert_eq!(rig.s.license("cad").await["versions"], RANGE);
    assert_eq!(rig.s.license("ide").await["versions"], json!(null));
    assert_eq!(rig.s.live("cad").await, 1, "only 2026.2 took a seat");
    let summary = eventually_summary(&rig, "cad", |s| s["denials_by_reason"]["version"] == 3).await;
    assert_eq!(summary["denials_by_reason"]["entitlement"], 0, "{summary}");
    assert_eq!(summary["true_denials"], 0, "never a true denial: {summary}");
}
