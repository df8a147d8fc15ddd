//! The sweep against a brute-force recount, millisecond by millisecond, of
//! random sessions, pool-size timelines and denials.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use proptest::prelude::*;

use super::*;
use crate::store::denials::{DenialRow, each_denial, full_spans, offset_bytes, second_of};

fn ts(ms: i64) -> Timestamp {
    Timestamp::from_millis(ms)
}

/// A denial: its instant, holder and reason.
#[derive(Debug, Clone)]
struct Denial {
    at: i64,
    holder: String,
    reason: DenialReason,
}

#[derive(Debug, Clone)]
struct Session {
    start: i64,
    end: Option<i64>,
    holder: String,
    borrowed: bool,
}

/// What the sweep should say, counted at every millisecond of the range.
fn brute_force(
    range: &UsageRange,
    sessions: &[Session],
    pool: &PoolTimeline,
    denials: &[Denial],
    tolerance: i64,
) -> Usage {
    let (from, to, now) = (
        range.from.as_millis(),
        range.to.as_millis(),
        range.now.as_millis(),
    );
    let n = range.points();
    let mut peaks = vec![0u32; n];
    let mut checkouts = vec![0u64; n];
    let mut bucket_denials = vec![DenialsByReason::default(); n];
    let mut bucket_true = vec![0u64; n];
    let mut bucket_over = vec![0u64; n];
    let in_range: Vec<&Session> = sessions
        .iter()
        .filter(|s| Sweep::in_range(range, ts(s.start), s.end.map(ts)))
        .collect();
    let (mut peak, mut peak_at) = (0u32, None);
    let (mut session_ms, mut used, mut available, mut full, mut over) =
        (0u128, 0u128, 0u128, 0u128, 0u128);
    let mut borrowed_ms = 0u128;
    // Covered from the first record on (never before `from`, never after
    // `to`); nothing covered without one.
    let covered_from = pool
        .0
        .iter()
        .map(|(at, _)| *at)
        .min()
        .map_or(to, |first| first.clamp(from, to));
    for x in from..to.min(now.max(from)) {
        let open_now: Vec<_> = in_range
            .iter()
            .filter(|s| s.start <= x && x < s.end.unwrap_or(now))
            .collect();
        let open = open_now.len() as u32;
        borrowed_ms += open_now.iter().filter(|s| s.borrowed).count() as u128;
        let seats = pool.at(x);
        let b = ((x - from) / range.step_ms) as usize;
        peaks[b] = peaks[b].max(open);
        if open > peak {
            peak = open;
            peak_at = Some(ts(x));
        }
        session_ms += u128::from(open);
        if x >= covered_from {
            used += u128::from(open.min(seats));
            available += u128::from(seats);
        }
        if seats > 0 && open >= seats {
            full += 1;
        }
        if open > seats {
            over += 1;
            bucket_over[b] += 1;
        }
    }
    for s in &in_range {
        if s.start >= from {
            checkouts[((s.start - from) / range.step_ms) as usize] += 1;
        }
    }
    let (mut total_denials, mut total_true) = (DenialsByReason::default(), 0);
    let mut denied_holders: HashSet<&str> = HashSet::new();
    for d in denials.iter().filter(|d| (from..to).contains(&d.at)) {
        let b = ((d.at - from) / range.step_ms) as usize;
        bucket_denials[b].add(d.reason, 1);
        total_denials.add(d.reason, 1);
        // True: no session of the holder (any, the range's or later)
        // starts in (at, at + tolerance].
        let is_true = d.reason == DenialReason::Full
            && !sessions
                .iter()
                .any(|s| s.holder == d.holder && s.start > d.at && s.start <= d.at + tolerance);
        bucket_true[b] += u64::from(is_true);
        total_true += u64::from(is_true);
        if is_true {
            denied_holders.insert(d.holder.as_str());
        }
    }
    let points = (0..n)
        .map(|i| {
            let t = from + i as i64 * range.step_ms;
            UsagePoint {
                t: ts(t),
                seats: pool.at((t + range.step_ms).min(to)),
                peak: peaks[i],
                over_s: bucket_over[i] as f64 / 1000.0,
                checkouts: checkouts[i],
                denials: bucket_denials[i].total(),
                denials_by_reason: bucket_denials[i],
                true_denials: bucket_true[i],
            }
        })
        .collect();
    let holders: HashSet<&str> = in_range.iter().map(|s| s.holder.as_str()).collect();
    Usage {
        points,
        summary: UsageSummary {
            seats: pool.at(to),
            peak,
            peak_at,
            full_s: full as f64 / 1000.0,
            over_s: over as f64 / 1000.0,
            denials: total_denials.total(),
            denials_by_reason: total_denials,
            true_denials: total_true,
            denied_holders: denied_holders.len() as u64,
            seat_hours: session_ms as f64 / 3_600_000.0,
            borrowed_hours: borrowed_ms as f64 / 3_600_000.0,
            utilization: if available == 0 {
                0.0
            } else {
                used as f64 / available as f64
            },
            holders: holders.len() as u64,
            idle_hours: 0.0,
            covered_from: Some(ts(covered_from)),
        },
    }
}

