//! How `leasehold` reaches the server: the URL and the admin token, shared by
//! the console, the one-shot commands and `simulate` (its own module so that
//! none of them depends on another for it).

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use clap::parser::ValueSource;
use clap::{ArgMatches, Args, FromArgMatches};
use leasehold_common::text::sanitize_for_terminal;

pub const DEFAULT_SERVER: &str = "http://127.0.0.1:7400";
/// The environment variable `--server` falls back to.
pub const SERVER_ENV: &str = "LEASEHOLD_SERVER";
/// `leaseholdd`'s default `--data-dir`, relative to the working directory.
pub const DEFAULT_DATA_DIR: &str = "./data";
/// The file in a data dir where `leaseholdd` writes a generated admin token.
pub const TOKEN_FILE_NAME: &str = "admin.token";

/// How to reach the server; shared by the console and every subcommand.
///
/// The one definition of `--server`, `--token` and `--data-dir`: global
/// flags, each with an environment fallback, the flag winning. Parsing it
/// checks the server URL, naming where a bad one came from (`--server` or
/// `LEASEHOLD_SERVER`).
#[derive(Debug, Clone)]
pub struct ConnArgs {
    pub server: String,
    pub token: Option<String>,
    pub data_dir: PathBuf,
}

/// The flags as clap derives them; [`ConnArgs`] adds the URL check, which
/// needs to know whether the value came from the flag or the environment.
#[derive(Debug, Clone, Args)]
struct ConnFlags {
    /// Base URL of leaseholdd.
    #[arg(
        long,
        global = true,
        value_name = "URL",
        env = SERVER_ENV,
        default_value = DEFAULT_SERVER
    )]
    server: String,

    /// Admin token (else LEASEHOLD_ADMIN_TOKEN, else admin.token in the
    /// server's --data-dir).
    #[arg(
        long,
        global = true,
        value_name = "TOKEN",
        env = "LEASEHOLD_ADMIN_TOKEN",
        hide_env_values = true
    )]
    token: Option<String>,

    /// The server's data dir, read as leaseholdd reads it: the admin token
    /// is taken from its admin.token when no token is given.
    #[arg(
        long,
        global = true,
        value_name = "DIR",
        env = "LEASEHOLD_DATA_DIR",
        default_value = DEFAULT_DATA_DIR
    )]
    data_dir: PathBuf,
}

impl Args for ConnArgs {
    fn augment_args(cmd: clap::Command) -> clap::Command {
        ConnFlags::augment_args(cmd)
    }

    fn augment_args_for_update(cmd: clap::Command) -> clap::Command {
        ConnFlags::augment_args_for_update(cmd)
    }

    fn group_id() -> Option<clap::Id> {
        ConnFlags::group_id()
    }
}

impl FromArgMatches for ConnArgs {
    fn from_arg_matches(matches: &ArgMatches) -> Result<Self, clap::Error> {
        let flags = ConnFlags::from_arg_matches(matches)?;
        ConnArgs::checked(flags, matches)
    }

    fn update_from_arg_matches(&mut self, matches: &ArgMatches) -> Result<(), clap::Error> {
        let mut flags = ConnFlags {
            server: std::mem::take(&mut self.server),
            token: self.token.take(),
            data_dir: std::mem::take(&mut self.data_dir),
        };
        flags.update_from_arg_matches(matches)?;
        *self = ConnArgs::checked(flags, matches)?;
        Ok(())
    }
}

/// Why `server` is no base URL for leaseholdd, if it is not: it must be an
/// http:// or https:// URL with a host, and no ?query or #fragment (the API's
/// paths are appended to it).
pub fn check_server_url(server: &str) -> Result<(), String> {
    const EXAMPLE: &str = "e.g. http://127.0.0.1:7400";
    if server.is_empty() {
        return Err(format!(
            "it is empty; give the server's base URL, {EXAMPLE}"
        ));
    }
    let url = reqwest::Url::parse(server).map_err(|e| format!("not a URL ({e}); {EXAMPLE}"))?;
    if !matches!(url.scheme(), "http" | "https") || !server.contains("://") {
        return Err(format!("not an http:// or https:// URL; {EXAMPLE}"));
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err(format!("the URL has no host; {EXAMPLE}"));
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err(
            "a base URL takes no ?query or #fragment (the API's paths are appended to it)".into(),
        );
    }
    Ok(())
}

