//! `leasehold borrow` and `leasehold return`: one-shot client commands for
//! a seat that works offline. They speak the client API with the license
//! key (no admin token): a borrow checks out with `borrow_s`, verifies the
//! token against the server's JWKS (the file must hold a token a program can
//! trust offline), prints the lease and writes the token to a file only its
//! owner can read; a return is the client's `DELETE`, which frees a borrowed
//! seat at once.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, bail};
use clap::Args;
use leasehold_common::api::Lease;
use leasehold_common::client::{Client, ClientError};
use leasehold_common::token::verify;

use crate::format::{fmt_duration_ms, json_for_terminal};
use leasehold_common::text::sanitize_for_terminal;

/// One request's time limit.
const TIMEOUT: Duration = Duration::from_secs(15);

/// The license and its key, shared by `borrow` and `return`.
#[derive(Debug, Clone, Args)]
pub struct LicenseArgs {
    /// The license id.
    #[arg(long, value_name = "ID")]
    pub license: String,
    /// The license key (else LEASEHOLD_LICENSE_KEY, which keeps it out of
    /// the process list).
    #[arg(
        long,
        value_name = "KEY",
        env = "LEASEHOLD_LICENSE_KEY",
        hide_env_values = true
    )]
    pub key: String,
}

#[derive(Debug, Clone, Args)]
pub struct BorrowArgs {
    #[command(flatten)]
    pub license: LicenseArgs,
    /// Who holds the seat, shown to admins.
    #[arg(long, value_name = "NAME")]
    pub holder: String,
    /// This machine's fingerprint. A seat it holds becomes the borrow; a
    /// borrow it has is extended.
    #[arg(long, value_name = "FP")]
    pub fingerprint: String,
    /// How long, e.g. 3d, 8h, 90m (at most the license's borrow.max).
    #[arg(long = "for", value_name = "DURATION", value_parser = crate::duration::parse_block)]
    pub duration: Duration,
    /// Write the lease's token here (mode 0600, replaced atomically; a
    /// symlink is refused).
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Print the server's lease as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Clone, Args)]
pub struct ReturnArgs {
    #[command(flatten)]
    pub license: LicenseArgs,
    /// The borrowed seat's id (printed by `leasehold borrow`).
    pub seat_id: String,
    /// Print {"seat_id": ..., "returned": true} on success.
    #[arg(long)]
    pub json: bool,
}

/// `leasehold borrow`.
pub async fn borrow(server: &str, args: BorrowArgs, out: &mut dyn Write) -> anyhow::Result<()> {
    let client = client(server, &args.license)?;
    // Refused before borrowing: a seat out for days with its token lost.
    if let Some(path) = &args.out {
        check_token_path(path)?;
    }
    let lease = client
        .borrow(&args.holder, &args.fingerprint, args.duration, TIMEOUT)
        .await
        .map_err(|e| anyhow::anyhow!(borrow_denial(&args.license.license, &e)))?;
    let kept = match verify_offline(&client, &lease).await {
        Ok(()) => args
            .out
            .as_ref()
            .map_or(Ok(()), |p| write_token_file(p, &lease.token)),
        Err(e) => Err(e),
    };
    if let Err(e) = kept {
        // Nobody can use a borrow whose token is bad or lost: return it.
        let back = match client.give_back(&lease.seat_id, TIMEOUT).await {
            Ok(()) => "the seat was returned".to_string(),
            Err(r) => format!("returning seat {} failed too: {r}", lease.seat_id),
        };
        return Err(e.context(back));
    }
    if args.json {
        writeln!(
            out,
            "{}",
            json_for_terminal(&serde_json::to_string(&lease)?)
        )?;
    } else {
        write!(out, "{}", format_lease(&lease, args.out.as_deref()))?;
    }
    out.flush()?;
    Ok(())
}

/// `leasehold return`.
pub async fn give_back(server: &str, args: ReturnArgs, out: &mut dyn Write) -> anyhow::Result<()> {
    let client = client(server, &args.license)?;
    client
        .give_back(&args.seat_id, TIMEOUT)
        .await
        .with_context(|| format!("returning seat {}", args.seat_id))?;
    if args.json {
        let v = serde_json::json!({ "seat_id": args.seat_id, "returned": true });
        writeln!(out, "{}", json_for_terminal(&v.to_string()))?;
    } else {
        writeln!(
            out,
            "returned seat {}",
            sanitize_for_terminal(&args.seat_id)
        )?;
    }
    out.flush()?;
    Ok(())
}

fn client(server: &str, license: &LicenseArgs) -> anyhow::Result<Client> {
    Client::new(server, &license.license, &license.key).map_err(anyhow::Error::from)
}

/// The lease's token verifies against the server's JWKS and says what the
/// body says, `borrowed` and `exp` included.
async fn verify_offline(client: &Client, lease: &Lease) -> anyhow::Result<()> {
    let jwks = client.jwks(TIMEOUT).await.context("fetching the JWKS")?;
    let claims = verify(&lease.token, &jwks)
        .with_context(|| format!("the token of seat {} does not verify", lease.seat_id))?;
    if !claims.matches(lease) || !claims.borrowed {
        bail!(
            "the token of seat {} does not match the lease (claims {claims:?})",
            lease.seat_id
        );
    }
    Ok(())
}

/// A denial as one sentence that says what to do.
pub fn borrow_denial(license: &str, e: &ClientError) -> String {
    let retry = |ra: &Option<Duration>| {
        ra.map(|d| format!("; retry in {}s", d.as_secs()))
            .unwrap_or_default()
    };
    match e {
        ClientError::LimitReached {
            limit,
            max,
            retry_after,
            ..
        } if limit == "borrow" => format!(
            "cannot borrow: {} seat(s) of {license:?} are borrowed already, the most it lends \
             at once (409 limit_reached){}",
            max.map_or_else(|| "all".to_string(), |m| m.to_string()),
            retry(retry_after)
        ),
        ClientError::LimitReached { .. } | ClientError::NoSeats { .. } => {
            format!("cannot borrow: {e}")
        }
        ClientError::NotAllowed(message) => format!(
            "cannot borrow: {license:?} lends no seats to this holder or machine: it has no \
             [license.borrow], or its allow lists leave this holder out (403 not_allowed: \
             {message})"
        ),
        ClientError::Rejected {
            status,
            code,
            message,
        } => format!("cannot borrow: {message} ({status} {code})"),
        other => format!("cannot borrow: {other}"),
    }
}

/// The lease as printed: seat, license, holder, machine, until when.
pub fn format_lease(lease: &Lease, token_file: Option<&Path>) -> String {
    let s = sanitize_for_terminal;
    let left = lease.expires_at.millis_since(lease.issued_at);
    let mut text = format!(
        "borrowed seat {}\n  license  {}\n  holder   {}\n  machine  {}\n  until    {} \
         ({} from now)\n  borrowed {}\n",
        s(&lease.seat_id),
        s(&lease.license_id),
        s(&lease.holder),
        s(lease.fingerprint.as_deref().unwrap_or("-")),
        lease.expires_at,
        fmt_duration_ms(left),
        lease.borrowed,
    );
    if let Some(path) = token_file {
        text.push_str(&format!(
            "  token    written to {}\n",
            s(&path.display().to_string())
        ));
    }
    text
}

/// `path` can take the token: not a symlink, not a directory, in an
/// existing directory.
fn check_token_path(path: &Path) -> anyhow::Result<()> {
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_symlink() => bail!(
            "{} is a symlink: refusing to write the token through it",
            path.display()
        ),
        Ok(m) if m.is_dir() => bail!("{} is a directory", path.display()),
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let dir = path.parent().filter(|d| !d.as_os_str().is_empty());
            match dir {
                Some(d) if !d.is_dir() => bail!("{}: no such directory", d.display()),
                _ => Ok(()),
            }
        }
        Err(e) => Err(e).with_context(|| format!("checking {}", path.display())),
    }
}