fn sweep(
    range: &UsageRange,
    sessions: &[Session],
    pool: &PoolTimeline,
    denials: &[Denial],
    tolerance: i64,
) -> Usage {
    let mut ordered = sessions.to_vec();
    ordered.sort_by_key(|s| s.start);
    let mut sweep = Sweep::new(*range, pool.clone());
    feed_denials(&mut sweep, range, sessions, denials, tolerance);
    for s in &ordered {
        sweep.session(ts(s.start), s.end.map(ts), &s.holder, s.borrowed);
    }
    sweep.finish()
}

/// The denials as the stores feed them: packed into rows per second,
/// holder and reason, the rows a range reads, and each holder's grants
/// only in its span (what the stores' grant queries return).
fn feed_denials(
    sweep: &mut Sweep,
    range: &UsageRange,
    sessions: &[Session],
    denials: &[Denial],
    tolerance: i64,
) {
    let mut rows: Vec<DenialRow> = Vec::new();
    for d in denials {
        let second = second_of(ts(d.at));
        let row = match rows
            .iter_mut()
            .find(|r| r.second == second && r.holder == d.holder && r.reason == d.reason)
        {
            Some(row) => row,
            None => {
                rows.push(DenialRow {
                    license_id: "l".into(),
                    second,
                    holder: d.holder.clone(),
                    fingerprint: String::new(),
                    reason: d.reason,
                    offsets: Vec::new(),
                });
                rows.last_mut().unwrap()
            }
        };
        row.offsets.extend(offset_bytes(ts(d.at)));
    }
    rows.retain(|r| r.second >= second_of(range.from) && r.second < range.to);
    let tolerance = Duration::from_millis(tolerance as u64);
    let spans = full_spans(&rows, range.from, range.to, tolerance);
    let mut grants: HashMap<String, Vec<Timestamp>> = HashMap::new();
    for (holder, (lo, hi)) in &spans {
        let mut starts: Vec<Timestamp> = sessions
            .iter()
            .filter(|s| &s.holder == holder && ts(s.start) > *lo && ts(s.start) <= *hi)
            .map(|s| ts(s.start))
            .collect();
        starts.sort();
        grants.insert(holder.clone(), starts);
    }
    each_denial(
        &rows,
        range.from,
        range.to,
        &grants,
        tolerance,
        |at, row, t| {
            sweep.denials(at, row.reason, &row.holder, 1, u64::from(t));
        },
    );
}

fn denial() -> impl Strategy<Value = Denial> {
    (
        -1_200i64..2_300,
        0u8..6,
        prop::sample::select(DenialReason::ALL.to_vec()),
    )
        .prop_map(|(at, holder, reason)| Denial {
            at,
            holder: format!("h{holder}"),
            reason,
        })
}