/// The error for a bad server URL, naming where it came from: the
/// environment's `LEASEHOLD_SERVER`, else the `--server` flag.
pub fn server_error(value: &str, source: Option<ValueSource>, why: &str) -> String {
    let value = sanitize_for_terminal(value);
    match source {
        Some(ValueSource::EnvVariable) => format!(
            "invalid value '{value}' for {SERVER_ENV} (read when --server is not given): {why}"
        ),
        _ => format!("invalid value '{value}' for '--server <URL>': {why}"),
    }
}

impl ConnArgs {
    /// `flags` with the server URL checked (and trimmed).
    fn checked(flags: ConnFlags, matches: &ArgMatches) -> Result<Self, clap::Error> {
        let server = flags.server.trim().to_string();
        check_server_url(&server).map_err(|why| {
            let msg = server_error(&flags.server, matches.value_source("server"), &why);
            clap::Error::raw(clap::error::ErrorKind::ValueValidation, msg)
        })?;
        Ok(ConnArgs {
            server,
            token: flags.token,
            data_dir: flags.data_dir,
        })
    }

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

    #[test]
    fn server_urls_are_checked() {
        for ok in [
            DEFAULT_SERVER,
            "https://leasehold.example.com",
            "http://[::1]:7400/",
            "https://gw.example.com/leasehold/",
        ] {
            assert_eq!(check_server_url(ok), Ok(()), "{ok}");
        }
        for (bad, why) in [
            ("", "it is empty"),
            ("not a url", "not a URL (relative URL without a base)"),
            ("localhost:7400", "not an http:// or https:// URL"),
            ("ftp://x:21", "not an http:// or https:// URL"),
            ("http:x", "not an http:// or https:// URL"),
            ("http://", "not a URL (empty host)"),
            ("http://x:7400/?a=1", "no ?query or #fragment"),
            ("http://x:7400/#top", "no ?query or #fragment"),
        ] {
            let err = check_server_url(bad).unwrap_err();
            assert!(err.contains(why), "{bad:?}: {err}");
        }
    }

    #[test]
    fn a_bad_server_names_where_it_came_from() {
        let why = "not a URL";
        assert_eq!(
            server_error("x", Some(ValueSource::CommandLine), why),
            "invalid value 'x' for '--server <URL>': not a URL"
        );
        assert_eq!(
            server_error("x\x1b[2J", Some(ValueSource::EnvVariable), why),
            "invalid value 'x\u{fffd}[2J' for LEASEHOLD_SERVER (read when --server is not \
             given): not a URL"
        );
    }

    #[test]
    fn a_bad_server_flag_is_a_usage_error() {
        use clap::Parser;
        #[derive(Debug, Parser)]
        struct Cli {
            #[command(flatten)]
            conn: ConnArgs,
        }
        // The flag wins over LEASEHOLD_SERVER, whatever the environment has.
        let cli = Cli::try_parse_from(["x", "--server", " http://h:1/ "]).unwrap();
        assert_eq!(cli.conn.server, "http://h:1/");
        let err = Cli::try_parse_from(["x", "--server", "h:1"]).unwrap_err();
        assert_eq!(err.kind(), clap::error::ErrorKind::ValueValidation);
        let text = err.to_string();
        assert!(
            text.starts_with("error: invalid value 'h:1' for '--server <URL>': not an http"),
            "{text}"
        );
        assert!(!text.contains(SERVER_ENV), "{text}");
    }

    fn tempfile_dir(what: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("leasehold-tui-{what}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }
}
