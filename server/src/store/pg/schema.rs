//! The PostgreSQL schema, created and migrated by `leaseholdd` itself.
//!
//! Versions are tracked in `leasehold_schema`. Migrating happens in one
//! transaction under an advisory lock, so two replicas starting at once
//! take turns (the second finds the work done). A schema newer than this
//! build is refused rather than guessed at. Never edit a released migration:
//! append.

use postgres::Client;

use super::PgStartError;

/// Migration `i` takes the schema from version `i` to `i + 1`.
const MIGRATIONS: &[&str] = &[
    // v1: the cluster row, leases, blocks, the event log, the waiting line.
    r#"
    -- One row: what every replica shares besides the leases.
    CREATE TABLE cluster (
        id                 INTEGER PRIMARY KEY CHECK (id = 1),
        -- High-water mark of every decision time (ms): the database clock may
        -- step back on a failover; decisions never do.
        clock_ms           BIGINT NOT NULL,
        -- When the cluster last made progress (ms), for the outage rule; 0
        -- before the first batch.
        last_alive_ms      BIGINT NOT NULL,
        -- The last event id handed out: ids come from this row, updated in
        -- the writing transaction, so they are gap-free and become visible
        -- in order (a bigserial commits out of order).
        last_event_id      BIGINT NOT NULL,
        -- The policy in force: the licenses file last loaded by any replica.
        licenses_toml      TEXT,
        licenses_version   BIGINT NOT NULL,
        -- Every replica must sign with the same key and accept the same
        -- admin token.
        signing_kid        TEXT,
        admin_token_sha256 TEXT
    );
    INSERT INTO cluster VALUES (1, 0, 0, 0, NULL, 0, NULL, NULL);

    CREATE TABLE leases (
        seat_id         TEXT PRIMARY KEY,
        license_id      TEXT NOT NULL,
        holder          TEXT NOT NULL,
        fingerprint     TEXT,
        idempotency_key TEXT,
        checked_out_at  BIGINT NOT NULL,
        issued_at       BIGINT NOT NULL,
        expires_at      BIGINT NOT NULL
    );
    CREATE INDEX leases_by_license_expiry ON leases (license_id, expires_at);
    CREATE INDEX leases_by_fingerprint ON leases (license_id, fingerprint, expires_at)
        WHERE fingerprint IS NOT NULL;
    CREATE UNIQUE INDEX leases_by_idempotency_key ON leases (license_id, idempotency_key)
        WHERE idempotency_key IS NOT NULL;

    -- fingerprint is '' for "no fingerprint" so the primary key stays unique.
    CREATE TABLE blocks (
        license_id  TEXT NOT NULL,
        holder      TEXT NOT NULL,
        fingerprint TEXT NOT NULL,
        until_ms    BIGINT NOT NULL,
        PRIMARY KEY (license_id, holder, fingerprint)
    );

    CREATE TABLE events (
        id         BIGINT PRIMARY KEY,
        at         BIGINT NOT NULL,
        kind       TEXT NOT NULL,
        license_id TEXT,
        seat_id    TEXT,
        holder     TEXT,
        detail     TEXT
    );

    -- The waiting line of `?wait=` checkouts, one line across replicas:
    -- first come (lowest id) first served. A replica refreshes `seen_ms` of
    -- its waiters; a waiter not refreshed for a while belonged to a replica
    -- that died, and no longer counts.
    CREATE TABLE waiters (
        id         BIGSERIAL PRIMARY KEY,
        license_id TEXT NOT NULL,
        replica    TEXT NOT NULL,
        seen_ms    BIGINT NOT NULL
    );
    CREATE INDEX waiters_by_license ON waiters (license_id, id);
    "#,
    // v2: usage history (the same records as SQLite's v2).
    r#"
    CREATE TABLE sessions (
        seat_id     TEXT PRIMARY KEY,
        license_id  TEXT NOT NULL,
        holder      TEXT NOT NULL,
        fingerprint TEXT,
        started_at  BIGINT NOT NULL,
        ended_at    BIGINT,
        end_kind    TEXT
    );
    CREATE INDEX sessions_by_license_start ON sessions (license_id, started_at);
    CREATE INDEX sessions_by_end ON sessions (ended_at) WHERE ended_at IS NOT NULL;
    INSERT INTO sessions (seat_id, license_id, holder, fingerprint, started_at)
        SELECT seat_id, license_id, holder, fingerprint, checked_out_at FROM leases;

    CREATE TABLE denials (
        license_id TEXT NOT NULL,
        second_ms  BIGINT NOT NULL,
        count      BIGINT NOT NULL,
        PRIMARY KEY (license_id, second_ms)
    );

    CREATE TABLE pool_sizes (
        license_id TEXT NOT NULL,
        at         BIGINT NOT NULL,
        seats      INTEGER NOT NULL,
        PRIMARY KEY (license_id, at)
    );
    "#,
    // v3: the web dashboard (the same as SQLite's v3), and the viewer
    // token's SHA-256 that every replica must share.
    r#"
    CREATE TABLE ui_sessions (
        id_sha256    TEXT PRIMARY KEY,
        role         TEXT NOT NULL,
        created_at   BIGINT NOT NULL,
        last_seen_at BIGINT NOT NULL,
        expires_at   BIGINT NOT NULL
    );
    CREATE INDEX ui_sessions_by_expiry ON ui_sessions (expires_at);
    CREATE INDEX ui_sessions_by_last_seen ON ui_sessions (last_seen_at);

    CREATE INDEX leases_by_license_checkout ON leases (license_id, checked_out_at, seat_id);
    CREATE INDEX leases_by_holder ON leases (holder, seat_id);
    CREATE INDEX leases_by_expiry ON leases (expires_at, seat_id);
    CREATE INDEX leases_by_checkout ON leases (checked_out_at, seat_id);

    ALTER TABLE cluster ADD COLUMN viewer_token_sha256 TEXT;
    "#,
    // v4: usage-history reads that cost their range (the same indexes as
    // SQLite's v4).
    r#"
    DROP INDEX sessions_by_license_start;
    CREATE INDEX sessions_by_license_time
        ON sessions (license_id, started_at, seat_id, ended_at, holder);
    CREATE INDEX sessions_by_license_end ON sessions (license_id, ended_at, started_at)
        WHERE ended_at IS NOT NULL;
    CREATE INDEX sessions_open ON sessions (license_id, started_at) WHERE ended_at IS NULL;
    "#,
    // v5: sessions keyed by insertion order, leases naming their session
    // (the same shape as SQLite's v5): a new session's key goes at the end
    // of the primary key's index, not at a random place, and ending one is
    // a lookup by that key.
    r#"
    CREATE TABLE sessions_v5 (
        id          BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        seat_id     TEXT NOT NULL,
        license_id  TEXT NOT NULL,
        holder      TEXT NOT NULL,
        fingerprint TEXT,
        started_at  BIGINT NOT NULL,
        ended_at    BIGINT,
        end_kind    TEXT
    );
    INSERT INTO sessions_v5 (seat_id, license_id, holder, fingerprint, started_at, ended_at, end_kind)
        SELECT seat_id, license_id, holder, fingerprint, started_at, ended_at, end_kind
        FROM sessions ORDER BY started_at, seat_id;
    ALTER TABLE leases ADD COLUMN session_id BIGINT;
    UPDATE leases SET session_id = s.id FROM sessions_v5 s
        WHERE s.seat_id = leases.seat_id AND s.ended_at IS NULL;
    DROP TABLE sessions;
    ALTER TABLE sessions_v5 RENAME TO sessions;
    ALTER INDEX sessions_v5_pkey RENAME TO sessions_pkey;
    ALTER SEQUENCE sessions_v5_id_seq RENAME TO sessions_id_seq;
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
    // v6: an open session is its lease row; the session row is written
    // once, when the seat leaves the table (the same as SQLite's v6).
    r#"
    DELETE FROM sessions WHERE ended_at IS NULL;
    DROP INDEX sessions_open;
    ALTER TABLE leases DROP COLUMN session_id;
    "#,
    // v7: seat policies (the same as SQLite's v7). Counts per group and
    // holder are asked under the license's lock, and only of licenses
    // with groups or caps: they read the license's live leases
    // (`leases_by_license_expiry`), as the pool count does.
    r#"
    ALTER TABLE leases ADD COLUMN grp TEXT;
    ALTER TABLE leases ADD COLUMN mode INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE sessions ADD COLUMN grp TEXT;
    "#,
    // v8: who waits in line, so a freed seat goes to the first waiter the
    // rules let in (a group's reserved seat to a member, past a non-member
    // ahead of it). Rows of older replicas name nobody ('') and are served
    // as a holder in no group would be.
    r#"
    ALTER TABLE waiters ADD COLUMN holder TEXT NOT NULL DEFAULT '';
    ALTER TABLE waiters ADD COLUMN fingerprint TEXT;
    "#,
    // v9: borrowing (the same as SQLite's v8): a session records how its
    // seat was kept when it ended, and the usage sweep's index carries it.
    r#"
    ALTER TABLE sessions ADD COLUMN mode INTEGER NOT NULL DEFAULT 0;
    DROP INDEX sessions_by_license_time;
    CREATE INDEX sessions_by_license_time
        ON sessions (license_id, started_at, seat_id, ended_at, holder, mode);
    "#,
    // v10: the token fingerprint of a dashboard session (the same as
    // SQLite's v9).
    r#"
    ALTER TABLE ui_sessions ADD COLUMN token_fp TEXT NOT NULL DEFAULT '';
    "#,
    // v11: a pool count that does not scan the live leases. `lease_rows`
    // holds how many rows each license has in `leases`, kept by statement
    // triggers in the very transactions that insert and delete them (so it
    // is exact whatever writes the table); a license's live seats are its
    // rows minus its lapsed-but-unreaped ones, which the reaper keeps few
    // and `leases_by_license_expiry` finds without visiting the live ones.
    r#"
    CREATE TABLE lease_rows (
        license_id TEXT PRIMARY KEY,
        rows       BIGINT NOT NULL
    );
    INSERT INTO lease_rows SELECT license_id, count(*) FROM leases GROUP BY license_id;

    CREATE FUNCTION lease_rows_added() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        INSERT INTO lease_rows (license_id, rows)
            SELECT license_id, count(*) FROM added GROUP BY license_id
            ON CONFLICT (license_id) DO UPDATE SET rows = lease_rows.rows + excluded.rows;
        RETURN NULL;
    END $$;
    CREATE FUNCTION lease_rows_removed() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        UPDATE lease_rows r SET rows = r.rows - gone.n
            FROM (SELECT license_id, count(*) AS n FROM removed GROUP BY license_id) gone
            WHERE r.license_id = gone.license_id;
        RETURN NULL;
    END $$;
    CREATE TRIGGER leases_added AFTER INSERT ON leases
        REFERENCING NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION lease_rows_added();
    CREATE TRIGGER leases_removed AFTER DELETE ON leases
        REFERENCING OLD TABLE AS removed FOR EACH STATEMENT EXECUTE FUNCTION lease_rows_removed();
    -- A lease never moves to another license; refuse what would break the count.
    CREATE FUNCTION lease_license_fixed() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        RAISE EXCEPTION 'a lease cannot move to another license';
    END $$;
    CREATE TRIGGER leases_license_fixed BEFORE UPDATE OF license_id ON leases
        FOR EACH ROW WHEN (OLD.license_id IS DISTINCT FROM NEW.license_id)
        EXECUTE FUNCTION lease_license_fixed();
    "#,
    // v12: idle reclaim (the same records as SQLite's). A lease keeps since
    // when its user has been idle (NULL: active). No index on it: a
    // heartbeat is never a HOT update (`expires_at` is indexed), so every
    // index of `leases` gets an entry per renewal, and a partial index of
    // idle seats cost each idle-reporting heartbeat one more (a few percent
    // in BENCHMARKS.md); the reaper instead reads a license's live
    // seats by `leases_by_license_expiry`, and only for licenses with an
    // `idle_timeout`. Idle
    // periods are history, written when they end: summed per session (by
    // seat), swept per license over a range (by end, then start: the
    // periods that end after `from`), pruned by end. The `lease_rows`
    // triggers name no column but `license_id`: a new column leaves them be.
    r#"
    ALTER TABLE leases ADD COLUMN idle_since BIGINT;

    CREATE TABLE idle_periods (
        license_id TEXT NOT NULL,
        seat_id    TEXT NOT NULL,
        from_ms    BIGINT NOT NULL,
        to_ms      BIGINT NOT NULL
    );
    CREATE INDEX idle_periods_by_seat ON idle_periods (license_id, seat_id, from_ms, to_ms);
    CREATE INDEX idle_periods_by_license_time ON idle_periods (license_id, to_ms, from_ms);
    CREATE INDEX idle_periods_by_end ON idle_periods (to_ms);
    "#,
    // v13: denials with their reason, holder and fingerprint, to the
    // millisecond (the same rows as SQLite's v11: a row per license,
    // second, holder, fingerprint and reason, the offsets 2 bytes each;
    // the v2 counts kept as `full` denials of an unknown holder at the
    // start of their second), pruned by second. A batch's denials are
    // written at its commit as one upsert per row (`denial_batch.rs`), so a
    // storm-second's row is rewritten once per batch, not per denial
    // (measured in BENCHMARKS.md). A holder's grants by start: one
    // more index entry per
    // session row (written once, when the seat leaves); open sessions by
    // `leases_by_holder`, so no heartbeat pays for a new index.
    r#"
    CREATE TABLE denials_v13 (
        license_id  TEXT NOT NULL,
        second_ms   BIGINT NOT NULL,
        holder      TEXT NOT NULL,
        fingerprint TEXT NOT NULL,
        reason      TEXT NOT NULL,
        count       BIGINT NOT NULL,
        offsets     BYTEA NOT NULL,
        PRIMARY KEY (license_id, second_ms, holder, fingerprint, reason)
    );
    INSERT INTO denials_v13
        SELECT license_id, second_ms, '', '', 'full', count,
               decode(repeat('0000', count::int), 'hex')
        FROM denials;
    DROP TABLE denials;
    ALTER TABLE denials_v13 RENAME TO denials;
    ALTER INDEX denials_v13_pkey RENAME TO denials_pkey;
    CREATE INDEX denials_by_second ON denials (second_ms);
    CREATE INDEX sessions_by_license_holder ON sessions (license_id, holder, started_at);
    "#,
    // v14: the webhook outbox and the alert states (`pg/outbox/`). A
    // delivery is inserted by the transaction that causes it, its body
    // rendered once; `seq` is the deliveries list's cursor (newest first),
    // `claimed_until` keeps other replicas off a delivery being attempted.
    // Due ones are found by the partial index, a webhook's list by
    // (webhook, seq), finished ones pruned by (status, created_at).
    r#"
    CREATE TABLE deliveries (
        seq             BIGSERIAL PRIMARY KEY,
        id              TEXT NOT NULL UNIQUE,
        webhook         TEXT NOT NULL,
        type            TEXT NOT NULL,
        license_id      TEXT,
        created_at      BIGINT NOT NULL,
        body            TEXT NOT NULL,
        status          TEXT NOT NULL,
        attempts        INTEGER NOT NULL DEFAULT 0,
        next_attempt_at BIGINT NOT NULL,
        claimed_until   BIGINT NOT NULL DEFAULT 0,
        last_attempt_at BIGINT,
        last_error      TEXT
    );
    CREATE INDEX deliveries_due ON deliveries (next_attempt_at) WHERE status = 'pending';
    CREATE INDEX deliveries_by_webhook ON deliveries (webhook, seq);
    CREATE INDEX deliveries_by_status ON deliveries (status, created_at);

    CREATE TABLE alert_states (
        alert         TEXT PRIMARY KEY,
        license_id    TEXT NOT NULL,
        holding_since BIGINT,
        firing_since  BIGINT
    );
    "#,
    // v15: what the store remembers of each vendor's entitlement id
    // (`store/entitlement_ids.rs`, the same table on SQLite).
    crate::store::entitlement_ids::TABLE_SQL,
    // v16: the cluster's entitlements (`store/entitlement_set.rs`): the
    // judged set last published by a replica whose scan changed it, taken
    // by every writer when its version moves; and the `entitlement` events
    // that happen at an instant rather than at a publication (a term's
    // grace and end), each recorded once by whichever replica sees it
    // first.
    r#"
    ALTER TABLE cluster ADD COLUMN entitlements_json TEXT;
    ALTER TABLE cluster ADD COLUMN entitlements_version BIGINT NOT NULL DEFAULT 0;
    CREATE TABLE entitlement_events_seen (key TEXT PRIMARY KEY);
    "#,
];