/// Write `token` to `path` with mode 0600: into a new file beside it
/// (`create_new` never follows a symlink), flushed to disk, then renamed
/// over `path`, so a reader sees the old token or the new one, never half.
/// A symlink at `path` is refused: the token goes where it was asked to.
pub fn write_token_file(path: &Path, token: &str) -> anyhow::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;

    if let Ok(meta) = std::fs::symlink_metadata(path)
        && meta.file_type().is_symlink()
    {
        bail!(
            "{} is a symlink: refusing to write the token through it",
            path.display()
        );
    }
    let name = path
        .file_name()
        .with_context(|| format!("{} is not a file name", path.display()))?;
    let tmp = path.with_file_name(format!(
        ".{}.{}.tmp",
        name.to_string_lossy(),
        std::process::id()
    ));
    let written = (|| {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)?;
        f.write_all(token.as_bytes())?;
        f.write_all(b"\n")?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(e).with_context(|| format!("writing the token to {}", path.display()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "leasehold-tui-borrow-{name}-{}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn the_token_file_is_0600_and_replaced_whole() {
        let dir = scratch("file");
        let path = dir.join("seat.jwt");
        std::fs::write(&path, "old").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        write_token_file(&path, "eyJ.new").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "eyJ.new\n");
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "the replaced file is the new 0600 one");
        let left: Vec<_> = std::fs::read_dir(&dir).unwrap().collect();
        assert_eq!(left.len(), 1, "no temp file left behind");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_symlink_is_refused_and_its_target_untouched() {
        let dir = scratch("link");
        let target = dir.join("target");
        std::fs::write(&target, "keep").unwrap();
        let link = dir.join("seat.jwt");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let err = write_token_file(&link, "eyJ.new").unwrap_err().to_string();
        assert!(err.contains("symlink"), "{err}");
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn denials_say_what_happened() {
        let limit = ClientError::LimitReached {
            retry_after: Some(Duration::from_secs(40)),
            limit: "borrow".into(),
            max: Some(2),
            group: None,
        };
        let line = borrow_denial("cad", &limit);
        assert!(
            line.contains("2 seat(s) of \"cad\" are borrowed already"),
            "{line}"
        );
        assert!(line.contains("409 limit_reached") && line.ends_with("retry in 40s"));
        let line = borrow_denial("cad", &ClientError::NotAllowed("no".into()));
        assert!(
            line.contains("[license.borrow]") && line.contains("403"),
            "{line}"
        );
        let bad = ClientError::Rejected {
            status: 400,
            code: "invalid_request".into(),
            message: "borrow_s must be 1 to 60".into(),
        };
        assert_eq!(
            borrow_denial("cad", &bad),
            "cannot borrow: borrow_s must be 1 to 60 (400 invalid_request)"
        );
    }
}
