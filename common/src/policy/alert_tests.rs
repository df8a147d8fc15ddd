//! `[[webhook]]` and `[[license.alert]]`: what parses, and every invalid
//! field the brief names, each rejecting the whole file by name.

use std::time::Duration;

use super::*;
use crate::api::EventKind;

const HOOK: &str = r#"
[[webhook]]
name = "ops"
url = "https://hooks.example.com/leasehold"
secret = "0123456789abcdef"
format = "json"
events = ["revoke", "reclaim", "config"]

[[webhook]]
name = "chat"
url = "http://127.0.0.1:9/hook"
secret = "another-secret-16"
format = "slack"
"#;

fn file(hooks: &str, alerts: &str) -> Result<Licenses, PolicyError> {
    Licenses::parse(&format!(
        "{hooks}\n[[license]]\nid = \"cad\"\nkey = \"k\"\nseats = 10\n{alerts}"
    ))
}

fn alert(body: &str) -> Result<Licenses, PolicyError> {
    file(HOOK, &format!("[[license.alert]]\n{body}"))
}

/// The field a rejected file names.
fn field_of(r: Result<Licenses, PolicyError>) -> &'static str {
    match r {
        Err(PolicyError::Invalid { field, .. } | PolicyError::Webhook { field, .. }) => field,
        other => panic!("expected a named field, got {other:?}"),
    }
}

#[test]
fn webhooks_and_alerts_of_every_kind_parse() {
    let l = file(
        HOOK,
        r#"
[[license.alert]]
name = "cad-full"
when = "full"
for = "5m"
webhooks = ["ops"]

[[license.alert]]
name = "cad-busy"
when = "usage"
percent = 90
for = "10m"

[[license.alert]]
name = "cad-denied"
when = "denials"
count = 3
within = "15m"
"#,
    )
    .unwrap();
    let ops = l.webhook("ops").unwrap();
    assert_eq!(ops.format, WebhookFormat::Json);
    assert_eq!(
        ops.events,
        [EventKind::Revoke, EventKind::Reclaim, EventKind::Config]
    );
    let chat = l.webhook("chat").unwrap();
    assert_eq!(chat.format, WebhookFormat::Slack);
    assert!(chat.events.is_empty(), "no events by default");
    let alerts: Vec<&Alert> = l.alerts().map(|(_, a)| a).collect();
    assert_eq!(
        alerts[0].condition,
        AlertCondition::Full {
            for_: Duration::from_secs(300)
        }
    );
    assert_eq!(alerts[0].webhooks, ["ops"]);
    assert_eq!(
        alerts[1].condition,
        AlertCondition::Usage {
            percent: 90,
            for_: Duration::from_secs(600)
        }
    );
    assert_eq!(
        alerts[1].webhooks,
        ["ops", "chat"],
        "default: every webhook"
    );
    assert_eq!(
        alerts[2].condition,
        AlertCondition::Denials {
            count: 3,
            within: Duration::from_secs(900)
        }
    );
    assert_eq!(alerts[2].condition.hold_for(), Duration::ZERO);
    let s = alerts[1].settings();
    assert_eq!(
        serde_json::to_value(&s).unwrap(),
        serde_json::json!({"name": "cad-busy", "when": "usage", "percent": 90, "for": "10m"})
    );
}

#[test]
fn the_secret_never_shows_in_debug_output() {
    let l = file(HOOK, "").unwrap();
    let shown = format!("{l:?}");
    assert!(!shown.contains("0123456789abcdef"), "{shown}");
    assert!(shown.contains("<redacted>"));
}

#[test]
fn every_invalid_webhook_field_rejects_the_file_by_name() {
    let hook = |fields: &str| file(&format!("[[webhook]]\n{fields}"), "");
    let ok = "secret = \"0123456789abcdef\"\n";
    let cases = [
        (format!("name = \"\"\nurl = \"http://h/\"\n{ok}"), "name"),
        (format!("name = \"a b\"\nurl = \"http://h/\"\n{ok}"), "name"),
        (format!("name = \"x\"\nurl = \"ftp://h/\"\n{ok}"), "url"),
        (
            format!("name = \"x\"\nurl = \"hooks.example.com\"\n{ok}"),
            "url",
        ),
        (
            format!("name = \"x\"\nurl = \"https://u:pw@h/\"\n{ok}"),
            "url",
        ),
        (format!("name = \"x\"\nurl = \"https://u@h/\"\n{ok}"), "url"),
        (
            format!("name = \"x\"\nurl = \"https:///path\"\n{ok}"),
            "url",
        ),
        (
            format!("name = \"x\"\nurl = \"https://h:99999/\"\n{ok}"),
            "url",
        ),
        (
            "name = \"x\"\nurl = \"http://h/\"\nsecret = \"short\"\n".to_string(),
            "secret",
        ),
        (
            format!("name = \"x\"\nurl = \"http://h/\"\n{ok}format = \"xml\"\n"),
            "format",
        ),
        (
            format!("name = \"x\"\nurl = \"http://h/\"\n{ok}events = [\"nope\"]\n"),
            "events",
        ),
        (
            format!("name = \"x\"\nurl = \"http://h/\"\n{ok}events = [\"alert\"]\n"),
            "events",
        ),
    ];
    for (fields, field) in cases {
        assert_eq!(field_of(hook(&fields)), field, "{fields}");
    }
    let twice = format!("{HOOK}\n[[webhook]]\nname = \"ops\"\nurl = \"http://h/\"\n{ok}");
    assert_eq!(field_of(file(&twice, "")), "name");
    let message = hook(&format!("name = \"x\"\nurl = \"https://u:pw@h/\"\n{ok}"))
        .unwrap_err()
        .to_string();
    assert!(message.starts_with("webhook \"x\": url"), "{message}");
    assert!(
        !message.contains("pw"),
        "the password is not repeated: {message}"
    );
}

