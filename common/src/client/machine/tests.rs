use super::*;

const T0: i64 = 1_796_011_200_000;

fn at(ms: i64) -> Timestamp {
    Timestamp::from_millis(T0 + ms)
}

fn lease(seat: &str, issued_ms: i64, window_ms: i64) -> Lease {
    Lease {
        license_id: "l".into(),
        seat_id: seat.into(),
        holder: "h".into(),
        fingerprint: Some("fp".into()),
        issued_at: at(issued_ms),
        expires_at: at(issued_ms + window_ms),
        overage: false,
        borrowed: false,
        grace: false,
        entitlement_ends_at: None,
        token: String::new(),
    }
}

fn machine() -> Machine {
    Machine::with_rng(at(0), StdRng::seed_from_u64(7))
}

fn lost(reason: Option<SeatLostReason>) -> ClientError {
    ClientError::SeatLost {
        reason,
        message: "m".into(),
    }
}

fn transient() -> ClientError {
    ClientError::Transient("connection refused".into())
}

fn checkout_key(m: &mut Machine, now: Timestamp) -> String {
    match m.next_action(now) {
        Action::Checkout { idempotency_key } => idempotency_key,
        other => panic!("expected a checkout, got {other:?}"),
    }
}

fn sleep_until(m: &mut Machine, now: Timestamp) -> Timestamp {
    match m.next_action(now) {
        Action::SleepUntil(t) => t,
        other => panic!("expected a sleep, got {other:?}"),
    }
}

#[test]
fn heartbeat_at_a_third_of_the_window_from_the_send() {
    let t = HeldTiming::of(&lease("s", 0, 60_000), at(5));
    assert_eq!(t.window_ms, 60_000);
    assert_eq!(t.heartbeat_at(1.0), at(20_005));
    assert_eq!(t.heartbeat_at(0.9), at(18_005));
    assert_eq!(t.heartbeat_at(1.1), at(22_005));
    assert_eq!(t.deadline(), at(60_005));
}

#[test]
fn schedule_ignores_the_absolute_server_times() {
    // The same lease seen by a client an hour fast and an hour slow: the
    // schedule moves with the local send time, never with expires_at.
    let l = lease("s", 0, 3_000);
    for offset in [-3_600_000, 0, 3_600_000] {
        let sent = at(offset);
        let t = HeldTiming::of(&l, sent);
        assert_eq!(t.heartbeat_at(1.0).millis_since(sent), 1_000);
        assert_eq!(t.deadline().millis_since(sent), 3_000);
    }
}

#[test]
fn backoff_grows_and_is_capped_within_the_window() {
    let w = Duration::from_secs(60);
    assert_eq!(backoff(w, 1, 1.0), Duration::from_secs(1));
    assert_eq!(backoff(w, 2, 1.0), Duration::from_secs(2));
    assert_eq!(backoff(w, 4, 1.0), Duration::from_secs(8));
    assert_eq!(backoff(w, 5, 1.0), Duration::from_secs(10));
    assert_eq!(backoff(w, 500, 1.0), Duration::from_secs(10));
    let short = Duration::from_secs(1);
    assert_eq!(backoff(short, 1, 1.0), Duration::from_millis(50));
    assert_eq!(backoff(short, 9, 1.0), Duration::from_millis(200));
    assert_eq!(backoff(w, 1, 0.5), Duration::from_millis(500));
}

#[test]
fn jittered_heartbeats_stay_within_ten_percent() {
    let mut m = machine();
    for i in 0..50 {
        let sent = at(i * 100_000);
        m.on_checkout(sent, sent, Ok(lease("s", i * 100_000, 30_000)));
        let next = sleep_until(&mut m, sent);
        let d = next.millis_since(sent);
        assert!((9_000..=11_000).contains(&d), "{d}");
    }
}

