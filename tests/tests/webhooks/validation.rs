//! The licenses file's webhooks and alerts validated, at start-up and on
//! reload: each invalid edit names the field and where, never a secret.

use std::time::Duration;

use leasehold_tests::{Server, eventually, run_leaseholdd_expecting_exit};

use super::receiver::Receiver;
use super::webhook_kit::{alert_toml, license_toml, send_test, webhook_toml, webhook_view};
use super::{ARRIVES, CHAT_SECRET, SECRET, json_delivery};

/// A valid file whose webhook points at `url`; the validation cases edit it.
fn valid_file(url: &str) -> String {
    [
        webhook_toml("ops", url, SECRET, "json", &["revoke"]),
        license_toml("cad", 2),
        alert_toml(
            "cad-busy",
            "usage",
            &["percent = 90", "for = \"10m\"", "webhooks = [\"ops\"]"],
        ),
        license_toml("cam", 2),
        alert_toml("cam-denied", "denials", &["count = 3", "within = \"15m\""]),
    ]
    .concat()
}

/// Each invalid edit of [`valid_file`]: (what, the file, words its error
/// must carry: the field and where; words it must not: a credential).
fn invalid_files(url: &str) -> Vec<(&'static str, String, Vec<&'static str>, Vec<&'static str>)> {
    let ok = valid_file(url);
    let edit = |from: &str, to: &str| {
        assert!(ok.contains(from), "{from:?} in the valid file");
        ok.replacen(from, to, 1)
    };
    let second = webhook_toml("ops", url, CHAT_SECRET, "json", &[]);
    let alert_as = |name: &str| alert_toml(name, "full", &["for = \"5m\""]);
    vec![
        (
            "duplicate webhook name",
            format!("{second}{ok}"),
            vec!["ops", "name"],
            vec![],
        ),
        (
            "malformed webhook name",
            edit("name = \"ops\"", "name = \"ops hook!\""),
            vec!["name"],
            vec![],
        ),
        (
            "duplicate alert name",
            format!("{ok}{}", alert_as("cad-busy")),
            vec!["cad-busy", "name"],
            vec![],
        ),
        (
            "malformed alert name",
            edit("name = \"cam-denied\"", "name = \"cam denied\""),
            vec!["name"],
            vec![],
        ),
        (
            "url not http(s)",
            edit(&format!("url = {url:?}"), "url = \"ftp://127.0.0.1/ops\""),
            vec!["ops", "url"],
            vec![],
        ),
        (
            "url with a password",
            edit(
                &format!("url = {url:?}"),
                "url = \"http://user:hunter2pw@127.0.0.1:9/ops\"",
            ),
            vec!["ops", "url"],
            vec!["hunter2pw"],
        ),
        (
            // A user name alone can be a credential too (a token as user):
            // the file is not a place for credentials (issue 32).
            "url with a user name",
            edit(
                &format!("url = {url:?}"),
                "url = \"http://hooktoken@127.0.0.1:9/ops\"",
            ),
            vec!["ops", "url"],
            vec!["hooktoken"],
        ),
        (
            "secret under 16 characters",
            edit(
                &format!("secret = {SECRET:?}"),
                "secret = \"fifteen-chars-x\"",
            ),
            vec!["ops", "secret"],
            vec!["fifteen-chars-x"],
        ),
        (
            "unknown format",
            edit("format = \"json\"", "format = \"xml\""),
            vec!["ops", "format"],
            vec![],
        ),
        (
            "unknown when",
            edit("when = \"usage\"", "when = \"sometimes\""),
            vec!["cad", "when"],
            vec![],
        ),
        (
            "unknown event kind",
            edit("events = [\"revoke\"]", "events = [\"explode\"]"),
            vec!["ops", "events"],
            vec![],
        ),
        (
            "events names alert",
            edit("events = [\"revoke\"]", "events = [\"alert\"]"),
            vec!["ops", "events"],
            vec![],
        ),
        (
            "unknown webhook name",
            edit("webhooks = [\"ops\"]", "webhooks = [\"nope\"]"),
            vec!["cad", "webhooks"],
            vec![],
        ),
        (
            "percent 0",
            edit("percent = 90", "percent = 0"),
            vec!["cad", "percent"],
            vec![],
        ),
        (
            "percent 101",
            edit("percent = 90", "percent = 101"),
            vec!["cad", "percent"],
            vec![],
        ),
        (
            "count 0",
            edit("count = 3", "count = 0"),
            vec!["cam", "count"],
            vec![],
        ),
        (
            "for under 1s",
            edit("for = \"10m\"", "for = \"500ms\""),
            vec!["cad", "for"],
            vec![],
        ),
        (
            "within under 1s",
            edit("within = \"15m\"", "within = \"0s\""),
            vec!["cam", "within"],
            vec![],
        ),
    ]
}

