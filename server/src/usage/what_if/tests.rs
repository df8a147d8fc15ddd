//! The what-if replay against a brute-force recount that builds the demand
//! and replays each seat count millisecond by millisecond, and one test per
//! rule of the demand and the replay.

use proptest::prelude::*;

use super::*;

fn ts(ms: i64) -> Timestamp {
    Timestamp::from_millis(ms)
}

use leasehold_testkit::what_if::{self as reference, Answer, History, Session};

fn demand(h: &History) -> Demand {
    let mut b = DemandBuilder::new(
        ts(h.covered_from),
        ts(h.to),
        h.idle_timeout.map(|t| Duration::from_millis(t as u64)),
    );
    for s in &h.sessions {
        let idle: Vec<_> = s.idle.iter().map(|(a, b)| (ts(*a), ts(*b))).collect();
        b.session(ts(s.start), s.end.map(ts), &idle);
    }
    let mut by_who: std::collections::HashMap<&str, Vec<Timestamp>> = Default::default();
    for (who, at) in &h.true_denials {
        by_who.entry(who).or_default().push(ts(*at));
    }
    b.finish(
        by_who.into_values(),
        Duration::from_millis(h.tolerance as u64),
        Duration::from_millis(h.ttl as u64),
    )
}

/// The replay's answer, as the reference gives one.
fn answer(h: &History, k_max: u32) -> Answer {
    let d = demand(h);
    let r = d.replay();
    Answer {
        sessions: d.sessions(),
        true_denials: d.true_denials(),
        episodes: d.episodes(),
        idle_cut: d.idle_cut(),
        requests: r.requests(),
        curve: r.curve(1..=k_max, 0.0).0,
    }
}

fn brute_force(h: &History, k_max: u32) -> Answer {
    reference::replay(h, k_max)
}

fn session_strategy() -> impl Strategy<Value = Session> {
    (
        -30i64..130,
        0i64..90,
        any::<bool>(),
        prop::collection::vec((0i64..25, 0i64..40), 0..4),
    )
        .prop_map(|(start, len, open, gaps)| {
            let end = start + len;
            // Periods one after another inside the session, as recorded.
            let mut idle = Vec::new();
            let mut at = start;
            for (gap, len) in gaps {
                let (from, to) = (at + gap, (at + gap + len).min(end));
                if from >= end {
                    break;
                }
                idle.push((from, to));
                at = to;
            }
            Session {
                start,
                end: (!open).then_some(end),
                idle,
            }
        })
}

fn history_strategy() -> impl Strategy<Value = History> {
    (
        0i64..30,
        0i64..110,
        prop::option::of(1i64..30),
        1i64..60,
        prop::collection::vec(session_strategy(), 0..12),
        // Few people refused often: retries join into episodes.
        prop::collection::vec((0u8..4, -10i64..140), 0..14),
        0i64..30,
    )
        .prop_map(
            |(covered_from, len, idle_timeout, ttl, sessions, denials, tolerance)| History {
                covered_from,
                to: covered_from + len,
                idle_timeout,
                ttl,
                tolerance,
                sessions,
                true_denials: denials
                    .into_iter()
                    .map(|(who, at)| (format!("h{who}"), at))
                    .collect(),
            },
        )
}

/// A busier pool: more people than seats most of the time, several of
/// them retrying, so many seat counts wait at once.
fn busy_strategy() -> impl Strategy<Value = History> {
    (
        prop::collection::vec((0i64..300, 1i64..120), 10..40),
        prop::collection::vec((0u8..6, 0i64..300), 0..40),
        0i64..40,
    )
        .prop_map(|(sessions, denials, tolerance)| History {
            covered_from: 0,
            to: 300,
            idle_timeout: None,
            ttl: 30,
            tolerance,
            sessions: sessions
                .into_iter()
                .map(|(start, len)| Session {
                    start,
                    end: Some(start + len),
                    idle: Vec::new(),
                })
                .collect(),
            true_denials: denials
                .into_iter()
                .map(|(who, at)| (format!("h{who}"), at))
                .collect(),
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(600))]

    #[test]
    fn a_busy_pool_with_retries_is_the_per_millisecond_recount(h in busy_strategy()) {
        prop_assert_eq!(answer(&h, 24), brute_force(&h, 24));
    }

    #[test]
    fn the_replay_is_the_per_millisecond_recount(h in history_strategy()) {
        prop_assert_eq!(answer(&h, 14), brute_force(&h, 14));
    }

    #[test]
    fn more_seats_never_deny_more_and_one_above_the_peak_denies_nothing(
        h in history_strategy()
    ) {
        let r = demand(&h).replay();
        let (curve, _) = r.curve(1..=16, 0.0);
        for pair in curve.windows(2) {
            prop_assert!(pair[1].denials <= pair[0].denials);
        }
        // One above: even a zero-length request arriving at the peak fits.
        let above = &r.curve(r.peak() + 1..=r.peak() + 1, 0.0).0[0];
        prop_assert_eq!(above.denials, 0);
    }
}

