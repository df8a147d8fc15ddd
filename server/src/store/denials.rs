//! Recorded denials, as both stores keep and read them: who was refused,
//! why, and when, to the millisecond; and which `full` denials were true
//! (no seat of the license went to the same holder within the tolerance
//! after).
//!
//! Storage is one row per (license, second, holder, fingerprint, reason)
//! with a `count` and the denials' millisecond offsets in that second
//! packed in a blob, 2 bytes each, in the order they were counted. A client
//! refused 1,000 times a second adds 2,000 bytes a second to one row, not
//! 1,000 rows, and every instant stays exact. The instants are read back
//! here, so SQL never unpacks them.

use std::collections::HashMap;
use std::time::Duration;

use leasehold_common::Timestamp;
use leasehold_common::api::{DenialReason, DenialView};

use super::history::BadCursor;

/// The tolerance of a true denial when the query names none.
pub const DEFAULT_TOLERANCE: Duration = Duration::from_secs(60);
/// The longest tolerance a query may ask for.
pub const MAX_TOLERANCE: Duration = Duration::from_secs(3600);

/// One page of `GET /v1/admin/denials`: denials of the license in
/// `[from, to)`, newest first, after `after`.
#[derive(Debug, Clone)]
pub struct DenialsQuery {
    pub license_id: String,
    pub from: Timestamp,
    pub to: Timestamp,
    /// A `full` denial followed by a grant to the same holder within this
    /// is not a true denial.
    pub tolerance: Duration,
    pub after: Option<DenialCursor>,
    pub limit: usize,
}

/// Where a page ended: the last denial's sort key, and how many denials
/// with exactly that key (a retry storm repeats them) it already listed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DenialCursor {
    pub at: Timestamp,
    pub holder: String,
    pub fingerprint: String,
    pub reason: DenialReason,
    pub seen: u32,
}

impl DenialCursor {
    /// Opaque to clients: hex of the key's fields, one a line (holder and
    /// fingerprint never hold a line break: `check_text`).
    pub fn encode(&self) -> String {
        hex::encode(format!(
            "{}\n{}\n{}\n{}\n{}",
            self.at.as_millis(),
            self.seen,
            self.reason.as_str(),
            self.holder,
            self.fingerprint
        ))
    }

    pub fn decode(text: &str) -> Result<DenialCursor, BadCursor> {
        if text.len() > 2048 {
            return Err(BadCursor);
        }
        let bytes = hex::decode(text).map_err(|_| BadCursor)?;
        let text = String::from_utf8(bytes).map_err(|_| BadCursor)?;
        let mut parts = text.split('\n');
        let mut next = || parts.next().ok_or(BadCursor);
        let at = next()?.parse::<i64>().map_err(|_| BadCursor)?;
        let seen = next()?.parse::<u32>().map_err(|_| BadCursor)?;
        let reason = DenialReason::parse(next()?).ok_or(BadCursor)?;
        let holder = next()?.to_string();
        let fingerprint = next()?.to_string();
        // An empty holder is an old count's (schema before reasons).
        if parts.next().is_some() {
            return Err(BadCursor);
        }
        Ok(DenialCursor {
            at: Timestamp::from_millis(at),
            holder,
            fingerprint,
            reason,
            seen,
        })
    }
}

/// One stored row: the denials of one holder + fingerprint for one reason
/// in the second starting at `second`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DenialRow {
    pub license_id: String,
    pub second: Timestamp,
    pub holder: String,
    /// `""` for none, as blocks store it (a key column is never NULL).
    pub fingerprint: String,
    pub reason: DenialReason,
    /// Millisecond offsets in the second, 2 bytes each, big-endian.
    pub offsets: Vec<u8>,
}

/// The second a denial is stored under.
pub fn second_of(at: Timestamp) -> Timestamp {
    Timestamp::from_millis(at.as_millis().div_euclid(1000) * 1000)
}

