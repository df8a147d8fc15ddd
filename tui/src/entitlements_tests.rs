use super::*;
use leasehold_common::api::EntitledLicense;

const MIN: i64 = 60_000;
const HOUR: i64 = 60 * MIN;

fn t(ms: i64) -> Timestamp {
    Timestamp::from_millis(1_796_011_200_000 + ms)
}

/// A pool of `vendor` entitled to `seats`, dropping `ends_in` ms from t(0).
fn vendor_pool(seats: u32, ends_in: Option<i64>, in_grace: bool) -> LicenseSummary {
    LicenseSummary {
        id: "cad".into(),
        seats,
        vendor: Some("keyright".into()),
        entitled_seats: Some(seats),
        entitlement_ends_at: ends_in.map(t),
        in_grace,
        ..Default::default()
    }
}

#[test]
fn time_left_in_its_largest_whole_unit() {
    for (ms, want) in [
        (-5 * DAY_MS, "<1m"),
        (0, "<1m"),
        (59_999, "<1m"),
        (MIN, "1m"),
        (59 * MIN + 59_999, "59m"),
        (HOUR, "1h"),
        (DAY_MS - 1, "23h"),
        (DAY_MS, "1d"),
        (12 * DAY_MS + 23 * HOUR, "12d"),
        (400 * DAY_MS, "400d"),
    ] {
        assert_eq!(fmt_left(ms), want, "{ms} ms");
    }
}

#[test]
fn a_vendor_pool_is_marked_within_30_days_in_grace_and_when_expired() {
    let mark = |l: &LicenseSummary| term_mark(l, t(0)).map(|m| m.to_string());
    // Days left, within 30 days (the 30th included), not beyond.
    let soon = vendor_pool(10, Some(12 * DAY_MS + HOUR), false);
    assert_eq!(
        term_mark(&soon, t(0)),
        Some(TermMark::EndsIn(12 * DAY_MS + HOUR))
    );
    assert_eq!(mark(&soon).as_deref(), Some("⏳ 12d"));
    assert_eq!(
        mark(&vendor_pool(10, Some(5 * HOUR), false)).as_deref(),
        Some("⏳ 5h")
    );
    assert_eq!(
        mark(&vendor_pool(10, Some(WARN_WITHIN_MS), false)).as_deref(),
        Some("⏳ 30d")
    );
    assert_eq!(
        mark(&vendor_pool(10, Some(WARN_WITHIN_MS + 1), false)),
        None
    );
    // Perpetual: the seats never drop.
    assert_eq!(mark(&vendor_pool(10, None, false)), None);
    // In grace: the time until the seats drop, however far.
    assert_eq!(
        mark(&vendor_pool(3, Some(3 * DAY_MS + HOUR), true)).as_deref(),
        Some("grace 3d")
    );
    assert_eq!(
        mark(&vendor_pool(3, Some(60 * DAY_MS), true)).as_deref(),
        Some("grace 60d")
    );
    assert_eq!(mark(&vendor_pool(3, None, true)).as_deref(), Some("grace"));
    // Nothing entitled: expired, whatever else is said.
    let expired = vendor_pool(0, None, false);
    assert_eq!(term_mark(&expired, t(0)), Some(TermMark::Expired));
    assert_eq!(mark(&expired).as_deref(), Some("expired"));
    assert_eq!(
        mark(&vendor_pool(0, Some(DAY_MS), true)).as_deref(),
        Some("expired")
    );
    // A plain license (no vendor) has no mark and no entitled cell, even
    // with stray fields.
    let plain = LicenseSummary {
        entitled_seats: Some(0),
        entitlement_ends_at: Some(t(DAY_MS)),
        in_grace: true,
        ..Default::default()
    };
    assert_eq!(term_mark(&plain, t(0)), None);
    assert_eq!(entitled_cell(&plain, t(0)), None);
    assert_eq!(
        entitled_cell(&soon, t(0)),
        Some(("10".into(), Some(TermMark::EndsIn(12 * DAY_MS + HOUR))))
    );
    assert_eq!(
        entitled_cell(&vendor_pool(4, None, false), t(0)),
        Some(("4".into(), None))
    );
}

