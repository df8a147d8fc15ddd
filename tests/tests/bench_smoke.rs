//! `leasehold-bench` keeps working: a one-second run of every scenario
//! against the debug server, no errors. No timing assertions (debug build,
//! shared 2-core machine).

use std::process::Command;

#[test]
fn bench_runs_every_scenario_without_errors() {
    let dir = tempfile::tempdir().expect("tempdir");
    let json = dir.path().join("bench.json");
    let out = Command::new(env!("CARGO_BIN_EXE_leasehold-bench"))
        .arg("--leaseholdd")
        .arg(leasehold_tests::leaseholdd_bin())
        .args(["--duration", "1s", "--warmup", "0s"])
        .args(["--connections", "4", "--held", "50"])
        .arg("--json")
        .arg(&json)
        .env_remove("LEASEHOLD_ADMIN_TOKEN")
        .output()
        .expect("run leasehold-bench");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "leasehold-bench failed: {}\nstdout:\n{stdout}\nstderr:\n{stderr}",
        out.status
    );

    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).expect("json written"))
            .expect("valid json");
    let scenarios = report["scenarios"].as_array().expect("scenarios");
    for name in ["healthz", "checkout", "heartbeat", "mixed"] {
        let s = scenarios
            .iter()
            .find(|s| s["name"] == name)
            .unwrap_or_else(|| panic!("scenario {name} in the report:\n{stdout}"));
        assert!(
            s["requests"].as_u64().unwrap_or(0) > 0,
            "{name}: no requests\n{stdout}"
        );
        assert_eq!(
            s["errors_total"].as_u64(),
            Some(0),
            "{name}: errors {}\n{stdout}\n{stderr}",
            s["errors"]
        );
        assert!(s["ratio_to_healthz"].as_f64().is_some(), "{name}: ratio");
    }
    assert_eq!(report["server"]["started_by_bench"], true);
    assert!(report["server"]["rss_kib_end"].as_u64().unwrap_or(0) > 0);
    // The started server was stopped: its pid is gone.
    let pid = report["server"]["pid"].as_u64().expect("pid");
    assert!(
        !std::path::Path::new(&format!("/proc/{pid}")).exists()
            || std::fs::read_to_string(format!("/proc/{pid}/status"))
                .map(|s| s.contains("State:\tZ"))
                .unwrap_or(true),
        "leaseholdd {pid} still running after the bench"
    );
}

#[test]
fn bench_refuses_a_non_loopback_server() {
    let out = Command::new(env!("CARGO_BIN_EXE_leasehold-bench"))
        .args(["--server", "http://192.0.2.1:7400", "--duration", "1s"])
        .output()
        .expect("run leasehold-bench");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("loopback"), "stderr: {stderr}");
}