/// The schema version this build writes.
pub const CURRENT_VERSION: i32 = MIGRATIONS.len() as i32;

/// Any constant: the advisory lock that serializes migrations.
const MIGRATION_LOCK: i64 = 0x6c65_6173_6568_6f6c; // "leasehol"

/// Bring the database up to [`CURRENT_VERSION`].
pub fn migrate(client: &mut Client) -> Result<(), PgStartError> {
    migrate_to(client, CURRENT_VERSION)
}

/// Migrate up to `target` only: how the migration tests make the database
/// an older build wrote.
pub fn migrate_to(client: &mut Client, target: i32) -> Result<(), PgStartError> {
    let mut tx = client.transaction()?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])?;
    // Checked rather than CREATE … IF NOT EXISTS, which logs a NOTICE on
    // every start but the first.
    let exists: bool = tx
        .query_one("SELECT to_regclass('leasehold_schema') IS NOT NULL", &[])?
        .get(0);
    if !exists {
        tx.batch_execute("CREATE TABLE leasehold_schema (version INTEGER NOT NULL)")?;
    }
    let version: Option<i32> = tx
        .query_opt("SELECT version FROM leasehold_schema", &[])?
        .map(|r| r.get(0));
    let version = match version {
        Some(v) => v,
        None => {
            tx.execute("INSERT INTO leasehold_schema VALUES (0)", &[])?;
            0
        }
    };
    if !(0..=CURRENT_VERSION).contains(&version) {
        return Err(PgStartError::SchemaTooNew {
            found: version,
            supported: CURRENT_VERSION,
        });
    }
    let target = target.clamp(0, CURRENT_VERSION) as usize;
    for (i, sql) in MIGRATIONS
        .iter()
        .enumerate()
        .take(target)
        .skip(version as usize)
    {
        tx.batch_execute(sql)?;
        tx.execute(
            "UPDATE leasehold_schema SET version = $1",
            &[&(i as i32 + 1)],
        )?;
    }
    tx.commit()?;
    Ok(())
}

/// Refuse a server that could lose an acknowledged seat in a crash.
pub fn check_durability(client: &mut Client) -> Result<(), PgStartError> {
    for setting in ["fsync", "synchronous_commit"] {
        let value: String = client.query_one(&format!("SHOW {setting}"), &[])?.get(0);
        if value == "off" {
            return Err(PgStartError::NotDurable { setting });
        }
    }
    Ok(())
}
