//! The summary's denials as the verdict reads them: only a *true* denial
//! (refused while full and not served within the tolerance) means too few
//! seats. A denial by a cap, a list or a block, or one served a moment
//! later, is said beside the verdict, never counted as a shortage.
//!
//! Denials the server gives no reason for (a server older than reasons, or
//! history recorded before them) count as before: as a shortage.

use std::time::Duration;

use leasehold_common::api::UsageSummary;
use leasehold_common::policy::format_duration;

/// The server's tolerance when the report does not send one.
pub const DEFAULT_TOLERANCE: Duration = Duration::from_secs(60);

/// The longest `--tolerance` the server accepts.
pub const MAX_TOLERANCE: Duration = Duration::from_secs(3600);

/// `--tolerance`: a duration from `0s` to `1h`.
pub fn parse_tolerance(s: &str) -> Result<Duration, String> {
    let d = leasehold_common::policy::parse_duration(s)?;
    if d > MAX_TOLERANCE {
        return Err(format!("{s:?}: the tolerance is at most 1h"));
    }
    Ok(d)
}

/// One summary's denials, split by what they say about the seat count.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Denials {
    /// `full` denials not followed by a grant within the tolerance.
    pub true_full: u64,
    /// Distinct holders among `true_full` (0 from a server older than the
    /// count, or when there are none).
    pub holders: u64,
    /// Counted denials without a recorded reason: read as true denials.
    pub unknown: u64,
    /// `full` denials the holder got a seat within the tolerance after.
    pub served: u64,
    /// Denials by caps (`holder`, `group`, `borrow`), lists and blocks.
    pub caps: u64,
    pub lists: u64,
    pub blocks: u64,
}

impl Denials {
    pub fn of(s: &UsageSummary) -> Denials {
        let by = &s.denials_by_reason;
        let true_full = s.true_denials.min(by.full);
        Denials {
            true_full,
            holders: s.denied_holders,
            unknown: s.denials.saturating_sub(by.total()),
            served: by.full - true_full,
            caps: by.holder + by.group + by.borrow,
            lists: by.not_allowed,
            blocks: by.blocked,
        }
    }

    /// The denials that mean too few seats.
    pub fn shortage(&self) -> u64 {
        self.true_full + self.unknown
    }

    /// Denials that are not a shortage.
    pub fn other(&self) -> u64 {
        self.served + self.caps + self.lists + self.blocks
    }

    /// The distinct holders the shortage came from; `None` when the
    /// server did not say (one older than the count, or denials with no
    /// recorded reason, which name no holder).
    pub fn denied_holders(&self) -> Option<u64> {
        (self.holders > 0 || self.shortage() == 0).then_some(self.holders)
    }

    /// The true denials and who they came from: `13 true denials from 4
    /// holders`; without `from` when the server does not count holders.
    pub fn true_words(&self) -> String {
        let denials = counted(self.true_full, "true denial");
        if self.holders > 0 {
            format!("{denials} from {}", counted(self.holders, "holder"))
        } else {
            denials
        }
    }

    /// The shortage in words: `13 true denials from 4 holders (full, not
    /// served within 60s)`; `3 denials` alone when no reason is recorded at
    /// all (as an older server's report read).
    pub fn shortage_words(&self, tolerance: Duration) -> Vec<String> {
        let mut words = Vec::new();
        if self.true_full > 0 {
            words.push(format!(
                "{} (full, not served within {})",
                self.true_words(),
                tolerance_words(tolerance)
            ));
        }
        if self.unknown > 0 {
            let what = counted(self.unknown, "denial");
            if self.true_full + self.other() == 0 {
                words.push(what);
            } else {
                words.push(format!("{what} with no recorded reason"));
            }
        }
        words
    }

    /// What is said beside the verdict: `3 refused while full but served
    /// within 60s, 4 refused by caps or lists — not a shortage`.
    pub fn beside_words(&self, tolerance: Duration) -> Option<String> {
        let mut parts = Vec::new();
        if self.served > 0 {
            parts.push(format!(
                "{} refused while full but served within {}",
                self.served,
                tolerance_words(tolerance)
            ));
        }
        let by: Vec<&str> = [
            (self.caps, "caps"),
            (self.lists, "lists"),
            (self.blocks, "blocks"),
        ]
        .into_iter()
        .filter(|(n, _)| *n > 0)
        .map(|(_, what)| what)
        .collect();
        if !by.is_empty() {
            parts.push(format!(
                "{} refused by {}",
                self.caps + self.lists + self.blocks,
                or_list(&by)
            ));
        }
        (!parts.is_empty()).then(|| format!("{} — not a shortage", parts.join(", ")))
    }

    /// `no denials` when nothing was refused, else `no true denials`.
    pub fn none_words(&self) -> &'static str {
        if self.other() == 0 {
            "no denials"
        } else {
            "no true denials"
        }
    }
}