/// The 2 bytes a denial at `at` appends to its row's blob.
pub fn offset_bytes(at: Timestamp) -> [u8; 2] {
    (at.as_millis().rem_euclid(1000) as u16).to_be_bytes()
}

impl DenialRow {
    /// Each denial's instant, in the order counted.
    pub fn instants(&self) -> impl Iterator<Item = Timestamp> + '_ {
        self.offsets.chunks_exact(2).map(|b| {
            let ms = i64::from(u16::from_be_bytes([b[0], b[1]]));
            Timestamp::from_millis(self.second.as_millis() + ms)
        })
    }
}

/// Whether a denial at `d` is false-made by one of `grants` (sorted): a
/// grant in `(d, d + tolerance]`.
pub fn granted_within(d: Timestamp, grants: &[Timestamp], tolerance: Duration) -> bool {
    let first_after = grants.partition_point(|g| *g <= d);
    grants
        .get(first_after)
        .is_some_and(|g| *g <= d.saturating_add(tolerance))
}

/// Whether a denial is a true denial, given its holder's grants (sorted)
/// of the same license.
pub fn is_true(
    reason: DenialReason,
    at: Timestamp,
    grants: Option<&Vec<Timestamp>>,
    tolerance: Duration,
) -> bool {
    reason == DenialReason::Full && !grants.is_some_and(|g| granted_within(at, g, tolerance))
}

/// The holders of `full` denials among `rows` in `[from, to)`, each with
/// the span its grants are looked up in: `(earliest, latest + tolerance]`.
pub fn full_spans(
    rows: &[DenialRow],
    from: Timestamp,
    to: Timestamp,
    tolerance: Duration,
) -> HashMap<String, (Timestamp, Timestamp)> {
    let mut spans: HashMap<String, (Timestamp, Timestamp)> = HashMap::new();
    for row in rows.iter().filter(|r| r.reason == DenialReason::Full) {
        for at in row.instants().filter(|at| *at >= from && *at < to) {
            widen(&mut spans, &row.holder, at, tolerance);
        }
    }
    spans
}

fn widen(
    spans: &mut HashMap<String, (Timestamp, Timestamp)>,
    holder: &str,
    at: Timestamp,
    tolerance: Duration,
) {
    let end = at.saturating_add(tolerance);
    match spans.get_mut(holder) {
        Some((lo, hi)) => {
            *lo = (*lo).min(at);
            *hi = (*hi).max(end);
        }
        None => {
            spans.insert(holder.to_string(), (at, end));
        }
    }
}

/// Each denial of `rows` in `[from, to)` with its row (holder,
/// fingerprint, reason) and whether it was a true denial, by its holder's
/// `grants` (sorted; at least those in the holder's [`full_spans`] span).
pub fn each_denial(
    rows: &[DenialRow],
    from: Timestamp,
    to: Timestamp,
    grants: &HashMap<String, Vec<Timestamp>>,
    tolerance: Duration,
    mut f: impl FnMut(Timestamp, &DenialRow, bool),
) {
    for row in rows {
        let holder_grants = grants.get(&row.holder);
        for at in row.instants().filter(|at| *at >= from && *at < to) {
            f(at, row, is_true(row.reason, at, holder_grants, tolerance));
        }
    }
}

/// A license's true denials, one list per holder and fingerprint (`""`
/// for none), each oldest first: what the what-if groups into episodes.
pub type TrueDenialsByWho = HashMap<(String, String), Vec<Timestamp>>;

/// The true denials among `rows` in `[from, to)`, by who was refused.
pub fn true_denials_by_who(
    rows: &[DenialRow],
    from: Timestamp,
    to: Timestamp,
    grants: &HashMap<String, Vec<Timestamp>>,
    tolerance: Duration,
) -> TrueDenialsByWho {
    let mut by_who = TrueDenialsByWho::new();
    each_denial(rows, from, to, grants, tolerance, |at, row, is_true| {
        if is_true {
            by_who
                .entry((row.holder.clone(), row.fingerprint.clone()))
                .or_default()
                .push(at);
        }
    });
    for instants in by_who.values_mut() {
        instants.sort();
    }
    by_who
}

