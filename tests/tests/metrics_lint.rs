//! `/metrics` as Prometheus tooling sees it: a busy server's scrape passes
//! `promtool check metrics`; `assets/prometheus/leasehold-rules.yml` passes
//! `promtool check rules` and its unit tests; the rules and the Grafana
//! dashboard `assets/grafana/leasehold.json` name only series that
//! `/metrics` exposes, and the dashboard's queries parse.

use std::collections::BTreeSet;
use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

use leasehold_tests::{Server, TEST_LICENSES, require_tool};
use serde_json::{Value, json};

fn require_promtool() {
    require_tool(
        Command::new("promtool").arg("--version"),
        "promtool",
        "apt-get install prometheus",
    );
}

fn asset(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../assets")
        .join(rel)
}

/// Run promtool with `args` (and `stdin`, if any); panics unless it exits 0.
fn promtool(args: &[&str], stdin: Option<&str>) -> Output {
    let mut child = Command::new("promtool")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run promtool");
    let mut input = child.stdin.take().expect("promtool stdin");
    input
        .write_all(stdin.unwrap_or("").as_bytes())
        .expect("write promtool stdin");
    drop(input);
    let out = child.wait_with_output().expect("promtool output");
    assert!(
        out.status.success(),
        "promtool {args:?}: {}\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Each replica's `/metrics` text (one on SQLite).
async fn scrapes(s: &Server) -> Vec<String> {
    let mut texts = Vec::new();
    for addr in s.replica_addrs() {
        let resp = s
            .client()
            .get(format!("http://{addr}/metrics"))
            .send()
            .await
            .expect("scrape");
        assert_eq!(resp.status(), 200);
        texts.push(resp.text().await.expect("metrics text"));
    }
    texts
}

/// The sample names of an exposition (`x_bucket`, not the family `x`).
fn sample_names(text: &str) -> BTreeSet<String> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .filter_map(|l| l.split(['{', ' ']).next())
        .map(str::to_string)
        .collect()
}

/// Every `leasehold_…` metric name in `text`.
fn leasehold_names(text: &str) -> BTreeSet<String> {
    let is_name = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == ':';
    let mut names = BTreeSet::new();
    let mut rest = text;
    while let Some(at) = rest.find("leasehold_") {
        let preceded = rest[..at].chars().next_back().is_some_and(is_name);
        let len = rest[at..].find(|c| !is_name(c)).unwrap_or(rest.len() - at);
        if !preceded {
            names.insert(rest[at..at + len].to_string());
        }
        rest = &rest[at + len..];
    }
    names
}

/// The value of the sample `series` (name and labels, exactly).
fn sample(text: &str, series: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or_else(|| panic!("no {series} in\n{text}"))
}

#[tokio::test]
async fn a_busy_servers_metrics_pass_promtool_check_metrics() {
    require_promtool();
    let s = Server::start(TEST_LICENSES).await;
    // Samples in every outcome the rules and dashboard read: granted
    // (new and reused), denied, renewed, lost, released, revoked.
    let a = json!({"holder": "a", "fingerprint": "m-a"});
    let lease = s.take_seat("tiny", "tiny-key", a.clone()).await;
    let again = s.checkout("tiny", "tiny-key", a).await;
    assert!(again.status().is_success(), "{}", again.status());
    let denied = s.checkout("tiny", "tiny-key", json!({"holder": "b"})).await;
    assert_eq!(denied.status(), 409);
    assert_eq!(
        s.heartbeat("tiny", "tiny-key", &lease.seat_id)
            .await
            .status(),
        200
    );
    let revoked = s
        .take_seat("small", "small-key", json!({"holder": "c"}))
        .await;
    let resp = s.revoke(&revoked.seat_id).send().await.expect("revoke");
    assert!(resp.status().is_success(), "{}", resp.status());
    assert_eq!(
        s.heartbeat("small", "small-key", &revoked.seat_id)
            .await
            .status(),
        410
    );
    let released = s
        .take_seat("small", "small-key", json!({"holder": "d"}))
        .await;
    let resp = s.release("small", "small-key", &released.seat_id).await;
    assert!(resp.status().is_success(), "{}", resp.status());

    for (series, n) in [
        ("leasehold_checkouts_total{outcome=\"new\"}", 3),
        ("leasehold_checkouts_total{outcome=\"reused\"}", 1),
        ("leasehold_denials_total{outcome=\"full\"}", 1),
        ("leasehold_heartbeats_total{outcome=\"renewed\"}", 1),
        ("leasehold_heartbeats_total{outcome=\"lost\"}", 1),
        ("leasehold_releases_total", 1),
        ("leasehold_revokes_total", 1),
    ] {
        assert_eq!(s.counter_sum(series).await, n, "{series}");
    }
    for text in scrapes(&s).await {
        // Writer time is in seconds now, and some was spent committing.
        let commit = sample(&text, "leasehold_store_commit_seconds_total");
        assert!(commit > 0.0 && commit < 60.0, "commit seconds {commit}");
        assert!(!text.contains("microseconds"), "{text}");
        let out = promtool(&["check", "metrics"], Some(&text));
        let said = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(said.trim().is_empty(), "promtool check metrics: {said}");
    }
}

#[test]
fn the_alerting_rules_pass_promtool_check_and_their_unit_tests() {
    require_promtool();
    let rules = asset("prometheus/leasehold-rules.yml");
    let out = promtool(&["check", "rules", rules.to_str().expect("utf-8")], None);
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.contains("SUCCESS: 4 rules found"), "{said}");
    let tests = asset("prometheus/leasehold-rules.test.yml");
    let out = promtool(&["test", "rules", tests.to_str().expect("utf-8")], None);
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.contains("SUCCESS"), "{said}");
}