/// A tolerance as admins say it: `60s`, `90s`, `10m`, `1h`.
pub fn tolerance_words(d: Duration) -> String {
    if d.subsec_millis() == 0 && d.as_secs() <= 120 {
        format!("{}s", d.as_secs())
    } else {
        format_duration(d)
    }
}

/// `1 denial`, `2 denials`.
fn counted(n: u64, what: &str) -> String {
    let plural = if n == 1 { "" } else { "s" };
    format!("{n} {what}{plural}")
}

/// `caps`, `caps or lists`, `caps, lists or blocks`.
fn or_list(items: &[&str]) -> String {
    match items {
        [] => String::new(),
        [one] => (*one).to_string(),
        [init @ .., last] => format!("{} or {last}", init.join(", ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use leasehold_common::api::DenialsByReason;

    fn summary(denials: u64, by: DenialsByReason, true_denials: u64) -> UsageSummary {
        UsageSummary {
            seats: 1,
            peak: 1,
            peak_at: None,
            full_s: 0.0,
            over_s: 0.0,
            denials,
            denials_by_reason: by,
            true_denials,
            denied_holders: 0,
            seat_hours: 0.0,
            borrowed_hours: 0.0,
            idle_hours: 0.0,
            utilization: 0.0,
            holders: 0,
            covered_from: None,
        }
    }

    const MIN: Duration = DEFAULT_TOLERANCE;

    #[test]
    fn an_older_server_reads_every_denial_as_a_shortage() {
        let r = Denials::of(&summary(3, DenialsByReason::default(), 0));
        assert_eq!((r.shortage(), r.other()), (3, 0));
        assert_eq!(r.shortage_words(MIN), ["3 denials"]);
        assert_eq!(r.beside_words(MIN), None);
    }

    #[test]
    fn reasons_split_true_served_and_caps() {
        let by = DenialsByReason {
            full: 5,
            holder: 1,
            group: 1,
            not_allowed: 2,
            ..Default::default()
        };
        let r = Denials::of(&UsageSummary {
            denied_holders: 2,
            ..summary(9, by, 2)
        });
        assert_eq!((r.shortage(), r.served, r.other()), (2, 3, 7));
        assert_eq!(r.denied_holders(), Some(2));
        assert_eq!(
            r.shortage_words(MIN),
            ["2 true denials from 2 holders (full, not served within 60s)"]
        );
        assert_eq!(
            r.beside_words(Duration::from_secs(90)).as_deref(),
            Some(
                "3 refused while full but served within 90s, 4 refused by caps or lists — not a shortage"
            )
        );
        assert_eq!(r.none_words(), "no true denials");
    }

    #[test]
    fn true_denials_say_the_holders_they_came_from() {
        let by = |full| DenialsByReason {
            full,
            ..Default::default()
        };
        let of = |true_denials, denied_holders| {
            Denials::of(&UsageSummary {
                denied_holders,
                ..summary(true_denials, by(true_denials), true_denials)
            })
        };
        // One holder retrying is said as one holder.
        assert_eq!(of(13, 4).true_words(), "13 true denials from 4 holders");
        assert_eq!(of(13, 1).true_words(), "13 true denials from 1 holder");
        assert_eq!(
            of(1, 1).shortage_words(MIN),
            ["1 true denial from 1 holder (full, not served within 60s)"]
        );
        // A server older than the count (0 by default): the count alone.
        let old = of(2, 0);
        assert_eq!(old.denied_holders(), None);
        assert_eq!(
            old.shortage_words(MIN),
            ["2 true denials (full, not served within 60s)"]
        );
        // No shortage: no holder was denied.
        assert_eq!(of(0, 0).denied_holders(), Some(0));
        // Denials with no recorded reason name no holder.
        let r = Denials::of(&summary(3, DenialsByReason::default(), 0));
        assert_eq!(r.denied_holders(), None);
    }

    #[test]
    fn denials_without_a_reason_beside_recorded_ones_are_still_a_shortage() {
        // Two counted before reasons were recorded, one block after.
        let by = DenialsByReason {
            blocked: 1,
            ..Default::default()
        };
        let r = Denials::of(&summary(3, by, 0));
        assert_eq!(r.shortage(), 2);
        assert_eq!(r.shortage_words(MIN), ["2 denials with no recorded reason"]);
        assert_eq!(
            r.beside_words(MIN).as_deref(),
            Some("1 refused by blocks — not a shortage")
        );
    }

    #[test]
    fn tolerances_are_zero_to_an_hour() {
        assert_eq!(parse_tolerance("0s"), Ok(Duration::ZERO));
        assert_eq!(parse_tolerance("1h"), Ok(MAX_TOLERANCE));
        assert!(parse_tolerance("61m").is_err());
        assert!(parse_tolerance("soon").is_err());
        assert_eq!(or_list(&["a", "b", "c"]), "a, b or c");
        assert_eq!(tolerance_words(Duration::from_secs(60)), "60s");
        assert_eq!(tolerance_words(Duration::from_secs(600)), "10m");
        assert_eq!(tolerance_words(Duration::from_millis(1500)), "1500ms");
    }
}
