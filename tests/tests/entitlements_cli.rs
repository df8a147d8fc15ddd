//! `leasehold entitlements`, `status` and the console against the real
//! `leaseholdd` with vendor-signed files in its entitlements directory
//! (issue 41): a term with grace ahead (cad), one in grace (ide), one
//! ended (cam), a perpetual one (render), a file that is no JWS, and a
//! plain license beside them. The table gives the server's kid and a row
//! per file; `--json` is the server's answer; `status` and the console's
//! pools pane give each vendor pool's entitled seats, marked `⏳ 8d`,
//! `grace 3d`, `expired` within 30 days of the drop.

use std::time::Duration;

use leasehold_tests::tmux::{Tmux, console_command, require_tmux};
use leasehold_tests::vendor::{Vendor, leaseholdd_kid, unix_now};
use leasehold_tests::{Run, Server, ServerOptions, eventually, run_leasehold};
use serde_json::{Value, json};
use tempfile::TempDir;

const DAY: i64 = 86_400;
const HOUR: i64 = 3600;
const SOON: Duration = Duration::from_secs(15);

fn vendor_license(id: &str) -> String {
    format!(
        "\n[[license]]\nid = \"{id}\"\nkey = \"{id}-key\"\nvendor = \"keyright\"\n\
         ttl = \"60s\"\nskew = \"5s\"\nreap_grace = \"15s\"\n"
    )
}

/// keyright's entitlement `jti` for Acme: `seats` of `license`, issued at
/// `iat`, ending at `exp` (none: perpetual) with `grace` seconds more.
fn signed(
    v: &Vendor,
    jti: &str,
    license: &str,
    seats: u32,
    term: (i64, Option<i64>, i64),
) -> String {
    let (iat, exp, grace) = term;
    let mut claims = json!({
        "iss": "keyright", "jti": jti, "sub": "Acme", "iat": iat,
        "licenses": [{"id": license, "seats": seats}],
    });
    if let Some(exp) = exp {
        claims["exp"] = json!(exp);
        claims["grace"] = json!(grace);
    }
    v.sign(&claims)
}

/// The server with four vendor licenses and `plain`, and the five files
/// already in its entitlements directory (and its listing showing them).
async fn vendor_server() -> (Server, TempDir) {
    let v = Vendor::generate("keyright");
    let licenses = format!(
        "{}{}{}{}{}\n[[license]]\nid = \"plain\"\nkey = \"plain-key\"\nseats = 2\n\
         ttl = \"60s\"\nskew = \"5s\"\nreap_grace = \"15s\"\n",
        v.toml(),
        vendor_license("cad"),
        vendor_license("ide"),
        vendor_license("cam"),
        vendor_license("render"),
    );
    let now = unix_now();
    let files = [
        // Ends in 5 days, then 3 days of grace: the seats drop in 8 days.
        (
            "cad.lic",
            signed(
                &v,
                "cad-2026",
                "cad",
                10,
                (now - 60, Some(now + 5 * DAY + HOUR), 3 * DAY),
            ),
        ),
        // Ended 23 hours ago, in grace for 3 days more.
        (
            "ide.lic",
            signed(
                &v,
                "ide-2025",
                "ide",
                3,
                (now - 30 * DAY, Some(now - 23 * HOUR), 4 * DAY),
            ),
        ),
        // Ended 10 days ago, its day of grace 9 days ago.
        (
            "cam.lic",
            signed(
                &v,
                "cam-old",
                "cam",
                2,
                (now - 40 * DAY, Some(now - 10 * DAY), DAY),
            ),
        ),
        (
            "render.lic",
            signed(&v, "render-forever", "render", 4, (now - 60, None, 0)),
        ),
        ("bad.lic", "not a JWS\n".to_string()),
    ];
    let dir = tempfile::tempdir().expect("entitlements dir");
    for (name, text) in &files {
        std::fs::write(dir.path().join(name), text).expect("write entitlement");
    }
    let options = ServerOptions::new(&licenses)
        .arg("--entitlements")
        .arg(dir.path().to_str().expect("utf-8 path"));
    let s = Server::start_with(options).await;
    eventually(SOON, "the five files listed", || async {
        let listing = s.admin_get("/v1/admin/entitlements").await;
        (listing["entitlements"].as_array()?.len() == 5).then_some(())
    })
    .await;
    (s, dir)
}

async fn leasehold(s: &Server, token: &str, args: &[&str]) -> Run {
    run_leasehold(s, Some(token), &std::env::temp_dir(), args).await
}

fn ok(run: Run, args: &[&str]) -> String {
    assert_eq!(
        run.code,
        Some(0),
        "leasehold {args:?}\nstdout:\n{}\nstderr:\n{}",
        run.stdout,
        run.stderr
    );
    run.stdout
}

/// The line of `table` whose first cell is `first`.
fn line<'a>(table: &'a str, first: &str) -> &'a str {
    table
        .lines()
        .find(|l| l.split_whitespace().next() == Some(first))
        .unwrap_or_else(|| panic!("no row {first}:\n{table}"))
}

