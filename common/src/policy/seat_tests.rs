//! The seat-policy fields of the licenses file: parsing, validation, who is who.

use std::time::Duration;

use super::*;

/// The example of `docs/src/configuration.md`, "Seat policies": every field at once.
const EXAMPLE: &str = r#"
[[license]]
id = "cad"
key = "cad-key"
seats = 10
ttl = "60s"
skew = "5s"
reap_grace = "15s"
overage = 2                       # up to 2 grants beyond `seats` (soft limit); default 0
linger = "5m"                     # a released seat keeps counting this long; default none
max_per_holder = 1                # live seats one holder name may have; default no cap
allow = ["@design", "ci-*"]       # who may check out; absent: everyone
deny = ["@contractors", "guest"]  # checked first: deny wins over allow

[[license.group]]
name = "design"
holders = ["alice", "bob", "design-*"]   # holder names
fingerprints = ["render-node-*"]         # and/or machines
reserve = 3                       # seats only this group may use
max = 6                           # the group never holds more than this at once

[[license.group]]
name = "contractors"
holders = ["ext-*"]

[license.borrow]                  # absent: no borrowing on this license
max = "7d"                        # longest borrow
seats = 3                         # at most 3 seats borrowed at once
allow = ["@design"]               # who may borrow; absent: whoever may check out
"#;

fn cad() -> LicenseConfig {
    Licenses::parse(EXAMPLE)
        .unwrap()
        .get("cad")
        .unwrap()
        .clone()
}

fn one(body: &str) -> Result<Licenses, PolicyError> {
    Licenses::parse(&format!(
        "[[license]]\nid = \"x\"\nkey = \"k\"\nseats = 4\n{body}"
    ))
}

fn x(body: &str) -> LicenseConfig {
    one(body).unwrap().get("x").unwrap().clone()
}

/// The error names license "x" and `field`; its message contains `words`.
#[track_caller]
fn rejects(body: &str, field: &str, words: &str) {
    match one(body) {
        Err(e @ PolicyError::Invalid { .. }) => {
            let PolicyError::Invalid {
                license, field: f, ..
            } = &e
            else {
                unreachable!()
            };
            assert_eq!(license, "x", "{e}");
            assert_eq!(*f, field, "{e}");
            assert!(e.to_string().contains(words), "{e}");
        }
        other => panic!("expected {field} to be rejected, got {other:?}"),
    }
}

fn p(s: &str) -> Pattern {
    Pattern::parse(s).unwrap()
}

#[test]
fn the_example_of_the_brief_parses() {
    let cad = cad();
    assert_eq!(cad.policy.seats, 10);
    assert_eq!(cad.policy.overage, 2);
    assert_eq!(cad.policy.linger, Some(Duration::from_secs(300)));
    assert_eq!(cad.policy.max_per_holder, Some(1));
    assert_eq!(
        cad.allow,
        Some(vec![Who::Group("design".into()), Who::Pattern(p("ci-*"))])
    );
    assert_eq!(
        cad.deny,
        vec![Who::Group("contractors".into()), Who::Pattern(p("guest"))]
    );
    assert_eq!(
        cad.groups,
        vec![
            Group {
                name: "design".into(),
                holders: vec![p("alice"), p("bob"), p("design-*")],
                fingerprints: vec![p("render-node-*")],
                reserve: 3,
                max: Some(6),
            },
            Group {
                name: "contractors".into(),
                holders: vec![p("ext-*")],
                fingerprints: vec![],
                reserve: 0,
                max: None,
            },
        ]
    );
    assert_eq!(
        cad.borrow,
        Some(BorrowPolicy {
            max: Duration::from_secs(7 * 86_400),
            seats: 3,
            allow: Some(vec![Who::Group("design".into())]),
        })
    );
    assert!(cad.has_seat_policies());
    assert_eq!(cad.reserved_total(), 3);
    assert!(!format!("{cad:?}").contains("cad-key"));
}

#[test]
fn a_license_without_the_new_fields_gets_the_defaults() {
    let l = x("");
    assert_eq!(l.policy.overage, 0);
    assert_eq!(l.policy.linger, None);
    assert_eq!(l.policy.max_per_holder, None);
    assert!(l.groups.is_empty());
    assert_eq!(l.allow, None);
    assert!(l.deny.is_empty());
    assert_eq!(l.borrow, None);
    assert!(!l.has_seat_policies());
    assert!(l.allows("anyone", None));
    assert!(l.allows("anyone", Some("fp")));
    assert!(
        !l.allows_borrow("anyone", Some("fp")),
        "no [license.borrow]"
    );
    assert_eq!(l.group_of("anyone", Some("fp")), None);
    assert_eq!(x("linger = \"0s\"").policy.linger, None, "0s is no linger");
}