#[test]
fn loopback_private_and_ipv6_hosts_are_allowed() {
    for url in [
        "http://127.0.0.1:8080/hook",
        "http://10.0.0.5/x",
        "https://[::1]:443/x",
        "http://[fe80::1]/",
        "https://hooks.example.com",
    ] {
        let text =
            format!("[[webhook]]\nname = \"x\"\nurl = \"{url}\"\nsecret = \"0123456789abcdef\"\n");
        assert!(file(&text, "").is_ok(), "{url}");
    }
}

#[test]
fn every_invalid_alert_field_rejects_the_file_by_name() {
    let cases = [
        ("name = \"\"\nwhen = \"full\"\nfor = \"1m\"", "alert.name"),
        (
            "name = \"a/b\"\nwhen = \"full\"\nfor = \"1m\"",
            "alert.name",
        ),
        ("name = \"a\"\nwhen = \"empty\"\nfor = \"1m\"", "alert.when"),
        ("name = \"a\"\nwhen = \"full\"", "alert.for"),
        (
            "name = \"a\"\nwhen = \"full\"\nfor = \"500ms\"",
            "alert.for",
        ),
        ("name = \"a\"\nwhen = \"full\"\nfor = \"0s\"", "alert.for"),
        (
            "name = \"a\"\nwhen = \"usage\"\npercent = 0\nfor = \"1m\"",
            "alert.percent",
        ),
        (
            "name = \"a\"\nwhen = \"usage\"\npercent = 101\nfor = \"1m\"",
            "alert.percent",
        ),
        (
            "name = \"a\"\nwhen = \"usage\"\nfor = \"1m\"",
            "alert.percent",
        ),
        (
            "name = \"a\"\nwhen = \"denials\"\ncount = 0\nwithin = \"1m\"",
            "alert.count",
        ),
        (
            "name = \"a\"\nwhen = \"denials\"\ncount = 1\nwithin = \"999ms\"",
            "alert.within",
        ),
        (
            "name = \"a\"\nwhen = \"denials\"\nwithin = \"1m\"",
            "alert.count",
        ),
        (
            "name = \"a\"\nwhen = \"full\"\nfor = \"1m\"\nwebhooks = [\"nope\"]",
            "alert.webhooks",
        ),
        (
            "name = \"a\"\nwhen = \"full\"\nfor = \"1m\"\npercent = 5",
            "alert.percent",
        ),
        (
            "name = \"a\"\nwhen = \"denials\"\ncount = 1\nwithin = \"1m\"\nfor = \"1m\"",
            "alert.for",
        ),
    ];
    for (body, field) in cases {
        assert_eq!(field_of(alert(body)), field, "{body}");
    }
    let message = alert("name = \"a\"\nwhen = \"usage\"\npercent = 101\nfor = \"1m\"")
        .unwrap_err()
        .to_string();
    assert!(
        message.starts_with("license \"cad\": alert.percent"),
        "{message}"
    );
}

#[test]
fn alert_names_are_unique_in_the_whole_file() {
    let text = format!(
        "{HOOK}
[[license]]
id = \"a\"
key = \"k\"
seats = 1
[[license.alert]]
name = \"same\"
when = \"full\"
for = \"1m\"

[[license]]
id = \"b\"
key = \"k\"
seats = 1
[[license.alert]]
name = \"same\"
when = \"full\"
for = \"1m\"
"
    );
    assert_eq!(field_of(Licenses::parse(&text)), "alert.name");
}

#[test]
fn an_alert_without_webhooks_in_the_file_goes_nowhere_but_still_fires() {
    let l = file(
        "",
        "[[license.alert]]\nname = \"a\"\nwhen = \"full\"\nfor = \"1s\"",
    )
    .unwrap();
    let (_, a) = l.alerts().next().unwrap();
    assert!(a.webhooks.is_empty());
}

#[test]
fn reload_changes_name_webhooks_and_alerts_but_never_the_secret() {
    let old = file(HOOK, "").unwrap();
    let rotated = HOOK.replace("0123456789abcdef", "fedcba9876543210");
    let new = file(
        &rotated,
        "[[license.alert]]\nname = \"cad-full\"\nwhen = \"full\"\nfor = \"1m\"",
    )
    .unwrap();
    let changes = old.describe_changes(&new).join("\n");
    assert!(changes.contains("webhook ops: secret changed"), "{changes}");
    assert!(changes.contains("cad: alerts [cad-full]"), "{changes}");
    assert!(!changes.contains("fedcba9876543210"), "{changes}");
}
