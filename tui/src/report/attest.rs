//! `leasehold report --attest --license ID --out FILE`: the license's usage
//! summary over the range, signed by the server with its lease key
//! (`GET /v1/admin/usage/attestation`, a compact JWS), written to a new
//! file: what a customer on an overage plan hands its vendor, who checks it
//! offline with `leasehold vendor verify-usage`.

use std::io::Write;
use std::path::Path;

use anyhow::{Context, bail};
use leasehold_common::api::code;
use leasehold_common::attestation::{self, UsageAttestation};

use super::range::Range;
use super::{ReportArgs, clean};
use crate::api::{AdminClient, ApiError, UsageQuery};
use crate::format::fmt_duration_ms;

/// Fetch the statement, check it is whole, write it, print its figures.
pub async fn run(
    args: &ReportArgs,
    client: &AdminClient,
    range: Range,
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    let license = args
        .license
        .as_deref()
        .context("--attest needs --license")?;
    let file = args.out.as_deref().context("--attest needs --out FILE")?;
    let query = UsageQuery {
        license,
        from: Some(range.from),
        to: Some(range.to),
        step: None,
    };
    let jws = match client.usage_attestation(&query, args.tolerance).await {
        Ok(jws) => jws,
        Err(ApiError::Server {
            status: 404, code, ..
        }) if code == code::NOT_FOUND => bail!(
            "the server at {} signs no usage (GET /v1/admin/usage/attestation answered 404): \
             it is older than this leasehold",
            client.base()
        ),
        Err(e) => {
            return Err(anyhow::Error::new(e)
                .context(format!("the usage attestation of {}", clean(license))));
        }
    };
    // What the server answered is checked before it is handed on.
    let attested = attestation::verify(&jws)
        .map_err(|e| anyhow::anyhow!("the server's attestation does not check: {e}"))?;
    write_new(file, &jws)?;
    writeln!(
        out,
        "wrote {}: {}",
        file.display(),
        figures_line(&attested.claims, &attested.kid)
    )?;
    out.flush()?;
    Ok(())
}

/// `--out` must not exist yet: checked before asking the server.
pub fn refuse_existing(file: Option<&Path>) -> anyhow::Result<()> {
    match file {
        Some(f) if f.symlink_metadata().is_ok() => {
            bail!("{} exists: not overwritten", f.display())
        }
        _ => Ok(()),
    }
}

/// A new file holding the JWS and a newline; an existing one (or a
/// symlink) is never written through.
fn write_new(file: &Path, jws: &str) -> anyhow::Result<()> {
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(file)
        .with_context(|| {
            format!(
                "creating {} (an existing file is not overwritten)",
                file.display()
            )
        })?;
    f.write_all(format!("{jws}\n").as_bytes())
        .and_then(|()| f.sync_all())
        .with_context(|| format!("writing {}", file.display()))
}

/// The figures on one line: `cad 2026-01-01T00:00:00Z to
/// 2026-01-31T00:00:00Z: 10 seats, peak 12, 1h00m over, 1234.50
/// seat-hours, 4 true denials (2 holders); signed by server KID`.
pub fn figures_line(c: &UsageAttestation, kid: &str) -> String {
    format!(
        "{} {} to {}: {}, peak {}, {} over, {} seat-hours, {} ({}); signed by server {}",
        clean(&c.lic),
        secs(c.from),
        secs(c.to),
        count(c.seats.into(), "seat"),
        c.peak,
        over(c.over_s),
        hours(c.seat_hours),
        count(c.true_denials, "true denial"),
        count(c.denied_holders, "holder"),
        clean(kid)
    )
}

/// `1 seat`, `2 seats`.
pub fn count(n: u64, one: &str) -> String {
    if n == 1 {
        format!("1 {one}")
    } else {
        format!("{n} {one}s")
    }
}

/// Seat-hours to the hundredth, and as signed when that rounds them.
pub fn hours(h: f64) -> String {
    let rounded = format!("{h:.2}");
    if rounded.parse::<f64>() == Ok(h) {
        rounded
    } else {
        format!("{rounded} ({h} as signed)")
    }
}

/// An instant to the second, as people read it.
pub fn secs(t: leasehold_common::Timestamp) -> String {
    t.to_datetime()
        .to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// Time over the seats: `0s`, `1h00m`.
pub fn over(over_s: f64) -> String {
    fmt_duration_ms((over_s * 1000.0).round() as i64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use leasehold_common::Timestamp;

    #[test]
    fn the_figures_read_on_one_line() {
        let c = UsageAttestation {
            iss: "leasehold".into(),
            iat: 1_800_000_000,
            lic: "cad\u{1b}".into(),
            from: Timestamp::parse_rfc3339("2026-01-01T00:00:00Z").unwrap(),
            to: Timestamp::parse_rfc3339("2026-01-31T00:00:00.250Z").unwrap(),
            covered_from: Timestamp::parse_rfc3339("2026-01-01T00:00:00Z").unwrap(),
            seats: 10,
            peak: 12,
            over_s: 3600.0,
            seat_hours: 1234.5,
            true_denials: 4,
            denied_holders: 2,
            entitlements: vec!["acme".into()],
        };
        assert_eq!(
            figures_line(&c, "KID"),
            "cad\u{fffd} 2026-01-01T00:00:00Z to 2026-01-31T00:00:00Z: 10 seats, peak 12, \
             1h00m over, 1234.50 seat-hours, 4 true denials (2 holders); signed by server KID"
                .replace('\u{fffd}', &clean("\u{1b}"))
        );
        let one = UsageAttestation {
            seats: 1,
            seat_hours: 0.0025,
            true_denials: 1,
            denied_holders: 1,
            ..c
        };
        assert!(
            figures_line(&one, "KID").contains(
                ": 1 seat, peak 12, 1h00m over, 0.00 (0.0025 as signed) seat-hours, \
                 1 true denial (1 holder);"
            ),
            "{}",
            figures_line(&one, "KID")
        );
    }

    #[test]
    fn an_existing_out_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("usage.jws");
        assert!(refuse_existing(Some(&file)).is_ok());
        write_new(&file, "a.b.c").unwrap();
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "a.b.c\n");
        let err = refuse_existing(Some(&file)).unwrap_err().to_string();
        assert!(err.ends_with("usage.jws exists: not overwritten"), "{err}");
        assert!(write_new(&file, "x.y.z").is_err());
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "a.b.c\n");
    }
}
