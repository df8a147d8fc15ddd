//! The start-up warning for a primary without a synchronous standby: a
//! replica answers after `COMMIT`, and only a synchronous standby makes
//! that commit outlive the primary (`docs/src/replicas.md`).

use postgres::Client;

/// What the primary says about its standbys.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StandbyState {
    /// `synchronous_standby_names` is set.
    pub named: bool,
    /// `synchronous_commit` as this replica's sessions see it.
    pub commit_mode: String,
    /// Standbys `pg_stat_replication` reports `sync` or `quorum`.
    pub synchronous: i64,
    /// Standbys whose `sync_state` this role may not read (no
    /// `pg_read_all_stats`): they might be synchronous.
    pub hidden: i64,
}

/// Why acknowledged commits could be lost with the primary, if they could.
pub fn risk(state: &StandbyState) -> Option<&'static str> {
    if !state.named {
        return Some("no synchronous standby is configured (synchronous_standby_names is empty)");
    }
    if state.commit_mode == "local" {
        return Some("synchronous_commit = local: commits do not wait for the standby");
    }
    if state.synchronous == 0 && state.hidden == 0 {
        return Some("no synchronous standby is connected");
    }
    None
}

/// Read the primary's standby state.
pub fn read(client: &mut Client) -> Result<StandbyState, postgres::Error> {
    let row = client.query_one(
        "SELECT current_setting('synchronous_standby_names') <> '',
                current_setting('synchronous_commit'),
                count(*) FILTER (WHERE sync_state IN ('sync', 'quorum')),
                count(*) FILTER (WHERE sync_state IS NULL)
         FROM pg_stat_replication",
        &[],
    )?;
    Ok(StandbyState {
        named: row.get(0),
        commit_mode: row.get(1),
        synchronous: row.get(2),
        hidden: row.get(3),
    })
}

/// One warning line when the primary has no synchronous standby; a failed
/// look is only logged, as it says nothing about durability here.
pub fn warn_if_unprotected(client: &mut Client) {
    match read(client) {
        Ok(state) => {
            if let Some(why) = risk(&state) {
                tracing::warn!(
                    "PostgreSQL has no synchronous standby ({why}): a failover to an \
                     asynchronous or absent standby can lose the last acknowledged checkouts, \
                     heartbeats and releases; see docs/src/replicas.md, \"Failover to a \
                     synchronous standby\""
                );
            }
        }
        Err(e) => tracing::debug!("store: could not read the standbys' state: {e}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(named: bool, commit_mode: &str, synchronous: i64, hidden: i64) -> StandbyState {
        StandbyState {
            named,
            commit_mode: commit_mode.to_string(),
            synchronous,
            hidden,
        }
    }

    #[test]
    fn only_a_connected_synchronous_standby_that_commits_wait_for_is_safe() {
        assert!(risk(&state(false, "on", 0, 0)).is_some(), "none named");
        assert!(risk(&state(false, "on", 0, 1)).is_some(), "an async one");
        assert!(
            risk(&state(true, "local", 1, 0)).is_some(),
            "not waited for"
        );
        assert!(risk(&state(true, "on", 0, 0)).is_some(), "named, not there");
        assert_eq!(risk(&state(true, "on", 1, 0)), None);
        assert_eq!(risk(&state(true, "remote_apply", 1, 0)), None);
        assert_eq!(risk(&state(true, "on", 0, 1)), None, "may not see: no cry");
    }
}