#[test]
fn checkout_then_heartbeats_keep_the_same_seat() {
    let mut m = machine();
    assert_eq!(m.state(), &KeeperState::Acquiring);
    let _key = checkout_key(&mut m, at(0));
    let s = m.on_checkout(at(0), at(10), Ok(lease("a", 3, 3_000)));
    assert!(matches!(s, Some(KeeperState::Held(ref l)) if l.seat_id == "a"));
    let hb = sleep_until(&mut m, at(10));
    assert!(hb.millis_since(at(0)) >= 900 && hb.millis_since(at(0)) <= 1_100);
    assert_eq!(
        m.next_action(hb),
        Action::Heartbeat {
            seat_id: "a".into(),
            idle_s: None,
        }
    );
    let renewed = lease("a", 1_000, 3_000);
    let s = m.on_heartbeat(hb, hb, Ok(renewed.clone()));
    assert_eq!(s, Some(KeeperState::Held(renewed)));
}

#[test]
fn a_transient_retry_reuses_the_idempotency_key_and_a_new_attempt_does_not() {
    let mut m = machine();
    let k1 = checkout_key(&mut m, at(0));
    assert_eq!(m.on_checkout(at(0), at(5), Err(transient())), None);
    let retry_at = sleep_until(&mut m, at(5));
    assert_eq!(checkout_key(&mut m, retry_at), k1, "same attempt, same key");
    // A 409 is an answer: the next checkout is a new attempt.
    let s = m.on_checkout(
        retry_at,
        retry_at,
        Err(ClientError::NoSeats {
            retry_after: Some(Duration::from_secs(4)),
            seats: Some(1),
            live: Some(1),
            reserved: Some(0),
        }),
    );
    let Some(KeeperState::Waiting { retry_after }) = s else {
        panic!("{s:?}")
    };
    assert!(retry_after >= Duration::from_secs(4));
    assert!(retry_after <= Duration::from_millis(4_400));
    let wake = sleep_until(&mut m, retry_at);
    assert_eq!(
        wake.millis_since(retry_at),
        duration_millis(retry_after),
        "waits for Retry-After"
    );
    let k2 = checkout_key(&mut m, wake);
    assert_ne!(k2, k1);
    m.on_checkout(wake, wake, Ok(lease("a", 0, 3_000)));
    // After losing the seat, another new key.
    let hb = sleep_until(&mut m, wake);
    m.on_heartbeat(hb, hb, Err(lost(None)));
    assert_ne!(checkout_key(&mut m, hb), k2);
}

#[test]
fn transient_heartbeat_failures_keep_the_lease_until_its_deadline() {
    let mut m = machine();
    checkout_key(&mut m, at(0));
    m.on_checkout(at(0), at(0), Ok(lease("a", 0, 3_000)));
    let mut now = sleep_until(&mut m, at(0));
    let mut attempts = 0;
    // The server is down: every heartbeat fails.
    while now < at(3_000) {
        assert_eq!(
            m.next_action(now),
            Action::Heartbeat {
                seat_id: "a".into(),
                idle_s: None,
            }
        );
        assert_eq!(
            m.on_heartbeat(now, now, Err(transient())),
            None,
            "still held"
        );
        assert!(m.state().is_held());
        attempts += 1;
        now = sleep_until(&mut m, now);
        assert!(now <= at(3_000), "never sleeps past the deadline");
    }
    assert!(attempts >= 3, "retries soon: {attempts}");
    assert_eq!(now, at(3_000), "wakes at the deadline to try once more");
    // The try at the deadline fails too: now, and only now, lapsed.
    assert_eq!(
        m.on_heartbeat(now, now, Err(transient())),
        Some(KeeperState::Lapsed)
    );
    // Still trying the same seat (the server may still hold it).
    let next = sleep_until(&mut m, now);
    assert_eq!(
        m.next_action(next),
        Action::Heartbeat {
            seat_id: "a".into(),
            idle_s: None,
        }
    );
    // The server is back and still has the seat.
    let back = lease("a", 5_000, 3_000);
    assert_eq!(
        m.on_heartbeat(next, next, Ok(back.clone())),
        Some(KeeperState::Held(back))
    );
}

