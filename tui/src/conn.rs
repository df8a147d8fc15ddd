//! How `leasehold` reaches the server: the URL and the admin token, shared by
//! the console, the one-shot commands and `simulate` (its own module so that
//! none of them depends on another for it).

use std::path::Path;

use anyhow::{Context, bail};
use clap::Args;

pub const DEFAULT_SERVER: &str = "http://127.0.0.1:7400";
/// Where `leaseholdd` writes a generated admin token with its default
/// `--data-dir`, relative to the working directory.
pub const DEFAULT_TOKEN_FILE: &str = "data/admin.token";

/// How to reach the server; shared by the console and every subcommand.
#[derive(Debug, Clone, Args)]
pub struct ConnArgs {
    /// Base URL of leaseholdd.
    #[arg(long, global = true, value_name = "URL", default_value = DEFAULT_SERVER)]
    pub server: String,

    /// Admin token (else LEASEHOLD_ADMIN_TOKEN, else ./data/admin.token).
    #[arg(
        long,
        global = true,
        value_name = "TOKEN",
        env = "LEASEHOLD_ADMIN_TOKEN",
        hide_env_values = true
    )]
    pub token: Option<String>,
}

/// The admin token: `--token` or `LEASEHOLD_ADMIN_TOKEN` (clap reads both
/// into `flag`), else the first line of `token_file`.
pub fn resolve_token(flag: Option<&str>, token_file: &Path) -> anyhow::Result<String> {
    if let Some(t) = flag {
        let t = t.trim();
        if t.is_empty() {
            bail!("the admin token given by --token or LEASEHOLD_ADMIN_TOKEN is empty");
        }
        return Ok(t.to_string());
    }
    match std::fs::read_to_string(token_file) {
        Ok(text) => {
            let t = text.lines().next().unwrap_or("").trim();
            if t.is_empty() {
                bail!("the admin token file {} is empty", token_file.display());
            }
            Ok(t.to_string())
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => bail!(
            "no admin token: pass --token, set LEASEHOLD_ADMIN_TOKEN, or run from the \
             directory that holds {} (the server's data dir)",
            token_file.display()
        ),
        Err(e) => {
            Err(e).with_context(|| format!("reading the admin token from {}", token_file.display()))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_comes_from_flag_then_file() {
        let dir = std::env::temp_dir().join(format!("leasehold-tui-token-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("admin.token");
        assert_eq!(resolve_token(Some(" t1 \n"), &file).unwrap(), "t1");
        let err = resolve_token(None, &file).unwrap_err().to_string();
        assert!(err.contains("no admin token"), "{err}");
        std::fs::write(&file, "secret\n").unwrap();
        assert_eq!(resolve_token(None, &file).unwrap(), "secret");
        assert!(resolve_token(Some(""), &file).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
