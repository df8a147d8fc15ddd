//! Every statement a replica's writer runs, prepared once per connection
//! ([`Statements`]), grouped by what it serves, and the SQL of the shared
//! waiting line that the pool's reads (`pg/line.rs`) ask too.

use postgres::{Client, Statement};

use crate::store::lease_columns;

/// A waiter not refreshed for this long has left the line (`pg/line.rs`).
pub const STALE_MS: i64 = 5_000;

/// The database's clock, in milliseconds.
pub const DB_NOW: &str = "(extract(epoch FROM clock_timestamp()) * 1000)::bigint";

/// The license's (`$1`) live waiters (not seen for `$3` ms: gone), first
/// come first; with `$2`, only those ahead of that row. The handler's reads
/// (`pg/line.rs`) and the writer's (`pg/tx.rs`) ask the same.
pub fn waiters_ahead_sql() -> String {
    format!(
        "SELECT holder, fingerprint FROM waiters
         WHERE license_id = $1 AND ($2::bigint IS NULL OR id < $2)
           AND seen_ms >= {DB_NOW} - $3
         ORDER BY id"
    )
}

const LEASE_COLUMNS: &str = lease_columns!();

/// The live leases of one scope: `$1` license, `$2` threshold, then the
/// group, holder or mode (the others NULL).
const SCOPED: &str = "license_id = $1 AND expires_at >= $2
    AND ($3::text IS NULL OR grp = $3) AND ($4::text IS NULL OR holder = $4)
    AND ($5::integer IS NULL OR mode = $5)";

/// Every statement the writer runs, prepared once per connection, in this
/// order.
pub struct Statements {
    /// The batch's clock, the cluster's state and whether anyone waits in
    /// line (`pg/writer.rs`: `read_cluster`).
    pub read_cluster: Statement,
    pub(super) history: HistoryStatements,
    pub(super) checkout: CheckoutStatements,
    pub(super) counts: CountStatements,
    pub(super) leases: LeaseStatements,
    pub(super) batch: BatchStatements,
    pub(super) waiting_line: Statement,
    pub(super) prune_blocks: Statement,
    pub(super) prune_events: Statement,
    pub(super) extend_live: Statement,
    /// The webhook outbox and alert states (`pg/outbox/`).
    pub(super) outbox: super::outbox_statements::OutboxStatements,
}

impl Statements {
    pub fn prepare(client: &mut Client) -> Result<Self, postgres::Error> {
        let history = HistoryStatements::prepare(client)?;
        let read_cluster = client.prepare(&format!(
            "SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint, clock_ms,
                        last_alive_ms, licenses_version,
                        EXISTS (SELECT 1 FROM waiters WHERE seen_ms >= {DB_NOW} - {STALE_MS}),
                        entitlements_version
                 FROM cluster WHERE id = 1"
        ))?;
        Ok(Statements {
            read_cluster,
            history,
            checkout: CheckoutStatements::prepare(client)?,
            counts: CountStatements::prepare(client)?,
            leases: LeaseStatements::prepare(client)?,
            batch: BatchStatements::prepare(client)?,
            // The shared line as `pg/line.rs` reads it, in the batch.
            waiting_line: client.prepare(&waiters_ahead_sql())?,
            prune_blocks: client.prepare("DELETE FROM blocks WHERE until_ms <= $1")?,
            prune_events: client.prepare(
                "DELETE FROM events WHERE id <= (SELECT last_event_id FROM cluster WHERE id = 1) - $1",
            )?,
            extend_live: client.prepare(
                "UPDATE leases SET expires_at = $1
                 WHERE license_id = $2 AND expires_at >= $3 AND expires_at < $1
                   AND mode = $4::integer",
            )?,
            outbox: super::outbox_statements::OutboxStatements::prepare(client)?,
        })
    }
}

/// What a checkout's rules look up and write besides the counts: blocks,
/// Idempotency-Keys, a fingerprint's live lease.
pub(super) struct CheckoutStatements {
    pub(super) block_until: Statement,
    pub(super) set_block: Statement,
    pub(super) by_idempotency_key: Statement,
    pub(super) forget_idempotency_key: Statement,
    pub(super) live_by_fingerprint: Statement,
}

