//! Seeing it: `GET /v1/admin/entitlements` (every file, its state and what
//! it grants), the licenses view's new fields and the metrics, on a server
//! that reads the default directory, `<data-dir>/entitlements`.

use std::collections::BTreeSet;

use leasehold_tests::vendor::{Vendor, leaseholdd_kid, unix_now};
use serde_json::{Value, json};

use crate::{KEYRIGHT, Rig, claims, grant, metric, millis, vendor_license};

const RANGE: &str = ">=2025.1, <2027";

const ENTRY_KEYS: &[&str] = &[
    "vendor",
    "id",
    "customer",
    "issued_at",
    "not_before",
    "expires_at",
    "grace_until",
    "bound",
    "state",
    "file",
    "licenses",
    "unused",
    "error",
];

fn keys(v: &Value) -> BTreeSet<String> {
    v.as_object()
        .unwrap_or_else(|| panic!("an object: {v}"))
        .keys()
        .cloned()
        .collect()
}

fn want_keys(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|k| k.to_string()).collect()
}

/// Four files: everything set (bound to a standby and this server, one
/// item for a license the file does not have), perpetual, not yet in force,
/// not a JWS.
fn files(v: &Vendor, kid: &str, now: i64) -> Vec<(&'static str, String)> {
    let mut full = claims(
        "acme-2026",
        now - 60,
        json!([
            {"id": "cad", "seats": 10, "versions": RANGE, "overage": 2,
             "borrow": {"max": 259_200, "seats": 2}},
            {"id": "cam", "seats": 1},
        ]),
    );
    full["sub"] = json!("Acme");
    full["nbf"] = json!(now - 3600);
    full["exp"] = json!(now + 30 * 86_400);
    full["grace"] = json!(14 * 86_400);
    full["aud"] = json!(["a-standby-kid", kid]);
    let mut later = claims("ide-more", now - 60, grant("ide", 3));
    later["nbf"] = json!(now + 86_400);
    vec![
        ("full.lic", v.sign(&full)),
        (
            "forever.lic",
            v.sign(&claims("ide-forever", now - 60, grant("ide", 2))),
        ),
        ("later.lic", v.sign(&later)),
        ("bad.lic", "not a JWS\n".to_string()),
    ]
}

/// The entry of `full.lic` (see [`files`]), issued at `now - 60`.
fn assert_full_entry(full: &Value, now: i64) {
    assert_eq!(full["vendor"], KEYRIGHT);
    assert_eq!(full["id"], "acme-2026");
    assert_eq!(full["customer"], "Acme");
    assert_eq!(full["file"], "full.lic");
    assert_eq!(full["bound"], true);
    assert_eq!(full["unused"], json!(["cam"]), "{full}");
    assert!(full["error"].is_null(), "{full}");
    for (field, secs) in [
        ("issued_at", now - 60),
        ("not_before", now - 3600),
        ("expires_at", now + 30 * 86_400),
        ("grace_until", now + 44 * 86_400),
    ] {
        assert_eq!(millis(&full[field]), secs * 1000, "{field}: {full}");
    }
    let items = full["licenses"].as_array().expect("licenses");
    assert_eq!(items.len(), 2, "{full}");
    let item_keys = want_keys(&["id", "seats", "versions", "overage", "borrow"]);
    assert!(items.iter().all(|i| keys(i) == item_keys), "{full}");
    let (cad, cam) = (&items[0], &items[1]);
    assert_eq!(
        (&cad["id"], &cad["seats"], &cad["versions"], &cad["overage"]),
        (&json!("cad"), &json!(10), &json!(RANGE), &json!(2)),
        "{full}"
    );
    assert_eq!(cad["borrow"]["seats"], 2, "{full}");
    assert!(!cad["borrow"]["max"].is_null(), "{full}");
    assert_eq!(
        (&cam["id"], &cam["seats"], &cam["versions"], &cam["borrow"]),
        (&json!("cam"), &json!(1), &json!(null), &json!(null)),
        "{full}"
    );
}