#[test]
fn each_field_alone_is_a_seat_policy() {
    for body in [
        "overage = 1",
        "linger = \"1s\"",
        "max_per_holder = 2",
        "allow = []",
        "deny = [\"guest\"]",
        "[[license.group]]\nname = \"g\"",
        "[license.borrow]\nmax = \"1h\"\nseats = 1",
    ] {
        assert!(x(body).has_seat_policies(), "{body}");
    }
    assert!(!x("overage = 0").has_seat_policies());
}

#[test]
fn policy_field_errors_name_the_field() {
    rejects("overage = 5", "overage", "must be at most seats (4)");
    assert_eq!(x("overage = 4").policy.overage, 4);
    rejects("linger = \"31d\"", "linger", "30 days");
    assert_eq!(
        x("linger = \"30d\"").policy.linger,
        Some(Duration::from_secs(30 * 86_400))
    );
    rejects("max_per_holder = 0", "max_per_holder", "at least 1");
}

#[test]
fn group_errors_name_the_group_and_field() {
    rejects(
        "[[license.group]]\nname = \"design\"\nreserve = 3\nmax = 2",
        "group.design.max",
        "below the group's reserve (3)",
    );
    assert_eq!(
        x("[[license.group]]\nname = \"design\"\nreserve = 3\nmax = 3").groups[0].max,
        Some(3)
    );
    rejects(
        "[[license.group]]\nname = \"a\"\nreserve = 3\n[[license.group]]\nname = \"design\"\nreserve = 2",
        "group.design.reserve",
        "reserves of this license to 5, more than its 4 seats",
    );
    assert_eq!(
        x("[[license.group]]\nname = \"a\"\nreserve = 2\n[[license.group]]\nname = \"b\"\nreserve = 2")
            .reserved_total(),
        4
    );
    rejects(
        "[[license.group]]\nname = \"a\"\n[[license.group]]\nname = \"a\"",
        "group",
        "\"a\" is defined twice",
    );
    rejects(
        "[[license.group]]\nholders = [\"x\"]",
        "group",
        "name must not be empty",
    );
    rejects(
        "[[license.group]]\nname = \"\"",
        "group",
        "name must not be empty",
    );
    rejects(
        "[[license.group]]\nname = \"a b\"",
        "group",
        "ASCII letters",
    );
    rejects(
        "[[license.group]]\nname = \"design\"\nholders = [\"\"]",
        "group.design.holders",
        "empty pattern",
    );
    rejects(
        "[[license.group]]\nname = \"design\"\nfingerprints = [\"a\", \"\"]",
        "group.design.fingerprints",
        "empty pattern",
    );
    rejects(
        "[[license.group]]\nname = \"design\"\nholders = [\"\\u001b[2J\"]",
        "group.design.holders",
        "control or format",
    );
}

#[test]
fn allow_deny_errors() {
    rejects("allow = [\"\"]", "allow", "empty pattern");
    rejects("deny = [\"a\", \"\"]", "deny", "empty pattern");
    rejects("allow = [\"@\"]", "allow", "without a group name");
    rejects(
        "allow = [\"@design\"]",
        "group",
        "\"design\" (named by \"@design\" in allow) is not defined",
    );
    rejects("deny = [\"@nobody\"]", "group", "in deny");
    rejects(
        "[license.borrow]\nmax = \"1h\"\nseats = 1\nallow = [\"@nobody\"]",
        "group",
        "in borrow.allow",
    );
    rejects(
        "[license.borrow]\nmax = \"1h\"\nseats = 1\nallow = [\"\"]",
        "borrow.allow",
        "empty pattern",
    );
}

#[test]
fn borrow_errors() {
    rejects(
        "[license.borrow]\nmax = \"59s\"\nseats = 1",
        "borrow.max",
        "at least 1 minute",
    );
    rejects(
        "[license.borrow]\nmax = \"31d\"\nseats = 1",
        "borrow.max",
        "at most 30 days",
    );
    rejects(
        "[license.borrow]\nmax = \"1h\"\nseats = 0",
        "borrow.seats",
        "at least 1",
    );
    rejects(
        "[license.borrow]\nmax = \"1h\"\nseats = 5",
        "borrow.seats",
        "at most seats (4)",
    );
    let b = x("[license.borrow]\nmax = \"1m\"\nseats = 4")
        .borrow
        .unwrap();
    assert_eq!(
        (b.max, b.seats, b.allow),
        (Duration::from_secs(60), 4, None)
    );
    assert!(
        x("[license.borrow]\nmax = \"30d\"\nseats = 1")
            .borrow
            .is_some()
    );
    // `max` and `seats` are required; unknown fields are typos.
    for body in [
        "[license.borrow]\nseats = 1",
        "[license.borrow]\nmax = \"1h\"",
        "[license.borrow]\nmax = \"1h\"\nseats = 1\nmaximum = 2",
    ] {
        assert!(matches!(one(body), Err(PolicyError::Syntax(_))), "{body}");
    }
}