#[test]
fn a_lapsed_seat_that_is_gone_is_checked_out_again_and_stays_lapsed_until_then() {
    let mut m = machine();
    checkout_key(&mut m, at(0));
    m.on_checkout(at(0), at(0), Ok(lease("a", 0, 1_000)));
    assert_eq!(
        m.on_heartbeat(at(1_000), at(1_200), Err(transient())),
        Some(KeeperState::Lapsed)
    );
    let t = sleep_until(&mut m, at(1_200));
    assert_eq!(m.on_heartbeat(t, t, Err(lost(None))), None);
    assert_eq!(m.state(), &KeeperState::Lapsed);
    checkout_key(&mut m, t);
    assert_eq!(m.on_checkout(t, t, Err(transient())), None, "still lapsed");
    let t2 = sleep_until(&mut m, t);
    let s = m.on_checkout(t2, t2, Ok(lease("b", 0, 1_000)));
    assert!(matches!(s, Some(KeeperState::Held(ref l)) if l.seat_id == "b"));
}

#[test]
fn seat_lost_checks_out_again_at_once() {
    let mut m = machine();
    checkout_key(&mut m, at(0));
    m.on_checkout(at(0), at(0), Ok(lease("a", 0, 60_000)));
    let hb = sleep_until(&mut m, at(0));
    assert_eq!(
        m.on_heartbeat(hb, hb, Err(lost(None))),
        Some(KeeperState::Acquiring)
    );
    assert_eq!(m.seat_id(), None);
    checkout_key(&mut m, hb);
}

#[test]
fn limit_reached_waits_for_retry_after_like_a_full_pool() {
    let mut m = machine();
    let k1 = checkout_key(&mut m, at(0));
    let s = m.on_checkout(
        at(0),
        at(0),
        Err(ClientError::LimitReached {
            retry_after: Some(Duration::from_secs(6)),
            limit: "group".into(),
            max: Some(6),
            group: Some("design".into()),
        }),
    );
    let Some(KeeperState::Waiting { retry_after }) = s else {
        panic!("{s:?}")
    };
    assert!(retry_after >= Duration::from_secs(6));
    assert!(retry_after <= Duration::from_millis(6_600));
    let wake = sleep_until(&mut m, at(0));
    assert_eq!(wake.millis_since(at(0)), duration_millis(retry_after));
    // Then a new attempt (the 409 was an answer), which may succeed.
    let k2 = checkout_key(&mut m, wake);
    assert_ne!(k2, k1);
    let s = m.on_checkout(wake, wake, Ok(lease("a", 0, 3_000)));
    assert!(matches!(s, Some(KeeperState::Held(_))), "{s:?}");
}

#[test]
fn not_allowed_is_terminal_and_never_retried() {
    let mut m = machine();
    checkout_key(&mut m, at(0));
    let s = m.on_checkout(
        at(0),
        at(0),
        Err(ClientError::NotAllowed("deny list".into())),
    );
    let Some(KeeperState::Failed(why)) = s else {
        panic!("{s:?}")
    };
    assert!(why.contains("not allowed"), "{why}");
    for t in [0, 60_000, 3_600_000] {
        assert_eq!(m.next_action(at(t)), Action::Finish, "no retry loop");
    }
}

#[test]
fn blocked_and_permanent_errors_are_terminal() {
    let mut m = machine();
    checkout_key(&mut m, at(0));
    let s = m.on_checkout(
        at(0),
        at(0),
        Err(ClientError::Blocked {
            retry_after: Some(Duration::from_secs(60)),
            message: "m".into(),
        }),
    );
    assert!(matches!(s, Some(KeeperState::Blocked { .. })));
    assert_eq!(m.next_action(at(100_000)), Action::Finish);

    for e in [
        ClientError::Unauthorized("u".into()),
        ClientError::UnknownLicense("u".into()),
        ClientError::Rejected {
            status: 400,
            code: "invalid_request".into(),
            message: "holder".into(),
        },
    ] {
        let mut m = machine();
        checkout_key(&mut m, at(0));
        assert!(matches!(
            m.on_checkout(at(0), at(0), Err(e)),
            Some(KeeperState::Failed(_))
        ));
        assert_eq!(m.next_action(at(0)), Action::Finish);
    }
}