/// The default directory is created empty at first start; the listing
/// gives the server's `kid` (as `leaseholdd kid` prints it) and, per file,
/// exactly the brief's fields: times, `bound`, state (`active`, `not_yet`,
/// `rejected`), what each item grants, ids the licenses file lacks, the
/// error; viewers may read it, no one else.
#[tokio::test]
async fn the_entitlements_view_lists_every_file_with_the_briefs_fields() {
    let v = Vendor::generate(KEYRIGHT);
    let licenses = format!(
        "{}{}{}",
        v.toml(),
        vendor_license("cad", "seats = 8"),
        vendor_license("ide", "")
    );
    let rig = Rig::start_in_data_dir(&licenses).await;
    let dir = rig.s.data_dir().join("entitlements");
    assert_eq!(std::fs::read_dir(&dir).expect("created").count(), 0);
    let kid = leaseholdd_kid(&rig.s.data_dir());
    let empty = rig.listing().await;
    assert_eq!(empty, json!({"server_kid": kid, "entitlements": []}));

    let now = unix_now();
    for (name, text) in files(&v, &kid, now) {
        rig.put(name, &text);
    }
    let full = rig.wait_file("full.lic", &["active"]).await;
    let forever = rig.wait_file("forever.lic", &["active"]).await;
    let later = rig.wait_file("later.lic", &["not_yet"]).await;
    let bad = rig.wait_file("bad.lic", &["rejected"]).await;
    for e in [&full, &forever, &later, &bad] {
        assert_eq!(keys(e), want_keys(ENTRY_KEYS), "{e}");
    }

    assert_full_entry(&full, now);
    for (field, want) in [
        ("customer", json!(null)),
        ("not_before", json!(null)),
        ("expires_at", json!(null)),
        ("grace_until", json!(null)),
        ("bound", json!(false)),
        ("unused", json!([])),
    ] {
        assert_eq!(forever[field], want, "{field}: {forever}");
    }
    assert_eq!(millis(&later["not_before"]), (now + 86_400) * 1000);
    assert!(
        bad["error"].as_str().is_some_and(|e| e.contains("JWS")),
        "{bad}"
    );
    assert!(bad["vendor"].is_null() && bad["id"].is_null(), "{bad}");

    let viewer = rig
        .s
        .client()
        .get(rig.s.url("/v1/admin/entitlements"))
        .bearer_auth(rig.s.viewer_token())
        .send()
        .await
        .unwrap();
    assert_eq!(viewer.status(), 200, "a viewer may read it");
    let nobody = rig
        .s
        .client()
        .get(rig.s.url("/v1/admin/entitlements"))
        .send()
        .await
        .unwrap();
    assert_eq!(nobody.status(), 401);
}

/// The series of `/metrics` named `name` whose labels contain `label`.
async fn series(rig: &Rig, name: &str, label: &str) -> Option<f64> {
    let text = rig
        .s
        .client()
        .get(rig.s.url("/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    text.lines()
        .filter(|l| l.starts_with(&format!("{name}{{")) && l.contains(label))
        .find_map(|l| l.rsplit(' ').next()?.parse().ok())
}

/// The licenses view's new fields for a vendor license (narrowed by the
/// file, with a term and a range), another (perpetual, a renewal not yet
/// in force) and a plain one (nulls and `false`); the metrics of entitled
/// seats and of each active entitlement's end.
#[tokio::test]
async fn the_licenses_view_and_metrics_show_what_is_entitled() {
    let v = Vendor::generate(KEYRIGHT);
    let plain = "\n[[license]]\nid = \"plain\"\nkey = \"plain-key\"\nseats = 2\n\
                 ttl = \"60s\"\nskew = \"5s\"\nreap_grace = \"15s\"\n";
    let licenses = format!(
        "{}{}{}{plain}",
        v.toml(),
        vendor_license("cad", "seats = 8"),
        vendor_license("ide", "")
    );
    let rig = Rig::start_in_data_dir(&licenses).await;
    let kid = leaseholdd_kid(&rig.s.data_dir());
    let now = unix_now();
    for (name, text) in files(&v, &kid, now) {
        rig.put(name, &text);
    }
    rig.wait_file("full.lic", &["active"]).await;
    rig.wait_file("later.lic", &["not_yet"]).await;
    rig.wait_entitled("ide", 2).await;

    let cad = rig.s.license("cad").await;
    let ends = (now + 44 * 86_400) * 1000;
    assert_eq!(cad["vendor"], KEYRIGHT, "{cad}");
    assert_eq!(cad["customer"], "Acme", "{cad}");
    assert_eq!(cad["entitled_seats"], 10, "{cad}");
    assert_eq!(cad["seats"], 8, "effective: the file narrows: {cad}");
    assert_eq!(millis(&cad["entitlement_ends_at"]), ends, "{cad}");
    assert_eq!(cad["in_grace"], false, "{cad}");
    assert_eq!(cad["versions"], RANGE, "{cad}");

    let ide = rig.s.license("ide").await;
    assert_eq!(ide["entitled_seats"], 2, "not yet: not counted: {ide}");
    assert_eq!(ide["seats"], 2, "{ide}");
    assert_eq!(
        ide["entitlement_ends_at"],
        json!(null),
        "never drops: {ide}"
    );
    assert_eq!(ide["versions"], json!(null), "{ide}");

    let plain = rig.s.license("plain").await;
    for (field, want) in [
        ("vendor", json!(null)),
        ("customer", json!(null)),
        ("entitled_seats", json!(null)),
        ("entitlement_ends_at", json!(null)),
        ("in_grace", json!(false)),
        ("versions", json!(null)),
        ("seats", json!(2)),
    ] {
        assert_eq!(plain[field], want, "{field}: {plain}");
    }

    let entitled = |l: &'static str| format!("leasehold_entitled_seats{{license=\"{l}\"}}");
    assert_eq!(metric(&rig.s, &entitled("cad")).await, Some(10.0));
    assert_eq!(metric(&rig.s, &entitled("ide")).await, Some(2.0));
    let expiry = "leasehold_entitlement_expiry_timestamp_seconds";
    let acme = series(&rig, expiry, "entitlement=\"acme-2026\"").await;
    let (exp, grace_end) = ((now + 30 * 86_400) as f64, (now + 44 * 86_400) as f64);
    assert!(
        acme == Some(exp) || acme == Some(grace_end),
        "acme-2026's end: {acme:?}"
    );
    assert_eq!(
        series(&rig, expiry, "entitlement=\"ide-forever\"").await,
        None
    );
    assert_eq!(series(&rig, expiry, "entitlement=\"ide-more\"").await, None);
}