/// The page's order: newest first, then by holder, fingerprint and reason,
/// so every store lists the same denials in the same order.
fn sort_key(v: &DenialView) -> (std::cmp::Reverse<Timestamp>, &str, &str, &str) {
    (
        std::cmp::Reverse(v.at),
        v.holder.as_str(),
        v.fingerprint.as_deref().unwrap_or(""),
        v.reason.as_str(),
    )
}

/// Accumulates a page from rows read newest second first; the store stops
/// reading when [`Page::full`] says so after a whole second.
pub struct Page<'q> {
    q: &'q DenialsQuery,
    views: Vec<DenialView>,
    second: Vec<DenialView>,
    second_at: Option<Timestamp>,
}

impl<'q> Page<'q> {
    pub fn new(q: &'q DenialsQuery) -> Page<'q> {
        Page {
            q,
            views: Vec::new(),
            second: Vec::new(),
            second_at: None,
        }
    }

    /// A row, in descending `second` order. `false`: the seconds before
    /// this row's filled the page; the store stops reading.
    pub fn push(&mut self, row: &DenialRow) -> bool {
        if self.second_at != Some(row.second) {
            self.close_second();
            if self.views.len() >= self.q.limit {
                return false;
            }
            self.second_at = Some(row.second);
        }
        let fingerprint = (!row.fingerprint.is_empty()).then(|| row.fingerprint.clone());
        for at in row.instants() {
            if at >= self.q.from && at < self.q.to {
                self.second.push(DenialView {
                    at,
                    license_id: row.license_id.clone(),
                    holder: row.holder.clone(),
                    fingerprint: fingerprint.clone(),
                    reason: row.reason,
                    is_true: false,
                });
            }
        }
        true
    }

    /// The newest second a page may hold a denial of: the cursor's, or
    /// the one holding the end of the range.
    pub fn newest_second(&self) -> Timestamp {
        let last = self.q.to.saturating_sub(Duration::from_millis(1));
        match &self.q.after {
            Some(c) => second_of(c.at.min(last)),
            None => second_of(last),
        }
    }

    fn close_second(&mut self) {
        let mut second = std::mem::take(&mut self.second);
        second.sort_by(|a, b| sort_key(a).cmp(&sort_key(b)));
        let mut seen_of_cursor = 0u32;
        for v in second {
            if let Some(c) = &self.q.after {
                let key = (
                    std::cmp::Reverse(c.at),
                    c.holder.as_str(),
                    c.fingerprint.as_str(),
                    c.reason.as_str(),
                );
                match sort_key(&v).cmp(&key) {
                    std::cmp::Ordering::Less => continue,
                    std::cmp::Ordering::Equal if seen_of_cursor < c.seen => {
                        seen_of_cursor += 1;
                        continue;
                    }
                    _ => {}
                }
            }
            self.views.push(v);
        }
    }

    /// The page: at most `limit` denials, newest first, all marked not
    /// true until [`mark_true`].
    pub fn finish(mut self) -> Vec<DenialView> {
        self.close_second();
        self.views.truncate(self.q.limit);
        self.views
    }
}

/// Holders of `full` denials among `views`, each with the span its grants
/// are looked up in: `(earliest denial, latest denial + tolerance]`.
pub fn grant_spans(
    views: &[DenialView],
    tolerance: Duration,
) -> HashMap<String, (Timestamp, Timestamp)> {
    let mut spans = HashMap::new();
    for v in views.iter().filter(|v| v.reason == DenialReason::Full) {
        widen(&mut spans, &v.holder, v.at, tolerance);
    }
    spans
}

/// Mark each `full` denial true or false by its holder's grants (sorted).
pub fn mark_true(
    views: &mut [DenialView],
    grants: &HashMap<String, Vec<Timestamp>>,
    tolerance: Duration,
) {
    for v in views {
        v.is_true = is_true(v.reason, v.at, grants.get(&v.holder), tolerance);
    }
}

impl DenialCursor {
    /// The cursor after a page (`after`: the one it was asked with): its
    /// last denial's key, and how many with that key the pages so far
    /// listed.
    pub fn next(views: &[DenialView], after: Option<&DenialCursor>) -> Option<DenialCursor> {
        next_cursor(views, after)
    }
}

fn next_cursor(views: &[DenialView], after: Option<&DenialCursor>) -> Option<DenialCursor> {
    let last = views.last()?;
    let key = sort_key(last);
    let mut seen = views
        .iter()
        .rev()
        .take_while(|v| sort_key(v) == key)
        .count() as u32;
    if let Some(c) = after
        && c.at == last.at
        && c.holder == last.holder
        && c.fingerprint == last.fingerprint.as_deref().unwrap_or("")
        && c.reason == last.reason
    {
        seen += c.seen;
    }
    Some(DenialCursor {
        at: last.at,
        holder: last.holder.clone(),
        fingerprint: last.fingerprint.clone().unwrap_or_default(),
        reason: last.reason,
        seen,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_round_trip_and_garbage_is_refused() {
        for c in [
            DenialCursor {
                at: Timestamp::from_millis(-5),
                holder: "a:b c".into(),
                fingerprint: String::new(),
                reason: DenialReason::NotAllowed,
                seen: 3,
            },
            DenialCursor {
                at: Timestamp::from_millis(1_800_000_000_123),
                holder: String::new(),
                fingerprint: "m-1".into(),
                reason: DenialReason::Full,
                seen: 0,
            },
        ] {
            assert_eq!(DenialCursor::decode(&c.encode()), Ok(c));
        }
        for bad in [
            "",
            "zz",
            &"00".repeat(1100),
            &hex::encode("1\n0\nfull\nh"),
            &hex::encode("1\n0\nempty\nh\nf"),
            &hex::encode("x\n0\nfull\nh\nf"),
            &hex::encode("1\n0\nfull\nh\nf\nextra"),
        ] {
            assert_eq!(DenialCursor::decode(bad), Err(BadCursor), "{bad:?}");
        }
    }

    #[test]
    fn a_grant_makes_a_denial_false_only_after_it_and_within_the_tolerance() {
        let t = Timestamp::from_millis;
        let grants = [t(100), t(200)];
        let tol = Duration::from_millis(50);
        assert!(granted_within(t(150), &grants, tol), "200 = 150 + 50");
        assert!(!granted_within(t(149), &grants, tol), "200 > 149 + 50");
        assert!(
            !granted_within(t(200), &grants, tol),
            "a grant at d is not after it"
        );
        assert!(granted_within(t(99), &grants, tol));
        assert!(!granted_within(t(99), &grants, Duration::ZERO));
        assert!(!is_true(DenialReason::Holder, t(0), None, tol), "only full");
        assert!(is_true(DenialReason::Full, t(0), None, tol));
    }

    #[test]
    fn a_row_packs_each_denial_in_two_bytes_of_its_second() {
        let at = [1_999, 1_000, 1_999, -1, -1_000];
        let mut rows: Vec<DenialRow> = Vec::new();
        for ms in at {
            let at = Timestamp::from_millis(ms);
            match rows.iter_mut().find(|r| r.second == second_of(at)) {
                Some(r) => r.offsets.extend(offset_bytes(at)),
                None => rows.push(DenialRow {
                    license_id: "l".into(),
                    second: second_of(at),
                    holder: "h".into(),
                    fingerprint: String::new(),
                    reason: DenialReason::Full,
                    offsets: offset_bytes(at).to_vec(),
                }),
            }
        }
        let back: Vec<i64> = rows
            .iter()
            .flat_map(|r| r.instants().map(|t| t.as_millis()).collect::<Vec<_>>())
            .collect();
        assert_eq!(back, at);
        assert_eq!(rows.len(), 2);
    }
}
