//! Entitlements on the dashboard (issue 41), in a real browser against the
//! real `leaseholdd`: a license whose seats a vendor's signed files grant
//! shows the entitled seats, the customer and, as a warning in both
//! themes, how long is left of its term (`⏳ 10d`, `grace 2d`, `expired`);
//! a plain license shows none of it. A renewal dropped into the
//! entitlements directory clears the countdown without a reload, and the
//! live feed shows `entitlement` events in a style of their own.
//!
//! Files are signed with [`leasehold_tests::vendor::Vendor`], as the
//! entitlements suite (`tests/entitlements/`) signs them. Every wait is a
//! bounded poll for a positive marker.

#[path = "../src/browser.rs"]
mod browser;

use std::path::Path;
use std::time::Duration;

use browser::Browser;
use leasehold_tests::vendor::{Vendor, unix_now};
use leasehold_tests::{Server, ServerOptions, eventually};
use serde_json::{Value, json};
use tempfile::TempDir;

const SOON: Duration = Duration::from_secs(10);
/// A file written to the entitlements directory is watched and debounced;
/// the entitlements suite allows it this long to show.
const SHOWS_WITHIN: Duration = Duration::from_secs(15);

const VENDOR: &str = "keyright";
const DAY: i64 = 86_400;

/// A `[[license]]` whose seats `keyright`'s entitlements grant; `extra`
/// lines at its end.
fn vendor_license(id: &str, extra: &str) -> String {
    format!(
        "\n[[license]]\nid = \"{id}\"\nkey = \"{id}-key\"\nvendor = \"{VENDOR}\"\n\
         ttl = \"60s\"\nskew = \"5s\"\nreap_grace = \"15s\"\n{extra}\n"
    )
}

const PLAIN: &str = "\n[[license]]\nid = \"plain\"\nkey = \"plain-key\"\nseats = 2\n\
                     ttl = \"60s\"\nskew = \"5s\"\nreap_grace = \"15s\"\n";

/// `keyright`'s entitlement `jti` for Acme, issued at `iat`, granting
/// `seats` of `license` until `exp` (plus `grace` seconds, if any).
fn acme(jti: &str, iat: i64, license: &str, seats: u32, exp: i64, grace: Option<i64>) -> Value {
    let mut c = json!({
        "iss": VENDOR, "jti": jti, "sub": "Acme", "iat": iat, "exp": exp,
        "licenses": [{"id": license, "seats": seats}],
    });
    if let Some(g) = grace {
        c["grace"] = json!(g);
    }
    c
}

/// A server reading `dir` (its entitlements directory, `files` in it).
async fn start(licenses: &str, dir: &TempDir, files: &[(&str, String)]) -> Server {
    for (name, text) in files {
        std::fs::write(dir.path().join(name), text).expect("write entitlement");
    }
    let options = ServerOptions::new(licenses)
        .arg("--entitlements")
        .arg(dir.path().to_str().expect("utf-8 path"));
    Server::start_with(options).await
}

/// Writes `name` whole into `dir`: a temp name the server ignores, then a
/// rename.
fn put(dir: &Path, name: &str, text: &str) {
    let tmp = dir.join(format!("{name}.tmp"));
    std::fs::write(&tmp, text).expect("write entitlement");
    std::fs::rename(&tmp, dir.join(name)).expect("rename entitlement");
}

/// The licenses view of `license` once `holds` says yes.
async fn license_when(s: &Server, license: &str, holds: impl Fn(&Value) -> bool) -> Value {
    eventually(
        SHOWS_WITHIN,
        &format!("{license} in the licenses view"),
        || async {
            let l = s.license(license).await;
            holds(&l).then_some(l)
        },
    )
    .await
}

/// Whole days from now to the RFC 3339 instant `at`, truncated (the page's
/// `⏳ Nd`).
fn days_left(at: &Value) -> i64 {
    let text = at.as_str().unwrap_or_else(|| panic!("a time: {at}"));
    let ms = leasehold_common::Timestamp::parse_rfc3339(text)
        .unwrap_or_else(|| panic!("RFC 3339: {text}"))
        .as_millis();
    (ms - unix_now() * 1000).div_euclid(DAY * 1000)
}

/// The detail of the first `entitlement` entry in the live feed whose
/// detail has every one of `words`, once there is one; its kind reads
/// `§ entitlement`.
async fn feed_entry(b: &Browser, words: &[&str], timeout: Duration) -> String {
    let what = format!("an entitlement event saying {words:?} in the feed");
    b.wait_until(timeout, &what, || async {
        let entries = b
            .eval(
                "return [...document.querySelectorAll('[data-events] li')].map((li) => [
                   li.querySelector('.kind').textContent,
                   (li.querySelector('.detail') || { textContent: '' }).textContent]);",
            )
            .await;
        entries.as_array()?.iter().find_map(|e| {
            let (kind, detail) = (e[0].as_str()?, e[1].as_str()?);
            (kind == "§ entitlement" && words.iter().all(|w| detail.contains(w)))
                .then(|| detail.to_string())
        })
    })
    .await
}

fn field(license: &str, name: &str) -> String {
    format!("tr[data-license={license}] [data-field={name}]")
}

