//! `[[vendor]]` and `vendor =` in the licenses file: a mistake rejects the
//! whole file, naming the field.

use super::{Licenses, PolicyError, SEATS_NOT_NARROWED};

const KEY: &str = "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo";

fn parse(text: &str) -> Result<Licenses, PolicyError> {
    Licenses::parse(text)
}

fn vendor_error(text: &str) -> (String, &'static str, String) {
    match parse(text) {
        Err(PolicyError::Vendor {
            vendor,
            field,
            problem,
        }) => (vendor, field, problem),
        other => panic!("expected a vendor error, got {other:?}"),
    }
}

#[test]
fn a_vendor_license_takes_its_seats_from_the_vendor_unless_the_file_narrows() {
    let l = parse(&format!(
        r#"
        [[vendor]]
        name = "keyright"
        public_key = "{KEY}"
        [[license]]
        id = "cad"
        key = "k1"
        vendor = "keyright"
        [[license]]
        id = "ide"
        key = "k2"
        vendor = "keyright"
        seats = 8
        "#
    ))
    .unwrap();
    assert_eq!(l.vendors().len(), 1);
    assert_eq!(l.vendors()[0].keys.len(), 1);
    let cad = l.get("cad").unwrap();
    assert_eq!(cad.vendor.as_deref(), Some("keyright"));
    assert_eq!(cad.policy.seats, SEATS_NOT_NARROWED);
    assert_eq!(cad.seats_in_file(), None);
    assert_eq!(l.get("ide").unwrap().seats_in_file(), Some(8));
}

#[test]
fn a_vendor_may_have_several_keys() {
    let l = parse(&format!(
        "[[vendor]]\nname = \"v\"\npublic_key = [\"{KEY}\", \"{KEY}\"]\n"
    ))
    .unwrap();
    assert_eq!(l.vendors()[0].keys.len(), 2);
}

#[test]
fn vendor_mistakes_reject_the_file_naming_the_field() {
    let (vendor, field, problem) =
        vendor_error("[[vendor]]\nname = \"v\"\npublic_key = \"not-a-key\"\n");
    assert_eq!((vendor.as_str(), field), ("v", "vendor.public_key"));
    assert!(problem.contains("not base64url"), "{problem}");
    let (_, field, problem) = vendor_error(&format!(
        "[[vendor]]\nname = \"v\"\npublic_key = \"{KEY}\"\n[[vendor]]\nname = \"v\"\npublic_key = \"{KEY}\"\n"
    ));
    assert_eq!(field, "vendor.name");
    assert!(problem.contains("another vendor"), "{problem}");
    let (_, field, _) = vendor_error(&format!(
        "[[vendor]]\nname = \"\"\npublic_key = \"{KEY}\"\n"
    ));
    assert_eq!(field, "vendor.name");
    let (_, field, _) = vendor_error("[[vendor]]\nname = \"v\"\npublic_key = []\n");
    assert_eq!(field, "vendor.public_key");
}

#[test]
fn a_license_naming_an_unknown_vendor_or_no_seats_is_refused() {
    match parse("[[license]]\nid = \"cad\"\nkey = \"k\"\nvendor = \"nobody\"\n") {
        Err(PolicyError::Invalid { license, field, .. }) => {
            assert_eq!((license.as_str(), field), ("cad", "vendor"))
        }
        other => panic!("{other:?}"),
    }
    match parse("[[license]]\nid = \"cad\"\nkey = \"k\"\n") {
        Err(PolicyError::Invalid { field, .. }) => assert_eq!(field, "seats"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_reload_says_what_changed_about_vendors() {
    let before = parse("[[license]]\nid = \"cad\"\nkey = \"k\"\nseats = 3\n").unwrap();
    let after = parse(&format!(
        "[[vendor]]\nname = \"v\"\npublic_key = \"{KEY}\"\n[[license]]\nid = \"cad\"\nkey = \"k\"\nvendor = \"v\"\n"
    ))
    .unwrap();
    let changes = before.describe_changes(&after);
    assert!(
        changes
            .iter()
            .any(|c| c.contains("seats 3→entitled") && c.contains("vendor none→v")),
        "{changes:?}"
    );
    assert!(changes.iter().any(|c| c == "vendors [v]"), "{changes:?}");
}

#[test]
fn two_files_parsed_apart_are_equal_until_entitlements_differ() {
    let text = "[[license]]\nid = \"cad\"\nkey = \"k\"\nseats = 3\n";
    let (a, b) = (parse(text).unwrap(), parse(text).unwrap());
    assert_eq!(a, b, "a replica's file is the cluster's: no reload event");
    let rejected = super::Entitled::new(
        crate::entitlement::Ledger::default(),
        Vec::new(),
        vec![super::Rejected {
            file: "x.lic".into(),
            why: "not a JWS".into(),
        }],
    );
    assert_ne!(a, b.with_entitled(rejected));
}
