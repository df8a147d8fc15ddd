//! Versioned schema migrations, tracked in `PRAGMA user_version`.
//!
//! Each entry of [`MIGRATIONS`] moves the schema from version `i` to `i + 1`
//! and runs in its own transaction. Never edit a released migration: append.

use rusqlite::Connection;

use crate::store::StoreError;

/// Migration `i` takes the schema from version `i` to `i + 1`.
const MIGRATIONS: &[&str] = &[
    // v1: leases, re-checkout blocks, the event log, server metadata.
    r#"
    CREATE TABLE leases (
        seat_id         TEXT PRIMARY KEY,
        license_id      TEXT NOT NULL,
        holder          TEXT NOT NULL,
        fingerprint     TEXT,
        idempotency_key TEXT,
        checked_out_at  INTEGER NOT NULL,
        issued_at       INTEGER NOT NULL,
        expires_at      INTEGER NOT NULL
    ) WITHOUT ROWID;
    -- Counting live seats and reaping are range scans on this index.
    CREATE INDEX leases_by_license_expiry ON leases (license_id, expires_at);
    CREATE INDEX leases_by_fingerprint ON leases (license_id, fingerprint)
        WHERE fingerprint IS NOT NULL;
    CREATE UNIQUE INDEX leases_by_idempotency_key ON leases (license_id, idempotency_key)
        WHERE idempotency_key IS NOT NULL;

    -- fingerprint is '' for "no fingerprint" so the primary key stays unique.
    CREATE TABLE blocks (
        license_id  TEXT NOT NULL,
        holder      TEXT NOT NULL,
        fingerprint TEXT NOT NULL,
        until_ms    INTEGER NOT NULL,
        PRIMARY KEY (license_id, holder, fingerprint)
    ) WITHOUT ROWID;

    -- AUTOINCREMENT: ids are never reused, even after pruning, so an SSE
    -- client's Last-Event-ID can never point at a different event.
    CREATE TABLE events (
        id         INTEGER PRIMARY KEY AUTOINCREMENT,
        at         INTEGER NOT NULL,
        kind       TEXT NOT NULL,
        license_id TEXT,
        seat_id    TEXT,
        holder     TEXT,
        detail     TEXT
    );

    CREATE TABLE meta (
        key   TEXT PRIMARY KEY,
        value INTEGER NOT NULL
    ) WITHOUT ROWID;
    "#,
    // v2: usage history. A session is one seat from checkout to its end;
    // `ended_at`/`end_kind` stay NULL while the lease is in the table (a
    // lapsed, not yet reaped seat's end is read from the lease itself).
    r#"
    CREATE TABLE sessions (
        seat_id     TEXT PRIMARY KEY,
        license_id  TEXT NOT NULL,
        holder      TEXT NOT NULL,
        fingerprint TEXT,
        started_at  INTEGER NOT NULL,
        ended_at    INTEGER,
        end_kind    TEXT
    ) WITHOUT ROWID;
    CREATE INDEX sessions_by_license_start ON sessions (license_id, started_at);
    CREATE INDEX sessions_by_end ON sessions (ended_at) WHERE ended_at IS NOT NULL;
    -- Seats checked out before history was kept: their sessions start at
    -- their checkout.
    INSERT INTO sessions (seat_id, license_id, holder, fingerprint, started_at)
        SELECT seat_id, license_id, holder, fingerprint, checked_out_at FROM leases;

    -- Refused checkouts (409 and 403 answers), exactly, per license and second.
    CREATE TABLE denials (
        license_id TEXT NOT NULL,
        second_ms  INTEGER NOT NULL,
        count      INTEGER NOT NULL,
        PRIMARY KEY (license_id, second_ms)
    ) WITHOUT ROWID;

    -- Each license's pool size from `at` on.
    CREATE TABLE pool_sizes (
        license_id TEXT NOT NULL,
        at         INTEGER NOT NULL,
        seats      INTEGER NOT NULL,
        PRIMARY KEY (license_id, at)
    ) WITHOUT ROWID;
    "#,
    // v3: the web dashboard. Sign-in sessions (only the SHA-256 of a
    // session id is stored), and indexes for the seats list's keyset pages
    // (sort key, seat_id), so a page costs what it holds, not the table.
    r#"
    CREATE TABLE ui_sessions (
        id_sha256    TEXT PRIMARY KEY,
        role         TEXT NOT NULL,
        created_at   INTEGER NOT NULL,
        last_seen_at INTEGER NOT NULL,
        expires_at   INTEGER NOT NULL
    ) WITHOUT ROWID;
    CREATE INDEX ui_sessions_by_expiry ON ui_sessions (expires_at);
    CREATE INDEX ui_sessions_by_last_seen ON ui_sessions (last_seen_at);

    CREATE INDEX leases_by_license_checkout ON leases (license_id, checked_out_at, seat_id);
    CREATE INDEX leases_by_holder ON leases (holder, seat_id);
    CREATE INDEX leases_by_expiry ON leases (expires_at, seat_id);
    CREATE INDEX leases_by_checkout ON leases (checked_out_at, seat_id);
    "#,
    // v4: usage-history reads that cost their range, not the history before
    // it. A range's sessions are those that started in it and those that
    // started before it and ran into it: ended after its start (a range of
    // the license's ends) or not ended (the open ones). The index by start
    // also holds what the usage sweep reads (and `seat_id` right after
    // `started_at`, the sessions pages' keyset order), so a year of usage
    // never visits the table.
    r#"
    DROP INDEX sessions_by_license_start;
    CREATE INDEX sessions_by_license_time
        ON sessions (license_id, started_at, seat_id, ended_at, holder);
    CREATE INDEX sessions_by_license_end ON sessions (license_id, ended_at, started_at)
        WHERE ended_at IS NOT NULL;
    CREATE INDEX sessions_open ON sessions (license_id, started_at) WHERE ended_at IS NULL;
    "#,
    // v5: sessions keyed by insertion order (rowid), not by the random seat
    // id, so a checkout appends its session to the table's last page
    // instead of dirtying a scattered one. A lease names its session
    // (`session_id`), so release, revoke and reap end it by rowid; nothing
    // looks a session up by seat id, so that has no index. The rows keep
    // their start order; the v4 indexes are rebuilt as they were.
    r#"
    CREATE TABLE sessions_v5 (
        id          INTEGER PRIMARY KEY,
        seat_id     TEXT NOT NULL,
        license_id  TEXT NOT NULL,
        holder      TEXT NOT NULL,
        fingerprint TEXT,
        started_at  INTEGER NOT NULL,
        ended_at    INTEGER,
        end_kind    TEXT
    );
    INSERT INTO sessions_v5 (seat_id, license_id, holder, fingerprint, started_at, ended_at, end_kind)
        SELECT seat_id, license_id, holder, fingerprint, started_at, ended_at, end_kind
        FROM sessions ORDER BY started_at, seat_id;
    ALTER TABLE leases ADD COLUMN session_id INTEGER;
    -- Only for this statement: a lease's open session by seat id.
    CREATE INDEX sessions_v5_open_seat ON sessions_v5 (seat_id) WHERE ended_at IS NULL;
    UPDATE leases SET session_id = (
        SELECT id FROM sessions_v5 s WHERE s.seat_id = leases.seat_id AND s.ended_at IS NULL);
    DROP INDEX sessions_v5_open_seat;
    DROP TABLE sessions;
    ALTER TABLE sessions_v5 RENAME TO sessions;
    CREATE INDEX sessions_by_end ON sessions (ended_at) WHERE ended_at IS NOT NULL;
    CREATE INDEX sessions_by_license_time
        ON sessions (license_id, started_at, seat_id, ended_at, holder);
    CREATE INDEX sessions_by_license_end ON sessions (license_id, ended_at, started_at)
        WHERE ended_at IS NOT NULL;
    CREATE INDEX sessions_open ON sessions (license_id, started_at) WHERE ended_at IS NULL;

    -- The seats list by expiry or checkout time across licenses merges each
    -- license's rows from the indexes by (license, expiry) and (license,
    -- checkout), so these two only cost writes (a heartbeat moved its
    -- lease in the one by expiry).
    DROP INDEX leases_by_expiry;
    DROP INDEX leases_by_checkout;
    "#,
    // v6: an open session is its lease row. A checkout writes only the
    // lease; the session row is written once, when the seat leaves the
    // table (release, revoke, reap), with how it ended. Reads take the
    // ended sessions from `sessions` and the open ones from `leases`
    // (started at `checked_out_at`, by `leases_by_license_checkout`). The
    // open session rows were copies of their leases' fields.
    r#"
    DELETE FROM sessions WHERE ended_at IS NULL;
    DROP INDEX sessions_open;
    ALTER TABLE leases DROP COLUMN session_id;
    "#,
    // v7: seat policies. A seat records the group it counts for (`grp`,
    // fixed at its grant) and how it is kept (`mode`: 0 by heartbeats,
    // 1 lingering after a release, 2 borrowed); a session keeps its group.
    // Counts per group, holder and mode come from the writer's live index.
    r#"
    ALTER TABLE leases ADD COLUMN grp TEXT;
    ALTER TABLE leases ADD COLUMN mode INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE sessions ADD COLUMN grp TEXT;
    "#,
    // v8: borrowing. A session records how its seat was kept when it ended
    // (`mode`, as on `leases`), so history tells borrowed seat-hours apart;
    // the usage sweep's index carries it, so the sweep still reads only
    // the index.
    r#"
    ALTER TABLE sessions ADD COLUMN mode INTEGER NOT NULL DEFAULT 0;
    DROP INDEX sessions_by_license_time;
    CREATE INDEX sessions_by_license_time
        ON sessions (license_id, started_at, seat_id, ended_at, holder, mode);
    "#,
    // v9: a dashboard session records a fingerprint of the token that
    // signed it in (`token_fp`), so changing that token ends it. Sessions
    // from before have none and end at the upgrade.
    r#"
    ALTER TABLE ui_sessions ADD COLUMN token_fp TEXT NOT NULL DEFAULT '';
    "#,
    // v10: idle reclaim. A lease keeps since when its client reports its
    // user idle (`idle_since`, NULL: active); the reaper finds the seats
    // idle past the timeout in a partial index, so leases that never report
    // idleness are not in it and cost it nothing. Idle periods of at least
    // a minute are history, keyed by insertion order like `sessions`: read
    // per seat (a session's `idle_s`), per license by start (those that
    // began in a usage range) and by end (those that began before it and
    // ran into it), and pruned by end.
    r#"
    ALTER TABLE leases ADD COLUMN idle_since INTEGER;
    CREATE INDEX leases_idle ON leases (license_id, idle_since, seat_id)
        WHERE idle_since IS NOT NULL;

    CREATE TABLE idle_periods (
        id         INTEGER PRIMARY KEY,
        license_id TEXT NOT NULL,
        seat_id    TEXT NOT NULL,
        from_ms    INTEGER NOT NULL,
        to_ms      INTEGER NOT NULL
    );
    CREATE INDEX idle_periods_by_seat ON idle_periods (seat_id, from_ms, to_ms);
    CREATE INDEX idle_periods_by_license_from ON idle_periods (license_id, from_ms, to_ms);
    CREATE INDEX idle_periods_by_license_to ON idle_periods (license_id, to_ms, from_ms);
    CREATE INDEX idle_periods_by_end ON idle_periods (to_ms);
    "#,
    // v11: every counted denial with its reason, holder and fingerprint
    // ('' for none), to the millisecond. One row per (license, second,
    // holder, fingerprint, reason) holds the denials' millisecond offsets
    // in that second, 2 bytes each (`store/denials.rs`), so a client
    // refused 1,000 times a second costs one row of about 2 KB a second
    // (BENCHMARKS.md), not 1,000 rows, and every instant stays exact.
    // Pruned by second. The v2 rows knew only a count per second: they
    // keep it, as `full` denials of an unknown holder ('') at the start of
    // their second. True denials look up a holder's grants of a license by
    // start (`sessions_by_license_holder`: one more index entry per
    // session row, written once when the seat leaves the table; open
    // sessions are found by `leases_by_holder`, so a lease, renewed by
    // every heartbeat, gets no new index).
    r#"
    CREATE TABLE denials_v11 (
        license_id  TEXT NOT NULL,
        second_ms   INTEGER NOT NULL,
        holder      TEXT NOT NULL,
        fingerprint TEXT NOT NULL,
        reason      TEXT NOT NULL,
        count       INTEGER NOT NULL,
        offsets     BLOB NOT NULL,
        PRIMARY KEY (license_id, second_ms, holder, fingerprint, reason)
    ) WITHOUT ROWID;
    INSERT INTO denials_v11
        SELECT license_id, second_ms, '', '', 'full', count, zeroblob(count * 2) FROM denials;
    DROP TABLE denials;
    ALTER TABLE denials_v11 RENAME TO denials;
    CREATE INDEX denials_by_second ON denials (second_ms);
    CREATE INDEX sessions_by_license_holder ON sessions (license_id, holder, started_at);
    "#,
    // v12: alerts and webhooks. The outbox: each delivery is written in the
    // transaction of the event or alert transition that causes it, its
    // body rendered once (every attempt sends those bytes); `seq` (the
    // rowid) is the deliveries list's cursor, newest first. The worker
    // finds due ones in a partial index of the pending; the admin views
    // read a webhook's by `seq`; pruning finds finished ones by age. Alert
    // states make each transition happen once, across restarts.
    r#"
    CREATE TABLE deliveries (
        seq             INTEGER PRIMARY KEY,
        id              TEXT NOT NULL UNIQUE,
        webhook         TEXT NOT NULL,
        type            TEXT NOT NULL,
        license_id      TEXT,
        created_at      INTEGER NOT NULL,
        body            TEXT NOT NULL,
        status          TEXT NOT NULL,
        attempts        INTEGER NOT NULL DEFAULT 0,
        next_attempt_at INTEGER NOT NULL,
        claimed_until   INTEGER NOT NULL DEFAULT 0,
        last_attempt_at INTEGER,
        last_error      TEXT
    );
    CREATE INDEX deliveries_due ON deliveries (next_attempt_at) WHERE status = 'pending';
    CREATE INDEX deliveries_by_webhook ON deliveries (webhook, seq);
    CREATE INDEX deliveries_by_status ON deliveries (status, created_at);

    CREATE TABLE alert_states (
        alert         TEXT PRIMARY KEY,
        license_id    TEXT NOT NULL,
        holding_since INTEGER,
        firing_since  INTEGER
    ) WITHOUT ROWID;
    "#,
    // v13: what the store remembers of each vendor's entitlement id
    // (`store/entitlement_ids.rs`, the same table on PostgreSQL).
    crate::store::entitlement_ids::TABLE_SQL,
];

