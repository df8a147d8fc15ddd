//! Durations as people type them (`10m`, `2h`, `3d`): the one parser for a
//! revoke's block (`--block` and the console's revoke dialog) and a borrow's
//! length (`--for`), and a block as the API's `block_s`.

use std::time::Duration;

/// A duration as typed (`10m`, `2h`): the one parser for `--block`, the
/// console's revoke modal and `borrow --for`.
pub(crate) fn parse_block(s: &str) -> Result<Duration, String> {
    leasehold_common::policy::parse_duration(s)
}

/// A block as the API's `block_s`, rounded up: a block is never shorter
/// than asked for.
pub(crate) fn block_secs(d: Duration) -> u64 {
    d.as_millis().div_ceil(1000) as u64
}
