use clap::Parser;
use leasehold_common::Timestamp;
use leasehold_common::alerts::AlertSettings;
use leasehold_common::api::{DeliveryType, WebhookView};

use super::*;
use crate::cli::{Cli, Command, TopCommand};

fn t(s: i64) -> Timestamp {
    Timestamp::from_millis(1_796_011_200_000 + s * 1000)
}

fn webhooks() -> WebhooksResponse {
    WebhooksResponse {
        webhooks: vec![
            WebhookView {
                name: "ops".into(),
                url: "http://127.0.0.1:9/hook".into(),
                format: "json".into(),
                events: vec![],
                pending: 2,
                delivered: 0,
                failed: 1,
                last_success_at: None,
                last_error: Some("connect error: Connection refused (os error 111)".into()),
            },
            WebhookView {
                name: "chat\u{1b}[2J".into(),
                url: "https://hooks.example.com/x".into(),
                format: "slack".into(),
                events: vec![],
                pending: 0,
                delivered: 12,
                failed: 0,
                last_success_at: Some(t(-30)),
                last_error: None,
            },
        ],
    }
}

fn alert(license: &str, name: &str, when: &str, firing: bool) -> AlertView {
    AlertView {
        license_id: license.into(),
        alert: AlertSettings {
            name: name.into(),
            when: when.into(),
            for_: (when != "denials").then(|| "5m".into()),
            percent: (when == "usage").then_some(90),
            count: (when == "denials").then_some(3),
            within: (when == "denials").then(|| "15m".into()),
            before: None,
        },
        firing,
        since: firing.then(|| t(-300)),
    }
}