/// `#8a6100` → `rgb(138, 97, 0)`, as `getComputedStyle` writes a colour.
fn rgb(hex: &str) -> String {
    let h = hex.trim().trim_start_matches('#');
    assert_eq!(h.len(), 6, "a #rrggbb colour: {hex}");
    let c = |i: usize| u8::from_str_radix(&h[i..i + 2], 16).expect("hex");
    format!("rgb({}, {}, {})", c(0), c(2), c(4))
}

/// In `theme`: the computed colour and weight of `css`, and the theme's
/// `--var` as `rgb(...)`.
async fn styled(b: &Browser, theme: &str, css: &str, var: &str) -> (String, String, String) {
    let v = b
        .eval(&format!(
            "document.documentElement.dataset.theme = {theme};
             const e = document.querySelector({css});
             const s = getComputedStyle(e);
             return [s.color, s.fontWeight,
                     getComputedStyle(document.documentElement).getPropertyValue({var})];",
            theme = json!(theme),
            css = json!(css),
            var = json!(var),
        ))
        .await;
    let s = |i: usize| v[i].as_str().unwrap_or_else(|| panic!("{v}")).to_string();
    (s(0), s(1), rgb(&s(2)))
}

/// Four vendor pools and a plain one: `cad` (10 of Acme's seats, narrowed
/// to 8 by the licenses file, ending in 10.5 days) shows `entitled 10`,
/// `Acme` and `⏳ 10d` in the warning colour of each theme; `cam` (its
/// term ended a day ago, 2.5 days of grace left) `grace 2d`; `ide` (its
/// term ended, no grace) `expired` in the lapsed colour; `far` (100 days
/// left) its seats and no countdown; `plain` nothing of the kind.
#[tokio::test]
async fn a_vendor_pool_shows_its_entitled_seats_and_its_terms_end_as_a_warning() {
    let v = Vendor::generate(VENDOR);
    let licenses = format!(
        "{}{}{}{}{}{PLAIN}",
        v.toml(),
        vendor_license("cad", "seats = 8"),
        vendor_license("cam", ""),
        vendor_license("ide", ""),
        vendor_license("far", ""),
    );
    let now = unix_now();
    let files = [
        (
            "cad.lic",
            v.sign(&acme(
                "acme-cad",
                now - 60,
                "cad",
                10,
                now + 10 * DAY + DAY / 2,
                None,
            )),
        ),
        (
            "cam.lic",
            v.sign(&acme(
                "acme-cam",
                now - 5 * DAY,
                "cam",
                4,
                now - DAY,
                Some(3 * DAY + DAY / 2),
            )),
        ),
        (
            "ide.lic",
            v.sign(&acme(
                "acme-ide",
                now - 5 * DAY,
                "ide",
                5,
                now - 2 * DAY,
                None,
            )),
        ),
        (
            "far.lic",
            v.sign(&acme("acme-far", now - 60, "far", 3, now + 100 * DAY, None)),
        ),
    ];
    let dir = tempfile::tempdir().expect("entitlements dir");
    let server = start(&licenses, &dir, &files).await;

    // The server's word first: what the page is to show, from its instants.
    let cad = license_when(&server, "cad", |l| l["entitled_seats"] == 10).await;
    assert_eq!(
        (&cad["seats"], &cad["customer"]),
        (&json!(8), &json!("Acme"))
    );
    let cad_days = days_left(&cad["entitlement_ends_at"]);
    assert_eq!(cad_days, 10, "10.5 days left: {cad}");
    let cam = license_when(&server, "cam", |l| l["in_grace"] == true).await;
    let cam_days = days_left(&cam["entitlement_ends_at"]);
    assert_eq!(cam_days, 2, "2.5 days of grace left: {cam}");
    license_when(&server, "ide", |l| l["entitled_seats"] == 0).await;
    license_when(&server, "far", |l| l["entitled_seats"] == 3).await;

    let b = Browser::start().await;
    b.sign_in(&server.base, &server.admin_token).await;
    let term = b
        .wait_text(&field("cad", "term"), SOON, "cad's countdown", |t| {
            !t.is_empty()
        })
        .await;
    assert_eq!(term, format!("⏳ {cad_days}d"));
    assert_eq!(b.text(&field("cad", "entitled")).await, "entitled 10");
    assert_eq!(b.text(&field("cad", "customer")).await, "Acme");
    let row = b.text("tr[data-license=cad]").await;
    assert!(row.contains("0 / 8"), "the seats, narrowed: {row}");

    // The warning: the theme's amber ("▲ busy", a holder's "expiring"),
    // bold, in light and in dark.
    let cad_term = field("cad", "term");
    let (light, weight, busy) = styled(&b, "light", &cad_term, "--busy").await;
    assert_eq!((light.as_str(), weight.as_str()), (busy.as_str(), "700"));
    let (dark, weight, busy) = styled(&b, "dark", &cad_term, "--busy").await;
    assert_eq!((dark.as_str(), weight.as_str()), (busy.as_str(), "700"));
    assert_ne!(light, dark, "the warning follows the theme");
    let (entitled, weight, dim) = styled(&b, "light", &field("cad", "entitled"), "--dim").await;
    assert_eq!(
        (entitled, weight),
        (dim, "400".to_string()),
        "the entitled seats are a quiet note"
    );

    let grace = b
        .wait_text(&field("cam", "term"), SOON, "cam in grace", |t| {
            !t.is_empty()
        })
        .await;
    assert_eq!(grace, format!("grace {cam_days}d"));
    let (colour, _, busy) = styled(&b, "light", &field("cam", "term"), "--busy").await;
    assert_eq!(colour, busy, "grace is a warning");
    assert_eq!(b.text(&field("cam", "entitled")).await, "entitled 4");

    let expired = b
        .wait_text(&field("ide", "term"), SOON, "ide expired", |t| {
            !t.is_empty()
        })
        .await;
    assert_eq!(expired, "expired");
    assert_eq!(b.text(&field("ide", "entitled")).await, "entitled 0");
    let (colour, _, full) = styled(&b, "light", &field("ide", "term"), "--full").await;
    assert_eq!(colour, full, "nothing granted: the lapsed colour");

    // A far end: the seats, no countdown.
    b.wait_text(&field("far", "entitled"), SOON, "far's seats", |t| {
        t == "entitled 3"
    })
    .await;
    assert_eq!(b.text(&field("far", "term")).await, "");
    assert_eq!(b.count(&format!("{}.warn", field("far", "term"))).await, 0);

    // The plain pool: nothing of the kind.
    let plain = b.text("tr[data-license=plain]").await;
    assert!(plain.contains("0 / 2"), "{plain}");
    for word in ["entitled", "⏳", "grace", "expired", "Acme"] {
        assert!(!plain.contains(word), "{word:?} on the plain pool: {plain}");
    }
    for name in ["entitled", "customer", "term"] {
        let texts = b
            .eval(&format!(
                "return document.querySelector({}).textContent;",
                json!(field("plain", name))
            ))
            .await;
        assert_eq!(texts, "", "plain's {name}");
    }
    assert_eq!(
        b.count("tr[data-license=plain] .term.warn, tr[data-license=plain] .term.ended")
            .await,
        0
    );

    b.assert_clean().await;
    b.close().await;
}

