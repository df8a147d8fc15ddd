//! How a store is set up: its tuning ([`StoreOptions`]; the defaults are in
//! `open.rs`, beside `Store::open`, as two of them come from the SQLite
//! checkpointer) and which store it is ([`StoreKind`]).

use std::time::Duration;

/// Tuning that tests change; production uses the defaults.
#[derive(Debug, Clone)]
pub struct StoreOptions {
    /// A gap this long between two writer wake-ups (process paused, VM frozen,
    /// clock jump, or the server being down) is treated as an outage: leases
    /// that were live when it began get one TTL from its end to be renewed.
    pub stall_threshold: Duration,
    /// Most commands committed in one transaction.
    pub max_batch: usize,
    /// Commands that may wait for the writer before callers are held back.
    pub queue_capacity: usize,
    /// Events kept in the log; older ones are pruned by the reaper.
    pub event_retention: i64,
    /// Usage history (sessions, denials, pool sizes) older than this is
    /// pruned, in bounded batches.
    pub history_retention: Duration,
    /// A WAL with more frames than this is started over, even under writes
    /// without a pause (see [`checkpoint`](super::sqlite::checkpoint)).
    pub wal_restart_frames: i64,
    /// How often the checkpoint thread copies the WAL into the database when
    /// it is not far behind.
    pub checkpoint_every: Duration,
}

/// Which store a server runs on (for `/metrics` and the logs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreKind {
    Sqlite,
    Postgres,
}

impl StoreKind {
    pub fn as_str(self) -> &'static str {
        match self {
            StoreKind::Sqlite => "sqlite",
            StoreKind::Postgres => "postgres",
        }
    }
}
