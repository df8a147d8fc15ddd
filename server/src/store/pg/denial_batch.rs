//! A PostgreSQL batch's counted denials, kept until its commit and written
//! there as one statement: one upsert per (license, second, holder,
//! fingerprint, reason) row, whatever number of denials the batch counted
//! under that key.
//!
//! Why: a row is appended to by rewriting it (MVCC), so a retry storm that
//! upserted each denial left a dead version of a row growing to 2 KB per
//! denial for vacuum (13 MB for a minute of 1,000 denials a second). Kept
//! here, a batch's denials of one key cost one new version, holding every
//! denial's 2-byte millisecond offset in the order counted
//! (`store/denials.rs`), so counts stay exact to the millisecond.
//!
//! Nothing a batch runs reads the denials (prune deletes rows older than
//! the retention, never the batch's second), so they need not be written
//! before the batch's other statements, only before its `COMMIT`; a
//! command that fails forgets its denials ([`DenialBatch::truncate`]), as
//! its savepoint forgets what it wrote. A failed write fails the commit,
//! and every command of the batch is answered with the error.

use std::collections::HashMap;

use postgres::Client;

use super::statements::Statements;
use crate::store::denials::{offset_bytes, second_of};
use crate::store::rules::Denial;

/// The row a denial is counted in.
#[derive(Clone, PartialEq, Eq, Hash)]
struct Key {
    license_id: String,
    second_ms: i64,
    holder: String,
    fingerprint: String,
    reason: &'static str,
}

impl Key {
    fn order(&self) -> (&str, i64, &str, &str, &str) {
        (
            &self.license_id,
            self.second_ms,
            &self.holder,
            &self.fingerprint,
            self.reason,
        )
    }
}

/// The batch's denials not yet written, in the order counted.
#[derive(Default)]
pub struct DenialBatch {
    counted: Vec<(Key, [u8; 2])>,
}

impl DenialBatch {
    /// How many are kept: where the next command's begin.
    pub fn len(&self) -> usize {
        self.counted.len()
    }

    /// Forget the denials counted after the first `len` (a command rolled
    /// back).
    pub fn truncate(&mut self, len: usize) {
        self.counted.truncate(len);
    }

    /// Keep a denial for the commit.
    pub fn push(&mut self, denial: &Denial<'_>) {
        self.counted.push((
            Key {
                license_id: denial.license_id.to_string(),
                second_ms: second_of(denial.at).as_millis(),
                holder: denial.holder.to_string(),
                fingerprint: denial.fingerprint.unwrap_or("").to_string(),
                reason: denial.reason.as_str(),
            },
            offset_bytes(denial.at),
        ));
    }

    /// The kept denials merged by row, in key order (each key once, so one
    /// `ON CONFLICT` statement may touch all of them): each row's count and
    /// offsets in the order counted.
    fn merged(&self) -> Vec<(&Key, i64, Vec<u8>)> {
        let mut rows: Vec<(&Key, i64, Vec<u8>)> = Vec::new();
        let mut at: HashMap<&Key, usize> = HashMap::new();
        for (key, offset) in &self.counted {
            let i = *at.entry(key).or_insert_with(|| {
                rows.push((key, 0, Vec::new()));
                rows.len() - 1
            });
            rows[i].1 += 1;
            rows[i].2.extend_from_slice(offset);
        }
        rows.sort_by(|a, b| a.0.order().cmp(&b.0.order()));
        rows
    }

    /// Write every kept denial in one statement (nothing if none) and
    /// forget them.
    pub fn write(
        &mut self,
        client: &mut Client,
        statements: &Statements,
    ) -> Result<(), postgres::Error> {
        if self.counted.is_empty() {
            return Ok(());
        }
        let rows = self.merged();
        let text = |f: fn(&Key) -> &str| rows.iter().map(|r| f(r.0)).collect::<Vec<_>>();
        let seconds: Vec<i64> = rows.iter().map(|r| r.0.second_ms).collect();
        let counts: Vec<i64> = rows.iter().map(|r| r.1).collect();
        let offsets: Vec<&[u8]> = rows.iter().map(|r| r.2.as_slice()).collect();
        client.execute(
            &statements.history.count_denials,
            &[
                &text(|k| &k.license_id),
                &seconds,
                &text(|k| &k.holder),
                &text(|k| &k.fingerprint),
                &text(|k| k.reason),
                &counts,
                &offsets,
            ],
        )?;
        self.counted.clear();
        Ok(())
    }

    /// How many kept denials of `reason` on the license are at `since` or
    /// later (alert evaluation, `pg/outbox/mod.rs`: `denials_since`).
    pub fn count_since(
        &self,
        license_id: &str,
        reason: leasehold_common::api::DenialReason,
        since: leasehold_common::Timestamp,
    ) -> u64 {
        let since = since.as_millis();
        self.counted
            .iter()
            .filter(|(k, offset)| {
                k.license_id == license_id
                    && k.reason == reason.as_str()
                    && k.second_ms + i64::from(u16::from_be_bytes(*offset)) >= since
            })
            .count() as u64
    }
}

#[cfg(test)]
mod tests {
    use leasehold_common::Timestamp;
    use leasehold_common::api::DenialReason;

    use super::*;
    use crate::store::denials::DenialRow;

    fn denial<'a>(holder: &'a str, ms: i64, reason: DenialReason) -> Denial<'a> {
        Denial {
            license_id: "l",
            holder,
            fingerprint: (holder == "a").then_some("m"),
            reason,
            at: Timestamp::from_millis(ms),
        }
    }

    #[test]
    fn a_batch_merges_by_row_in_the_order_counted_and_forgets_what_rolled_back() {
        let mut b = DenialBatch::default();
        for (holder, ms, reason) in [
            ("a", 1_999, DenialReason::Full),
            ("b", 1_500, DenialReason::Full),
            ("a", 1_000, DenialReason::Full),
            ("a", 1_999, DenialReason::Full),
            ("a", 1_998, DenialReason::Holder),
            ("a", 2_000, DenialReason::Full),
        ] {
            b.push(&denial(holder, ms, reason));
        }
        let mark = b.len();
        b.push(&denial("a", 1_001, DenialReason::Full));
        b.truncate(mark);
        let rows: Vec<(String, i64, &str, i64, Vec<i64>)> = b
            .merged()
            .into_iter()
            .map(|(k, count, offsets)| {
                let row = DenialRow {
                    license_id: k.license_id.clone(),
                    second: Timestamp::from_millis(k.second_ms),
                    holder: k.holder.clone(),
                    fingerprint: k.fingerprint.clone(),
                    reason: DenialReason::parse(k.reason).unwrap(),
                    offsets,
                };
                let instants = row.instants().map(|t| t.as_millis()).collect();
                (k.holder.clone(), k.second_ms, k.reason, count, instants)
            })
            .collect();
        assert_eq!(
            rows,
            [
                ("a".into(), 1_000, "full", 3, vec![1_999, 1_000, 1_999]),
                ("a".into(), 1_000, "holder", 1, vec![1_998]),
                ("b".into(), 1_000, "full", 1, vec![1_500]),
                ("a".into(), 2_000, "full", 1, vec![2_000]),
            ]
        );
    }
}
