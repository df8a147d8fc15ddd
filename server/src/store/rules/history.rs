//! What the usage history needs beyond sessions: pool sizes over time,
//! and pruning past the retention.

use leasehold_common::Timestamp;

use super::{LeaseTx, Result, Rules};

impl<T: LeaseTx> Rules<'_, T> {
    /// Record each license's pool size (effective seats) from now on where
    /// it differs from the last one recorded (a license gone from the policy: 0 seats), so
    /// a past interval is judged against the seats it had then.
    pub fn record_pool_sizes(&mut self) -> Result<()> {
        let recorded = self.tx.current_pool_sizes()?;
        let licenses = self.licenses;
        // A license with a vendor: the seats its entitlements grant now,
        // narrowed by the file, so a report compares demand with what was
        // entitled.
        let mut changes: Vec<(&str, u32)> = licenses
            .iter()
            .map(|l| {
                (
                    l.id.as_str(),
                    super::effective(licenses, l, self.now).lic.policy.seats,
                )
            })
            .filter(|(id, seats)| recorded.get(*id) != Some(seats))
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
