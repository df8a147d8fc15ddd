//! `assets/leaseholdd.service`: the hardening it promises is there, its
//! flags are `leaseholdd`'s, and `systemd-analyze verify` finds nothing to
//! say about it.

use std::path::PathBuf;
use std::process::Command;

use leasehold_tests::{leaseholdd_bin, require_tool};

fn unit_text() -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../assets/leaseholdd.service");
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
}

/// `ExecStart=`'s words, continuation lines joined.
fn exec_start(unit: &str) -> Vec<String> {
    let joined = unit.replace("\\\n", " ");
    let line = joined
        .lines()
        .find_map(|l| l.strip_prefix("ExecStart="))
        .expect("an ExecStart= line");
    line.split_whitespace().map(str::to_string).collect()
}

#[test]
fn unit_has_the_promised_settings() {
    let unit = unit_text();
    for line in [
        "DynamicUser=yes",
        "StateDirectory=leasehold",
        "ProtectSystem=strict",
        "ProtectHome=yes",
        "NoNewPrivileges=yes",
        "PrivateTmp=yes",
        "Restart=on-failure",
        "CapabilityBoundingSet=",
    ] {
        assert!(unit.lines().any(|l| l == line), "missing {line:?}");
    }
    let words = exec_start(&unit);
    assert_eq!(words[0], "/usr/local/bin/leaseholdd");
    for flag in [
        "--data-dir /var/lib/leasehold",
        "--licenses /etc/leasehold/licenses.toml",
    ] {
        assert!(words.join(" ").contains(flag), "ExecStart without {flag}");
    }
    // The flags are leaseholdd's own: clap stops at `--help` only after
    // accepting every flag before it (an unknown one exits 2).
    let out = Command::new(leaseholdd_bin())
        .args(&words[1..])
        .arg("--help")
        .output()
        .expect("run leaseholdd");
    assert!(
        out.status.success(),
        "leaseholdd refused the unit's flags: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn systemd_analyze_verify_is_silent() {
    require_tool(
        Command::new("systemd-analyze").arg("--version"),
        "systemd-analyze",
        "apt-get install systemd",
    );
    // verify checks that ExecStart's program exists and is executable, so
    // the copy it reads starts the binary this build made instead.
    let dir = tempfile::tempdir().expect("tempdir");
    let bin = leaseholdd_bin();
    assert!(bin.exists(), "{} not built", bin.display());
    let unit = unit_text().replace(
        "ExecStart=/usr/local/bin/leaseholdd",
        &format!("ExecStart={}", bin.display()),
    );
    let path = dir.path().join("leaseholdd.service");
    std::fs::write(&path, unit).expect("write unit");
    let out = Command::new("systemd-analyze")
        .arg("verify")
        .arg(&path)
        .output()
        .expect("run systemd-analyze");
    // verify exits 0 on an unknown key or a bad value and only says so.
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success() && said.trim().is_empty(),
        "systemd-analyze verify: {}\n{said}",
        out.status
    );
}
