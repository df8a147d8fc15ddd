//! The vendor's tool, no server needed: `leasehold vendor keygen` and
//! `vendor sign` make the key and the signed entitlement files a customer's
//! server grants seats from; `leasehold entitlement inspect` reads a file
//! and checks its signature; `vendor verify-usage` checks a usage statement
//! a customer's server signed against the entitlement bound to it.

mod inspect;
pub mod sign;
pub mod verify_usage;

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use clap::{Args, Subcommand};
use leasehold_common::entitlement::{Claims, VendorSigner};
use serde_json::Value;

pub use inspect::InspectArgs;
pub use sign::SignArgs;
pub use verify_usage::VerifyUsageArgs;

#[derive(Debug, Clone, Args)]
pub struct VendorArgs {
    #[command(subcommand)]
    pub command: VendorCommand,
}

#[derive(Debug, Clone, Subcommand)]
pub enum VendorCommand {
    /// Make a vendor key: the private key as PKCS#8 PEM (mode 0600), and
    /// the `[[vendor]]` lines a customer adds to the licenses file.
    Keygen {
        /// Where to write the private key (never overwritten).
        #[arg(long, value_name = "FILE")]
        out: PathBuf,
        /// The vendor's name for the printed `[[vendor]]` lines.
        #[arg(long, value_name = "NAME", default_value = "your-company")]
        name: String,
    },
    /// Sign an entitlement file (iat = now): seats, versions and term of
    /// licenses for one customer.
    Sign(Box<SignArgs>),
    /// Check a usage statement (`leasehold report --attest`) against the
    /// entitlement you issued: signed by a server the entitlement is bound
    /// to, unaltered, for a license it grants; then its figures (exit 1 if
    /// any check fails).
    VerifyUsage(VerifyUsageArgs),
}

#[derive(Debug, Clone, Args)]
pub struct EntitlementArgs {
    #[command(subcommand)]
    pub command: EntitlementCommand,
}

#[derive(Debug, Clone, Subcommand)]
pub enum EntitlementCommand {
    /// Print a file's claims in words and, given the vendor's key, whether
    /// its signature verifies (exit 1 if not).
    Inspect(InspectArgs),
}

pub fn run_vendor(args: VendorArgs, out: &mut impl Write) -> anyhow::Result<()> {
    match args.command {
        VendorCommand::Keygen { out: file, name } => keygen(&file, &name, out),
        VendorCommand::Sign(args) => sign_file(&args, out),
        VendorCommand::VerifyUsage(args) => verify_usage::run(&args, out),
    }
}

pub fn run_entitlement(args: EntitlementArgs, out: &mut impl Write) -> anyhow::Result<()> {
    match args.command {
        EntitlementCommand::Inspect(args) => inspect::run(&args, out),
    }
}

fn keygen(file: &Path, name: &str, out: &mut impl Write) -> anyhow::Result<()> {
    let mut seed = [0u8; 32];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut r| r.read_exact(&mut seed))
        .context("reading 32 random bytes from /dev/urandom")?;
    let key = VendorSigner::from_seed(&seed);
    write_private(file, key.to_pkcs8_pem().as_bytes())?;
    writeln!(
        out,
        "wrote the private key to {} (keep it secret: whoever has it signs seats)\n\
         the customer's licenses file names you with:\n\n\
         [[vendor]]\nname = {}\npublic_key = \"{}\"",
        file.display(),
        toml_string(name),
        key.public_key()
    )?;
    Ok(())
}

/// A new file only its owner can read; an existing one is never replaced.
fn write_private(file: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(file)
        .with_context(|| {
            format!(
                "creating {} (an existing key is never overwritten)",
                file.display()
            )
        })?;
    f.write_all(bytes)
        .with_context(|| format!("writing {}", file.display()))
}

fn toml_string(s: &str) -> String {
    Value::from(s).to_string()
}

fn sign_file(args: &SignArgs, out: &mut impl Write) -> anyhow::Result<()> {
    let pem = std::fs::read_to_string(&args.key)
        .with_context(|| format!("reading {}", args.key.display()))?;
    let key = VendorSigner::from_pkcs8_pem(&pem)
        .map_err(|e| anyhow::anyhow!("{}: {e}", args.key.display()))?;
    let claims = sign::claims(args, chrono::Utc::now().timestamp())?;
    let summary = summary(&Claims::from_json(&claims).map_err(|e| anyhow::anyhow!("{e}"))?);
    let text = format!(
        "# Leasehold entitlement: {summary}\n# Put it in the server's entitlements directory.\n{}\n",
        key.sign(&claims)
    );
    if args.out.exists() && args.renew.as_ref() != Some(&args.out) {
        bail!("{} exists: not overwritten", args.out.display());
    }
    std::fs::write(&args.out, text).with_context(|| format!("writing {}", args.out.display()))?;
    writeln!(out, "wrote {}: {summary}", args.out.display())?;
    Ok(())
}

/// `keyright/acme for Acme: cad 10, ide 3; until 2027-01-01T00:00:00Z`.
pub(crate) fn summary(c: &Claims) -> String {
    let licenses: Vec<String> = c
        .licenses
        .iter()
        .map(|g| format!("{} {}", g.id, g.seats))
        .collect();
    let what = if c.is_tombstone() {
        "withdrawn".to_string()
    } else {
        licenses.join(", ")
    };
    let customer = c
        .sub
        .as_deref()
        .map(|s| format!(" for {s}"))
        .unwrap_or_default();
    let term = match c.exp {
        Some(exp) => format!("until {}", rfc3339(exp)),
        None => "perpetual".to_string(),
    };
    format!("{}/{}{customer}: {what}; {term}", c.iss, c.jti)
}

pub(crate) fn rfc3339(s: i64) -> String {
    chrono::DateTime::from_timestamp(s, 0)
        .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
        .unwrap_or_else(|| s.to_string())
}
