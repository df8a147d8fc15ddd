//! The event log against the answers.

use leasehold_robustness::check::{Broken, check};
use leasehold_robustness::history::ClockStep;

use crate::build::{Hist, flags, holds, ms};

fn two_checkouts_and_a_release() -> Hist {
    let mut h = Hist::new(3);
    h.checkout(1, "a", 0, 5, 10);
    h.checkout(2, "b", 100, 105, 110);
    h.release(1, "a", 200, Some(205), 210);
    h
}

#[test]
fn consistent_events_hold() {
    holds(&two_checkouts_and_a_release().check());
}

#[test]
fn a_gap_in_the_ids() {
    let mut history = two_checkouts_and_a_release().build();
    history.events[2].id = 4;
    flags(&check(&history), Broken::EventGap, Some(205));
}

#[test]
fn an_acknowledged_checkout_without_its_event() {
    let mut history = two_checkouts_and_a_release().build();
    history.events.remove(1);
    history.events[1].id = 2;
    flags(&check(&history), Broken::EventMissing, Some(100));
}

#[test]
fn an_acknowledged_release_of_a_seat_nothing_took_out() {
    let mut h = Hist::new(3);
    h.checkout(1, "a", 0, 5, 10);
    h.release(1, "a", 200, None, 210);
    flags(&h.check(), Broken::EventMissing, Some(200));
}

#[test]
fn a_release_sent_again_after_an_unknown_one_may_find_the_seat_gone() {
    let mut h = Hist::new(3);
    h.checkout(1, "a", 0, 5, 10);
    h.release_unknown(1, "a", 100);
    h.event("release", "a", 150);
    h.release(1, "a", 2_200, None, 2_210);
    holds(&h.check());
}

#[test]
fn an_event_stamped_outside_its_operation() {
    let mut history = two_checkouts_and_a_release().build();
    history.events[2].at = ms(400);
    flags(&check(&history), Broken::EventOrder, Some(200));
}

#[test]
fn events_in_an_order_the_answers_contradict() {
    // `a` was answered (10) before `b` was sent (100), yet logged after it.
    let mut history = two_checkouts_and_a_release().build();
    history.events[0].id = 2;
    history.events[1].id = 1;
    history.events.swap(0, 1);
    let verdict = check(&history);
    flags(&verdict, Broken::EventOrder, None);
    assert!(
        verdict
            .first()
            .unwrap()
            .message
            .contains("before the operation of event"),
        "{}",
        verdict.violations[0]
    );
}

#[test]
fn overlapping_operations_may_be_logged_in_either_order() {
    let mut h = Hist::new(3);
    h.checkout(1, "a", 0, 50, 100);
    h.checkout(2, "b", 10, 40, 90);
    holds(&h.check());
}

#[test]
fn a_server_clock_stepped_ahead_is_read_on_its_own_clock() {
    // The server's clock is an hour ahead from the start: the leases it
    // signs and its events are on its clock, the clients' on theirs.
    let hour = 3_600_000_000;
    let mut h = Hist::new(2);
    h.checkout(1, "a", 0, 5, 10);
    h.renewed(1, "a", 1_000, 1_005, 1_010);
    let mut history = h.build();
    for op in &mut history.ops {
        if let Some(lease) = match &mut op.outcome {
            leasehold_robustness::history::Outcome::Ok { lease } => lease.as_mut(),
            _ => None,
        } {
            lease.issued_at += hour;
            lease.expires_at += hour;
        }
    }
    for e in &mut history.events {
        e.at += hour;
    }
    assert!(
        !check(&history).holds(),
        "without the step, the server's instants are an hour off"
    );
    history.clock_steps.push(ClockStep {
        from: ms(-1_000),
        offset: hour,
    });
    holds(&check(&history));
}

#[test]
fn a_wall_clock_step_while_recording_is_measured() {
    let history = two_checkouts_and_a_release().build();
    assert_eq!(history.wall_clock_drift(), 0);
    let mut stepped = history.clone();
    stepped.ops[2].sent.wall += 1_000_000;
    assert_eq!(stepped.wall_clock_drift(), 1_000_000);
    assert_eq!(
        leasehold_robustness::history::History::default().wall_clock_drift(),
        0
    );
}