impl CheckoutStatements {
    fn prepare(client: &mut Client) -> Result<Self, postgres::Error> {
        let mut p = |sql: &str| client.prepare(sql);
        Ok(CheckoutStatements {
            block_until: p("SELECT until_ms FROM blocks
                WHERE license_id = $1 AND holder = $2 AND fingerprint = $3 AND until_ms > $4")?,
            set_block: p(
                "INSERT INTO blocks (license_id, holder, fingerprint, until_ms) VALUES ($1, $2, $3, $4)
                 ON CONFLICT (license_id, holder, fingerprint) DO UPDATE SET until_ms = excluded.until_ms",
            )?,
            by_idempotency_key: p(&format!(
                "SELECT {LEASE_COLUMNS} FROM leases WHERE license_id = $1 AND idempotency_key = $2"
            ))?,
            forget_idempotency_key: p(
                "UPDATE leases SET idempotency_key = NULL WHERE seat_id = $1",
            )?,
            live_by_fingerprint: p(&format!(
                "SELECT {LEASE_COLUMNS} FROM leases
                 WHERE license_id = $1 AND fingerprint = $2 AND expires_at >= $3
                 ORDER BY (mode = $5::integer AND holder <> $4), expires_at DESC,
                          seat_id COLLATE \"C\" DESC
                 LIMIT 1"
            ))?,
        })
    }
}

/// Live counts and earliest live expiries, of a license or of one scope.
pub(super) struct CountStatements {
    pub(super) live_count: Statement,
    pub(super) earliest_live: Statement,
    pub(super) live_count_scoped: Statement,
    pub(super) earliest_live_scoped: Statement,
}

impl CountStatements {
    fn prepare(client: &mut Client) -> Result<Self, postgres::Error> {
        let mut p = |sql: &str| client.prepare(sql);
        Ok(CountStatements {
            // The license's rows (`lease_rows`, kept by the triggers) less
            // its lapsed ones: the complement of the live predicate
            // (`expires_at >= $2`), so exactly the live count, without
            // visiting the live leases. One statement reads both terms in
            // one snapshot, and a trigger's update commits with the rows it
            // counts, so they agree.
            live_count: p(
                "SELECT coalesce((SELECT rows FROM lease_rows WHERE license_id = $1), 0)
                      - (SELECT count(*) FROM leases WHERE license_id = $1 AND expires_at < $2)",
            )?,
            earliest_live: p(
                "SELECT min(expires_at) FROM leases WHERE license_id = $1 AND expires_at >= $2",
            )?,
            // A group's, a holder's or a mode's seats: asked only of
            // licenses with seat policies, under the license's lock.
            live_count_scoped: p(&format!("SELECT count(*) FROM leases WHERE {SCOPED}"))?,
            earliest_live_scoped: p(&format!(
                "SELECT min(expires_at) FROM leases WHERE {SCOPED}"
            ))?,
        })
    }
}

/// One lease read, the batch's new leases written, leases deleted or
/// reaped.
pub(super) struct LeaseStatements {
    pub(super) lease: Statement,
    pub(super) insert_leases: Statement,
    pub(super) delete_lease: Statement,
    pub(super) reap_leases: Statement,
    pub(super) idle_seats: Statement,
}

impl LeaseStatements {
    fn prepare(client: &mut Client) -> Result<Self, postgres::Error> {
        let mut p = |sql: &str| client.prepare(sql);
        Ok(LeaseStatements {
            lease: p(&format!(
                "SELECT {LEASE_COLUMNS} FROM leases
                 WHERE seat_id = $1 AND ($2::text IS NULL OR license_id = $2)"
            ))?,
            insert_leases: p(
                "INSERT INTO leases (seat_id, license_id, holder, fingerprint, idempotency_key,
                                     checked_out_at, issued_at, expires_at, grp, mode,
                                     idle_since)
                 SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[],
                                      $5::text[], $6::bigint[], $7::bigint[], $8::bigint[],
                                      $9::text[], $10::int[], $11::bigint[])",
            )?,
            delete_lease: p(&format!(
                "DELETE FROM leases WHERE seat_id = $1 AND ($2::text IS NULL OR license_id = $2)
                 RETURNING {LEASE_COLUMNS}"
            ))?,
            // SKIP LOCKED: two replicas reaping at once split the work; a
            // lease is deleted, and its event written, exactly once.
            reap_leases: p("WITH victims AS (
                     SELECT seat_id FROM leases
                     WHERE license_id = $1 AND expires_at < $2
                     ORDER BY expires_at, seat_id LIMIT $3
                     FOR UPDATE SKIP LOCKED)
                 DELETE FROM leases l USING victims v WHERE l.seat_id = v.seat_id
                 RETURNING l.seat_id, l.license_id, l.holder, l.fingerprint, l.checked_out_at,
                           l.issued_at, l.expires_at, l.grp, l.mode, l.idle_since")?,
            // The reaper's idle seats, longest idle first, among the
            // license's live seats (by expiry; no index on `idle_since`, see
            // schema v12); asked only for licenses with an `idle_timeout`.
            idle_seats: p(&format!(
                "SELECT {LEASE_COLUMNS} FROM leases
                 WHERE license_id = $1 AND idle_since <= $3 AND mode = $2::integer
                   AND expires_at >= $4
                 ORDER BY idle_since, seat_id COLLATE \"C\" LIMIT $5"
            ))?,
        })
    }
}

