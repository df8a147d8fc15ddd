//! Running the `leasehold` command line against a [`Server`].

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use crate::server::Server;
use crate::tools::leasehold_bin;

/// What a finished `leasehold` run printed.
#[derive(Debug)]
pub struct Run {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl From<std::process::Output> for Run {
    fn from(out: std::process::Output) -> Run {
        Run {
            code: out.status.code(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }
}

/// Run `leasehold ARGS` against `server` (with `--server`, plus `--token`
/// unless `token` is None) in `cwd`, with a clean environment for the token;
/// bounded to 30 s.
pub async fn run_leasehold(server: &Server, token: Option<&str>, cwd: &Path, args: &[&str]) -> Run {
    let bin = leasehold_bin();
    assert!(
        bin.exists(),
        "{} not built: run `cargo build -p leasehold-tui` first",
        bin.display()
    );
    let mut cmd = tokio::process::Command::new(&bin);
    cmd.args(args)
        .arg("--server")
        .arg(&server.base)
        .current_dir(cwd)
        .env_remove("LEASEHOLD_ADMIN_TOKEN")
        .env("NO_COLOR", "1")
        .stdin(Stdio::null());
    if let Some(t) = token {
        cmd.arg("--token").arg(t);
    }
    let out = tokio::time::timeout(Duration::from_secs(30), cmd.output())
        .await
        .expect("leasehold finished within 30 s")
        .expect("run leasehold");
    Run::from(out)
}
