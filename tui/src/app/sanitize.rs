//! Server strings made safe for the terminal on their way into the app.

use leasehold_common::api::{Event, LicenseSummary, SeatView};
use leasehold_common::text::sanitize_for_terminal;

fn clean(s: String) -> String {
    // Printable ASCII is never unsafe: skip the per-char Unicode checks.
    if s.bytes().all(|b| (0x20..0x7f).contains(&b)) {
        return s;
    }
    match sanitize_for_terminal(&s) {
        std::borrow::Cow::Borrowed(_) => s,
        std::borrow::Cow::Owned(o) => o,
    }
}

pub(super) fn sanitize_seat(mut s: SeatView) -> SeatView {
    s.license_id = clean(s.license_id);
    s.seat_id = clean(s.seat_id);
    s.holder = clean(s.holder);
    s.fingerprint = s.fingerprint.map(clean);
    s
}

/// A pool's id, the names of its firing alerts, and its vendor, customer
/// and version range.
pub(super) fn sanitize_license(mut l: LicenseSummary) -> LicenseSummary {
    l.id = clean(l.id);
    l.alerts_firing = l.alerts_firing.into_iter().map(clean).collect();
    l.vendor = l.vendor.map(clean);
    l.customer = l.customer.map(clean);
    l.versions = l.versions.map(clean);
    l
}

pub(super) fn sanitize_event(mut e: Event) -> Event {
    e.license_id = e.license_id.map(clean);
    e.seat_id = e.seat_id.map(clean);
    e.holder = e.holder.map(clean);
    e.detail = e.detail.map(clean);
    e
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pools_vendor_customer_and_versions_arrive_clean() {
        let l = sanitize_license(LicenseSummary {
            id: "cad".into(),
            vendor: Some("key\u{1b}[2Jright".into()),
            customer: Some("Acme\u{202e}".into()),
            versions: Some(">=1\u{9b}".into()),
            ..Default::default()
        });
        assert_eq!(l.vendor.as_deref(), Some("key\u{fffd}[2Jright"));
        assert_eq!(l.customer.as_deref(), Some("Acme\u{fffd}"));
        assert_eq!(l.versions.as_deref(), Some(">=1\u{fffd}"));
    }
}
