//! Test harness shared by `server/tests` (store tests on both stores) and
//! `tests/` (end-to-end suites): [`postgres::PgCluster`], a throwaway
//! PostgreSQL cluster the tests start themselves, so `cargo test` needs no
//! running service and no network.

pub mod postgres;
