//! Entitlements as the admin reads them: `leasehold entitlements` (every
//! file of the server's entitlements directory: its vendor, id, customer,
//! state, what it grants, when it ends, why it is rejected), and how a
//! vendor pool's term reads in `leasehold status` and the console's pools
//! pane ([`term_mark`]: the entitled seats drop soon, the pool is in grace,
//! or nothing is entitled any more).
//!
//! The formatting functions are pure (the server's `now` is passed in), so
//! the tests check them without a server. Every server string is passed
//! through [`sanitize_for_terminal`] in the table; `--json` prints the
//! server's answer (as `status --json` does: its fields, in its order) but
//! escapes what a terminal would act on ([`json_for_terminal`]).

use std::fmt;
use std::io::Write;

use leasehold_common::Timestamp;
use leasehold_common::api::{EntitlementView, EntitlementsResponse, LicenseSummary};
use leasehold_common::text::sanitize_for_terminal;

use crate::api::AdminClient;
use crate::format::{ellipsize, json_for_terminal, table};

/// A vendor pool whose entitled seats drop within this long is marked.
pub const WARN_WITHIN_MS: i64 = 30 * DAY_MS;
const DAY_MS: i64 = 86_400_000;
/// An error longer than this ends in `…` in the table (`--json` has it
/// whole), as in `leasehold webhooks`.
const ERROR_CELLS: usize = 80;

/// `leasehold entitlements [--json]`: the table at the server's time (its
/// `now` from `GET /v1/admin/licenses`: the term is judged by the server's
/// clock, not this machine's), or the server's JSON.
pub async fn run(client: &AdminClient, json: bool, out: &mut dyn Write) -> anyhow::Result<()> {
    if json {
        let listing = client.entitlements().await?;
        writeln!(
            out,
            "{}",
            json_for_terminal(&serde_json::to_string_pretty(&listing)?)
        )?;
        return Ok(());
    }
    let (listing, licenses) = tokio::join!(client.entitlements(), client.licenses());
    let (listing, now) = (listing?, licenses?.now);
    write!(out, "{}", format_entitlements(&listing, client.base(), now))?;
    Ok(())
}

fn clean(s: &str) -> String {
    sanitize_for_terminal(s).into_owned()
}

fn or_dash(s: Option<&str>) -> String {
    s.map_or_else(|| "-".into(), clean)
}

/// The server's kid, then one row per file.
pub fn format_entitlements(resp: &EntitlementsResponse, server: &str, now: Timestamp) -> String {
    let mut out = format!(
        "server {} · kid {} · server time {now}\n",
        clean(server),
        clean(&resp.server_kid)
    );
    if resp.entitlements.is_empty() {
        out.push_str("no entitlement files in the server's entitlements directory\n");
        return out;
    }
    let rows: Vec<Vec<String>> = resp
        .entitlements
        .iter()
        .map(|e| {
            vec![
                clean(&e.file),
                or_dash(e.vendor.as_deref()),
                or_dash(e.id.as_deref()),
                or_dash(e.customer.as_deref()),
                state_cell(e, now),
                licenses_cell(e),
                ends_cell(e, now),
                e.error
                    .as_deref()
                    .map_or_else(|| "-".into(), |m| ellipsize(&clean(m), ERROR_CELLS).into()),
            ]
        })
        .collect();
    out.push_str(&table(
        &[
            "FILE", "VENDOR", "ID", "CUSTOMER", "STATE", "LICENSES", "ENDS", "ERROR",
        ],
        &rows,
    ));
    out
}

/// The state; one not yet in force says when it starts.
fn state_cell(e: &EntitlementView, now: Timestamp) -> String {
    let state = clean(&e.state);
    match e.not_before {
        Some(nbf) if e.state == "not_yet" && nbf > now => {
            format!("{state} (starts in {})", fmt_left(nbf.millis_since(now)))
        }
        _ => state,
    }
}