/// What a batch sends for what it keeps (`pg/batch_state.rs`,
/// `pg/pending.rs`): its events at the commit, the leases and blocks it
/// reads up front, its renewals and ended idle periods.
pub(super) struct BatchStatements {
    pub(super) number_events: Statement,
    pub(super) blocks_of_licenses: Statement,
    pub(super) leases_by_seat: Statement,
    pub(super) renew_leases: Statement,
    pub(super) record_idle_periods: Statement,
}

impl BatchStatements {
    fn prepare(client: &mut Client) -> Result<Self, postgres::Error> {
        let mut p = |sql: &str| client.prepare(sql);
        Ok(BatchStatements {
            // At the commit, under the cluster row's lock: the batch's
            // events get the next ids (gap-free, visible in id order), and
            // the high-water mark and "alive" time move, in one statement;
            // it answers the id before the first (the outbox renders the
            // bodies of forwarded events with theirs).
            number_events: p("WITH numbered AS (
                     UPDATE cluster
                     SET last_event_id = last_event_id + cardinality($1::bigint[]),
                         clock_ms = greatest(clock_ms, $7),
                         last_alive_ms = greatest(last_alive_ms, $7)
                     WHERE id = 1
                     RETURNING last_event_id - cardinality($1::bigint[]) AS before),
                 inserted AS (
                     INSERT INTO events (id, at, kind, license_id, seat_id, holder, detail)
                     SELECT numbered.before + e.n, e.at, e.kind, e.license_id, e.seat_id,
                            e.holder, e.detail
                     FROM numbered, unnest($1::bigint[], $2::text[], $3::text[], $4::text[],
                                           $5::text[], $6::text[])
                         WITH ORDINALITY AS e(at, kind, license_id, seat_id, holder, detail, n))
                 SELECT before FROM numbered")?,
            blocks_of_licenses: p(
                "SELECT license_id, holder, fingerprint, until_ms FROM blocks
                 WHERE license_id = ANY($1::text[]) AND until_ms > $2",
            )?,
            leases_by_seat: p(&format!(
                "SELECT {LEASE_COLUMNS} FROM leases WHERE seat_id = ANY($1::text[])"
            ))?,
            renew_leases: p(
                "UPDATE leases l SET issued_at = u.issued_at, expires_at = u.expires_at,
                                     mode = u.mode, idle_since = u.idle_since
                 FROM unnest($1::text[], $2::bigint[], $3::bigint[], $4::int[], $5::bigint[])
                     AS u(seat_id, issued_at, expires_at, mode, idle_since)
                 WHERE l.seat_id = u.seat_id",
            )?,
            record_idle_periods: p(
                "INSERT INTO idle_periods (license_id, seat_id, from_ms, to_ms)
                 SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[], $4::bigint[])",
            )?,
        })
    }
}