fn session() -> impl Strategy<Value = Session> {
    (
        -300i64..2_300,
        prop::option::weighted(0.8, 0i64..900),
        0u8..6,
        prop::bool::weighted(0.3),
    )
        .prop_map(|(start, len, holder, borrowed)| Session {
            start,
            end: len.map(|l| start + l),
            holder: format!("h{holder}"),
            borrowed,
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn sweep_equals_counting_every_millisecond(
        from in -100i64..100,
        span in 1i64..2_000,
        step in 1i64..700,
        now in -200i64..2_400,
        sessions in prop::collection::vec(session(), 0..25),
        pool in prop::collection::vec((-300i64..2_300, 0u32..6), 0..5),
        denials in prop::collection::vec(denial(), 0..30),
        tolerance in prop_oneof![Just(0i64), 0i64..400],
    ) {
        let to = from + span;
        prop_assume!(points(span, step) <= MAX_POINTS);
        let range = UsageRange::new(ts(from), ts(to), Some(step), ts(now)).unwrap();
        let pool = PoolTimeline::new(pool.into_iter().map(|(at, s)| (ts(at), s)).collect());
        let got = sweep(&range, &sessions, &pool, &denials, tolerance);
        let want = brute_force(&range, &sessions, &pool, &denials, tolerance);
        prop_assert_eq!(&got.points, &want.points);
        let (g, w) = (&got.summary, &want.summary);
        prop_assert_eq!((g.seats, g.peak, g.peak_at, g.denials, g.holders, g.covered_from),
                        (w.seats, w.peak, w.peak_at, w.denials, w.holders, w.covered_from));
        prop_assert_eq!((g.denials_by_reason, g.true_denials),
                        (w.denials_by_reason, w.true_denials));
        prop_assert!((g.full_s - w.full_s).abs() < 1e-9);
        prop_assert!((g.over_s - w.over_s).abs() < 1e-9);
        let points_over: f64 = got.points.iter().map(|p| p.over_s).sum();
        prop_assert!((points_over - g.over_s).abs() < 1e-6);
        prop_assert!((g.seat_hours - w.seat_hours).abs() < 1e-12);
        prop_assert!((g.borrowed_hours - w.borrowed_hours).abs() < 1e-12);
        prop_assert!((g.utilization - w.utilization).abs() < 1e-9);
        prop_assert!((0.0..=1.0).contains(&g.utilization));
    }
}

#[test]
fn ranges_are_checked() {
    let now = ts(0);
    assert_eq!(
        UsageRange::new(ts(5), ts(5), None, now),
        Err(RangeError::Empty {
            from: ts(5),
            to: ts(5)
        })
    );
    assert_eq!(
        UsageRange::new(ts(0), ts(10), Some(0), now),
        Err(RangeError::ZeroStep)
    );
    assert_eq!(
        UsageRange::new(ts(0), ts(10_001), Some(1), now),
        Err(RangeError::TooManyPoints { points: 10_001 })
    );
    // A step longer than the range is one bucket, clipped at `to`; an
    // absurd one must not overflow.
    let r = UsageRange::new(ts(0), ts(10), Some(i64::MAX), now).unwrap();
    assert_eq!((r.points(), r.bucket_end(0)), (1, 10));
    // Two thousand years in days is fine by default.
    let r = UsageRange::new(ts(-62_000_000_000_000), ts(1_800_000_000_000), None, now).unwrap();
    assert!(r.points() <= DEFAULT_POINTS as usize);
}

#[test]
fn default_steps_are_round_and_keep_to_500_points() {
    assert_eq!(default_step_ms(86_400_000), 300_000); // a day: 5 min, 288 points
    assert_eq!(default_step_ms(3_600_000), 10_000); // an hour: 10 s, 360 points
    assert_eq!(default_step_ms(1_000), 1_000);
    assert_eq!(default_step_ms(400 * 86_400_000), 86_400_000);
    assert_eq!(default_step_ms(1000 * 86_400_000), 2 * 86_400_000);
}

#[test]
fn an_end_and_a_start_at_the_same_instant_do_not_overlap() {
    let range = UsageRange::new(ts(0), ts(100), Some(100), ts(100)).unwrap();
    let mut s = Sweep::new(range, PoolTimeline::new(vec![(ts(0), 1)]));
    s.session(ts(0), Some(ts(50)), "a", false);
    s.session(ts(50), Some(ts(100)), "b", false);
    let u = s.finish();
    assert_eq!(u.summary.peak, 1);
    assert_eq!(u.summary.peak_at, Some(ts(0)));
    assert_eq!(u.summary.full_s, 0.1);
    assert_eq!(u.summary.over_s, 0.0);
    assert_eq!(u.summary.utilization, 1.0);
}

#[test]
fn time_over_the_pool_is_over_and_full() {
    // 2 seats until 40, then 1 (a shrink below the seats held), then 0 from
    // 80 (suspended): three sessions overlap on [20, 60).
    let pool = PoolTimeline::new(vec![(ts(0), 2), (ts(40), 1), (ts(80), 0)]);
    let range = UsageRange::new(ts(0), ts(100), Some(50), ts(100)).unwrap();
    let mut s = Sweep::new(range, pool);
    s.session(ts(0), Some(ts(60)), "a", false);
    s.session(ts(10), Some(ts(90)), "b", false);
    s.session(ts(20), Some(ts(60)), "c", false);
    let u = s.finish();
    // Open: 1 on [0,10), 2 on [10,20), 3 on [20,60), 1 on [60,90).
    // Over 2 seats on [20,40); over 1 seat on [40,60); over 0 on [80,90).
    assert_eq!(u.summary.over_s, 0.05);
    assert_eq!(
        u.points.iter().map(|p| p.over_s).collect::<Vec<_>>(),
        [0.03, 0.02]
    );
    // Full (>= seats on a pool of at least one): [10,80); never on 0 seats.
    assert_eq!(u.summary.full_s, 0.07);
}

#[test]
fn a_range_before_the_first_record_is_covered_from_that_record() {
    // Asked [0, 1000); the server first recorded 4 seats at 600. One seat
    // held on [700, 800): 100 ms of 4 x 400 ms available, not of 4 x 1000.
    let range = UsageRange::new(ts(0), ts(1000), Some(100), ts(1000)).unwrap();
    let mut s = Sweep::new(range, PoolTimeline::new(vec![(ts(600), 4)]));
    s.session(ts(700), Some(ts(800)), "a", false);
    let u = s.finish();
    assert_eq!(u.summary.covered_from, Some(ts(600)));
    assert_eq!(u.summary.utilization, 100.0 / 1600.0);
    assert_eq!(u.summary.seat_hours, 100.0 / 3_600_000.0);
    // Before the first record, the points still show its size.
    assert_eq!(u.points[0].seats, 4);
}

#[test]
fn a_range_after_the_first_record_is_covered_from_its_start() {
    let pool = PoolTimeline::new(vec![(ts(-500), 2), (ts(300), 4)]);
    let range = UsageRange::new(ts(0), ts(1000), Some(100), ts(1000)).unwrap();
    let mut s = Sweep::new(range, pool);
    s.session(ts(0), Some(ts(1000)), "a", false);
    let u = s.finish();
    assert_eq!(u.summary.covered_from, Some(ts(0)));
    // 1 of 2 seats for 300 ms, 1 of 4 for 700 ms.
    assert_eq!(u.summary.utilization, 1000.0 / (600.0 + 2800.0));
}

#[test]
fn no_record_covers_nothing() {
    let range = UsageRange::new(ts(0), ts(1000), Some(100), ts(1000)).unwrap();
    let u = Sweep::new(range, PoolTimeline::new(vec![])).finish();
    assert_eq!(u.summary.covered_from, Some(ts(1000)));
    assert_eq!(u.summary.utilization, 0.0);
    // A history that starts after the range covers none of it either.
    let u = Sweep::new(range, PoolTimeline::new(vec![(ts(5000), 3)])).finish();
    assert_eq!(u.summary.covered_from, Some(ts(1000)));
    assert_eq!(u.summary.utilization, 0.0);
}
