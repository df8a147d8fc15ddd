//! What the outbox tests share: the licenses file (three webhooks, an
//! alert of each kind), a store on the test's database with a clock moved
//! by hand, and the calls the tests make through it.

use std::sync::Arc;

use leasehold_common::Licenses;
use leasehold_common::alerts::{DeliveryStatus, DeliveryView};
use leasehold_common::api::EventKind;
use leasehold_server::clock::ManualClock;
use leasehold_server::licenses::LicensesHandle;
use leasehold_server::store::outbox::{DeliveriesQuery, DueDelivery};
use leasehold_server::store::{CheckoutOutcome, CheckoutRequest, LeaseRow, Store};

use crate::support::{NO_STALL, TestDb, at};

/// `ops` forwards revokes, `chat` (slack) revokes and reclaims, `quiet`
/// nothing. `cad` has no alert; `busy`, `pool` and `deny` one each.
pub const LICENSES: &str = r#"
[[webhook]]
name = "ops"
url = "http://127.0.0.1:9/ops"
secret = "0123456789abcdef"
events = ["revoke"]

[[webhook]]
name = "chat"
url = "http://127.0.0.1:9/chat"
secret = "0123456789abcdef"
format = "slack"
events = ["revoke", "reclaim"]

[[webhook]]
name = "quiet"
url = "http://127.0.0.1:9/quiet"
secret = "0123456789abcdef"

[[license]]
id = "cad"
key = "cad-key"
seats = 5
ttl = "1h"
skew = "5s"
reap_grace = "15s"

[[license]]
id = "busy"
key = "busy-key"
seats = 2
ttl = "1h"
skew = "5s"
reap_grace = "15s"

[[license.alert]]
name = "busy-usage"
when = "usage"
percent = 50
for = "10s"
webhooks = ["ops"]

[[license]]
id = "pool"
key = "pool-key"
seats = 1
ttl = "1h"
skew = "5s"
reap_grace = "15s"

[[license.alert]]
name = "pool-full"
when = "full"
for = "5s"

[[license]]
id = "deny"
key = "deny-key"
seats = 1
ttl = "1h"
skew = "5s"
reap_grace = "15s"

[[license.alert]]
name = "deny-refused"
when = "denials"
count = 2
within = "10s"
webhooks = ["chat"]
"#;

pub const DAY_MS: i64 = 24 * 3600 * 1000;

pub struct Harness {
    pub db: TestDb,
    pub clock: Arc<ManualClock>,
    pub licenses: LicensesHandle,
    pub store: Store,
}

impl Harness {
    pub fn new() -> Harness {
        Harness::on(TestDb::new())
    }

    pub fn on(db: TestDb) -> Harness {
        let clock = ManualClock::new(at(0));
        let licenses = LicensesHandle::new(Licenses::parse(LICENSES).unwrap());
        let store = db.open(LICENSES, &licenses, &clock, NO_STALL).unwrap();
        Harness {
            db,
            clock,
            licenses,
            store,
        }
    }

    pub async fn reopen(self) -> Harness {
        self.store.close().await;
        let store = self
            .db
            .open(LICENSES, &self.licenses, &self.clock, NO_STALL)
            .unwrap();
        Harness { store, ..self }
    }

    pub async fn finish(self) {
        self.store.close().await;
    }

    /// The clock at `ms` after T0.
    pub fn set(&self, ms: i64) {
        self.clock.set(at(ms));
    }

    pub async fn checkout(&self, license: &str, holder: &str) -> CheckoutOutcome {
        let req = CheckoutRequest {
            license_id: license.into(),
            holder: holder.into(),
            fingerprint: None,
            idempotency_key: None,
            borrow: None,
            version: None,
        };
        self.store.checkout(req).await.unwrap()
    }

    pub async fn granted(&self, license: &str, holder: &str) -> LeaseRow {
        match self.checkout(license, holder).await {
            CheckoutOutcome::Granted { lease, .. } => lease,
            other => panic!("{license}/{holder}: {other:?}"),
        }
    }

    pub async fn refused(&self, license: &str, holder: &str) {
        let outcome = self.checkout(license, holder).await;
        assert!(
            matches!(outcome, CheckoutOutcome::Full { .. }),
            "{outcome:?}"
        );
    }

    pub async fn release(&self, seat: &LeaseRow) {
        assert!(
            self.store
                .release(&seat.license_id, &seat.seat_id)
                .await
                .unwrap()
        );
    }

    /// An alive tick (alerts are evaluated) and the details of the `alert`
    /// events it wrote.
    pub async fn tick(&self) -> Vec<String> {
        let before = self.alert_events().await.len();
        self.store.tick().await.unwrap();
        self.alert_events().await.split_off(before)
    }

    pub async fn alert_events(&self) -> Vec<String> {
        let events = self.store.events_after(0, 10_000).await.unwrap();
        events
            .into_iter()
            .filter(|e| e.kind == EventKind::Alert)
            .map(|e| e.detail.unwrap())
            .collect()
    }

    pub async fn page(&self, q: DeliveriesQuery) -> Vec<(i64, DeliveryView)> {
        let rows = self.store.deliveries_page(q).await.unwrap();
        rows.into_iter().map(|r| (r.seq, r.view)).collect()
    }

    /// Every stored delivery, newest first.
    pub async fn deliveries(&self) -> Vec<DeliveryView> {
        let q = DeliveriesQuery {
            limit: 10_000,
            ..DeliveriesQuery::default()
        };
        self.page(q).await.into_iter().map(|(_, v)| v).collect()
    }

    pub async fn delivery(&self, id: &str) -> DeliveryView {
        let all = self.deliveries().await;
        all.into_iter().find(|d| d.id == id).unwrap()
    }

    pub async fn claim(&self) -> Vec<DueDelivery> {
        self.store.claim_deliveries(8).await.unwrap()
    }

    pub async fn attempt(&self, due: &DueDelivery, result: Result<(), &str>) -> DeliveryStatus {
        let result = result.map_err(str::to_string);
        let record = self.store.record_attempt(due.clone(), result).await;
        record.unwrap().status
    }
}

/// Run statements on the test's database beside the store.
pub fn exec(db: &TestDb, sqlite: &str, postgres: &str) {
    match db {
        TestDb::Sqlite(_) => {
            let c = rusqlite::Connection::open(db.sqlite_path()).unwrap();
            c.execute_batch(sqlite).unwrap();
        }
        TestDb::Postgres(url) => {
            let (url, sql) = (url.clone(), postgres.to_string());
            // The blocking client runs its own runtime: not on this one.
            std::thread::spawn(move || {
                let mut c = postgres::Client::connect(&url, postgres::NoTls).unwrap();
                c.batch_execute(&sql).unwrap();
            })
            .join()
            .unwrap();
        }
    }
}

pub fn webhooks_of(ds: &[DeliveryView]) -> Vec<&str> {
    let mut names: Vec<&str> = ds.iter().map(|d| d.webhook.as_str()).collect();
    names.sort();
    names
}
