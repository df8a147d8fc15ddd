//! Over-grant and granted twice.

use leasehold_robustness::check::Broken;

use crate::build::{Hist, flags, holds};

#[test]
fn three_seats_at_once_on_a_pool_of_two_is_an_over_grant() {
    let mut h = Hist::new(2);
    h.checkout(1, "a", 0, 5, 10);
    h.checkout(2, "b", 100, 105, 110);
    h.checkout(3, "c", 200, 205, 210);
    flags(&h.check(), Broken::OverGrant, Some(207));
}

#[test]
fn a_seat_released_before_the_next_grant_leaves_room() {
    let mut h = Hist::new(2);
    h.checkout(1, "a", 0, 5, 10);
    h.checkout(2, "b", 100, 105, 110);
    h.release(1, "a", 150, Some(155), 160);
    h.checkout(3, "c", 200, 205, 210);
    holds(&h.check());
}

#[test]
fn a_release_answered_unknown_may_have_made_room() {
    let mut h = Hist::new(2);
    h.checkout(1, "a", 0, 5, 10);
    h.checkout(2, "b", 100, 105, 110);
    h.release_unknown(1, "a", 150);
    h.checkout(3, "c", 200, 205, 210);
    let mut history = h.build();
    // The release took effect at 160: its event is the proof.
    history.events.insert(2, release_event(&history, "a", 160));
    renumber(&mut history);
    holds(&leasehold_robustness::check::check(&history));
}

#[test]
fn a_release_sent_after_the_grant_cannot_have_made_room() {
    let mut h = Hist::new(2);
    h.checkout(1, "a", 0, 5, 10);
    h.checkout(2, "b", 100, 105, 110);
    h.checkout(3, "c", 200, 205, 210);
    h.release_unknown(1, "a", 300);
    flags(&h.check(), Broken::OverGrant, Some(207));
}

#[test]
fn a_lapsed_seat_leaves_room_only_after_its_skew() {
    // `a` expires at 3005 and counts until 4005.
    let mut late = Hist::new(1);
    late.checkout(1, "a", 0, 5, 10);
    late.checkout(2, "b", 4_100, 4_105, 4_110);
    holds(&late.check());

    let mut early = Hist::new(1);
    early.checkout(1, "a", 0, 5, 10);
    early.checkout(2, "b", 3_500, 3_505, 3_510);
    flags(&early.check(), Broken::OverGrant, Some(3_507));
}

#[test]
fn an_unknown_checkout_is_placed_where_it_adds_nothing() {
    let mut h = Hist::new(1);
    h.checkout_unknown(1, 0);
    h.checkout(2, "b", 100, 105, 110);
    h.checkout_refused(3, 200, 210);
    holds(&h.check());
}

#[test]
fn one_seat_id_granted_twice() {
    let mut h = Hist::new(3);
    h.checkout(1, "a", 0, 5, 10);
    h.release(1, "a", 100, Some(105), 110);
    h.checkout(2, "a", 200, 205, 210);
    flags(&h.check(), Broken::GrantedTwice, Some(205));
}

fn release_event(
    history: &leasehold_robustness::history::History,
    seat: &str,
    at_ms: i64,
) -> leasehold_robustness::history::Event {
    leasehold_robustness::history::Event {
        id: 0,
        at: crate::build::ms(at_ms),
        kind: "release".into(),
        license: Some(history.terms[0].license.clone()),
        seat: Some(seat.into()),
        detail: None,
    }
}

fn renumber(history: &mut leasehold_robustness::history::History) {
    history.events.sort_by_key(|e| e.at);
    for (i, e) in history.events.iter_mut().enumerate() {
        e.id = i as i64 + 1;
    }
}

#[test]
fn refused_while_the_pool_was_full_is_legal() {
    let mut h = Hist::new(1);
    h.checkout(1, "a", 0, 5, 10);
    h.checkout_refused(2, 100, 110);
    holds(&h.check());
}

#[test]
fn refused_after_the_only_seat_was_released() {
    let mut h = Hist::new(1);
    h.checkout(1, "a", 0, 5, 10);
    h.release(1, "a", 50, Some(55), 60);
    h.checkout_refused(2, 100, 110);
    flags(&h.check(), Broken::RefusedWhileFree, Some(100));
}

#[test]
fn refused_after_the_only_seat_lapsed() {
    // `a` counts until 4005, and is still in the table (not reaped).
    let mut h = Hist::new(1);
    h.checkout(1, "a", 0, 5, 10);
    h.checkout_refused(2, 4_500, 4_510);
    flags(&h.check(), Broken::RefusedWhileFree, Some(4_500));
}

#[test]
fn a_release_answered_unknown_may_not_have_freed_the_seat() {
    let mut h = Hist::new(1);
    h.checkout(1, "a", 0, 5, 10);
    h.release_unknown(1, "a", 50);
    h.checkout_refused(2, 100, 110);
    holds(&h.check());
}

#[test]
fn an_unknown_checkout_the_log_shows_granted_fills_the_pool() {
    let mut h = Hist::new(1);
    h.checkout_unknown(1, 0);
    h.event("checkout", "p", 5);
    h.checkout_refused(2, 100, 110);
    holds(&h.check());
}

#[test]
fn an_unknown_checkout_the_log_does_not_show_took_no_seat() {
    let mut h = Hist::new(1);
    h.checkout_unknown(1, 0);
    h.checkout_refused(2, 100, 110);
    flags(&h.check(), Broken::RefusedWhileFree, Some(100));
}