#[test]
fn a_heartbeat_answer_for_another_seat_is_not_taken() {
    let mut m = machine();
    checkout_key(&mut m, at(0));
    m.on_checkout(at(0), at(0), Ok(lease("a", 0, 60_000)));
    let hb = sleep_until(&mut m, at(0));
    assert_eq!(m.on_heartbeat(hb, hb, Ok(lease("b", 0, 60_000))), None);
    assert_eq!(m.seat_id(), Some("a"));
}

#[test]
fn request_timeout_never_outlives_the_lease() {
    let mut m = machine();
    let cfg = Duration::from_secs(10);
    assert_eq!(m.request_timeout(at(0), cfg), cfg, "no lease: configured");
    checkout_key(&mut m, at(0));
    m.on_checkout(at(0), at(0), Ok(lease("a", 0, 3_000)));
    assert_eq!(m.request_timeout(at(1_000), cfg), Duration::from_secs(2));
    assert_eq!(m.request_timeout(at(2_900), cfg), MIN_REQUEST_TIMEOUT);
    assert_eq!(m.request_timeout(at(3_000), cfg), cfg);
}

#[test]
fn check_lease_refuses_mismatches() {
    let l = lease("a", 0, 60_000);
    let claims = LeaseClaims::for_lease(&l);
    let exp = Expected {
        license: "l".into(),
        holder: "h".into(),
        fingerprint: Some("fp".into()),
    };
    assert_eq!(check_lease(&l, &claims, &exp, Some("a")), Ok(()));
    assert_eq!(
        check_lease(&l, &claims, &exp, Some("b")),
        Err(LeaseMismatch::OtherSeat {
            asked: "b".into(),
            got: "a".into()
        })
    );
    let mut longer = l.clone();
    longer.expires_at = at(3_600_000);
    assert!(
        matches!(
            check_lease(&longer, &claims, &exp, None),
            Err(LeaseMismatch::TokenDiffers { .. })
        ),
        "a body promising more than its token is refused"
    );
    let other = Expected {
        holder: "mallory".into(),
        ..exp.clone()
    };
    assert_eq!(
        check_lease(&l, &claims, &other, None),
        Err(LeaseMismatch::OtherHolder("h".into()))
    );
}

fn borrowed(seat: &str, issued_ms: i64, window_ms: i64) -> Lease {
    Lease {
        borrowed: true,
        grace: false,
        entitlement_ends_at: None,
        ..lease(seat, issued_ms, window_ms)
    }
}

#[test]
fn a_borrow_stops_heartbeats_until_its_deadline_then_checks_out_again() {
    let mut m = machine();
    checkout_key(&mut m, at(0));
    m.on_checkout(at(0), at(10), Ok(lease("a", 0, 3_000)));
    let refused = Err(ClientError::LimitReached {
        retry_after: None,
        limit: "borrow".into(),
        max: Some(1),
        group: None,
    });
    assert_eq!(
        m.on_borrow(at(100), &refused),
        None,
        "a denial keeps the seat"
    );
    assert!(!m.holds_borrow());
    let b = borrowed("a", 200, 60_000);
    assert_eq!(
        m.on_borrow(at(150), &Ok(b.clone())),
        Some(KeeperState::Held(b))
    );
    assert!(m.holds_borrow());
    // Not one heartbeat for the whole borrow: sleep to its deadline.
    assert_eq!(sleep_until(&mut m, at(1_000)), at(60_150));
    assert_eq!(sleep_until(&mut m, at(60_149)), at(60_150));
    checkout_key(&mut m, at(60_150));
    assert_eq!(m.state(), &KeeperState::Acquiring);
    assert_eq!(m.seat_id(), None);
}

#[test]
fn a_borrow_given_back_checks_out_at_once() {
    let mut m = machine();
    m.on_borrow(at(0), &Ok(borrowed("a", 0, 60_000)));
    assert_eq!(m.on_given_back(at(500)), Some(KeeperState::Acquiring));
    assert!(!m.holds_borrow());
    checkout_key(&mut m, at(500));
}