#[test]
fn unknown_fields_of_groups_are_typos() {
    let e = one("[[license.group]]\nname = \"a\"\nreserved = 1").unwrap_err();
    assert!(e.to_string().contains("reserved"), "{e}");
    let e = one("overages = 1").unwrap_err();
    assert!(e.to_string().contains("overages"), "{e}");
}

#[test]
fn membership_and_the_group_one_counts_for() {
    let cad = cad();
    let design = cad.group("design").unwrap();
    assert!(design.has_member("alice", None));
    assert!(design.has_member("design-7", Some("laptop")));
    assert!(
        design.has_member("ext-1", Some("render-node-3")),
        "by machine"
    );
    assert!(!design.has_member("ext-1", Some("laptop")));
    assert!(!design.has_member("Alice", None), "case-sensitive");
    assert!(
        !design.has_member("render-node-3", None),
        "holders only match holders"
    );
    assert_eq!(cad.group("nope"), None);

    // First in file order wins for counting.
    let name = |h, f| cad.group_of(h, f).map(|g| g.name.as_str());
    assert_eq!(name("alice", None), Some("design"));
    assert_eq!(name("ext-1", None), Some("contractors"));
    assert_eq!(name("ext-1", Some("render-node-1")), Some("design"));
    assert_eq!(name("carol", None), None);

    let swapped = Licenses::parse(
        &EXAMPLE.replace("holders = [\"ext-*\"]", "holders = [\"ext-*\", \"alice\"]"),
    )
    .unwrap();
    let swapped = swapped.get("cad").unwrap();
    assert_eq!(swapped.group_of("alice", None).unwrap().name, "design");
    assert!(
        swapped
            .group("contractors")
            .unwrap()
            .has_member("alice", None)
    );
}

#[test]
fn allow_and_deny_with_groups_and_deny_winning() {
    let cad = cad();
    assert!(cad.allows("alice", None), "@design");
    assert!(
        cad.allows("carol", Some("render-node-2")),
        "@design by machine"
    );
    assert!(cad.allows("ci-42", None), "ci-*");
    assert!(!cad.allows("carol", None), "allow present, no match");
    assert!(!cad.allows("guest", None), "denied");
    assert!(!cad.allows("ext-1", None), "@contractors denied");
    // A member of both: deny wins.
    assert!(
        !cad.allows("ext-1", Some("render-node-2")),
        "design by machine but contractor by name"
    );
    // A plain pattern in allow/deny names holders, not machines.
    assert!(!cad.allows("carol", Some("ci-42")));
    assert!(cad.allows("ci-1", Some("guest")));

    let nobody = x("allow = []");
    assert!(
        !nobody.allows("anyone", None),
        "an empty allow admits no one"
    );
    let deny_all = x("deny = [\"*\"]");
    assert!(!deny_all.allows("anyone", Some("fp")));
}

#[test]
fn who_may_borrow() {
    let cad = cad();
    assert!(cad.allows_borrow("alice", Some("laptop")));
    assert!(
        !cad.allows_borrow("ci-1", Some("laptop")),
        "not in borrow.allow"
    );
    assert!(!cad.allows_borrow("guest", Some("laptop")));
    assert!(
        !cad.allows_borrow("ext-1", Some("render-node-1")),
        "in @design but denied"
    );
    let open = x("[license.borrow]\nmax = \"1h\"\nseats = 1\n");
    assert!(
        open.allows_borrow("anyone", Some("fp")),
        "absent borrow.allow: as checkout"
    );
    let open = x("deny = [\"guest\"]\n[license.borrow]\nmax = \"1h\"\nseats = 1\n");
    assert!(!open.allows_borrow("guest", Some("fp")));
}

