//! `leasehold vendor verify-usage FILE --entitlement LIC --vendor-key KEY`:
//! a usage statement the customer's server signed (`leasehold report
//! --attest`) checked offline against the entitlement the vendor issued:
//! the entitlement verifies with the vendor's key, the statement's key has
//! a `kid` the entitlement is bound to, the statement verifies with that
//! key, and it reports a license the entitlement grants. Then its figures
//! in words; any failure is one sentence and exit 1.

use std::io::Write;
use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use leasehold_common::attestation::{self, Attested};
use leasehold_common::entitlement::{Claims, VendorKey, decode, jws_of_file};
use leasehold_common::text::sanitize_for_terminal;

use super::inspect::vendor_key;
use super::summary;
use crate::format::fmt_duration_ms;
use crate::report::attest::{count, hours, over, secs};

#[derive(Debug, Clone, Args)]
pub struct VerifyUsageArgs {
    /// The statement (`usage.jws`, from `leasehold report --attest`).
    pub file: PathBuf,
    /// The entitlement (`.lic`) you issued for the server that signed it,
    /// bound to that server's kid (`vendor sign --bind KID`).
    #[arg(long, value_name = "FILE")]
    pub entitlement: PathBuf,
    /// Your public key as written in `[[vendor]]`, or @FILE holding it. A
    /// key is base64url: it may begin with `-`.
    #[arg(long, value_name = "KEY", allow_hyphen_values = true)]
    pub vendor_key: String,
}

/// A statement that passed every check, and the entitlement it passed
/// against.
#[derive(Debug, Clone)]
pub struct Checked {
    pub entitlement: Claims,
    pub attested: Attested,
}

pub fn run(args: &VerifyUsageArgs, out: &mut impl Write) -> anyhow::Result<()> {
    let key = vendor_key(&args.vendor_key)?;
    let read = |f: &PathBuf| {
        std::fs::read_to_string(f).with_context(|| format!("reading {}", f.display()))
    };
    let (statement, lic) = (read(&args.file)?, read(&args.entitlement)?);
    let names = Names {
        statement: args.file.display().to_string(),
        entitlement: args.entitlement.display().to_string(),
    };
    let checked = check(&statement, &lic, &key, &names).map_err(anyhow::Error::msg)?;
    write_words(out, &checked, &names)?;
    out.flush()?;
    Ok(())
}

/// The two files' names, for the sentences.
#[derive(Debug, Clone)]
pub struct Names {
    pub statement: String,
    pub entitlement: String,
}

/// Every check, in order; `Err` is the sentence that says which failed.
pub fn check(
    statement: &str,
    lic: &str,
    key: &VendorKey,
    names: &Names,
) -> Result<Checked, String> {
    let (usage, file) = (&names.statement, &names.entitlement);
    let unverified =
        decode(&jws_of_file(lic)).map_err(|e| format!("{file} is not an entitlement file: {e}"))?;
    let entitlement = unverified
        .verify(std::slice::from_ref(key))
        .map_err(|_| {
            format!(
                "{file} does not verify with this vendor key: it was signed with another \
                 vendor's key, or altered since"
            )
        })?
        .claims;
    if entitlement.aud.is_empty() {
        return Err(format!(
            "{file} is not bound to a server (it has no aud), so it cannot say which server \
             may sign usage: issue it with --bind KID"
        ));
    }
    let attested = attestation::verify(statement).map_err(|e| {
        if e.contains("does not verify") {
            format!(
                "{usage} has been tampered with: its signature does not verify with the server \
                 key it names"
            )
        } else {
            format!("{usage} is not a usage statement: {e}")
        }
    })?;
    if !entitlement.aud.contains(&attested.kid) {
        return Err(format!(
            "{usage} is a statement from another server: it was signed by server {}, which \
             {file} is not bound to (it names {})",
            attested.kid,
            entitlement.aud.join(", ")
        ));
    }
    let lic_id = &attested.claims.lic;
    if entitlement.grant_for(lic_id).is_none() {
        let granted: Vec<&str> = entitlement.licenses.iter().map(|g| g.id.as_str()).collect();
        return Err(format!(
            "{usage} reports license {lic_id}, which {file} does not grant (it grants {})",
            if granted.is_empty() {
                "none".to_string()
            } else {
                granted.join(", ")
            }
        ));
    }
    Ok(Checked {
        entitlement,
        attested,
    })
}

fn write_words(out: &mut impl Write, checked: &Checked, names: &Names) -> anyhow::Result<()> {
    let clean = |s: &str| sanitize_for_terminal(s).into_owned();
    let c = &checked.attested.claims;
    let mut row = |label: &str, value: String| writeln!(out, "{label:<13}{value}");
    row(
        "verified",
        clean(&format!(
            "{} is intact, signed by server {}, which {} is bound to",
            names.statement, checked.attested.kid, names.entitlement
        )),
    )?;
    row("entitlement", clean(&summary(&checked.entitlement)))?;
    row("license", clean(&c.lic))?;
    row("range", format!("{} to {}", secs(c.from), secs(c.to)))?;
    if c.covered_from > c.from {
        row(
            "history",
            format!(
                "from {} only: the server recorded nothing before",
                secs(c.covered_from)
            ),
        )?;
    }
    row("seats", format!("{} at the end of the range", c.seats))?;
    row(
        "peak",
        format!("{} in use at once", count(c.peak.into(), "seat")),
    )?;
    row(
        "over",
        format!(
            "{} in use beyond the seats ({} s)",
            over(c.over_s),
            c.over_s
        ),
    )?;
    row("seat-hours", hours(c.seat_hours))?;
    row(
        "denials",
        format!(
            "{}, to {}",
            count(c.true_denials, "true denial"),
            count(c.denied_holders, "holder")
        ),
    )?;
    let entitlements = if c.entitlements.is_empty() {
        "none".to_string()
    } else {
        clean(&c.entitlements.join(", "))
    };
    row(
        "entitlements",
        format!("{entitlements} (in force in the range)"),
    )?;
    let signed_ago = chrono::Utc::now().timestamp().saturating_sub(c.iat);
    row(
        "signed",
        format!(
            "{} ({} ago)",
            super::rfc3339(c.iat),
            fmt_duration_ms(signed_ago.saturating_mul(1000))
        ),
    )?;
    Ok(())
}

#[cfg(test)]
#[path = "verify_usage_tests.rs"]
mod tests;
