//! Store tests on a real store with a clock moved by hand: SQLite (a file in
//! a temp dir) or PostgreSQL (a fresh database on a throwaway cluster), as
//! `LEASEHOLD_TEST_STORE` says. Tests named `sqlite_*` are about SQLite
//! itself (schema version, WAL, the file) and run on SQLite either way.
//!
//! Every test opens its own database. Unless a test is about the outage rule,
//! the stall threshold is set far beyond any clock jump the test makes, so
//! moving the clock by hand is not mistaken for the server having been down.
//!
//! One test binary: this file holds the harness and the requests the tests
//! share, each module below one topic's tests.

#[path = "../support/mod.rs"]
mod support;

mod batches;
mod borrow;
mod commands;
mod events;
mod group_commit;
mod outage;
mod reap;
mod sqlite;

use std::sync::Arc;
use std::time::Duration;

use leasehold_common::api::{Event, EventKind};
use leasehold_common::{Licenses, Timestamp};
use leasehold_server::clock::{Clock, ManualClock};
use leasehold_server::licenses::LicensesHandle;
use leasehold_server::store::{
    CheckoutOutcome, CheckoutRequest, HeartbeatOutcome, LeaseRow, Store,
};
use support::{NO_STALL, TestDb, at};

/// `cad`: 3 seats, ttl 60 s, skew 5 s, grace 15 s.
/// `other`: a second license, to check that seat ids do not cross licenses.
/// `pool`: 50 seats for the group-commit race.
const LICENSES: &str = r#"
[[license]]
id = "cad"
key = "cad-key"
seats = 3
ttl = "60s"
skew = "5s"
reap_grace = "15s"

[[license]]
id = "other"
key = "other-key"
seats = 2
ttl = "30s"
skew = "2s"
reap_grace = "10s"

[[license]]
id = "pool"
key = "pool-key"
seats = 50
ttl = "60s"
skew = "5s"
reap_grace = "15s"
"#;

const TTL: Duration = Duration::from_secs(60);
const SKEW: Duration = Duration::from_secs(5);
const GRACE: Duration = Duration::from_secs(15);

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

struct Harness {
    db: TestDb,
    /// The licenses file the store was opened with (PostgreSQL publishes it
    /// again on every open).
    licenses_toml: String,
    clock: Arc<ManualClock>,
    licenses: LicensesHandle,
    store: Store,
}

impl Harness {
    fn new() -> Harness {
        Harness::with(LICENSES, NO_STALL)
    }

    /// On the store `LEASEHOLD_TEST_STORE` names.
    fn with(licenses_toml: &str, stall_threshold: Duration) -> Harness {
        Harness::on(TestDb::new(), licenses_toml, stall_threshold)
    }

    /// On SQLite whatever the environment says, for tests of SQLite itself.
    fn sqlite_only() -> Harness {
        Harness::on(TestDb::sqlite(), LICENSES, NO_STALL)
    }

    fn on(db: TestDb, licenses_toml: &str, stall_threshold: Duration) -> Harness {
        let clock = ManualClock::new(at(0));
        let licenses = LicensesHandle::new(Licenses::parse(licenses_toml).unwrap());
        let store = db
            .open(licenses_toml, &licenses, &clock, stall_threshold)
            .unwrap();
        Harness {
            db,
            licenses_toml: licenses_toml.to_string(),
            clock,
            licenses,
            store,
        }
    }

    fn now(&self) -> Timestamp {
        self.clock.now()
    }

    fn advance(&self, d: Duration) {
        self.clock.advance(d);
    }

    fn set(&self, t: Timestamp) {
        self.clock.set(t);
    }

    /// Close the store and open the same database again.
    async fn reopen(self, stall_threshold: Duration) -> Harness {
        self.store.close().await;
        let store = self
            .db
            .open(
                &self.licenses_toml,
                &self.licenses,
                &self.clock,
                stall_threshold,
            )
            .unwrap();
        Harness { store, ..self }
    }

    async fn finish(self) {
        self.store.close().await;
    }

    async fn checkout(&self, req: CheckoutRequest) -> CheckoutOutcome {
        self.store.checkout(req).await.unwrap()
    }

    /// A checkout that must be granted; returns the lease and `reused`.
    async fn grant(&self, req: CheckoutRequest) -> (LeaseRow, bool) {
        match self.checkout(req.clone()).await {
            CheckoutOutcome::Granted {
                lease,
                reused,
                overage: false,
            } => (lease, reused),
            other => panic!(
                "checkout {req:?} at {} was not granted: {other:?}",
                self.now()
            ),
        }
    }

    /// A checkout that must take a fresh seat.
    async fn fresh(&self, req: CheckoutRequest) -> LeaseRow {
        let (lease, reused) = self.grant(req).await;
        assert!(
            !reused,
            "expected a fresh seat, got a reused one: {lease:?}"
        );
        lease
    }

    async fn heartbeat(&self, license: &str, seat: &str) -> HeartbeatOutcome {
        self.store.heartbeat(license, seat).await.unwrap()
    }

    async fn live(&self, license: &str) -> u32 {
        self.store
            .live_counts()
            .await
            .unwrap()
            .into_iter()
            .find(|(id, _)| id == license)
            .map(|(_, n)| n.live)
            .unwrap_or_else(|| panic!("no live count for {license}"))
    }

    async fn seat(&self, seat: &str) -> Option<LeaseRow> {
        self.store.find_seat(seat).await.unwrap()
    }

    async fn events(&self) -> Vec<Event> {
        self.store.events_after(0, 10_000).await.unwrap()
    }

    async fn events_of(&self, kind: EventKind) -> Vec<Event> {
        self.events()
            .await
            .into_iter()
            .filter(|e| e.kind == kind)
            .collect()
    }
}

fn req(license: &str, holder: &str) -> CheckoutRequest {
    CheckoutRequest {
        license_id: license.to_string(),
        holder: holder.to_string(),
        fingerprint: None,
        idempotency_key: None,
        borrow: None,
        version: None,
    }
}

fn req_fp(license: &str, holder: &str, fingerprint: &str) -> CheckoutRequest {
    CheckoutRequest {
        fingerprint: Some(fingerprint.to_string()),
        ..req(license, holder)
    }
}

fn req_key(license: &str, holder: &str, key: &str) -> CheckoutRequest {
    CheckoutRequest {
        idempotency_key: Some(key.to_string()),
        ..req(license, holder)
    }
}

fn renewed(outcome: HeartbeatOutcome) -> LeaseRow {
    match outcome {
        HeartbeatOutcome::Renewed(row) => row,
        other => panic!("heartbeat was answered {other:?}"),
    }
}
