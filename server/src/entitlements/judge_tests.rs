//! Each of the brief's reasons to reject a file, the last good content
//! kept, and the directory read.

use std::collections::{BTreeMap, HashMap};

use leasehold_common::entitlement::{Newest, VendorKey, VendorSigner};
use serde_json::{Value, json};

use super::judge::{Judge, Verdict, judge_all, judge_one};
use super::read_dir;

const NOW: i64 = 1_800_000_000;

fn vendor() -> VendorSigner {
    VendorSigner::from_seed(&[3; 32])
}

fn claims() -> Value {
    json!({"iss": "keyright", "jti": "acme", "iat": NOW - 60,
           "licenses": [{"id": "cad", "seats": 10}]})
}

fn with(f: impl FnOnce(&mut Value)) -> String {
    let mut c = claims();
    f(&mut c);
    vendor().sign(&c)
}

struct World {
    vendors: HashMap<String, Vec<VendorKey>>,
    kids: Vec<String>,
    remembered: HashMap<(String, String), (Newest, String)>,
}

impl World {
    fn new() -> World {
        World {
            vendors: HashMap::from([(
                "keyright".to_string(),
                vec![
                    VendorSigner::from_seed(&[9; 32]).public_key(),
                    vendor().public_key(),
                ],
            )]),
            kids: vec!["kid-here".to_string()],
            remembered: HashMap::new(),
        }
    }

    fn judge(&self) -> Judge<'_> {
        Judge {
            vendors: &self.vendors,
            kids: &self.kids,
            wall_s: NOW,
            remembered: &self.remembered,
        }
    }
}

fn rejected(v: Verdict) -> String {
    match v {
        Verdict::Rejected(why) => why,
        other => panic!("not rejected: {other:?}"),
    }
}

#[test]
fn a_good_file_loads_with_any_of_its_vendors_keys() {
    let w = World::new();
    let text = format!("# acme\n{}\n", with(|_| {}));
    let Verdict::Loaded(e) = judge_one(&text, w.judge()) else {
        panic!("not loaded")
    };
    assert_eq!(e.claims.grant_for("cad").unwrap().seats, 10);
    let bound = with(|c| c["aud"] = json!(["kid-standby", "kid-here"]));
    assert!(matches!(judge_one(&bound, w.judge()), Verdict::Loaded(_)));
}

#[test]
fn each_reason_to_reject_is_said() {
    let w = World::new();
    let stranger = VendorSigner::from_seed(&[4; 32]).sign(&claims());
    let cases = [
        ("garbage".to_string(), "compact JWS"),
        (
            with(|c| c["grace"] = json!(60)),
            "claim grace: only with exp",
        ),
        (
            with(|c| c["iat"] = json!(NOW + 24 * 3600 + 1)),
            "iat in the future: check this server's clock",
        ),
        (
            with(|c| c["iss"] = json!("other")),
            "claim iss: \"other\" is no [[vendor]]",
        ),
        (stranger, "does not verify with vendor keyright's keys"),
        (
            with(|c| c["aud"] = json!("kid-elsewhere")),
            "claim aud: bound to another server (this one's kid is kid-here)",
        ),
        (
            with(|c| c["licenses"][0]["versions"] = json!("2026")),
            "versions",
        ),
    ];
    for (text, says) in cases {
        let why = rejected(judge_one(&text, w.judge()));
        assert!(why.contains(says), "{why:?} should say {says:?}");
    }
    // A day ahead is still a clock a vendor may have.
    let ahead = with(|c| c["iat"] = json!(NOW + 24 * 3600));
    assert!(matches!(judge_one(&ahead, w.judge()), Verdict::Loaded(_)));
}

#[test]
fn the_same_iat_with_other_claims_rejects_both_files() {
    let mut w = World::new();
    let a = with(|_| {});
    let b = with(|c| c["licenses"][0]["seats"] = json!(1000));
    let same_claims_other_order = vendor().sign(&json!({"licenses": [{"seats": 10, "id": "cad"}],
        "iat": NOW - 60, "jti": "acme", "iss": "keyright"}));
    let files = BTreeMap::from([
        ("a.lic".to_string(), Ok(a.clone())),
        ("b.lic".to_string(), Ok(b)),
    ]);
    let verdicts = judge_all(&files, &BTreeMap::new(), w.judge());
    for name in ["a.lic", "b.lic"] {
        let why = rejected(verdicts[name].clone());
        assert!(
            why.contains("keyright/acme issued at") && why.contains("a.lic, b.lic"),
            "{why}"
        );
    }
    // The same claims twice are one entitlement, not a conflict.
    let files = BTreeMap::from([
        ("a.lic".to_string(), Ok(a.clone())),
        ("copy.lic".to_string(), Ok(same_claims_other_order)),
    ]);
    let verdicts = judge_all(&files, &BTreeMap::new(), w.judge());
    assert!(verdicts.values().all(|v| matches!(v, Verdict::Loaded(_))));

    // The store remembers other claims at that iat: the file is rejected.
    w.remembered.insert(
        ("keyright".into(), "acme".into()),
        (
            Newest {
                iat: NOW - 60,
                nbf: None,
            },
            "another-hash".into(),
        ),
    );
    let verdicts = judge_all(
        &BTreeMap::from([("a.lic".to_string(), Ok(a))]),
        &BTreeMap::new(),
        w.judge(),
    );
    assert!(rejected(verdicts["a.lic"].clone()).contains("and as remembered"));
}

#[test]
fn a_good_file_that_goes_bad_keeps_its_last_good_content_until_removed() {
    let w = World::new();
    let good = with(|_| {});
    let first = judge_all(
        &BTreeMap::from([("a.lic".to_string(), Ok(good))]),
        &BTreeMap::new(),
        w.judge(),
    );
    let half_written = BTreeMap::from([(
        "a.lic".to_string(),
        Ok("eyJhbGciOiJFZERTQSJ9.eyJ".to_string()),
    )]);
    let second = judge_all(&half_written, &first, w.judge());
    let Verdict::Kept { why, last_good } = &second["a.lic"] else {
        panic!("{second:?}")
    };
    assert!(why.contains("compact JWS"), "{why}");
    assert_eq!(Some(last_good), first["a.lic"].in_force());
    // Still bad at the next scan: still kept. Removed: gone.
    let third = judge_all(&half_written, &second, w.judge());
    assert!(matches!(third["a.lic"], Verdict::Kept { .. }));
    assert!(judge_all(&BTreeMap::new(), &third, w.judge()).is_empty());
    // A file never good is simply rejected.
    let never = judge_all(&half_written, &BTreeMap::new(), w.judge());
    assert!(never["a.lic"].in_force().is_none());
}

#[test]
fn only_lic_files_are_read() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("acme.lic"), "x").unwrap();
    std::fs::write(dir.path().join("notes.txt"), "x").unwrap();
    std::fs::write(dir.path().join(".hidden.lic"), "x").unwrap();
    std::fs::create_dir(dir.path().join("dir.lic")).unwrap();
    std::fs::write(dir.path().join("big.lic"), vec![b'a'; (1 << 20) + 1]).unwrap();
    let files = read_dir(dir.path()).unwrap();
    assert_eq!(files.keys().collect::<Vec<_>>(), ["acme.lic", "big.lic"]);
    assert_eq!(files["acme.lic"], Ok("x".to_string()));
    assert!(
        files["big.lic"]
            .as_ref()
            .unwrap_err()
            .contains("not an entitlement")
    );
}
