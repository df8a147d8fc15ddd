//! One seat's life: lost before its expiry, renewed after its release or
//! after a lapse, reaped too soon.

use leasehold_robustness::check::Broken;

use crate::build::{Hist, flags, holds};

#[test]
fn a_410_before_the_expiry_with_nothing_sent_to_end_it() {
    let mut h = Hist::new(2);
    h.checkout(1, "a", 0, 5, 10);
    h.lost(1, "a", 1_000, 1_010, "lapsed");
    flags(&h.check(), Broken::LostBeforeExpiry, Some(1_000));
}

#[test]
fn a_410_after_a_revoke_is_explained_acknowledged_or_not() {
    let mut acked = Hist::new(2);
    acked.checkout(1, "a", 0, 5, 10);
    acked.revoke(9, "a", 500, 505, 510);
    acked.lost(1, "a", 1_000, 1_010, "revoked");
    holds(&acked.check());

    let mut unknown = Hist::new(2);
    unknown.checkout(1, "a", 0, 5, 10);
    unknown.revoke_unknown(9, "a", 500);
    unknown.lost(1, "a", 1_000, 1_010, "revoked");
    holds(&unknown.check());
}

#[test]
fn a_revoke_sent_after_the_410_does_not_explain_it() {
    let mut h = Hist::new(2);
    h.checkout(1, "a", 0, 5, 10);
    h.lost(1, "a", 1_000, 1_010, "revoked");
    h.revoke_unknown(9, "a", 1_500);
    flags(&h.check(), Broken::LostBeforeExpiry, Some(1_000));
}

#[test]
fn a_410_after_the_skew_is_a_lapse() {
    let mut h = Hist::new(2);
    h.checkout(1, "a", 0, 5, 10);
    h.lost(1, "a", 4_100, 4_110, "lapsed");
    holds(&h.check());
}

#[test]
fn a_renewal_after_an_acknowledged_release() {
    let mut h = Hist::new(2);
    h.checkout(1, "a", 0, 5, 10);
    h.release(1, "a", 500, Some(505), 510);
    h.renewed(1, "a", 1_000, 1_005, 1_010);
    flags(&h.check(), Broken::RenewedAfterRelease, Some(1_000));
}

#[test]
fn a_renewal_after_a_release_answered_unknown_is_legal() {
    // The release may never have arrived.
    let mut h = Hist::new(2);
    h.checkout(1, "a", 0, 5, 10);
    h.release_unknown(1, "a", 500);
    h.renewed(1, "a", 1_000, 1_005, 1_010);
    holds(&h.check());
}

#[test]
fn a_renewal_inside_the_skew_is_legal_and_after_it_is_not() {
    // Expires at 3005, counts until 4005.
    let mut inside = Hist::new(2);
    inside.checkout(1, "a", 0, 5, 10);
    inside.renewed(1, "a", 3_500, 3_505, 3_510);
    holds(&inside.check());

    let mut after = Hist::new(2);
    after.checkout(1, "a", 0, 5, 10);
    after.renewed(1, "a", 4_500, 4_505, 4_510);
    flags(&after.check(), Broken::RenewedAfterLapse, Some(4_505));
}

#[test]
fn an_unknown_heartbeat_sent_in_time_may_have_kept_the_seat() {
    // Sent at 2500 (counting): it may have renewed at 4005 at the latest,
    // so the seat may count until 8005.
    let mut h = Hist::new(2);
    h.checkout(1, "a", 0, 5, 10);
    h.heartbeat_unknown(1, "a", 2_500);
    h.renewed(1, "a", 6_000, 6_005, 6_010);
    holds(&h.check());
}

#[test]
fn an_unknown_heartbeat_sent_after_the_lapse_cannot_have_kept_it() {
    let mut h = Hist::new(2);
    h.checkout(1, "a", 0, 5, 10);
    h.heartbeat_unknown(1, "a", 4_500);
    h.renewed(1, "a", 6_000, 6_005, 6_010);
    flags(&h.check(), Broken::RenewedAfterLapse, Some(6_005));
}

#[test]
fn an_outage_gives_a_seat_live_at_its_start_one_ttl_from_its_end() {
    // Down from 2000 to 5000: the seat may count until 5000 + 3000 + 1000.
    let mut h = Hist::new(2);
    h.checkout(1, "a", 0, 5, 10);
    h.outage(2_000, 5_000);
    h.renewed(1, "a", 8_500, 8_505, 8_510);
    holds(&h.check());

    let mut too_late = Hist::new(2);
    too_late.checkout(1, "a", 0, 5, 10);
    too_late.outage(2_000, 5_000);
    too_late.renewed(1, "a", 9_500, 9_505, 9_510);
    flags(&too_late.check(), Broken::RenewedAfterLapse, Some(9_505));
}

#[test]
fn a_renewal_after_a_410_for_the_seat() {
    let mut h = Hist::new(2);
    h.checkout(1, "a", 0, 5, 10);
    h.revoke_unknown(9, "a", 500);
    h.lost(1, "a", 1_000, 1_010, "revoked");
    h.renewed(1, "a", 2_000, 2_005, 2_010);
    flags(&h.check(), Broken::RenewedAfterLapse, Some(2_005));
}

#[test]
fn a_reap_before_the_reap_grace() {
    // Expires at 3005: reapable after 5005.
    let mut soon = Hist::new(2);
    soon.checkout(1, "a", 0, 5, 10);
    soon.event("reap", "a", 4_000);
    flags(&soon.check(), Broken::ReapedTooSoon, Some(4_000));

    let mut due = Hist::new(2);
    due.checkout(1, "a", 0, 5, 10);
    due.event("reap", "a", 5_200);
    holds(&due.check());
}

#[test]
fn a_reap_after_a_renewal_is_measured_from_the_renewed_expiry() {
    let mut h = Hist::new(2);
    h.checkout(1, "a", 0, 5, 10);
    h.renewed(1, "a", 1_000, 1_005, 1_010);
    h.event("reap", "a", 5_200);
    flags(&h.check(), Broken::ReapedTooSoon, Some(5_200));
}

#[test]
fn the_outage_rule_may_have_run_before_the_fault_was_seen_to_end() {
    // Down from 2000; the harness saw it back at 5000, but the server ran
    // the rule when it started, at 4400: a renewal at 4500 may follow it.
    let mut h = Hist::new(2);
    h.checkout(1, "a", 0, 5, 10);
    h.outage(2_000, 5_000);
    h.renewed(1, "a", 4_500, 4_505, 4_510);
    holds(&h.check());
}
