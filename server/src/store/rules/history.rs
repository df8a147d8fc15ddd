//! What the usage history needs beyond sessions: pool sizes over time,
//! and pruning past the retention.

use leasehold_common::Timestamp;

use super::{LeaseTx, Result, Rules};

impl<T: LeaseTx> Rules<'_, T> {
    /// Record each license's pool size from now on where it differs from
    /// the last one recorded (a license gone from the policy: 0 seats), so
    /// a past interval is judged against the seats it had then.
    pub fn record_pool_sizes(&mut self) -> Result<()> {
        let recorded = self.tx.current_pool_sizes()?;
        let mut changes: Vec<(&str, u32)> = self
            .licenses
            .iter()
            .filter(|l| recorded.get(&l.id) != Some(&l.policy.seats))
            .map(|l| (l.id.as_str(), l.policy.seats))
            .collect();
        changes.extend(
            recorded
                .iter()
                .filter(|(id, seats)| **seats > 0 && self.licenses.get(id).is_none())
                .map(|(id, _)| (id.as_str(), 0)),
        );
        for (license_id, seats) in changes {
            self.tx.record_pool_size(license_id, self.now, seats)?;
        }
        Ok(())
    }

    /// Drop history older than `cutoff`, at most `limit` rows per table,
    /// and finished webhook deliveries past their week.
    pub fn prune_history(&mut self, cutoff: Timestamp, limit: usize) -> Result<usize> {
        let history = self.tx.prune_history(cutoff, limit)?;
        Ok(history + self.prune_deliveries(limit)?)
    }
}