#[test]
fn webhooks_table_and_firing_alerts() {
    insta::assert_snapshot!(format_webhooks(&webhooks()), @r"
    NAME      FORMAT  URL                          PENDING  DELIVERED  FAILED  LAST SUCCESS              LAST ERROR
    ops       json    http://127.0.0.1:9/hook      2        0          1       -                         connect error: Connection refused (os error 111)
    chat�[2J  slack   https://hooks.example.com/x  0        12         0       2026-11-30T03:59:30.000Z  -
    ");
    assert_eq!(
        format_webhooks(&WebhooksResponse { webhooks: vec![] }),
        "no webhooks configured\n"
    );
    let alerts = AlertsResponse {
        alerts: vec![
            alert("cad", "cad-full", "full", true),
            alert("cad", "cad-busy", "usage", true),
            alert("cad", "cad-denied", "denials", true),
            alert("render", "render-full", "full", false),
        ],
    };
    insta::assert_snapshot!(format_alerts(&alerts), @r"
    alerts firing (3 of 4):
    LICENSE  ALERT       CONDITION             FIRING SINCE
    cad      cad-full    full for 5m           2026-11-30T03:55:00.000Z
    cad      cad-busy    usage ≥ 90% for 5m    2026-11-30T03:55:00.000Z
    cad      cad-denied  3 denials within 15m  2026-11-30T03:55:00.000Z
    ");
    let quiet = AlertsResponse {
        alerts: vec![alert("render", "render-full", "full", false)],
    };
    assert_eq!(format_alerts(&quiet), "no alerts firing (1 configured)\n");

    // --json: the server's webhooks, the alerts added, nothing secret.
    let v: serde_json::Value =
        serde_json::from_str(&webhooks_json(&webhooks(), &alerts).unwrap()).unwrap();
    assert_eq!(v["webhooks"][0]["pending"], 2);
    assert_eq!(v["webhooks"][0]["last_success_at"], serde_json::Value::Null);
    assert_eq!(v["webhooks"][1]["name"], "chat\u{1b}[2J");
    assert_eq!(v["alerts"][0]["alert"]["for"], "5m");
    assert_eq!(v["alerts"][0]["firing"], true);
}

#[test]
fn long_errors_are_cut_in_the_table() {
    let mut w = webhooks();
    w.webhooks[0].last_error = Some("x".repeat(500));
    let table = format_webhooks(&w);
    let line = table.lines().nth(1).unwrap();
    assert!(
        line.ends_with(&format!("{}…", "x".repeat(ERROR_CELLS - 1))),
        "{line}"
    );
}

#[test]
fn deliveries_table() {
    let d = |id: &str, kind, status, attempts, error: Option<&str>| DeliveryView {
        id: id.into(),
        webhook: "ops".into(),
        kind,
        status,
        attempts,
        created_at: t(-60),
        last_attempt_at: (attempts > 0).then(|| t(-10)),
        last_error: error.map(String::from),
        next_attempt_at: Some(t(20)),
        license_id: (kind != DeliveryType::Test).then(|| "cad".into()),
    };
    let resp = DeliveriesResponse {
        deliveries: vec![
            d(
                "aa01",
                DeliveryType::AlertFiring,
                DeliveryStatus::Pending,
                3,
                Some("HTTP 500"),
            ),
            d(
                "aa02",
                DeliveryType::Test,
                DeliveryStatus::Delivered,
                1,
                None,
            ),
            d(
                "aa03",
                DeliveryType::Event,
                DeliveryStatus::Failed,
                40,
                Some("timeout"),
            ),
        ],
        next: Some("17".into()),
    };
    insta::assert_snapshot!(format_deliveries(&resp), @r"
    ID    WEBHOOK  TYPE          LICENSE  STATUS     ATTEMPTS  CREATED                   LAST ATTEMPT              NEXT ATTEMPT              LAST ERROR
    aa01  ops      alert.firing  cad      pending    3         2026-11-30T03:59:00.000Z  2026-11-30T03:59:50.000Z  2026-11-30T04:00:20.000Z  HTTP 500
    aa02  ops      test          -        delivered  1         2026-11-30T03:59:00.000Z  2026-11-30T03:59:50.000Z  -                         -
    aa03  ops      event         cad      failed     40        2026-11-30T03:59:00.000Z  2026-11-30T03:59:50.000Z  -                         timeout
    older: --after 17
    ");
    let empty = DeliveriesResponse {
        deliveries: vec![],
        next: None,
    };
    assert_eq!(format_deliveries(&empty), "no deliveries\n");
    let v: serde_json::Value = serde_json::from_str(&to_json(&resp).unwrap()).unwrap();
    assert_eq!(v["deliveries"][0]["type"], "alert.firing");
    assert_eq!(v["next"], "17");
}

fn webhooks_args(args: &[&str]) -> WebhooksArgs {
    let argv = [&["leasehold", "webhooks"][..], args].concat();
    match Cli::try_parse_from(argv).unwrap().command {
        Some(TopCommand::Admin(Command::Webhooks(a))) => a,
        other => panic!("{other:?}"),
    }
}

#[test]
fn parses_webhooks_subcommands() {
    let a = webhooks_args(&[]);
    assert!(a.action.is_none() && !a.json);
    assert!(webhooks_args(&["--json"]).json);

    let a = webhooks_args(&["deliveries"]);
    assert!(matches!(
        a.action,
        Some(WebhooksAction::Deliveries {
            webhook: None,
            status: None,
            limit: 50,
            after: None,
            json: false
        })
    ));
    #[rustfmt::skip]
    let a = webhooks_args(&["deliveries", "--webhook", "ops", "--status", "failed", "--limit", "5",
        "--after", "9", "--json"]);
    match a.action {
        Some(WebhooksAction::Deliveries {
            webhook,
            status,
            limit,
            after,
            json,
        }) => {
            assert_eq!(webhook.as_deref(), Some("ops"));
            assert_eq!(status, Some(DeliveryStatus::Failed));
            assert_eq!((limit, after.as_deref(), json), (5, Some("9"), true));
        }
        other => panic!("{other:?}"),
    }
    let a = webhooks_args(&["test", "ops"]);
    assert!(matches!(
        a.action,
        Some(WebhooksAction::Test { ref name, json: false }) if name == "ops"
    ));
    // Bad values are refused by the parser: no request is made with them.
    for bad in [
        &["deliveries", "--status", "lost"][..],
        &["deliveries", "--limit", "0"],
        &["deliveries", "--limit", "many"],
        &["test"],
        &["resend"],
    ] {
        let argv = [&["leasehold", "webhooks"][..], bad].concat();
        assert!(Cli::try_parse_from(argv).is_err(), "{bad:?}");
    }
}

/// `leasehold status` names a pool's firing alerts, in a column shown only
/// while some pool has one.
#[test]
fn status_shows_firing_alerts_on_their_pool() {
    use leasehold_common::api::{LicenseSummary, LicensesResponse};
    let pool = |id: &str, live, alerts: &[&str]| LicenseSummary {
        id: id.into(),
        seats: 4,
        live,
        ttl_s: 60.0,
        skew_s: 5.0,
        reap_grace_s: 15.0,
        alerts_firing: alerts.iter().map(|a| a.to_string()).collect(),
        ..Default::default()
    };
    let resp = LicensesResponse {
        now: t(0),
        licenses: vec![
            pool("cad", 4, &["cad-full", "cad-busy"]),
            pool("render", 1, &[]),
        ],
    };
    insta::assert_snapshot!(crate::commands::format_status(&resp, "http://s"), @r"
    server http://s · server time 2026-11-30T04:00:00.000Z
    LICENSE  LIVE/SEATS  FREE  RESERVED  LINGERING  BORROWED  TTL  SKEW  REAP GRACE  STATUS  ALERTS
    cad      4/4         0     -         -          -         1m   5s    15s         FULL    ALERT cad-full,cad-busy
    render   1/4         3     -         -          -         1m   5s    15s         ok      -
    ");
}
