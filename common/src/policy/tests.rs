use super::*;

const GOOD: &str = r#"
[[license]]
id = "demo-cad"
key = "demo-cad-key"
seats = 10
ttl = "60s"
skew = "5s"
reap_grace = "15s"

[[license]]
id = "tiny"
key = "tiny-key"
seats = 0
ttl = 30
"#;

fn one(body: &str) -> Result<Licenses, PolicyError> {
    Licenses::parse(&format!("[[license]]\nid = \"x\"\nkey = \"k\"\n{body}"))
}

#[test]
fn the_demo_file_lends_one_ide_seat_for_three_days() {
    // The quickstart and `leasehold simulate` show borrowing on it.
    let demo = Licenses::parse(include_str!("../../../assets/licenses.toml")).unwrap();
    let ide = demo.get("demo-ide").expect("demo-ide");
    let borrow = ide.borrow.as_ref().expect("demo-ide lends seats");
    assert_eq!(borrow.max, Duration::from_secs(3 * 86_400));
    assert_eq!(borrow.seats, 1);
    assert!(borrow.allow.is_none());
}

#[test]
fn parses_a_good_file_with_defaults() {
    let l = Licenses::parse(GOOD).unwrap();
    assert_eq!(l.len(), 2);
    let cad = l.get("demo-cad").unwrap();
    assert_eq!(cad.policy.seats, 10);
    assert_eq!(cad.policy.ttl, Duration::from_secs(60));
    let tiny = l.get("tiny").unwrap();
    assert_eq!(
        tiny.policy.seats, 0,
        "zero seats is a valid (suspended) pool"
    );
    assert_eq!(tiny.policy.ttl, Duration::from_secs(30));
    assert_eq!(tiny.policy.skew, Duration::from_secs(5));
    assert_eq!(tiny.policy.reap_grace, Duration::from_secs(15));
}

#[test]
fn rejects_reap_grace_not_above_skew_naming_license_and_field() {
    let err = one("seats = 1\nskew = \"5s\"\nreap_grace = \"5s\"").unwrap_err();
    match &err {
        PolicyError::Invalid { license, field, .. } => {
            assert_eq!(license, "x");
            assert_eq!(*field, "reap_grace");
        }
        other => panic!("unexpected {other:?}"),
    }
    assert!(err.to_string().contains("greater than skew"), "{err}");
    assert!(one("seats = 1\nskew = \"5s\"\nreap_grace = \"4s\"").is_err());
    assert!(one("seats = 1\nskew = \"5s\"\nreap_grace = \"5001ms\"").is_ok());
}

#[test]
fn rejects_zero_ttl() {
    let err = one("seats = 1\nttl = \"0s\"").unwrap_err();
    assert!(
        matches!(err, PolicyError::Invalid { field: "ttl", .. }),
        "{err}"
    );
}

#[test]
fn rejects_negative_seats_and_missing_seats() {
    assert!(matches!(one("seats = -1"), Err(PolicyError::Syntax(_))));
    // Only a license with a vendor may leave its seats to the vendor.
    assert!(matches!(
        one(""),
        Err(PolicyError::Invalid { field: "seats", .. })
    ));
}

#[test]
fn rejects_empty_or_bad_ids_and_keys() {
    let e = Licenses::parse("[[license]]\nkey = \"k\"\nseats = 1").unwrap_err();
    assert!(matches!(e, PolicyError::Invalid { field: "id", .. }), "{e}");
    let e = Licenses::parse("[[license]]\nid = \"a\"\nseats = 1").unwrap_err();
    assert!(
        matches!(e, PolicyError::Invalid { field: "key", .. }),
        "{e}"
    );
    let e = Licenses::parse("[[license]]\nid = \"a/b\"\nkey = \"k\"\nseats = 1").unwrap_err();
    assert!(matches!(e, PolicyError::Invalid { field: "id", .. }), "{e}");
    let e = Licenses::parse("[[license]]\nid = \"a\"\nkey = \"k k\"\nseats = 1").unwrap_err();
    assert!(
        matches!(e, PolicyError::Invalid { field: "key", .. }),
        "{e}"
    );
}

#[test]
fn rejects_duplicate_ids() {
    let text = "[[license]]\nid = \"a\"\nkey = \"k\"\nseats = 1\n[[license]]\nid = \"a\"\nkey = \"j\"\nseats = 2";
    let e = Licenses::parse(text).unwrap_err();
    assert!(e.to_string().contains("another license"), "{e}");
}

#[test]
fn rejects_unknown_fields_so_typos_are_caught() {
    let e = one("seats = 1\nreap_grase = \"20s\"").unwrap_err();
    assert!(e.to_string().contains("reap_grase"), "{e}");
}

#[test]
fn durations() {
    assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
    assert_eq!(parse_duration("60s"), Ok(Duration::from_secs(60)));
    assert_eq!(parse_duration("5m"), Ok(Duration::from_secs(300)));
    assert_eq!(parse_duration("1h"), Ok(Duration::from_secs(3600)));
    assert_eq!(parse_duration("90"), Ok(Duration::from_secs(90)));
    for bad in ["", "s", "-5s", "5 parsecs", "1.5s", "99999999999999999999h"] {
        assert!(parse_duration(bad).is_err(), "{bad:?} should be rejected");
    }
    assert_eq!(format_duration(Duration::from_millis(1500)), "1500ms");
    assert_eq!(format_duration(Duration::from_secs(300)), "5m");
    assert_eq!(format_duration(Duration::ZERO), "0s");
}

#[test]
fn describes_changes() {
    let old = Licenses::parse(GOOD).unwrap();
    let new = Licenses::parse(
        &GOOD
            .replace("seats = 10", "seats = 12")
            .replace("id = \"tiny\"", "id = \"huge\""),
    )
    .unwrap();
    let changes = old.describe_changes(&new);
    assert!(
        changes.contains(&"demo-cad: seats 10→12".to_string()),
        "{changes:?}"
    );
    assert!(
        changes.contains(&"tiny: removed".to_string()),
        "{changes:?}"
    );
    assert!(
        changes.contains(&"huge: added with 0 seats".to_string()),
        "{changes:?}"
    );
}

#[test]
fn debug_never_shows_keys() {
    let l = Licenses::parse(GOOD).unwrap();
    assert!(!format!("{l:?}").contains("demo-cad-key"));
}
