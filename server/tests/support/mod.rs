//! What the store tests (`store/`, `model.rs`, ...) share: a manual
//! clock's start, the database a test runs on (SQLite or PostgreSQL, by
//! `LEASEHOLD_TEST_STORE`), one license as TOML, and a store on a clock
//! moved by hand with plain checkouts ([`Harness`]).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use leasehold_common::{Licenses, Timestamp};
use leasehold_server::clock::{ManualClock, SharedClock};
use leasehold_server::licenses::LicensesHandle;
use leasehold_server::store::pg::writer::DecisionClock;
use leasehold_server::store::pg::{self, ReplicaIdentity};
use leasehold_server::store::{
    CheckoutOutcome, CheckoutRequest, LeaseRow, Store, StoreError, StoreOptions,
};
use leasehold_testkit::postgres::PgCluster;
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

/// One test's database: opened, closed and opened again as often as the
/// test likes, always the same data.
pub enum TestDb {
    /// `leasehold.db` in a temp dir.
    Sqlite(TempDir),
    /// A fresh database on the process's shared throwaway cluster.
    Postgres(String),
}

/// A PostgreSQL database is dropped with its test: the model test makes one
/// per case, hundreds per process, and CI's disk is not unbounded.
impl Drop for TestDb {
    fn drop(&mut self) {
        // Not while unwinding: a failing test keeps its database to look at
        // (and a second panic would abort the process).
        if let TestDb::Postgres(url) = self
            && !std::thread::panicking()
        {
            PgCluster::drop_shared_database_soon(url);
        }
    }
}

impl TestDb {
    /// The store `LEASEHOLD_TEST_STORE` names, as the end-to-end harness
    /// reads it (`tests/src/lib.rs::TestStore::from_env`): unset or `sqlite`
    /// is SQLite; `postgres` and `postgres-2` are PostgreSQL (a store test
    /// opens one store handle, so both mean one replica here).
    pub fn new() -> TestDb {
        match std::env::var("LEASEHOLD_TEST_STORE").as_deref() {
            Err(_) | Ok("") | Ok("sqlite") => TestDb::sqlite(),
            Ok("postgres") | Ok("postgres-2") => TestDb::postgres(),
            Ok(other) => {
                panic!("LEASEHOLD_TEST_STORE={other:?}: expected sqlite, postgres or postgres-2")
            }
        }
    }

    /// SQLite whatever the environment says: for tests about SQLite itself.
    pub fn sqlite() -> TestDb {
        TestDb::Sqlite(tempfile::tempdir().unwrap())
    }

    pub fn postgres() -> TestDb {
        TestDb::Postgres(PgCluster::shared().create_database())
    }

    /// The SQLite file; panics on PostgreSQL (only SQLite-only tests ask).
    pub fn sqlite_path(&self) -> PathBuf {
        match self {
            TestDb::Sqlite(dir) => dir.path().join("leasehold.db"),
            TestDb::Postgres(url) => panic!("{url} is not an SQLite file"),
        }
    }

    /// The store on this database, deciding on the manual clock, with
    /// default options but the stall threshold. `licenses_toml` is the text
    /// `licenses` was parsed from (PostgreSQL publishes it as the cluster's
    /// policy, as a replica does at start-up).
    pub fn open(
        &self,
        licenses_toml: &str,
        licenses: &LicensesHandle,
        clock: &Arc<ManualClock>,
        stall_threshold: Duration,
    ) -> Result<Store, StoreError> {
        let options = StoreOptions {
            stall_threshold,
            ..StoreOptions::default()
        };
        let clock: SharedClock = clock.clone();
        match self {
            TestDb::Sqlite(_) => Store::open(&self.sqlite_path(), licenses.clone(), clock, options),
            TestDb::Postgres(url) => {
                let config = pg::config(url)?;
                // Fixed values: every open of this database is the same replica.
                let identity = ReplicaIdentity {
                    signing_kid: "store-test-kid".into(),
                    admin_token_sha256: "store-test-token".into(),
                    viewer_token_sha256: "store-test-viewer-token".into(),
                    rotate_tokens: false,
                };
                let start = pg::prepare(&config, &identity, licenses_toml, &licenses.current())?;
                // Decisions on the manual clock (never behind the cluster's
                // high-water mark), so moving it works as on SQLite.
                Store::open_postgres(
                    config,
                    DecisionClock::Injected(clock),
                    start,
                    licenses.clone(),
                    options,
                )
            }
        }
    }
}

/// One `[[license]]` table with a policy in milliseconds (key `<id>-key`).
pub fn license_toml(id: &str, seats: u32, ttl_ms: u64, skew_ms: u64, grace_ms: u64) -> String {
    format!(
        "[[license]]\nid = \"{id}\"\nkey = \"{id}-key\"\nseats = {seats}\n\
         ttl = \"{ttl_ms}ms\"\nskew = \"{skew_ms}ms\"\nreap_grace = \"{grace_ms}ms\"\n"
    )
}

/// A store on `db` under a policy, deciding on a clock moved by hand.
#[allow(dead_code)] // not every test binary uses it
pub struct Harness {
    pub db: TestDb,
    pub clock: Arc<ManualClock>,
    pub licenses: LicensesHandle,
    pub store: Store,
}

#[allow(dead_code)]
impl Harness {
    /// The store on `db` under `licenses_toml`, the clock at T0.
    pub fn on(db: TestDb, licenses_toml: &str) -> Harness {
        let clock = ManualClock::new(at(0));
        let licenses = LicensesHandle::new(Licenses::parse(licenses_toml).unwrap());
        let store = db.open(licenses_toml, &licenses, &clock, NO_STALL).unwrap();
        Harness {
            db,
            clock,
            licenses,
            store,
        }
    }

    pub fn set(&self, t: Timestamp) {
        self.clock.set(t);
    }

    pub async fn checkout(&self, req: &CheckoutRequest) -> CheckoutOutcome {
        self.store.checkout(req.clone()).await.unwrap()
    }

    pub async fn granted(&self, req: &CheckoutRequest) -> LeaseRow {
        match self.checkout(req).await {
            CheckoutOutcome::Granted { lease, .. } => lease,
            other => panic!("{req:?}: {other:?}"),
        }
    }

    pub async fn finish(self) {
        self.store.close().await;
        drop(self.db);
    }
}

/// A plain checkout (no idempotency key, no borrow).
#[allow(dead_code)]
pub fn req(license: &str, holder: &str, fingerprint: Option<&str>) -> CheckoutRequest {
    CheckoutRequest {
        license_id: license.into(),
        holder: holder.into(),
        fingerprint: fingerprint.map(str::to_string),
        idempotency_key: None,
        borrow: None,
        version: None,
    }
}