fn file(name: &str, state: &str) -> EntitlementView {
    EntitlementView {
        vendor: Some("keyright".into()),
        id: Some(name.trim_end_matches(".lic").into()),
        customer: Some("Acme".into()),
        issued_at: Some(t(-DAY_MS)),
        not_before: None,
        expires_at: None,
        grace_until: None,
        bound: false,
        state: state.into(),
        file: name.into(),
        licenses: vec![EntitledLicense {
            id: "cad".into(),
            seats: 10,
            versions: None,
            overage: 0,
            borrow: None,
        }],
        unused: Vec::new(),
        error: None,
    }
}

/// One row per kind of file: a term with grace ahead, one in grace, one
/// ended, a perpetual one, one not yet in force, and a rejected file.
#[test]
fn entitlements_table() {
    let mut active = file("acme.lic", "active");
    active.licenses.push(EntitledLicense {
        id: "ide".into(),
        seats: 3,
        ..active.licenses[0].clone()
    });
    active.licenses.push(EntitledLicense {
        id: "cam".into(),
        seats: 1,
        ..active.licenses[0].clone()
    });
    active.unused = vec!["cam".into()];
    (active.expires_at, active.grace_until) = (Some(t(30 * DAY_MS)), Some(t(44 * DAY_MS)));
    let mut grace = file("old.lic", "grace");
    (grace.expires_at, grace.grace_until) = (Some(t(-DAY_MS)), Some(t(3 * DAY_MS + HOUR)));
    let mut ended = file("older.lic", "ended");
    (ended.expires_at, ended.grace_until) = (Some(t(-10 * DAY_MS)), Some(t(-9 * DAY_MS)));
    ended.customer = None;
    let forever = file("forever.lic", "active");
    let mut later = file("later.lic", "not_yet");
    later.not_before = Some(t(DAY_MS + 5 * HOUR));
    later.expires_at = Some(t(400 * DAY_MS));
    let bad = EntitlementView {
        vendor: None,
        id: None,
        customer: None,
        issued_at: None,
        licenses: Vec::new(),
        error: Some(format!("not a JWS\u{1b}[2J: {}", "x".repeat(100))),
        ..file("bad.lic", "rejected")
    };
    let resp = EntitlementsResponse {
        server_kid: "k-123".into(),
        entitlements: vec![active, bad, forever, grace, later, ended],
    };
    insta::assert_snapshot!(format_entitlements(&resp, "http://127.0.0.1:7400", t(0)), @r"
    server http://127.0.0.1:7400 · kid k-123 · server time 2026-11-30T04:00:00.000Z
    FILE         VENDOR    ID       CUSTOMER  STATE                   LICENSES                       ENDS                 ERROR
    acme.lic     keyright  acme     Acme      active                  cad 10, ide 3, cam 1 (unused)  in 30d (+14d grace)  -
    bad.lic      -         -        -         rejected                -                              -                    not a JWS�[2J: xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx…
    forever.lic  keyright  forever  Acme      active                  cad 10                         perpetual            -
    old.lic      keyright  old      Acme      grace                   cad 10                         grace, ends in 3d    -
    later.lic    keyright  later    Acme      not_yet (starts in 1d)  cad 10                         in 400d              -
    older.lic    keyright  older    -         ended                   cad 10                         ended 9d ago         -
    ");
    let empty = EntitlementsResponse {
        server_kid: "k-123".into(),
        entitlements: Vec::new(),
    };
    assert_eq!(
        format_entitlements(&empty, "http://s", t(0)),
        "server http://s · kid k-123 · server time 2026-11-30T04:00:00.000Z\n\
         no entitlement files in the server's entitlements directory\n"
    );
}

/// A term without grace ends at `exp`; a term past its end reads as ended.
#[test]
fn ends_without_grace() {
    let mut e = file("a.lic", "active");
    e.expires_at = Some(t(2 * HOUR + MIN));
    assert_eq!(ends_cell(&e, t(0)), "in 2h");
    e.grace_until = e.expires_at;
    assert_eq!(ends_cell(&e, t(0)), "in 2h");
    assert_eq!(ends_cell(&e, t(3 * HOUR)), "ended 59m ago");
}