#[test]
fn a_borrow_from_a_plain_checkout_is_held_to_its_expiry_not_heartbeated() {
    let mut m = machine();
    checkout_key(&mut m, at(0));
    // Borrowed an hour ago for a day: its window is no measure of what
    // is left; its expiry on the local clock is.
    let b = borrowed("a", -3_600_000, 86_400_000);
    assert!(
        m.on_checkout(at(0), at(10), Ok(b))
            .is_some_and(|s| s.is_held())
    );
    assert_eq!(sleep_until(&mut m, at(10)), at(82_800_000));
    // One already over (the server still counts it within its skew) is
    // not taken: the checkout is tried again after a backoff.
    let mut m = machine();
    checkout_key(&mut m, at(0));
    assert_eq!(
        m.on_checkout(at(0), at(10), Ok(borrowed("a", -5_000, 4_000))),
        None
    );
    assert_eq!(m.state(), &KeeperState::Acquiring);
    assert!(sleep_until(&mut m, at(10)) > at(10));
}

#[test]
fn a_heartbeat_told_borrowed_checks_out_to_learn_the_borrow() {
    let mut m = machine();
    checkout_key(&mut m, at(0));
    m.on_checkout(at(0), at(10), Ok(lease("a", 0, 3_000)));
    let hb = match m.next_action(at(1_100)) {
        Action::Heartbeat { seat_id, idle_s } => {
            assert_eq!(idle_s, None, "no activity reported");
            seat_id
        }
        other => panic!("{other:?}"),
    };
    assert_eq!(hb, "a");
    let told = Err(ClientError::Borrowed("borrowed".into()));
    assert_eq!(m.on_heartbeat(at(1_100), at(1_110), told), None);
    checkout_key(&mut m, at(1_110));
    let b = borrowed("a", 1_000, 60_000);
    assert_eq!(
        m.on_checkout(at(1_110), at(1_120), Ok(b.clone())),
        Some(KeeperState::Held(b))
    );
    assert!(m.holds_borrow());
}

fn heartbeat_idle(m: &mut Machine, now: Timestamp) -> Option<u64> {
    match m.next_action(now) {
        Action::Heartbeat { idle_s, .. } => idle_s,
        other => panic!("expected a heartbeat, got {other:?}"),
    }
}

#[test]
fn heartbeats_report_whole_idle_seconds_from_the_first_activity_on() {
    let mut m = machine();
    checkout_key(&mut m, at(0));
    m.on_checkout(at(0), at(0), Ok(lease("a", 0, 60_000)));
    // No activity reported yet: heartbeats carry nothing, as before.
    let hb = sleep_until(&mut m, at(0));
    assert_eq!(heartbeat_idle(&mut m, hb), None);
    assert_eq!(m.idle_s(at(3_600_000)), None);

    // Reporting starts at the first activity; it changes no state.
    assert_eq!(m.on_activity(hb), None);
    assert_eq!(
        heartbeat_idle(&mut m, hb),
        Some(0),
        "0 right after activity"
    );
    m.on_heartbeat(hb, hb, Ok(lease("a", hb.millis_since(at(0)), 60_000)));
    // Whole seconds, rounded down, growing while the user is away.
    let next = sleep_until(&mut m, hb);
    let idle_ms = next.millis_since(hb);
    assert_eq!(heartbeat_idle(&mut m, next), Some(idle_ms as u64 / 1000));
    assert!(idle_ms >= 18_000, "{idle_ms}");
    assert_eq!(
        m.idle_s(hb.saturating_add(Duration::from_millis(2_999))),
        Some(2)
    );
    // An activity no later than the last one seen changes nothing...
    assert_eq!(m.on_activity(at(5)), None);
    assert_eq!(heartbeat_idle(&mut m, next), Some(idle_ms as u64 / 1000));
    // ...a later one starts the count again.
    m.on_activity(next);
    assert_eq!(heartbeat_idle(&mut m, next), Some(0));
    // At most a year, the contract's bound.
    let far = next.saturating_add(Duration::from_secs(MAX_IDLE_S + 100));
    assert_eq!(m.idle_s(far), Some(MAX_IDLE_S));
}

