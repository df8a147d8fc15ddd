//! Which store (SQLite or PostgreSQL) the suites run their servers on.

/// Which store the end-to-end suites run on, from `LEASEHOLD_TEST_STORE`:
/// `sqlite` (the default), `postgres` (one replica) or `postgres-2` (two
/// replicas sharing a data dir, behind a loopback round-robin proxy). The
/// PostgreSQL cluster is the harness's own (`leasehold_testkit`), one
/// database per server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TestStore {
    Sqlite,
    Postgres { replicas: usize },
}

impl TestStore {
    pub fn from_env() -> TestStore {
        match std::env::var("LEASEHOLD_TEST_STORE").as_deref() {
            Err(_) | Ok("") | Ok("sqlite") => TestStore::Sqlite,
            Ok("postgres") => TestStore::Postgres { replicas: 1 },
            Ok("postgres-2") => TestStore::Postgres { replicas: 2 },
            Ok(other) => {
                panic!("LEASEHOLD_TEST_STORE={other:?}: expected sqlite, postgres or postgres-2")
            }
        }
    }
}
