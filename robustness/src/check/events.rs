//! The server's event log against the answers: ids without a gap, an
//! event for every acknowledged checkout, release and revoke, each inside
//! its operation's window, and in an order no answer contradicts.

use std::collections::HashMap;

use crate::history::{Event, History, Kind, Micros, Op};

use super::{Broken, ENDS_A_SEAT, TOLERANCE, Violation, span};

pub fn check_events(history: &History) -> Vec<Violation> {
    let mut found: Vec<Violation> = gaps(history).into_iter().collect();
    let mut by_seat: HashMap<(&str, &str), Vec<&Event>> = HashMap::new();
    for e in &history.events {
        if let (Some(l), Some(s)) = (e.license.as_deref(), e.seat.as_deref()) {
            by_seat.entry((l, s)).or_default().push(e);
        }
    }
    let mut matched: Vec<(usize, &Event)> = Vec::new();
    for (i, op) in history.ops.iter().enumerate() {
        if !op.is_ok() {
            continue;
        }
        let Some(seat) = op.seat_id() else { continue };
        let events = by_seat
            .get(&(op.license.as_str(), seat))
            .map_or(&[][..], Vec::as_slice);
        match matching_event(history, op, events) {
            Ok(Some(e)) => {
                found.extend(outside_window(history, i, e));
                matched.push((i, e));
            }
            Ok(None) => {}
            Err(missing) => found.push(violation(
                Broken::EventMissing,
                history,
                op,
                vec![i],
                missing,
            )),
        }
    }
    found.extend(contradicted_order(history, matched));
    found
}

/// Consecutive ids from the first event to the last.
fn gaps(history: &History) -> Option<Violation> {
    let pair = history.events.windows(2).find(|w| w[1].id != w[0].id + 1)?;
    Some(Violation {
        broken: Broken::EventGap,
        license: None,
        at: pair[1].at,
        ops: Vec::new(),
        seats: Vec::new(),
        message: format!("event {} is followed by event {}", pair[0].id, pair[1].id),
    })
}

/// The event an acknowledged operation must have left: a checkout's
/// `checkout`, a revoke's `revoke`; a release leaves a `release` when the
/// seat was still in the table, and some event took it out in any case.
/// `Ok(None)`: the operation leaves no event of its own (a heartbeat, a
/// release of a seat already gone).
fn matching_event<'h>(
    history: &History,
    op: &Op,
    events: &[&'h Event],
) -> Result<Option<&'h Event>, String> {
    let (sent, answered) = history.window(op);
    let seat = op.seat_id().unwrap_or_default();
    let named = |kind: &str| events.iter().copied().find(|e| e.kind == kind);
    match op.kind {
        Kind::Checkout | Kind::Borrow => {
            let issued = op.granted().map_or(sent, |g| g.issued_at);
            let checkouts = events.iter().copied().filter(|e| e.kind == "checkout");
            checkouts
                .min_by_key(|e| (e.at - issued).abs())
                .map(Some)
                .ok_or_else(|| {
                    format!("the acknowledged checkout of seat {seat} has no checkout event")
                })
        }
        Kind::Revoke => named("revoke")
            .map(Some)
            .ok_or_else(|| format!("the acknowledged revoke of seat {seat} has no revoke event")),
        Kind::Release => {
            let ends = events
                .iter()
                .copied()
                .filter(|e| ENDS_A_SEAT.contains(&e.kind.as_str()));
            match ends.min_by_key(|e| e.id) {
                // Before the window: something else (a release answered
                // `unknown` and sent again, a revoke, a reap) took it out.
                Some(e) if e.at + TOLERANCE < sent => Ok(None),
                Some(e) if e.kind == "release" => Ok(Some(e)),
                // A revoke or reap racing the release took it out.
                Some(e) if e.at <= answered + TOLERANCE => Ok(None),
                _ => Err(format!(
                    "seat {seat}'s release was acknowledged, but no event took it out of the table by then"
                )),
            }
        }
        Kind::Heartbeat => Ok(None),
    }
}

/// An event must be stamped within its operation's window; a checkout's
/// at the instant its lease was signed.
fn outside_window(history: &History, i: usize, e: &Event) -> Option<Violation> {
    let op = &history.ops[i];
    let (sent, answered) = history.window(op);
    let signed = op.granted().map(|g| g.issued_at);
    let message = if e.at + TOLERANCE < sent || e.at > answered + TOLERANCE {
        format!(
            "event {} ({}) is stamped {} outside its operation's window",
            e.id,
            e.kind,
            span(if e.at < sent {
                sent - e.at
            } else {
                e.at - answered
            })
        )
    } else if let Some(issued) = signed.filter(|&t| (t - e.at).abs() > TOLERANCE) {
        format!(
            "event {} is stamped {} from the lease's signed issued_at",
            e.id,
            span((issued - e.at).abs())
        )
    } else {
        return None;
    };
    Some(violation(Broken::EventOrder, history, op, vec![i], message))
}

/// An operation answered before another was sent must have the smaller
/// event id. Walking from the largest id down, keep the earliest answer:
/// one before a smaller id's sending contradicts the order.
fn contradicted_order(history: &History, mut matched: Vec<(usize, &Event)>) -> Option<Violation> {
    matched.sort_by_key(|(_, e)| std::cmp::Reverse(e.id));
    let mut earliest: Option<(Micros, usize, i64)> = None;
    for (i, e) in matched {
        let (sent, _) = history.window(&history.ops[i]);
        if let Some((answered, j, later_id)) = earliest.filter(|&(a, _, _)| a + TOLERANCE < sent) {
            let message = format!(
                "event {later_id} was answered {} before the operation of event {} was sent",
                span(sent - answered),
                e.id
            );
            return Some(violation(
                Broken::EventOrder,
                history,
                &history.ops[i],
                vec![j, i],
                message,
            ));
        }
        let answered = history.window(&history.ops[i]).1;
        if earliest.is_none_or(|(a, _, _)| answered < a) {
            earliest = Some((answered, i, e.id));
        }
    }
    None
}

fn violation(
    broken: Broken,
    history: &History,
    op: &Op,
    ops: Vec<usize>,
    message: String,
) -> Violation {
    Violation {
        broken,
        license: Some(op.license.clone()),
        at: history.window(op).0,
        ops,
        seats: op.seat_id().map(str::to_string).into_iter().collect(),
        message,
    }
}