fn reclaimed(m: &mut Machine, now: Timestamp) -> Option<KeeperState> {
    m.on_heartbeat(now, now, Err(lost(Some(SeatLostReason::Idle))))
}

/// Activity at 0, a seat, and one renewed heartbeat that reported it (the
/// server knows the user was last active at 0); the next heartbeat is due.
fn idle_after_a_renewal(window_ms: i64) -> (Machine, Timestamp) {
    let mut m = machine();
    m.on_activity(at(0));
    checkout_key(&mut m, at(0));
    m.on_checkout(at(0), at(0), Ok(lease("a", 0, window_ms)));
    let hb = sleep_until(&mut m, at(0));
    assert_eq!(
        heartbeat_idle(&mut m, hb),
        Some(hb.millis_since(at(0)) as u64 / 1000)
    );
    m.on_heartbeat(hb, hb, Ok(lease("a", hb.millis_since(at(0)), window_ms)));
    let next = sleep_until(&mut m, hb);
    assert!(heartbeat_idle(&mut m, next).is_some());
    (m, next)
}

#[test]
fn an_idle_reclaim_takes_no_seat_until_the_next_activity() {
    let (mut m, hb) = idle_after_a_renewal(3_000);
    assert_eq!(
        reclaimed(&mut m, hb),
        Some(KeeperState::Reclaimed {
            message: "m".into()
        })
    );
    assert_eq!(m.seat_id(), None);
    assert!(!m.state().is_terminal() && !m.state().is_held());
    // However long the user stays away: no checkout, no heartbeat.
    for t in [0, 1, 60_000, 3_600_000] {
        let now = hb.saturating_add(Duration::from_millis(t));
        assert_eq!(m.next_action(now), Action::AwaitActivity, "{t}");
    }
    // The activity it already reported is not a new one.
    assert_eq!(m.on_activity(at(0)), None);
    assert_eq!(m.next_action(at(3_600_000)), Action::AwaitActivity);

    // The user is back: a new checkout at once.
    let back = at(3_600_000);
    assert_eq!(m.on_activity(back), Some(KeeperState::Acquiring));
    checkout_key(&mut m, back);
    // The pool filled meanwhile: wait in line as usual (polling).
    let full = Err(ClientError::NoSeats {
        retry_after: Some(Duration::from_secs(2)),
        seats: Some(1),
        live: Some(1),
        reserved: None,
    });
    assert!(matches!(
        m.on_checkout(back, back, full),
        Some(KeeperState::Waiting { .. })
    ));
    let wake = sleep_until(&mut m, back);
    checkout_key(&mut m, wake);
    let s = m.on_checkout(wake, wake, Ok(lease("b", 0, 3_000)));
    assert!(matches!(s, Some(KeeperState::Held(ref l)) if l.seat_id == "b"));
    // Idle counted from the activity that brought it back.
    let hb2 = sleep_until(&mut m, wake);
    let expected = hb2.millis_since(back) as u64 / 1000;
    assert_eq!(heartbeat_idle(&mut m, hb2), Some(expected));
}

#[test]
fn other_seat_lost_reasons_check_out_again_at_once() {
    for reason in [
        Some(SeatLostReason::Revoked),
        Some(SeatLostReason::Lapsed),
        Some(SeatLostReason::Released),
        None,
    ] {
        let mut m = machine();
        m.on_activity(at(0));
        checkout_key(&mut m, at(0));
        m.on_checkout(at(0), at(0), Ok(lease("a", 0, 3_000)));
        let hb = sleep_until(&mut m, at(0));
        assert_eq!(
            m.on_heartbeat(hb, hb, Err(lost(reason))),
            Some(KeeperState::Acquiring),
            "{reason:?}"
        );
        checkout_key(&mut m, hb);
    }
}