/// `cad` ends in 10.5 days: `⏳ 10d`, and the feed shows the file's
/// `loaded` as `§ entitlement` in a colour of its own. A renewal (same id,
/// later `iat`, 400 days, 12 seats) put in the directory: on the same
/// page, the countdown goes, the seats read `entitled 12`, and the feed
/// shows the renewal's event.
#[tokio::test]
async fn a_renewal_clears_the_countdown_live_and_the_feed_shows_entitlement_events() {
    let v = Vendor::generate(VENDOR);
    let licenses = format!("{}{}{PLAIN}", v.toml(), vendor_license("cad", ""));
    let now = unix_now();
    let first = v.sign(&acme(
        "acme-2026",
        now - 60,
        "cad",
        10,
        now + 10 * DAY + DAY / 2,
        None,
    ));
    let dir = tempfile::tempdir().expect("entitlements dir");
    let server = start(&licenses, &dir, &[("acme.lic", first)]).await;
    let cad = license_when(&server, "cad", |l| l["entitled_seats"] == 10).await;
    let days = days_left(&cad["entitlement_ends_at"]);

    let b = Browser::start().await;
    b.sign_in(&server.base, &server.admin_token).await;
    b.wait_text(&field("cad", "term"), SOON, "cad's countdown", |t| {
        t == format!("⏳ {days}d")
    })
    .await;
    let loaded = feed_entry(&b, &["loaded keyright/acme-2026", "(acme.lic)"], SOON).await;
    assert!(loaded.contains("cad 10"), "{loaded}");
    let (colour, _, accent) = styled(&b, "light", "[data-events] .k-entitlement", "--accent").await;
    assert_eq!(colour, accent, "entitlement events have their own colour");
    let (dark, _, accent) = styled(&b, "dark", "[data-events] .k-entitlement", "--accent").await;
    assert_eq!(dark, accent);
    assert_ne!(colour, dark);
    b.eval("window.__same_document = true").await;

    let renewal = acme("acme-2026", now, "cad", 12, now + 400 * DAY, None);
    put(dir.path(), "acme-renewed.lic", &v.sign(&renewal));
    b.wait_text(
        &field("cad", "entitled"),
        SHOWS_WITHIN,
        "the renewal's seats",
        |t| t == "entitled 12",
    )
    .await;
    b.wait_text(&field("cad", "term"), SOON, "no countdown", |t| {
        t.is_empty()
    })
    .await;
    assert_eq!(b.count(&format!("{}.warn", field("cad", "term"))).await, 0);
    let renewed = feed_entry(
        &b,
        &["loaded keyright/acme-2026", "(acme-renewed.lic)"],
        SOON,
    )
    .await;
    assert!(renewed.contains("cad 12"), "{renewed}");
    assert_eq!(
        b.eval("return window.__same_document === true").await,
        true,
        "updated in place, not reloaded"
    );
    b.assert_clean().await;
    b.close().await;
}