/// The usage history's statements: sessions, denials, pool sizes.
pub(super) struct HistoryStatements {
    pub(super) record_sessions: Statement,
    pub(super) ended_session: Statement,
    pub(super) count_denials: Statement,
    pub(super) current_pool_sizes: Statement,
    pub(super) record_pool_size: Statement,
    pub(super) prune_sessions: Statement,
    pub(super) prune_denials: Statement,
    pub(super) prune_pool_sizes: Statement,
    pub(super) prune_idle_periods: Statement,
}

impl HistoryStatements {
    fn prepare(client: &mut Client) -> Result<Self, postgres::Error> {
        let mut p = |sql: &str| client.prepare(sql);
        Ok(HistoryStatements {
            record_sessions: p(
                "INSERT INTO sessions (seat_id, license_id, holder, fingerprint, started_at,
                                       ended_at, end_kind, grp, mode)
                 SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[],
                                      $5::bigint[], $6::bigint[], $7::text[], $8::text[],
                                      $9::int[])",
            )?,
            // A gone seat's recent end: the sessions that ended since `$3`
            // (a ttl's worth, not the history), newest first, read by end
            // (`sessions_by_end`, `sessions_by_license_end`).
            ended_session: p("SELECT end_kind FROM sessions
                 WHERE license_id = $1 AND ended_at >= $3 AND seat_id = $2
                 ORDER BY ended_at DESC LIMIT 1")?,
            // At the commit, a batch's denials, one element per row (each
            // key once): appends their count and 2-byte offsets to their
            // second's row (`store/denials.rs`, `pg/denial_batch.rs`).
            count_denials: p("INSERT INTO denials
                     (license_id, second_ms, holder, fingerprint, reason, count, offsets)
                 SELECT * FROM unnest($1::text[], $2::bigint[], $3::text[], $4::text[],
                                      $5::text[], $6::bigint[], $7::bytea[])
                 ON CONFLICT (license_id, second_ms, holder, fingerprint, reason) DO UPDATE
                 SET count = denials.count + excluded.count,
                     offsets = denials.offsets || excluded.offsets")?,
            current_pool_sizes: p(
                "SELECT DISTINCT ON (license_id) license_id, seats FROM pool_sizes
                 ORDER BY license_id, at DESC",
            )?,
            record_pool_size: p(
                "INSERT INTO pool_sizes (license_id, at, seats) VALUES ($1, $2, $3)
                 ON CONFLICT (license_id, at) DO UPDATE SET seats = excluded.seats",
            )?,
            prune_sessions: p("DELETE FROM sessions WHERE id IN (
                     SELECT id FROM sessions WHERE ended_at < $1 LIMIT $2)")?,
            prune_denials: p("DELETE FROM denials
                 WHERE (license_id, second_ms, holder, fingerprint, reason) IN (
                     SELECT license_id, second_ms, holder, fingerprint, reason FROM denials
                     WHERE second_ms < $1 LIMIT $2)")?,
            // A size in force at the cutoff stays: it judges what comes after.
            prune_pool_sizes: p("DELETE FROM pool_sizes WHERE (license_id, at) IN (
                     SELECT p.license_id, p.at FROM pool_sizes p
                     WHERE p.at < $1 AND EXISTS (
                         SELECT 1 FROM pool_sizes q
                         WHERE q.license_id = p.license_id AND q.at > p.at AND q.at <= $1)
                     LIMIT $2)")?,
            // No key of its own: rows are never updated, so their ctids
            // stay put while the statement deletes them (`idle_periods_by_end`).
            prune_idle_periods: p("DELETE FROM idle_periods WHERE ctid = ANY(ARRAY(
                     SELECT ctid FROM idle_periods WHERE to_ms < $1 LIMIT $2))")?,
        })
    }
}
