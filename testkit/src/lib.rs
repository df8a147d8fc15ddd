//! Test harness shared by `server/tests` (store tests on both stores) and
//! `tests/` (end-to-end suites): [`postgres::PgCluster`], a throwaway
//! PostgreSQL cluster the tests start themselves, so `cargo test` needs no
//! running service and no network; and [`what_if::replay`], the what-if
//! read literally one millisecond at a time, the reference its replay is
//! tested against.

pub mod postgres;
pub mod what_if;
