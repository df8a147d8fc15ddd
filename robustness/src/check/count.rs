//! Over-grant: more seats surely counting at one instant than the pool.

use std::collections::BTreeSet;

use crate::history::{History, Micros, Terms};

use super::{Broken, TOLERANCE, Violation};

/// A piece of time a seat surely counted.
pub struct Counted<'h> {
    pub from: Micros,
    pub to: Micros,
    pub seat: &'h str,
    /// The operation that granted it.
    pub grant: Option<usize>,
}

/// The first instant more seats surely counted than `capacity`. Each piece
/// is shortened by the tolerance at both ends, so a seat ending and another
/// starting within it are not called an overlap.
pub fn over_grant(history: &History, terms: &Terms, counted: Vec<Counted>) -> Option<Violation> {
    let mut edges: Vec<(Micros, bool, usize)> = Vec::with_capacity(counted.len() * 2);
    for (i, piece) in counted.iter().enumerate() {
        let (from, to) = (piece.from + TOLERANCE, piece.to - TOLERANCE);
        if from < to {
            // `false` sorts first: at one instant, ends before starts.
            edges.push((from, true, i));
            edges.push((to, false, i));
        }
    }
    edges.sort_unstable();
    let mut live: BTreeSet<usize> = BTreeSet::new();
    for (at, starts, i) in edges {
        if !starts {
            live.remove(&i);
            continue;
        }
        live.insert(i);
        if live.len() > terms.capacity as usize {
            let pieces: Vec<&Counted> = live.iter().map(|&k| &counted[k]).collect();
            return Some(violation(history, terms, at, &pieces));
        }
    }
    None
}

fn violation(history: &History, terms: &Terms, at: Micros, pieces: &[&Counted]) -> Violation {
    let seats: Vec<String> = pieces.iter().map(|p| p.seat.to_string()).collect();
    let ops: Vec<usize> = pieces.iter().filter_map(|p| p.grant).collect();
    let clients: Vec<String> = ops
        .iter()
        .map(|&i| history.ops[i].client.to_string())
        .collect();
    let message = format!(
        "{} seats surely counted at once on a pool of {} (granted to clients {})",
        pieces.len(),
        terms.capacity,
        clients.join(", ")
    );
    Violation {
        broken: Broken::OverGrant,
        license: Some(terms.license.clone()),
        at,
        ops,
        seats,
        message,
    }
}