/// `cad 10, ide 3`; an id the licenses file does not have with this vendor
/// is marked `(unused)`: it grants nothing.
fn licenses_cell(e: &EntitlementView) -> String {
    if e.licenses.is_empty() {
        return "-".into();
    }
    e.licenses
        .iter()
        .map(|l| {
            let unused = if e.unused.contains(&l.id) {
                " (unused)"
            } else {
                ""
            };
            format!("{} {}{unused}", clean(&l.id), l.seats)
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// When the file stops granting, from the server's `now`: `perpetual`,
/// `in 12d` (`in 12d (+14d grace)` with a grace period), `grace, ends in
/// 3d`, `ended 2d ago`; `-` for a file whose claims could not be read.
pub fn ends_cell(e: &EntitlementView, now: Timestamp) -> String {
    if e.vendor.is_none() {
        return "-".into();
    }
    let Some(exp) = e.expires_at else {
        return "perpetual".into();
    };
    let until = e.grace_until.unwrap_or(exp).max(exp);
    if now < exp {
        let grace = until.millis_since(exp);
        let left = fmt_left(exp.millis_since(now));
        if grace > 0 {
            format!("in {left} (+{} grace)", fmt_left(grace))
        } else {
            format!("in {left}")
        }
    } else if now < until {
        format!("grace, ends in {}", fmt_left(until.millis_since(now)))
    } else {
        format!("ended {} ago", fmt_left(now.millis_since(until)))
    }
}

/// Time left in its largest whole unit, rounded down: `12d`, `5h`, `7m`,
/// `<1m` (also for a time already past).
pub fn fmt_left(ms: i64) -> String {
    let m = ms.max(0) / 60_000;
    match m {
        0 => "<1m".into(),
        1..60 => format!("{m}m"),
        60..1440 => format!("{}h", m / 60),
        _ => format!("{}d", m / 1440),
    }
}

/// A vendor pool's term, when it calls for a warning.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TermMark {
    /// The entitled seats drop within [`WARN_WITHIN_MS`]: this long from now.
    EndsIn(i64),
    /// In grace: the seats drop this long from now (`None`: the server
    /// gave no instant).
    Grace(Option<i64>),
    /// A vendor license with no entitled seats: every term has ended (or
    /// none has begun).
    Expired,
}

impl fmt::Display for TermMark {
    /// `⏳ 12d`, `grace 3d`, `expired`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TermMark::EndsIn(ms) => write!(f, "⏳ {}", fmt_left(*ms)),
            TermMark::Grace(Some(ms)) => write!(f, "grace {}", fmt_left(*ms)),
            TermMark::Grace(None) => f.write_str("grace"),
            TermMark::Expired => f.write_str("expired"),
        }
    }
}

/// The warning for pool `l` at the server's `now`: none for a license
/// without a vendor, nor for one whose seats do not drop within 30 days.
pub fn term_mark(l: &LicenseSummary, now: Timestamp) -> Option<TermMark> {
    l.vendor.as_ref()?;
    let left = l.entitlement_ends_at.map(|t| t.millis_since(now));
    if l.entitled_seats == Some(0) {
        Some(TermMark::Expired)
    } else if l.in_grace {
        Some(TermMark::Grace(left))
    } else {
        left.filter(|&ms| ms <= WARN_WITHIN_MS)
            .map(TermMark::EndsIn)
    }
}

/// A vendor pool's entitled seats with its mark, if any (`10 ⏳ 12d`,
/// `0 expired`); `None` for a license without a vendor.
pub fn entitled_cell(l: &LicenseSummary, now: Timestamp) -> Option<(String, Option<TermMark>)> {
    l.vendor.as_ref()?;
    let seats = l.entitled_seats.unwrap_or(0).to_string();
    Some((seats, term_mark(l, now)))
}

#[cfg(test)]
#[path = "entitlements_tests.rs"]
mod tests;
