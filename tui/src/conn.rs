//! How `leasehold` reaches the server: the URL and the admin token, shared by
//! the console, the one-shot commands and `simulate` (its own module so that
//! none of them depends on another for it).

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use clap::Args;

pub const DEFAULT_SERVER: &str = "http://127.0.0.1:7400";
/// `leaseholdd`'s default `--data-dir`, relative to the working directory.
pub const DEFAULT_DATA_DIR: &str = "./data";
/// The file in a data dir where `leaseholdd` writes a generated admin token.
pub const TOKEN_FILE_NAME: &str = "admin.token";

/// How to reach the server; shared by the console and every subcommand.
#[derive(Debug, Clone, Args)]
pub struct ConnArgs {
    /// Base URL of leaseholdd.
    #[arg(long, global = true, value_name = "URL", default_value = DEFAULT_SERVER)]
    pub server: String,

    /// Admin token (else LEASEHOLD_ADMIN_TOKEN, else admin.token in the
    /// server's --data-dir).
    #[arg(
        long,
        global = true,
        value_name = "TOKEN",
        env = "LEASEHOLD_ADMIN_TOKEN",
        hide_env_values = true
    )]
    pub token: Option<String>,

    /// The server's data dir, read as leaseholdd reads it: the admin token
    /// is taken from its admin.token when no token is given.
    #[arg(
        long,
        global = true,
        value_name = "DIR",
        env = "LEASEHOLD_DATA_DIR",
        default_value = DEFAULT_DATA_DIR
    )]
    pub data_dir: PathBuf,
}

impl ConnArgs {
    /// Where the admin token is read from when none is given.
    pub fn token_file(&self) -> PathBuf {
        self.data_dir.join(TOKEN_FILE_NAME)
    }

    /// The admin token: `--token`/`LEASEHOLD_ADMIN_TOKEN`, else the file.
    pub fn admin_token(&self) -> anyhow::Result<String> {
        resolve_token(self.token.as_deref(), &self.token_file())
    }
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
            "no admin token: pass --token, set LEASEHOLD_ADMIN_TOKEN, or point --data-dir \
             (LEASEHOLD_DATA_DIR) at the server's data dir (no {} there)",
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

    #[test]
    fn the_token_file_is_in_the_data_dir() {
        use clap::Parser;
        #[derive(Debug, Parser)]
        struct Cli {
            #[command(flatten)]
            conn: ConnArgs,
        }
        let dir = tempfile_dir("data-dir");
        std::fs::write(dir.join("admin.token"), "from-dir\n").unwrap();
        let cli = Cli::try_parse_from(["x", "--data-dir", dir.to_str().unwrap()]).unwrap();
        assert_eq!(cli.conn.token_file(), dir.join("admin.token"));
        // (LEASEHOLD_ADMIN_TOKEN, if the environment has one, wins.)
        if cli.conn.token.is_none() {
            assert_eq!(cli.conn.admin_token().unwrap(), "from-dir");
        }
        let cli = Cli::try_parse_from(["x", "--data-dir", "/nonexistent/leasehold"]).unwrap();
        if cli.conn.token.is_none() {
            let err = cli.conn.admin_token().unwrap_err().to_string();
            assert!(err.contains("/nonexistent/leasehold/admin.token"), "{err}");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    fn tempfile_dir(what: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("leasehold-tui-{what}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }
}