/// The schema version this build writes.
pub const CURRENT_VERSION: i64 = MIGRATIONS.len() as i64;

/// Bring the database up to [`CURRENT_VERSION`]. Refuses a database written
/// by a newer build rather than guessing at its schema.
pub fn migrate(conn: &mut Connection) -> Result<(), StoreError> {
    let version: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    if version < 0 {
        // Not a version any leaseholdd writes; `version as usize` below would
        // wrap and silently skip every migration.
        return Err(StoreError::SchemaNotOurs { version });
    }
    if version > CURRENT_VERSION {
        return Err(StoreError::SchemaTooNew {
            version,
            supported: CURRENT_VERSION,
        });
    }
    migrate_to(conn, CURRENT_VERSION)
}

/// Migrate up to `target` only: how the migration tests make the database
/// an older build wrote.
pub fn migrate_to(conn: &mut Connection, target: i64) -> Result<(), StoreError> {
    let version: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    let (from, to) = (
        version.max(0) as usize,
        target.clamp(0, CURRENT_VERSION) as usize,
    );
    for (i, sql) in MIGRATIONS.iter().enumerate().take(to).skip(from) {
        let tx = conn.transaction()?;
        tx.execute_batch(sql)?;
        tx.pragma_update(None, "user_version", i as i64 + 1)?;
        tx.commit()?;
    }
    Ok(())
}