/// Each query of the dashboard, with the panel it is on.
fn dashboard_queries(dashboard: &Value) -> Vec<(String, String)> {
    let panels = dashboard["panels"].as_array().expect("panels");
    let mut ids = BTreeSet::new();
    let mut queries = Vec::new();
    for p in panels {
        assert!(
            ids.insert(p["id"].as_u64().expect("id")),
            "duplicate id {p}"
        );
        if p["type"] == "row" {
            continue;
        }
        let title = p["title"].as_str().expect("title").to_string();
        assert_eq!(p["datasource"]["uid"], "${datasource}", "{title}");
        let targets = p["targets"].as_array().expect("targets");
        assert!(!targets.is_empty(), "{title} has no query");
        for t in targets {
            assert_eq!(t["datasource"]["uid"], "${datasource}", "{title}");
            let expr = t["expr"].as_str().expect("expr");
            queries.push((title.clone(), expr.to_string()));
        }
    }
    queries
}

#[tokio::test]
async fn the_rules_and_the_dashboard_read_only_series_metrics_exposes() {
    require_promtool();
    let dashboard: Value = serde_json::from_str(
        &std::fs::read_to_string(asset("grafana/leasehold.json")).expect("read dashboard"),
    )
    .expect("dashboard is JSON");
    assert!(dashboard["schemaVersion"].as_u64().expect("schemaVersion") >= 36);
    let variables = dashboard["templating"]["list"].as_array().expect("vars");
    assert!(
        variables.iter().any(|v| v["name"] == "datasource"
            && v["type"] == "datasource"
            && v["query"] == "prometheus"),
        "a Prometheus data source variable"
    );
    let queries = dashboard_queries(&dashboard);

    // Each query, its Grafana variables filled in, parses as PromQL:
    // promtool checks it as a recording rule (JSON is YAML).
    let rules: Vec<Value> = queries
        .iter()
        .enumerate()
        .map(|(i, (title, expr))| {
            let expr = expr
                .replace("$__rate_interval", "5m")
                .replace("$job", "leasehold")
                .replace("$license", ".*");
            assert!(!expr.contains('$'), "{title}: unknown variable in {expr}");
            json!({"record": format!("dashboard:query_{i}"), "expr": expr})
        })
        .collect();
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("dashboard-queries.yml");
    let groups = json!({"groups": [{"name": "dashboard", "rules": rules}]});
    std::fs::write(&path, groups.to_string()).expect("write queries");
    promtool(&["check", "rules", path.to_str().expect("utf-8")], None);

    let s = Server::start(TEST_LICENSES).await;
    let exposed = sample_names(&scrapes(&s).await[0]);
    let rules_text =
        std::fs::read_to_string(asset("prometheus/leasehold-rules.yml")).expect("read rules");
    let mut used = leasehold_names(&rules_text);
    for (_, expr) in &queries {
        used.extend(leasehold_names(expr));
    }
    assert!(used.len() >= 15, "few names found: {used:?}");
    let unknown: Vec<_> = used.difference(&exposed).collect();
    assert!(
        unknown.is_empty(),
        "not in /metrics: {unknown:?}\nexposed: {exposed:?}"
    );
}