#[tokio::test]
async fn an_invalid_webhook_or_alert_stops_start_up_naming_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let url = "http://127.0.0.1:9/ops";
    // The file the cases edit starts.
    drop(Server::start(&valid_file(url)).await);
    for (i, (what, file, named, hidden)) in invalid_files(url).into_iter().enumerate() {
        let path = dir.path().join(format!("licenses-{i}.toml"));
        std::fs::write(&path, &file).unwrap();
        let data = dir.path().join(format!("data-{i}"));
        let (status, stderr) = run_leaseholdd_expecting_exit(
            &[
                "--listen",
                "127.0.0.1:0",
                "--data-dir",
                data.to_str().unwrap(),
                "--licenses",
                path.to_str().unwrap(),
            ],
            Duration::from_secs(20),
        );
        assert!(!status.success(), "{what}: started anyway\n{file}");
        eprintln!("{what}: {}", stderr.trim());
        for word in named {
            assert!(
                stderr.contains(word),
                "{what}: {word:?} not named in\n{stderr}"
            );
        }
        for word in hidden {
            assert!(
                !stderr.contains(word),
                "{what}: {word:?} shown in\n{stderr}"
            );
        }
    }
}

#[tokio::test]
async fn an_invalid_webhook_or_alert_edit_is_refused_and_the_old_policy_kept() {
    let ops = Receiver::start(SECRET).await;
    let url = ops.url("/ops");
    let s = Server::start(&valid_file(&url)).await;
    let before = webhook_view(&s, "ops").await;
    let rejected = || async {
        s.events_of("config")
            .await
            .into_iter()
            .filter_map(|e| e["detail"].as_str().map(str::to_string))
            .filter(|d| d.contains("rejected"))
            .collect::<Vec<_>>()
    };
    // Each replica (two on PostgreSQL) reads the file and says so.
    let replicas = s.replica_addrs().len();
    for (what, file, named, hidden) in invalid_files(&url) {
        let seen = rejected().await.len();
        std::fs::write(s.licenses_path(), &file).unwrap();
        let details = eventually(ARRIVES, what, || async {
            let all = rejected().await;
            (all.len() >= seen + replicas).then(|| all[seen..].join("\n"))
        })
        .await;
        for word in named {
            assert!(
                details.contains(word),
                "{what}: {word:?} not named in {details}"
            );
        }
        for word in hidden {
            assert!(
                !details.contains(word),
                "{what}: {word:?} shown in {details}"
            );
            assert!(!s.logs().contains(word), "{what}: {word:?} logged");
        }
        let now = webhook_view(&s, "ops").await;
        assert_eq!(
            (&now["url"], &now["format"]),
            (&before["url"], &before["format"]),
            "{what}: the old policy kept"
        );
    }
    // Still the old webhook, secret and all.
    let id = send_test(&s, "ops").await;
    let got = ops.wait_for(1, ARRIVES).await;
    assert_eq!(json_delivery(&got[0])["id"], id.as_str());
    assert!(!s.logs().contains(SECRET));
}
