//! `leasehold vendor sign`: the claims of an entitlement from the flags,
//! fresh or from an issued file (`--renew` keeps its `jti`; `--withdraw`
//! issues its tombstone).

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, bail};
use clap::Args;
use leasehold_common::entitlement::{Claims, decode, jws_of_file};
use serde_json::{Map, Value, json};

use crate::duration::parse_block;

#[derive(Debug, Clone, Args)]
pub struct SignArgs {
    /// The vendor's private key (PKCS#8 PEM, from `vendor keygen`).
    #[arg(long, value_name = "FILE")]
    pub key: PathBuf,
    /// The vendor's name (`iss`), as in the customer's `[[vendor]]`.
    #[arg(long, value_name = "NAME")]
    pub vendor: Option<String>,
    /// The entitlement's id (`jti`): 1-64 of A-Za-z0-9._-.
    #[arg(long, value_name = "ID")]
    pub id: Option<String>,
    /// A license and its seats, `cad=10`; repeat for more licenses.
    #[arg(long = "license", value_name = "ID=SEATS", value_parser = parse_license)]
    pub licenses: Vec<(String, u32)>,
    /// The customer's name, for display (`sub`).
    #[arg(long, value_name = "NAME")]
    pub customer: Option<String>,
    /// The versions it grants, e.g. ">=2025.1, <2027" (every license).
    #[arg(long, value_name = "RANGE")]
    pub versions: Option<String>,
    /// Grants nothing before this instant (RFC 3339).
    #[arg(long, value_name = "T", value_parser = parse_instant)]
    pub not_before: Option<i64>,
    /// The end of the term (RFC 3339); without it, perpetual.
    #[arg(long, value_name = "T", value_parser = parse_instant)]
    pub expires: Option<i64>,
    /// Still grants this long after --expires, e.g. 14d.
    #[arg(long, value_name = "DURATION", value_parser = parse_block)]
    pub grace: Option<Duration>,
    /// Seats allowed beyond the count (every license).
    #[arg(long, value_name = "N")]
    pub overage: Option<u32>,
    /// Borrowing allowed, MAX:SEATS, e.g. 3d:2 (every license).
    #[arg(long, value_name = "MAX:SEATS", value_parser = parse_borrow)]
    pub borrow: Option<(i64, u32)>,
    /// Bind it to a server's `kid` (`leaseholdd kid`); repeat for a standby.
    #[arg(long = "bind", value_name = "KID")]
    pub bind: Vec<String>,
    /// Start from an issued file's claims and keep its id: a renewal
    /// replaces it, never adds to it.
    #[arg(long, value_name = "FILE", conflicts_with = "withdraw")]
    pub renew: Option<PathBuf>,
    /// Issue the tombstone of an issued file: it withdraws it.
    #[arg(long, value_name = "FILE")]
    pub withdraw: Option<PathBuf>,
    /// Where to write the signed file.
    #[arg(long, value_name = "FILE")]
    pub out: PathBuf,
}

fn parse_license(s: &str) -> Result<(String, u32), String> {
    let (id, seats) = s.split_once('=').ok_or("expected ID=SEATS, e.g. cad=10")?;
    let seats = seats
        .parse()
        .map_err(|_| format!("{seats:?} is not a number of seats"))?;
    Ok((id.to_string(), seats))
}

fn parse_instant(s: &str) -> Result<i64, String> {
    chrono::DateTime::parse_from_rfc3339(s)
        .map(|t| t.timestamp())
        .map_err(|e| format!("not an RFC 3339 instant ({e}), e.g. 2027-01-01T00:00:00Z"))
}

fn parse_borrow(s: &str) -> Result<(i64, u32), String> {
    let (max, seats) = s.split_once(':').ok_or("expected MAX:SEATS, e.g. 3d:2")?;
    let max = parse_block(max)?.as_secs() as i64;
    let seats = seats
        .parse()
        .map_err(|_| format!("{seats:?} is not a number of seats"))?;
    Ok((max, seats))
}

/// The claims to sign, issued at `now_s`, checked as the server will.
pub fn claims(args: &SignArgs, now_s: i64) -> anyhow::Result<Value> {
    let mut claims = match args.renew.as_ref().or(args.withdraw.as_ref()) {
        Some(file) => issued_claims(file)?,
        None => Map::new(),
    };
    let mut set = |name: &str, value: Option<Value>| {
        if let Some(v) = value {
            claims.insert(name.to_string(), v);
        }
    };
    set("iss", args.vendor.clone().map(Value::from));
    set("jti", args.id.clone().map(Value::from));
    set("sub", args.customer.clone().map(Value::from));
    set("nbf", args.not_before.map(Value::from));
    set("exp", args.expires.map(Value::from));
    set("grace", args.grace.map(|g| json!(g.as_secs())));
    if !args.bind.is_empty() {
        set("aud", Some(json!(args.bind)));
    }
    claims.insert("iat".into(), json!(now_s));
    let items = if args.withdraw.is_some() {
        Vec::new()
    } else {
        license_items(args, claims.get("licenses"))?
    };
    claims.insert("licenses".into(), Value::Array(items));
    let claims = Value::Object(claims);
    Claims::from_json(&claims).map_err(|e| anyhow::anyhow!("{e}"))?;
    Ok(claims)
}

/// The claims of an issued file, as signed (unknown claims kept).
fn issued_claims(file: &PathBuf) -> anyhow::Result<Map<String, Value>> {
    let text =
        std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
    let issued =
        decode(&jws_of_file(&text)).map_err(|e| anyhow::anyhow!("{}: {e}", file.display()))?;
    match issued.payload() {
        Value::Object(map) => Ok(map.clone()),
        _ => bail!("{}: the claims are not an object", file.display()),
    }
}

/// The license items: those issued (when renewing) with `--license` seats
/// set or added, then the options that apply to every item.
fn license_items(args: &SignArgs, issued: Option<&Value>) -> anyhow::Result<Vec<Value>> {
    let mut items: Vec<Value> = issued
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    for (id, seats) in &args.licenses {
        match items.iter_mut().find(|i| i["id"] == json!(id)) {
            Some(item) => item["seats"] = json!(seats),
            None => items.push(json!({"id": id, "seats": seats})),
        }
    }
    if items.is_empty() {
        bail!("no --license: an entitlement grants at least one (--withdraw to withdraw one)");
    }
    for item in &mut items {
        if let Some(range) = &args.versions {
            item["versions"] = json!(range);
        }
        if let Some(n) = args.overage {
            item["overage"] = json!(n);
        }
        if let Some((max, seats)) = args.borrow {
            item["borrow"] = json!({"max": max, "seats": seats});
        }
    }
    Ok(items)
}
