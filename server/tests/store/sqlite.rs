//! SQLite's own: the schema version, and files it refuses.

use std::path::Path;

use leasehold_common::Licenses;
use leasehold_server::clock::ManualClock;
use leasehold_server::licenses::LicensesHandle;
use leasehold_server::store::{SCHEMA_VERSION, StoreError};

use crate::support::{NO_STALL, TestDb, at};
use crate::{Harness, LICENSES, req};

// ---------------------------------------------------------------------------
// Migrations and bad files (SQLite's own: `user_version`, WAL, the file)
// ---------------------------------------------------------------------------

fn user_version(path: &Path) -> i64 {
    let conn = rusqlite::Connection::open(path).unwrap();
    conn.query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap()
}

#[tokio::test]
async fn sqlite_a_fresh_file_gets_the_current_schema_version() {
    let h = Harness::sqlite_only();
    let version = user_version(&h.db.sqlite_path());
    assert_eq!(version, SCHEMA_VERSION);
    assert!(version >= 1, "the schema was created");
    let journal: String = rusqlite::Connection::open(h.db.sqlite_path())
        .unwrap()
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .unwrap();
    assert_eq!(journal.to_ascii_lowercase(), "wal");
    // Reopening an up-to-date file migrates nothing and loses nothing.
    let a = h.fresh(req("cad", "alice")).await;
    let h = h.reopen(NO_STALL).await;
    assert_eq!(user_version(&h.db.sqlite_path()), SCHEMA_VERSION);
    assert_eq!(h.seat(&a.seat_id).await.unwrap(), a);
    h.finish().await;
}

fn open_err(db: &TestDb) -> StoreError {
    let clock = ManualClock::new(at(0));
    let licenses = LicensesHandle::new(Licenses::parse(LICENSES).unwrap());
    match db.open(LICENSES, &licenses, &clock, NO_STALL) {
        Ok(_) => panic!("{} should have been refused", db.sqlite_path().display()),
        Err(e) => e,
    }
}

#[tokio::test]
async fn sqlite_a_newer_schema_is_refused() {
    let db = TestDb::sqlite();
    let path = db.sqlite_path();
    {
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.execute_batch("CREATE TABLE future (x INTEGER);")
            .unwrap();
        conn.pragma_update(None, "user_version", SCHEMA_VERSION + 1)
            .unwrap();
    }
    let err = open_err(&db);
    assert!(matches!(err, StoreError::SchemaTooNew { .. }), "{err:?}");
    assert!(err.to_string().contains("newer"), "{err}");
    assert_eq!(user_version(&path), SCHEMA_VERSION + 1, "left as it was");
}

#[tokio::test]
async fn sqlite_a_negative_schema_version_is_refused() {
    let db = TestDb::sqlite();
    let path = db.sqlite_path();
    {
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.pragma_update(None, "user_version", -1).unwrap();
    }
    let err = open_err(&db);
    assert!(matches!(err, StoreError::SchemaNotOurs { .. }), "{err:?}");
    assert!(err.to_string().contains("schema version -1"), "{err}");
}

#[tokio::test]
async fn sqlite_a_file_that_is_not_sqlite_is_refused() {
    let db = TestDb::sqlite();
    let path = db.sqlite_path();
    let junk = "this is not a database, it is a shopping list\n".repeat(200);
    std::fs::write(&path, &junk).unwrap();
    let err = open_err(&db);
    let text = err.to_string();
    assert!(!text.is_empty());
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        junk,
        "the file is not overwritten"
    );
}
