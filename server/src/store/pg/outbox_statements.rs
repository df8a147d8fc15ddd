//! The outbox's prepared statements (`pg/outbox/mod.rs` says what they do), kept
//! apart so the batch's statements can hold them without importing the
//! outbox.

use postgres::{Client, Statement};

/// The outbox's statements, prepared once per writer connection.
pub struct OutboxStatements {
    pub(super) insert: Statement,
    pub(super) claim: Statement,
    pub(super) record_attempt: Statement,
    pub(super) prune: Statement,
    pub(super) lock_alerts: Statement,
    pub(super) alert_states: Statement,
    pub(super) set_alert_state: Statement,
    pub(super) delete_alert_state: Statement,
    pub(super) denials_since: Statement,
}

impl OutboxStatements {
    pub fn prepare(client: &mut Client) -> std::result::Result<Self, postgres::Error> {
        let mut p = |sql: &str| client.prepare(sql);
        Ok(OutboxStatements {
            // In the order queued: `seq` follows it.
            insert: p(
                "INSERT INTO deliveries (id, webhook, type, license_id, created_at, body,
                                          status, next_attempt_at)
                 SELECT d.id, d.webhook, d.type, d.license_id, d.created_at, d.body,
                        'pending', d.created_at
                 FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::bigint[],
                             $6::text[])
                     WITH ORDINALITY AS d(id, webhook, type, license_id, created_at, body, n)
                 ORDER BY d.n",
            )?,
            claim: p("UPDATE deliveries SET claimed_until = $2
                 WHERE seq IN (
                     SELECT seq FROM deliveries
                     WHERE status = 'pending' AND next_attempt_at <= $1 AND claimed_until <= $1
                     ORDER BY next_attempt_at, seq LIMIT $3
                     FOR UPDATE SKIP LOCKED)
                 RETURNING id, webhook, body, attempts, created_at, next_attempt_at, seq")?,
            record_attempt: p("UPDATE deliveries
                 SET status = $2, attempts = $3, last_attempt_at = $4, next_attempt_at = $5,
                     last_error = $6, claimed_until = 0
                 WHERE id = $1 AND status = 'pending'")?,
            prune: p("DELETE FROM deliveries WHERE seq IN (
                     SELECT seq FROM deliveries
                     WHERE status IN ('delivered', 'failed') AND created_at < $1 LIMIT $2)")?,
            lock_alerts: p("SELECT pg_advisory_xact_lock($1::bigint)")?,
            alert_states: p(
                "SELECT alert, license_id, holding_since, firing_since FROM alert_states
                 ORDER BY alert",
            )?,
            set_alert_state: p(
                "INSERT INTO alert_states (alert, license_id, holding_since, firing_since)
                 VALUES ($1, $2, $3, $4)
                 ON CONFLICT (alert) DO UPDATE
                 SET license_id = excluded.license_id, holding_since = excluded.holding_since,
                     firing_since = excluded.firing_since",
            )?,
            delete_alert_state: p("DELETE FROM alert_states WHERE alert = $1")?,
            // Whole seconds after `$3` by their counts; `$3`'s own rows by
            // their offsets (the caller keeps those at or after `since`).
            denials_since: p(
                "SELECT coalesce(sum(count) FILTER (WHERE second_ms > $3), 0)::bigint,
                        coalesce(string_agg(offsets, ''::bytea) FILTER (WHERE second_ms = $3),
                                 ''::bytea)
                 FROM denials WHERE license_id = $1 AND reason = $2 AND second_ms >= $3",
            )?,
        })
    }
}
