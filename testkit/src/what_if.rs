//! The what-if replay read literally, one millisecond at a time: the
//! reference the server's one-pass replay (`server/src/usage/what_if.rs`)
//! is property-tested against, in its unit tests and over a real store.
//! Slow on purpose: every rule is a line here, with no cleverness to trust.

use std::collections::{BTreeMap, VecDeque};

use leasehold_common::api::WhatIfPoint;

/// One recorded session: an open one (`end` `None`) ends at `to`.
#[derive(Debug, Clone)]
pub struct Session {
    pub start: i64,
    pub end: Option<i64>,
    /// Recorded idle periods `(from, to)`.
    pub idle: Vec<(i64, i64)>,
}

/// What the replay reads: the covered range `[covered_from, to)`, the
/// sessions, and each true denial with who was refused (holder and
/// fingerprint in one string).
#[derive(Debug, Clone)]
pub struct History {
    pub covered_from: i64,
    pub to: i64,
    pub idle_timeout: Option<i64>,
    pub ttl: i64,
    pub tolerance: i64,
    pub sessions: Vec<Session>,
    pub true_denials: Vec<(String, i64)>,
}

/// One seat count's answer, in milliseconds.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Point {
    seats: u32,
    denials: u64,
    peak: u32,
    full_ms: i64,
    used_ms: u128,
}

impl Point {
    /// In the wire's units, as the server computes them.
    fn wire(&self, requests: u64, span_ms: i64) -> WhatIfPoint {
        WhatIfPoint {
            seats: self.seats,
            denials: self.denials,
            denial_rate: if requests == 0 {
                0.0
            } else {
                self.denials as f64 * 100.0 / requests as f64
            },
            peak: self.peak,
            full_s: self.full_ms as f64 / 1000.0,
            utilization: if span_ms <= 0 {
                0.0
            } else {
                self.used_ms as f64 / (u128::from(self.seats) * span_ms as u128) as f64
            },
        }
    }
}

/// The whole answer, as the server's replay gives it.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    pub sessions: u64,
    pub true_denials: u64,
    pub episodes: u64,
    pub idle_cut: u64,
    pub requests: u64,
    pub curve: Vec<WhatIfPoint>,
}

/// A waiting request: it may be served at any instant of `[first, last]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Episode {
    first: i64,
    last: i64,
}

/// The session requests `(start, end)`: the maximal runs of the
/// milliseconds a session holds inside the range, a millisecond being
/// released when it lies at or past `from + t` of an idle period at least
/// `t` long. Also the number of sessions, of cut ones, and the median.
fn session_requests(h: &History) -> (Vec<(i64, i64)>, u64, u64, i64) {
    let (cf, to) = (h.covered_from, h.to);
    let (mut requests, mut sessions, mut cut, mut durations) = (Vec::new(), 0, 0, Vec::new());
    for s in &h.sessions {
        let end = s.end.unwrap_or(to).max(s.start);
        if !(s.start < to && (s.start >= cf || end > cf)) {
            continue;
        }
        sessions += 1;
        let (a, b) = (s.start.max(cf), end.min(to));
        durations.push(b - a);
        if a == b {
            requests.push((a, a));
            continue;
        }
        let released = |x: i64| {
            h.idle_timeout.is_some_and(|t| {
                s.idle
                    .iter()
                    .any(|(pf, pt)| pt - pf >= t && pf + t <= x && x < *pt)
            })
        };
        let (mut run, mut any_released) = (None, false);
        for x in a..b {
            if released(x) {
                any_released = true;
                if let Some(r) = run.take() {
                    requests.push((r, x));
                }
            } else if run.is_none() {
                run = Some(x);
            }
        }
        if let Some(r) = run {
            requests.push((r, b));
        }
        cut += u64::from(any_released);
    }
    durations.sort();
    let n = durations.len();
    let median = match n {
        0 => h.ttl,
        _ if n % 2 == 1 => durations[n / 2],
        _ => (durations[n / 2 - 1] + durations[n / 2]) / 2,
    };
    (requests, sessions, cut, median)
}

/// The true denials of the range, each person's in time order, joined
/// while at most the tolerance apart.
fn episodes(h: &History) -> (Vec<Episode>, u64) {
    let mut by_who: BTreeMap<&str, Vec<i64>> = BTreeMap::new();
    let mut count = 0;
    for (who, at) in &h.true_denials {
        if (h.covered_from..h.to).contains(at) {
            by_who.entry(who).or_default().push(*at);
            count += 1;
        }
    }
    let mut episodes = Vec::new();
    for mut ats in by_who.into_values() {
        ats.sort();
        let mut current = Episode {
            first: ats[0],
            last: ats[0],
        };
        for at in ats.into_iter().skip(1) {
            if at - current.last <= h.tolerance {
                current.last = at;
            } else {
                episodes.push(current);
                current = Episode {
                    first: at,
                    last: at,
                };
            }
        }
        episodes.push(current);
    }
    episodes.sort();
    (episodes, count)
}

/// One seat count, one millisecond at a time. At each instant: ends;
/// sessions that start (the earliest end first); the line, earliest first
/// denial first (one whose last denial passed is a denial); episodes
/// that start, granted, else in line if they can still wait, else denied.
fn point(h: &History, sessions: &[(i64, i64)], episodes: &[Episode], median: i64, k: u32) -> Point {
    let (cf, to) = (h.covered_from, h.to);
    let fits = |held: &Vec<i64>| (held.len() as u32) < k;
    let hold = |held: &mut Vec<i64>, from: i64, end: i64| {
        if end > from {
            held.push(end);
        }
    };
    let mut held: Vec<i64> = Vec::new();
    let mut line: VecDeque<Episode> = VecDeque::new();
    let (mut denials, mut full, mut used, mut peak) = (0u64, 0i64, 0u128, 0u32);
    for x in cf..to {
        held.retain(|end| *end > x);
        let mut starting: Vec<&(i64, i64)> = sessions.iter().filter(|r| r.0 == x).collect();
        starting.sort_by_key(|r| r.1);
        for &(start, end) in starting {
            if fits(&held) {
                hold(&mut held, start, end);
            } else {
                denials += 1;
            }
        }
        while let Some(e) = line.front().copied() {
            if e.last < x {
                line.pop_front();
                denials += 1;
            } else if fits(&held) {
                line.pop_front();
                hold(&mut held, x, (x + median).min(to));
            } else {
                break;
            }
        }
        for e in episodes.iter().filter(|e| e.first == x) {
            if fits(&held) {
                hold(&mut held, x, (x + median).min(to));
            } else if e.last > x {
                line.push_back(*e);
            } else {
                denials += 1;
            }
        }
        let n = held.len() as u32;
        full += i64::from(n == k && k > 0);
        used += u128::from(n);
        peak = peak.max(n);
    }
    denials += line.len() as u64;
    Point {
        seats: k,
        denials,
        peak,
        full_ms: full,
        used_ms: used,
    }
}

/// The answer for seat counts `1..=k_max`.
pub fn replay(h: &History, k_max: u32) -> Answer {
    let (sessions, session_count, idle_cut, median) = session_requests(h);
    let (episodes, true_denials) = episodes(h);
    let requests = (sessions.len() + episodes.len()) as u64;
    Answer {
        sessions: session_count,
        true_denials,
        episodes: episodes.len() as u64,
        idle_cut,
        requests,
        curve: (1..=k_max)
            .map(|k| point(h, &sessions, &episodes, median, k))
            .map(|p| p.wire(requests, h.to - h.covered_from))
            .collect(),
    }
}
