//! Top holders by hours: session time per holder inside the range, summed
//! over the pages of `GET /v1/admin/sessions`.
//!
//! The endpoint returns every session that *overlaps* the range, so a
//! session that began before `from` or is still open counts only its part
//! inside `[from, to]`; otherwise one long-running seat would outweigh a
//! week of real use.

use std::collections::HashMap;

use leasehold_common::Timestamp;
use leasehold_common::api::SessionView;

/// How many holders the report lists per license.
pub const TOP_HOLDERS: usize = 5;

/// One holder's session time inside the range.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct HolderHours {
    pub holder: String,
    pub hours: f64,
}

/// Milliseconds per holder, clipped to `[from, to]`.
#[derive(Debug)]
pub struct HolderTally {
    from: Timestamp,
    to: Timestamp,
    ms: HashMap<String, i64>,
}

impl HolderTally {
    pub fn new(from: Timestamp, to: Timestamp) -> Self {
        HolderTally {
            from,
            to,
            ms: HashMap::new(),
        }
    }

    /// Count one session's time inside the range.
    pub fn add(&mut self, s: &SessionView) {
        // An open session has no `ended_at`; its `duration_s` is the time so
        // far on the server's clock, which is where it ends for now.
        let end = s.ended_at.unwrap_or_else(|| {
            let so_far = (s.duration_s.max(0.0) * 1000.0).min(i64::MAX as f64) as i64;
            Timestamp::from_millis(s.started_at.as_millis().saturating_add(so_far))
        });
        let start = s.started_at.max(self.from);
        let end = end.min(self.to);
        let ms = end.millis_since(start);
        if ms > 0 {
            *self.ms.entry(s.holder.clone()).or_default() += ms;
        }
    }

    /// The `n` holders with the most time, most first; ties by name so the
    /// output is stable.
    pub fn top(&self, n: usize) -> Vec<HolderHours> {
        let mut all: Vec<(&String, i64)> = self.ms.iter().map(|(h, &ms)| (h, ms)).collect();
        all.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(b.0)));
        all.into_iter()
            .take(n)
            .map(|(h, ms)| HolderHours {
                holder: h.clone(),
                hours: ms as f64 / 3_600_000.0,
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use leasehold_common::api::SessionEnd;

    const H: i64 = 3_600_000;

    fn t(ms: i64) -> Timestamp {
        Timestamp::from_millis(1_796_011_200_000 + ms)
    }

    fn session(holder: &str, start: i64, end: Option<i64>, duration_ms: i64) -> SessionView {
        SessionView {
            seat_id: format!("{holder}{start}"),
            license_id: "demo".into(),
            holder: holder.into(),
            fingerprint: None,
            started_at: t(start),
            ended_at: end.map(t),
            end: end.map(|_| SessionEnd::Release),
            duration_s: duration_ms as f64 / 1000.0,
            group: None,
            borrowed: false,
            idle_s: 0.0,
        }
    }

    #[test]
    fn hours_are_clipped_to_the_range() {
        // Range: [0, 10h].
        let mut tally = HolderTally::new(t(0), t(10 * H));
        // Began 2 h before the range: 1 h inside.
        tally.add(&session("alice", -2 * H, Some(H), 3 * H));
        // Inside: 2 h.
        tally.add(&session("alice", 4 * H, Some(6 * H), 2 * H));
        // Still open, 5 h so far from 8 h: clipped at 10 h, 2 h inside.
        tally.add(&session("bob", 8 * H, None, 5 * H));
        // Ended exactly at `from`: nothing inside, not listed.
        tally.add(&session("carol", -H, Some(0), H));
        assert_eq!(
            tally.top(TOP_HOLDERS),
            vec![
                HolderHours {
                    holder: "alice".into(),
                    hours: 3.0
                },
                HolderHours {
                    holder: "bob".into(),
                    hours: 2.0
                },
            ]
        );
    }

    #[test]
    fn open_sessions_end_at_their_time_so_far() {
        let mut tally = HolderTally::new(t(0), t(10 * H));
        tally.add(&session("dave", H, None, H / 2));
        assert_eq!(tally.top(1)[0].hours, 0.5);
    }

    #[test]
    fn top_is_most_first_ties_by_name_and_capped() {
        let mut tally = HolderTally::new(t(0), t(100 * H));
        for (i, name) in ["f", "e", "d", "c", "b", "a"].iter().enumerate() {
            tally.add(&session(name, 0, Some(H * (1 + i as i64 / 2)), 0));
        }
        let names: Vec<String> = tally
            .top(TOP_HOLDERS)
            .into_iter()
            .map(|h| h.holder)
            .collect();
        // a, b: 3 h; c, d: 2 h; e, f: 1 h.
        assert_eq!(names, ["a", "b", "c", "d", "e"]);
    }
}
