//! The entitlements' Prometheus gauges: per license with a vendor the
//! entitled seats (before the licenses file narrows them), per active
//! entitlement with a term its end, and how far the wall clock reads
//! behind the decision clock.

use std::fmt::Write;

use leasehold_common::entitlement::State;
use leasehold_common::{Licenses, Timestamp};

/// The gauges' text at the decision time `now`; `clock_behind_ms` as the
/// writer last saw it.
pub fn render(licenses: &Licenses, now: Timestamp, clock_behind_ms: i64) -> String {
    let mut out = String::new();
    let ledger = licenses.entitled().ledger();
    let t = now.as_millis();
    let vendors: Vec<_> = licenses
        .iter()
        .filter_map(|l| l.vendor.as_deref().map(|v| (l, v)))
        .collect();
    if !vendors.is_empty() {
        out.push_str(
            "# HELP leasehold_entitled_seats Seats the entitlements in force grant a license, \
             before the licenses file narrows them.\n# TYPE leasehold_entitled_seats gauge\n",
        );
        for (l, vendor) in &vendors {
            let seats = ledger.grant(vendor, &l.id, t).seats;
            let _ = writeln!(
                out,
                "leasehold_entitled_seats{{license=\"{}\"}} {seats}",
                l.id
            );
        }
    }
    let ending: Vec<_> = ledger
        .entitlements()
        .iter()
        .zip(ledger.states(t))
        .filter(|(e, s)| s.grants() && e.claims.exp.is_some() && *s != State::Conflict)
        .collect();
    if !ending.is_empty() {
        out.push_str(
            "# HELP leasehold_entitlement_expiry_timestamp_seconds The end of the term (exp) of \
             each active entitlement that has one.\n\
             # TYPE leasehold_entitlement_expiry_timestamp_seconds gauge\n",
        );
        for (e, _) in ending {
            let c = &e.claims;
            let _ = writeln!(
                out,
                "leasehold_entitlement_expiry_timestamp_seconds{{vendor=\"{}\",entitlement=\"{}\"}} {}",
                c.iss,
                c.jti,
                c.exp.unwrap_or_default()
            );
        }
    }
    out.push_str(
        "# HELP leasehold_clock_behind_seconds How far the wall clock reads behind the decision \
         clock (0: not behind).\n# TYPE leasehold_clock_behind_seconds gauge\n",
    );
    let _ = writeln!(
        out,
        "leasehold_clock_behind_seconds {}",
        clock_behind_ms.max(0) as f64 / 1000.0
    );
    out
}
