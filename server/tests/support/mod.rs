//! What the store tests (`store.rs`, `model.rs`) share: a manual clock's
//! start, a store opened on a file of a temp dir, and one license as TOML.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use leasehold_common::Timestamp;
use leasehold_server::clock::{ManualClock, SharedClock};
use leasehold_server::licenses::LicensesHandle;
use leasehold_server::store::{Store, StoreError, StoreOptions};
use tempfile::TempDir;

/// 2027-01-15T08:00:00Z, a round start for the manual clock.
pub const T0: i64 = 1_800_000_000_000;

/// Far beyond any jump of the clock the tests make by hand, so no jump is
/// taken for an outage (the outage rule has its own tests).
pub const NO_STALL: Duration = Duration::from_secs(10 * 365 * 24 * 3600);

pub fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// `offset_ms` after T0.
pub fn at(offset_ms: i64) -> Timestamp {
    Timestamp::from_millis(T0 + offset_ms)
}

pub fn db_path(dir: &TempDir) -> PathBuf {
    dir.path().join("leasehold.db")
}

/// The store on `path`, on the manual clock, with default options but the
/// stall threshold.
pub fn open_store(
    path: &Path,
    licenses: &LicensesHandle,
    clock: &Arc<ManualClock>,
    stall_threshold: Duration,
) -> Result<Store, StoreError> {
    let clock: SharedClock = clock.clone();
    Store::open(
        path,
        licenses.clone(),
        clock,
        StoreOptions {
            stall_threshold,
            ..StoreOptions::default()
        },
    )
}

/// One `[[license]]` table with a policy in milliseconds (key `<id>-key`).
pub fn license_toml(id: &str, seats: u32, ttl_ms: u64, skew_ms: u64, grace_ms: u64) -> String {
    format!(
        "[[license]]\nid = \"{id}\"\nkey = \"{id}-key\"\nseats = {seats}\n\
         ttl = \"{ttl_ms}ms\"\nskew = \"{skew_ms}ms\"\nreap_grace = \"{grace_ms}ms\"\n"
    )
}
