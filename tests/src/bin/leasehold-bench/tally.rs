//! What one connection saw in a measured window: a latency histogram and
//! counts, merged across connections afterwards.

use std::collections::BTreeMap;

use hdrhistogram::Histogram;

/// What one connection saw in the measured window.
pub struct Tally {
    pub hist: Histogram<u64>,
    pub requests: u64,
    pub ok: u64,
    pub denied: u64,
    pub errors: BTreeMap<String, u64>,
    pub statuses: BTreeMap<u16, u64>,
}

impl Tally {
    pub fn new() -> Tally {
        Tally {
            // 1 µs .. 60 s, 3 significant digits.
            hist: Histogram::new_with_bounds(1, 60_000_000, 3).expect("histogram bounds"),
            requests: 0,
            ok: 0,
            denied: 0,
            errors: BTreeMap::new(),
            statuses: BTreeMap::new(),
        }
    }

    pub fn merge(&mut self, other: Tally) {
        self.hist.add(&other.hist).expect("same bounds");
        self.requests += other.requests;
        self.ok += other.ok;
        self.denied += other.denied;
        for (k, v) in other.errors {
            *self.errors.entry(k).or_insert(0) += v;
        }
        for (k, v) in other.statuses {
            *self.statuses.entry(k).or_insert(0) += v;
        }
    }
}