#[test]
fn describes_changes_of_the_seat_policies() {
    let old = Licenses::parse(EXAMPLE).unwrap();
    let changed = |from: &str, to: &str| {
        assert!(EXAMPLE.contains(from), "{from}");
        let new = Licenses::parse(&EXAMPLE.replace(from, to)).unwrap();
        old.describe_changes(&new)
    };
    assert_eq!(changed("overage = 2", "overage = 0"), ["cad: overage 2→0"]);
    assert_eq!(changed("linger = \"5m\"", ""), ["cad: linger 5m→none"]);
    assert_eq!(
        changed("max_per_holder = 1", "max_per_holder = 3"),
        ["cad: max_per_holder 1→3"]
    );
    assert_eq!(
        changed("allow = [\"@design\", \"ci-*\"]", ""),
        ["cad: allow [@design, ci-*]→everyone"]
    );
    assert_eq!(
        changed("\"@contractors\", \"guest\"", "\"guest\""),
        ["cad: deny [@contractors, guest]→[guest]"]
    );
    assert_eq!(
        changed("reserve = 3 ", "reserve = 2 "),
        ["cad: group design reserve 3→2"]
    );
    assert_eq!(changed("max = 6 ", ""), ["cad: group design max 6→none"]);
    assert_eq!(
        changed("\"ext-*\"]", "\"ext-*\", \"temp-*\"]"),
        ["cad: group contractors members changed"]
    );
    assert_eq!(
        changed(
            "name = \"contractors\"\nholders = [\"ext-*\"]",
            "name = \"contractors\"\nholders = [\"ext-*\"]\n[[license.group]]\nname = \"render\""
        ),
        ["cad: group render added"]
    );
    assert_eq!(
        changed("max = \"7d\"", "max = \"3d\""),
        ["cad: borrow.max 168h→72h"]
    );
    assert_eq!(
        changed("seats = 3 ", "seats = 2 "),
        ["cad: borrow.seats 3→2"]
    );
    assert_eq!(
        changed("allow = [\"@design\"]  ", ""),
        ["cad: borrow.allow [@design]→as checkout"]
    );
    let plain =
        Licenses::parse("[[license]]\nid = \"cad\"\nkey = \"cad-key\"\nseats = 10\n").unwrap();
    assert_eq!(
        plain.describe_changes(&old),
        [
            "cad: overage 0→2, linger none→5m, max_per_holder none→1, allow everyone→[@design, ci-*], deny []→[@contractors, guest], group design added, group contractors added, borrow added (max 168h, 3 seats)"
        ]
    );
    assert_eq!(
        old.describe_changes(&plain)[0],
        "cad: overage 2→0, linger 5m→none, max_per_holder 1→none, allow [@design, ci-*]→everyone, deny [@contractors, guest]→[], group design removed, group contractors removed, borrow removed"
    );
}

#[test]
fn messages_read_as_sentences() {
    let msg = |body: &str| one(body).unwrap_err().to_string();
    for body in [
        "overage = 5",
        "linger = \"31d\"",
        "max_per_holder = 0",
        "[[license.group]]\nname = \"design\"\nreserve = 3\nmax = 2",
        "[[license.group]]\nname = \"design\"\nreserve = 5",
        "[[license.group]]\nname = \"a\"\n[[license.group]]\nname = \"a\"",
        "[[license.group]]\nname = \"\"",
        "deny = [\"@contractors\"]",
        "allow = [\"\"]",
        "[license.borrow]\nmax = \"30s\"\nseats = 1",
        "[license.borrow]\nmax = \"1h\"\nseats = 0",
    ] {
        println!("{}", msg(body));
    }
    assert_eq!(
        msg("[[license.group]]\nname = \"design\"\nreserve = 3\nmax = 2"),
        "license \"x\": group.design.max (2) must not be below the group's reserve (3)"
    );
}

#[test]
fn reordered_groups_are_described() {
    let two = "[[license.group]]\nname = \"a\"\n[[license.group]]\nname = \"b\"";
    let old = one(two).unwrap();
    let new = one("[[license.group]]\nname = \"b\"\n[[license.group]]\nname = \"a\"").unwrap();
    assert_eq!(old.describe_changes(&new), ["x: groups reordered"]);
}

#[test]
fn run_time_field_names_are_interned_once() {
    let a = super::intern("group.g.max".to_string());
    let b = super::intern(String::from("group.g.max"));
    assert!(std::ptr::eq(a, b));
}

#[test]
fn idle_timeout_must_be_longer_than_the_ttl() {
    // The test license's ttl is the default, 60 s.
    assert_eq!(x("").policy.idle_timeout, None);
    assert_eq!(
        x("idle_timeout = \"30m\"").policy.idle_timeout,
        Some(Duration::from_secs(1800))
    );
    assert_eq!(
        x("idle_timeout = \"61s\"").policy.idle_timeout,
        Some(Duration::from_secs(61)),
        "any longer value, no floor"
    );
    assert!(x("idle_timeout = \"30m\"").has_seat_policies());
    rejects(
        "idle_timeout = \"60s\"",
        "idle_timeout",
        "(1m) must be longer than the ttl (1m)",
    );
    rejects("idle_timeout = \"10s\"", "idle_timeout", "(10s)");
    rejects(
        "idle_timeout = \"0s\"",
        "idle_timeout",
        "longer than the ttl",
    );
    let bad = one("idle_timeout = \"soon\"").unwrap_err().to_string();
    assert!(
        bad.contains("idle_timeout") && bad.contains("not a duration"),
        "{bad}"
    );
    let (with, without) = (one("idle_timeout = \"30m\"").unwrap(), one("").unwrap());
    assert_eq!(
        with.describe_changes(&without),
        ["x: idle_timeout 30m→none"]
    );
}