/// The table (with a viewer's token) and `--json` (with the admin's).
#[tokio::test]
async fn entitlements_lists_every_file_with_its_state_seats_and_end() {
    let (s, _dir) = vendor_server().await;
    let viewer = s.viewer_token();
    let table = ok(
        leasehold(&s, &viewer, &["entitlements"]).await,
        &["entitlements"],
    );
    let kid = leaseholdd_kid(&s.data_dir());
    let first = table.lines().next().unwrap_or_default();
    assert!(
        first.starts_with(&format!("server {} · kid {kid} · server time ", s.base)),
        "{table}"
    );
    let header: Vec<&str> = table.lines().nth(1).unwrap().split_whitespace().collect();
    assert_eq!(
        header,
        [
            "FILE", "VENDOR", "ID", "CUSTOMER", "STATE", "LICENSES", "ENDS", "ERROR"
        ],
        "{table}"
    );
    for (file, words) in [
        (
            "cad.lic",
            &[
                "keyright",
                "cad-2026",
                "Acme",
                "active",
                "cad 10",
                "in 5d (+3d grace)",
            ][..],
        ),
        (
            "ide.lic",
            &["ide-2025", "grace", "ide 3", "grace, ends in 3d"],
        ),
        ("cam.lic", &["cam-old", "ended", "cam 2", "ended 9d ago"]),
        (
            "render.lic",
            &["render-forever", "active", "render 4", "perpetual"],
        ),
        ("bad.lic", &["rejected", "JWS"]),
    ] {
        let row = line(&table, file);
        for w in words {
            assert!(row.contains(w), "{file}: {w:?} missing:\n{table}");
        }
    }
    // Rows are the server's order (by file), one each.
    let files: Vec<&str> = table
        .lines()
        .skip(2)
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert_eq!(
        files,
        ["bad.lic", "cad.lic", "cam.lic", "ide.lic", "render.lic"],
        "{table}"
    );

    // --json: what the server answers, its fields in its order.
    let args = ["entitlements", "--json"];
    let text = ok(leasehold(&s, &s.admin_token, &args).await, &args);
    let printed: Value = serde_json::from_str(&text).expect("JSON");
    assert_eq!(printed, s.admin_get("/v1/admin/entitlements").await);
    assert_eq!(printed["server_kid"], kid.as_str());
    assert!(text.starts_with("{\n  \"server_kid\": "), "{text}");
    // The first entry's fields, as the server writes them.
    let at: Vec<usize> = [
        "vendor", "id", "customer", "state", "file", "licenses", "error",
    ]
    .iter()
    .map(|k| {
        text.find(&format!("\"{k}\": "))
            .unwrap_or_else(|| panic!("{k}: {text}"))
    })
    .collect();
    assert!(at.is_sorted(), "not the server's order: {text}");

    // A token the server does not know: one line, non-zero exit.
    let run = leasehold(&s, "not-a-token", &["entitlements"]).await;
    assert_ne!(run.code, Some(0), "{run:?}");
    assert!(run.stderr.contains("401"), "{run:?}");
    assert_eq!(run.stderr.trim_end().lines().count(), 1, "{run:?}");
}

/// `status` and the console: entitled seats per vendor pool, marked
/// within 30 days of the drop; `-` (`—` in the console) for `plain`.
#[tokio::test]
async fn status_and_the_console_mark_vendor_pools_near_their_end() {
    require_tmux();
    let (s, _dir) = vendor_server().await;
    let token = s.admin_token.clone();
    let status = ok(leasehold(&s, &token, &["status"]).await, &["status"]);
    let header = line(&status, "LICENSE");
    assert!(header.trim_end().ends_with("STATUS  ENTITLED"), "{status}");
    for (pool, cell) in [
        ("cad", "10 ⏳ 8d"),
        ("ide", "3 grace 3d"),
        ("cam", "0 expired"),
        ("render", "4"),
        ("plain", "-"),
    ] {
        let row = line(&status, pool);
        assert!(
            row.ends_with(&format!("  {cell}")),
            "{pool}: {cell:?}:\n{status}"
        );
    }

    let logs = tempfile::tempdir().unwrap();
    let tmux = Tmux::start(
        "entitlements",
        &console_command(&s, &logs.path().join("console.log"), ""),
    );
    let screen = tmux
        .wait_for("the vendor pools' marks", SOON, |t| {
            t.contains("ENTITLED") && t.contains("10 ⏳ 8d") && t.contains("0 expired")
        })
        .await;
    for (pool, cell) in [("ide", "3 grace 3d"), ("render", "4"), ("plain", "—")] {
        let row = screen
            .lines()
            .find(|l| l.trim_start_matches('│').split_whitespace().next() == Some(pool))
            .unwrap_or_else(|| panic!("{pool}:\n{screen}"));
        let cells: Vec<&str> = row.split("  ").map(str::trim).collect();
        assert!(cells.contains(&cell), "{pool}: {cell:?}:\n{screen}");
    }
    tmux.keys(&["q"]);
}
