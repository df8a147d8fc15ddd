//! Refused while free: a checkout told `no_seats_available` while fewer seats than
//! the pool could possibly have counted, at every instant it could have
//! been decided.

use std::collections::{BTreeMap, HashMap};

use crate::history::{History, Micros, Outcome, Terms};

use super::seat::SeatLog;
use super::{Broken, ENDS_A_SEAT, TOLERANCE, Violation, after_outages};

/// Seats the event log shows granted that no answer carried: granted to a
/// checkout answered `unknown`. Each may count from its grant until its
/// end in the log, or its TTL (longer with an outage; without end when a
/// borrow went unanswered: its length is not known).
pub fn phantoms(
    history: &History,
    terms: &Terms,
    seats: &BTreeMap<&str, SeatLog>,
) -> Vec<(Micros, Micros)> {
    let license = Some(terms.license.as_str());
    let mut ends: HashMap<&str, Micros> = HashMap::new();
    for e in &history.events {
        if e.license.as_deref() == license
            && ENDS_A_SEAT.contains(&e.kind.as_str())
            && let Some(seat) = e.seat.as_deref()
        {
            ends.entry(seat).or_insert(e.at);
        }
    }
    let unknown_borrow = history.ops.iter().any(|op| {
        op.license == terms.license && op.kind == crate::history::Kind::Borrow && op.is_unknown()
    });
    let outages = history.outages();
    let granted_to_nobody = history.events.iter().filter(|e| {
        e.kind == "checkout"
            && e.license.as_deref() == license
            && e.seat
                .as_deref()
                .is_some_and(|s| seats.get(s).is_none_or(|l| l.grants.is_empty()))
    });
    granted_to_nobody
        .map(|e| {
            let lapses = if unknown_borrow {
                Micros::MAX
            } else {
                after_outages(&outages, e.at + terms.ttl, Micros::MAX, terms) + terms.skew
            };
            let end = e.seat.as_deref().and_then(|s| ends.get(s)).copied();
            (e.at, end.map_or(lapses, |end| end.min(lapses)))
        })
        .collect()
}

/// The first checkout refused `no_seats_available` while, at every instant it could
/// have been decided, fewer seats than the pool could have counted.
/// `possible`: when each seat could have counted, from its grant to the
/// latest end any placement allows.
pub fn refused_while_free(
    history: &History,
    terms: &Terms,
    ops: &[usize],
    possible: Vec<(Micros, Micros)>,
) -> Option<Violation> {
    let steps = count_steps(possible);
    let refused = ops.iter().copied().filter(|&i| {
        let op = &history.ops[i];
        op.kind.grants() && matches!(&op.outcome, Outcome::Fail { status: 409, error, .. } if error == "no_seats_available")
    });
    for i in refused {
        let (sent, answered) = history.window(&history.ops[i]);
        let most = most_counted(&steps, sent - TOLERANCE, answered + TOLERANCE);
        if most < terms.capacity as usize {
            let message = format!(
                "client {}'s checkout was refused no_seats_available, yet at most {most} of {} seats could have counted",
                history.ops[i].client, terms.capacity
            );
            return Some(Violation {
                broken: Broken::RefusedWhileFree,
                license: Some(terms.license.clone()),
                at: sent,
                ops: vec![i],
                seats: Vec::new(),
                message,
            });
        }
    }
    None
}

/// How many seats could count from each instant on: (instant, count),
/// ascending.
fn count_steps(possible: Vec<(Micros, Micros)>) -> Vec<(Micros, usize)> {
    let mut edges: Vec<(Micros, i64)> = Vec::with_capacity(possible.len() * 2);
    for (from, to) in possible {
        edges.push((from, 1));
        // Counted through `to` itself.
        edges.push((to.saturating_add(1), -1));
    }
    edges.sort_unstable();
    let mut steps: Vec<(Micros, usize)> = Vec::with_capacity(edges.len());
    let mut count: i64 = 0;
    for (at, delta) in edges {
        count += delta;
        match steps.last_mut() {
            Some(last) if last.0 == at => last.1 = count as usize,
            _ => steps.push((at, count as usize)),
        }
    }
    steps
}

/// The most seats that could count at one instant of `[from, to]`.
fn most_counted(steps: &[(Micros, usize)], from: Micros, to: Micros) -> usize {
    let first = steps.partition_point(|&(at, _)| at <= from);
    let at_from = first.checked_sub(1).map_or(0, |k| steps[k].1);
    let inside = steps[first..]
        .iter()
        .take_while(|&&(at, _)| at <= to)
        .map(|&(_, n)| n);
    inside.fold(at_from, usize::max)
}
