//! `leasehold entitlement inspect FILE [--vendor-key KEY]`.

use std::io::Write;
use std::path::PathBuf;

use anyhow::{Context, bail};
use clap::Args;
use leasehold_common::entitlement::{Claims, LicenseGrant, VendorKey, decode, jws_of_file};
use leasehold_common::text::sanitize_for_terminal;
use serde_json::json;

use super::{rfc3339, summary};
use crate::format::fmt_duration_ms;

#[derive(Debug, Clone, Args)]
pub struct InspectArgs {
    /// The entitlement file (`.lic`).
    pub file: PathBuf,
    /// The vendor's public key as written in `[[vendor]]`, or @FILE holding
    /// it: check the signature. A key is base64url: it may begin with `-`.
    #[arg(long, value_name = "KEY", allow_hyphen_values = true)]
    pub vendor_key: Option<String>,
    /// The claims and the verdict as JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: &InspectArgs, out: &mut impl Write) -> anyhow::Result<()> {
    let text = std::fs::read_to_string(&args.file)
        .with_context(|| format!("reading {}", args.file.display()))?;
    let file = args.file.display();
    let unverified = decode(&jws_of_file(&text)).map_err(|e| anyhow::anyhow!("{file}: {e}"))?;
    let claims = unverified.claims().clone();
    let payload = unverified.payload().clone();
    let verdict = match &args.vendor_key {
        None => None,
        Some(key) => Some(unverified.verify(&[vendor_key(key)?]).map(|_| ())),
    };
    if args.json {
        let verified = verdict.as_ref().map(Result::is_ok);
        writeln!(out, "{}", json!({"claims": payload, "verified": verified}))?;
    } else {
        write_words(out, &claims)?;
        let line = match &verdict {
            None => "not checked (give --vendor-key)".to_string(),
            Some(Ok(())) => "verifies with the vendor key".to_string(),
            Some(Err(e)) => e.clone(),
        };
        writeln!(out, "{:<11}{line}", "signature")?;
    }
    match verdict {
        Some(Err(e)) => bail!("{file}: {e}"),
        _ => Ok(()),
    }
}

/// KEY, or the key in @FILE (alone, or on a `public_key = "…"` line).
pub(super) fn vendor_key(arg: &str) -> anyhow::Result<VendorKey> {
    let text = match arg.strip_prefix('@') {
        Some(path) => std::fs::read_to_string(path).with_context(|| format!("reading {path}"))?,
        None => arg.to_string(),
    };
    let from_line = text.lines().find_map(|l| {
        let (name, value) = l.split_once('=')?;
        (name.trim() == "public_key").then(|| value.trim().trim_matches('"').to_string())
    });
    let key = from_line.unwrap_or_else(|| text.trim().to_string());
    VendorKey::parse(&key).map_err(|e| anyhow::anyhow!("--vendor-key: {e}"))
}

fn write_words(out: &mut impl Write, c: &Claims) -> anyhow::Result<()> {
    let clean = |s: &str| sanitize_for_terminal(s).into_owned();
    let mut row = |label: &str, value: String| writeln!(out, "{label:<11}{value}");
    row("summary", clean(&summary(c)))?;
    row("vendor", clean(&c.iss))?;
    row("id", clean(&c.jti))?;
    row(
        "customer",
        c.sub.as_deref().map(clean).unwrap_or("-".into()),
    )?;
    row("issued", rfc3339(c.iat))?;
    row("not before", c.nbf.map(rfc3339).unwrap_or("-".into()))?;
    let term = match c.exp {
        None => "perpetual".to_string(),
        Some(exp) if c.grace > 0 => format!(
            "{} (grace {}, until {})",
            rfc3339(exp),
            fmt_duration_ms(c.grace * 1000),
            rfc3339(exp + c.grace)
        ),
        Some(exp) => rfc3339(exp),
    };
    row("expires", term)?;
    let bound = if c.aud.is_empty() {
        "any server".to_string()
    } else {
        clean(&c.aud.join(", "))
    };
    row("bound to", bound)?;
    if c.is_tombstone() {
        row("licenses", "none: withdraws this id".into())?;
    }
    for g in &c.licenses {
        row("license", clean(&grant_words(g)))?;
    }
    Ok(())
}

fn grant_words(g: &LicenseGrant) -> String {
    let mut words = vec![format!("{} {} seats", g.id, g.seats)];
    if let Some(v) = &g.versions {
        words.push(format!("versions {v}"));
    }
    if g.overage > 0 {
        words.push(format!("overage {}", g.overage));
    }
    if let Some(b) = g.borrow {
        words.push(format!(
            "borrow up to {} for {}",
            b.seats,
            fmt_duration_ms(b.max_s * 1000)
        ));
    }
    words.join(", ")
}