/// Each denial by another holder: one episode each, as §3 replayed them.
fn history(cf: i64, to: i64, sessions: Vec<Session>, denials: Vec<i64>) -> History {
    History {
        covered_from: cf,
        to,
        idle_timeout: None,
        ttl: 7,
        tolerance: 60,
        sessions,
        true_denials: denials
            .into_iter()
            .enumerate()
            .map(|(i, at)| (format!("h{i}"), at))
            .collect(),
    }
}

fn closed(start: i64, end: i64) -> Session {
    Session {
        start,
        end: Some(end),
        idle: Vec::new(),
    }
}

/// Requests as `(start, end)`.
type Spans = Vec<(i64, i64)>;

/// The requests the builder made: sessions, then episodes as granted at
/// their first denial.
fn requests_of(h: &History) -> (Spans, Spans) {
    let d = demand(h);
    let episodes = d.episodes.iter().map(|e| (e.first, d.episode_end(e.first)));
    (d.sessions.clone(), episodes.collect())
}

#[test]
fn a_denial_lasts_the_median_session_odd_even_or_the_ttl() {
    let odd = history(
        0,
        1000,
        vec![closed(0, 10), closed(0, 30), closed(0, 20)],
        vec![100],
    );
    assert_eq!(requests_of(&odd).1, vec![(100, 120)]);
    // Even: the mean of the two middle ones, rounded down.
    let even = history(
        0,
        1000,
        vec![closed(0, 10), closed(0, 25), closed(0, 30), closed(0, 900)],
        vec![100],
    );
    assert_eq!(requests_of(&even).1, vec![(100, 127)]);
    let none = history(0, 1000, Vec::new(), vec![100, 995]);
    assert_eq!(requests_of(&none).1, vec![(100, 107), (995, 1000)]);
}

#[test]
fn the_median_is_of_clipped_sessions_before_any_cut() {
    // Clipped to [100, 200): 50 and 60 long; the cut does not shorten them.
    let mut h = history(
        100,
        200,
        vec![
            closed(50, 150),
            Session {
                start: 140,
                end: Some(260),
                idle: vec![(150, 190)],
            },
        ],
        vec![120],
    );
    h.idle_timeout = Some(10);
    let (sessions, denials) = requests_of(&h);
    assert_eq!(denials, vec![(120, 175)]);
    assert_eq!(sessions, vec![(100, 150), (140, 160), (190, 200)]);
}

#[test]
fn an_end_frees_a_seat_for_a_start_at_the_same_instant() {
    let h = history(0, 100, vec![closed(0, 50), closed(50, 100)], Vec::new());
    let (curve, rec) = demand(&h).replay().curve(1..=2, 0.0);
    assert_eq!(curve[0].denials, 0);
    assert_eq!(curve[0].utilization, 1.0);
    assert_eq!(curve[0].full_s, 0.1);
    assert_eq!(rec.map(|r| r.seats), Some(1));
}

#[test]
fn at_one_start_sessions_go_before_denials_then_the_earliest_end() {
    // A denial request (median 40) and a session at 10: the session wins.
    let h = history(0, 100, vec![closed(10, 50)], vec![10]);
    let p = &demand(&h).replay().curve(1..=1, 0.0).0[0];
    assert_eq!((p.denials, p.utilization), (1, 0.4));
    // Two sessions at 10: the one ending first is granted.
    let h = history(0, 100, vec![closed(10, 90), closed(10, 20)], Vec::new());
    let p = &demand(&h).replay().curve(1..=1, 0.0).0[0];
    assert_eq!((p.denials, p.utilization, p.full_s), (1, 0.1, 0.01));
}

