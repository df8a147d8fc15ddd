//! Where the [`Store`] handle meets the two stores: opening it on either,
//! the calls only PostgreSQL answers, and [`StoreOptions`]' defaults (two
//! come from the SQLite checkpointer). Kept out of `handle.rs` because
//! `sqlite` and `pg` name the handle: the handle naming them back would be
//! an import cycle.

use std::path::Path;
use std::time::Duration;

use crate::clock::SharedClock;
use crate::licenses::LicensesHandle;

use super::error::StoreError;
use super::handle::Store;
use super::options::StoreOptions;
use super::{pg, sqlite};

impl Default for StoreOptions {
    fn default() -> Self {
        StoreOptions {
            stall_threshold: Duration::from_secs(3),
            max_batch: 1024,
            queue_capacity: 8192,
            event_retention: 100_000,
            history_retention: Duration::from_secs(400 * 24 * 3600),
            wal_restart_frames: sqlite::checkpoint::RESTART_FRAMES,
            checkpoint_every: sqlite::checkpoint::CHECKPOINT_EVERY,
        }
    }
}

impl Store {
    /// The SQLite store in the file `path` (see [`sqlite::open`]).
    pub fn open(
        path: &Path,
        licenses: LicensesHandle,
        clock: SharedClock,
        options: StoreOptions,
    ) -> Result<Store, StoreError> {
        sqlite::open(path, licenses, clock, options)
    }

    /// This replica on PostgreSQL, after [`pg::prepare`] (see [`pg::open`]).
    pub fn open_postgres(
        config: tokio_postgres::Config,
        clock: pg::writer::DecisionClock,
        start: pg::StartPoint,
        licenses: LicensesHandle,
        options: StoreOptions,
    ) -> Result<Store, StoreError> {
        let parts = pg::open(config, clock, start, licenses, options.clone());
        let mut store = Store::start(
            parts.writer,
            parts.backend,
            parts.events,
            parts.stats,
            &options,
        )?;
        store.shared_line = Some(parts.line);
        Ok(store)
    }

    /// PostgreSQL's waiting line, shared by every replica (`None` on
    /// SQLite, where the line is the server's own, in memory).
    pub fn shared_waiting_line(&self) -> Option<pg::line::SharedLine> {
        self.shared_line.clone()
    }

    /// Idle connections in the PostgreSQL read pool (`None` on SQLite).
    pub fn read_pool_idle(&self) -> Option<usize> {
        self.reads.read_pool_idle()
    }

    /// PostgreSQL: make `licenses` (the text of a licenses file) the
    /// cluster's policy, with one `config` event if it changed anything.
    /// `None` on SQLite, where the file is the policy.
    pub async fn publish_licenses(
        &self,
        text: String,
        licenses: leasehold_common::Licenses,
        why: &'static str,
    ) -> Option<Result<super::backend::Published, StoreError>> {
        let publish = self.reads.publish_licenses(text, licenses, why)?;
        Some(publish.await)
    }
}