#[test]
fn an_idle_reclaim_without_reported_activity_checks_out_again_at_once() {
    // A seat re-claimed by fingerprint from an earlier process that did
    // report idleness: this application never reports, so it must never
    // wait for an activity that will not come.
    let mut m = machine();
    checkout_key(&mut m, at(0));
    m.on_checkout(at(0), at(0), Ok(lease("a", 0, 3_000)));
    let hb = sleep_until(&mut m, at(0));
    assert_eq!(reclaimed(&mut m, hb), Some(KeeperState::Acquiring));
    checkout_key(&mut m, hb);
}

#[test]
fn a_reclaim_the_user_already_answered_checks_out_again_at_once() {
    // Back before the reaper freed the seat: the heartbeat reporting it
    // (idle 0) is told the seat is gone.
    let (mut m, hb) = idle_after_a_renewal(3_000);
    m.on_activity(hb);
    assert_eq!(heartbeat_idle(&mut m, hb), Some(0));
    assert_eq!(reclaimed(&mut m, hb), Some(KeeperState::Acquiring));
    checkout_key(&mut m, hb);
    // Back while the heartbeat that reports the old activity is in flight.
    let (mut m, hb) = idle_after_a_renewal(3_000);
    m.on_activity(hb.saturating_add(Duration::from_millis(10)));
    assert_eq!(reclaimed(&mut m, hb), Some(KeeperState::Acquiring));
    checkout_key(&mut m, hb);
}

#[test]
fn a_lapsed_seat_reclaimed_for_idleness_waits_and_a_borrow_still_works() {
    let (mut m, hb) = idle_after_a_renewal(1_500);
    let deadline = m.timing().unwrap().deadline();
    assert_eq!(
        m.on_heartbeat(hb, deadline, Err(transient())),
        Some(KeeperState::Lapsed)
    );
    let t = sleep_until(&mut m, deadline);
    assert!(matches!(
        reclaimed(&mut m, t),
        Some(KeeperState::Reclaimed { .. })
    ));
    assert_eq!(m.next_action(t), Action::AwaitActivity);
    // Borrowing is the user's own act: it is held as asked.
    let b = borrowed("z", 0, 60_000);
    assert_eq!(m.on_borrow(t, &Ok(b.clone())), Some(KeeperState::Held(b)));
    assert_eq!(
        sleep_until(&mut m, t),
        t.saturating_add(Duration::from_secs(60)),
        "held to the borrow's end"
    );
}

#[test]
fn a_lease_not_entitled_stops_the_keeper_and_an_unchecked_one_is_taken_anew() {
    use crate::entitlement::NotEntitled;
    let bound = || ClientError::NotEntitled(NotEntitled::BoundElsewhere("kid-b".into()));
    // Answered at checkout (the driver released the seat): terminal.
    let mut m = machine();
    checkout_key(&mut m, at(0));
    let s = m.on_checkout(at(0), at(0), Err(bound()));
    let Some(KeeperState::Failed(why)) = s else {
        panic!("{s:?}")
    };
    assert!(why.starts_with("not entitled: "), "{why}");
    assert_eq!(m.next_action(at(3_600_000)), Action::Finish, "no retry");

    // Found at a re-check of the held lease: dropped, terminal.
    let mut m = machine();
    checkout_key(&mut m, at(0));
    m.on_checkout(at(0), at(0), Ok(lease("a", 0, 3_000)));
    let s = m.on_released(at(500), &bound());
    assert!(matches!(s, Some(KeeperState::Failed(ref w)) if w.contains("another server")));
    assert_eq!(m.seat_id(), None, "nothing left to release on shutdown");
    assert_eq!(m.next_action(at(600)), Action::Finish);

    // Not checked (the entitlements could not be fetched after the end):
    // dropped, and a new attempt after a backoff.
    let mut m = machine();
    let first = checkout_key(&mut m, at(0));
    m.on_checkout(at(0), at(0), Ok(lease("a", 0, 3_000)));
    let s = m.on_released(at(500), &transient());
    assert_eq!(s, Some(KeeperState::Acquiring));
    assert_eq!(m.seat_id(), None);
    let retry = sleep_until(&mut m, at(500));
    assert!(retry > at(500), "after a backoff");
    assert_ne!(checkout_key(&mut m, retry), first, "a new attempt");
}