#[test]
fn an_idle_period_cuts_and_a_return_is_a_new_request_with_its_own_periods_applied() {
    let mut h = history(
        0,
        1000,
        vec![Session {
            start: 0,
            end: Some(900),
            // Long, short (kept), long again.
            idle: vec![(100, 300), (400, 420), (500, 800)],
        }],
        Vec::new(),
    );
    h.idle_timeout = Some(50);
    let d = demand(&h);
    assert_eq!(d.sessions, vec![(0, 150), (300, 550), (800, 900)]);
    assert_eq!((d.idle_cut(), d.sessions()), (1, 1));
    assert_eq!(d.replay().requests(), 3);
    // The user never came back: cut, no return.
    h.sessions = vec![Session {
        start: 0,
        end: Some(900),
        idle: vec![(600, 900)],
    }];
    assert_eq!(requests_of(&h).0, vec![(0, 650)]);
    // A period exactly the timeout long removes nothing: not a cut.
    h.sessions = vec![Session {
        start: 0,
        end: Some(900),
        idle: vec![(600, 650)],
    }];
    let d = demand(&h);
    assert_eq!((d.sessions.clone(), d.idle_cut()), (vec![(0, 900)], 0));
}

#[test]
fn sessions_are_clipped_and_an_open_one_ends_at_to() {
    let h = history(
        100,
        200,
        vec![
            closed(0, 100), // ended as the range began: not in it
            closed(50, 150),
            closed(150, 150), // zero length, inside
            closed(180, 400),
            Session {
                start: 190,
                end: None,
                idle: Vec::new(),
            },
            closed(200, 300), // starts at `to`: not in it
        ],
        vec![99, 150, 200],
    );
    let d = demand(&h);
    assert_eq!(
        d.sessions,
        vec![(100, 150), (150, 150), (180, 200), (190, 200)]
    );
    assert_eq!((d.sessions(), d.true_denials()), (4, 1));
    // Median of 50, 0, 20, 10: (10 + 20) / 2.
    assert_eq!(requests_of(&h).1, vec![(150, 165)]);
}

#[test]
fn a_cut_before_the_range_is_not_counted() {
    let mut h = history(
        1000,
        2000,
        vec![Session {
            start: 0,
            end: Some(1500),
            idle: vec![(100, 500)],
        }],
        Vec::new(),
    );
    h.idle_timeout = Some(60);
    let d = demand(&h);
    assert_eq!((d.sessions.clone(), d.idle_cut()), (vec![(1000, 1500)], 0));
}

#[test]
fn the_curve_answers_each_seat_count_and_recommends_the_smallest_meeting_the_target() {
    // Three overlapping sessions over [0, 100).
    let h = history(
        0,
        100,
        vec![closed(0, 100), closed(10, 60), closed(20, 40)],
        Vec::new(),
    );
    let r = demand(&h).replay();
    assert_eq!((r.peak(), r.requests()), (3, 3));
    let (curve, rec) = r.curve(1..=4, 34.0);
    let denials: Vec<u64> = curve.iter().map(|p| p.denials).collect();
    assert_eq!(denials, vec![2, 1, 0, 0]);
    assert_eq!(curve[1].full_s, 0.05);
    assert_eq!(curve[1].utilization, 150.0 / 200.0);
    assert_eq!(curve[3].peak, 3);
    assert_eq!(
        rec,
        Some(WhatIfRecommendation {
            seats: 2,
            denial_rate: 100.0 / 3.0
        })
    );
    assert_eq!(r.curve(1..=2, 0.0).1, None);
    // Nothing at all: zeros, and one seat already meets any target.
    let empty = demand(&history(0, 0, Vec::new(), Vec::new())).replay();
    let (curve, rec) = empty.curve(1..=1, 0.0);
    assert_eq!((curve[0].denial_rate, curve[0].utilization), (0.0, 0.0));
    assert_eq!(rec.map(|r| r.seats), Some(1));
}

#[test]
fn a_session_holding_no_time_in_the_range_is_one_zero_length_request_never_cut() {
    // An empty covered range (history starts at `to`).
    let mut h = history(
        16,
        16,
        vec![Session {
            start: -4,
            end: Some(17),
            idle: vec![(-4, 16)],
        }],
        Vec::new(),
    );
    h.idle_timeout = Some(1);
    let d = demand(&h);
    assert_eq!((d.sessions.clone(), d.idle_cut()), (vec![(16, 16)], 0));
    assert_eq!(answer(&h, 2), brute_force(&h, 2));
}
