//! The PostgreSQL store: any number of interchangeable replicas on one
//! database.
//!
//! Each replica runs the same writer as on SQLite (one thread, group
//! commit, the rules of [`super::rules`]) over [`writer::PgBatches`];
//! everything else ([`PgBackend`]: reads, dashboard sign-ins, the shared
//! waiting line in [`line`]) uses a small async pool ([`pool`]); an event
//! follower ([`follower`]) feeds this replica's SSE streams with every
//! replica's events, in id order.
//! The writer uses the synchronous `postgres` client (the blocking facade of
//! `tokio-postgres`) because the rules are synchronous code on a thread of
//! their own, exactly as on SQLite; everything async uses `tokio-postgres`.

mod backend;
mod batch_state;
mod denial_batch;
pub(crate) mod denials;
mod entitlement_ids;
pub mod follower;
mod history;
pub mod line;
mod live_counts;
mod outbox;
mod outbox_batch;
mod outbox_statements;
mod pending;
pub mod pool;
mod rows;
pub mod schema;
mod seat_query;
mod sign_ins;
mod standby;
mod statements;
mod tx;
mod what_if;
pub mod writer;

use crate::store::backend::Published;
use std::time::Duration;

use leasehold_common::Licenses;
use postgres::Client;
use sha2::{Digest, Sha256};
use tokio_postgres::NoTls;

use super::StoreError;
pub use backend::{PgBackend, open};

/// The `LISTEN`/`NOTIFY` channel that wakes event followers.
pub const EVENTS_CHANNEL: &str = "leasehold_events";

/// Why a replica refuses to start.
#[derive(Debug, thiserror::Error)]
pub enum PgStartError {
    #[error("--database is not a PostgreSQL URL: {0}")]
    BadUrl(tokio_postgres::Error),
    #[error("PostgreSQL: {0}")]
    Database(#[from] postgres::Error),
    #[error(
        "database schema version {found} is newer than this leaseholdd understands ({supported})"
    )]
    SchemaTooNew { found: i32, supported: i32 },
    #[error(
        "PostgreSQL runs with {setting} off, so an acknowledged seat could be lost in a crash; \
         turn it on"
    )]
    NotDurable { setting: &'static str },
    #[error(
        "this replica's signing key (kid {ours}) differs from the cluster's (kid {cluster}): copy \
         signing.key from a running replica's data dir into this replica's data dir"
    )]
    SigningKeyMismatch { ours: String, cluster: String },
    #[error(
        "this replica's admin token differs from the cluster's: copy admin.token from a running \
         replica's data dir into this replica's data dir (or set the same LEASEHOLD_ADMIN_TOKEN); \
         to change the cluster's token, start with --rotate-tokens"
    )]
    AdminTokenMismatch,
    #[error(
        "this replica's viewer token differs from the cluster's: copy viewer.token from a running \
         replica's data dir into this replica's data dir (or set the same LEASEHOLD_VIEWER_TOKEN); \
         to change the cluster's token, start with --rotate-tokens"
    )]
    ViewerTokenMismatch,
    #[error("the cluster's licenses policy is unreadable: {0}")]
    ClusterPolicy(String),
}

/// Connection settings: the URL, plus the timeouts that keep a replica
/// frozen inside a transaction from holding license locks for long, and a
/// dead network from hanging a request.
pub fn config(url: &str) -> Result<tokio_postgres::Config, PgStartError> {
    let mut config: tokio_postgres::Config = url.parse().map_err(PgStartError::BadUrl)?;
    config
        .application_name("leaseholdd")
        .connect_timeout(Duration::from_secs(3))
        .keepalives(true)
        .keepalives_idle(Duration::from_secs(5))
        .options(
            // A replica frozen inside a transaction loses it (and its license
            // locks) after 3 s; a lock wait outlasts that, so the replica that
            // waited gets the lock rather than a 503.
            "-c lock_timeout=8s -c statement_timeout=10s \
             -c idle_in_transaction_session_timeout=3s",
        );
    Ok(config)
}

pub fn connect_sync(config: &postgres::Config) -> Result<Client, postgres::Error> {
    config.connect(NoTls)
}

/// The advisory lock key of a license: the first 8 bytes of its id's
/// SHA-256 (a collision only makes two licenses take turns).
pub fn advisory_key(license_id: &str) -> i64 {
    let digest = Sha256::digest(license_id.as_bytes());
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    i64::from_be_bytes(first)
}

/// What a replica proves at start-up that it shares with the cluster.
#[derive(Debug, Clone)]
pub struct ReplicaIdentity {
    /// The public signing key's id (RFC 7638 thumbprint).
    pub signing_kid: String,
    /// SHA-256 of the admin token, hex.
    pub admin_token_sha256: String,
    /// SHA-256 of the viewer token, hex.
    pub viewer_token_sha256: String,
    /// This replica's tokens replace the cluster's (`--rotate-tokens`)
    /// instead of being refused when they differ.
    pub rotate_tokens: bool,
}

/// Where a replica starts from.
#[derive(Debug, Clone, Copy)]
pub struct StartPoint {
    /// The cluster's policy version after this replica published its file.
    pub licenses_version: i64,
    /// The last event id: the follower publishes what comes after it.
    pub last_event_id: i64,
}

/// Start-up on a blocking thread: check durability (and warn without a
/// synchronous standby), migrate, check (or
/// record, on the first replica) the shared key and token, and publish this
/// replica's licenses file as the cluster's policy.
pub fn prepare(
    config: &tokio_postgres::Config,
    identity: &ReplicaIdentity,
    licenses_toml: &str,
    licenses: &Licenses,
) -> Result<StartPoint, PgStartError> {
    let config = postgres::Config::from(config.clone());
    let identity = identity.clone();
    let (text, licenses) = (licenses_toml.to_string(), licenses.clone());
    // The synchronous client runs its own runtime: keep it off this one.
    std::thread::spawn(move || -> Result<StartPoint, PgStartError> {
        let mut client = connect_sync(&config)?;
        schema::check_durability(&mut client)?;
        standby::warn_if_unprotected(&mut client);
        schema::migrate(&mut client)?;
        check_identity(&mut client, &identity)?;
        // Read before publishing, so this replica's own config event reaches
        // its followers too.
        let last_event_id: i64 = client
            .query_one("SELECT last_event_id FROM cluster WHERE id = 1", &[])?
            .get(0);
        let published = publish_licenses_sync(&mut client, &text, &licenses, "start-up")?;
        Ok(StartPoint {
            licenses_version: published.version,
            last_event_id,
        })
    })
    .join()
    .unwrap_or_else(|_| {
        Err(PgStartError::ClusterPolicy(
            "the start-up thread panicked".into(),
        ))
    })
}

fn check_identity(client: &mut Client, ours: &ReplicaIdentity) -> Result<(), PgStartError> {
    let mut tx = client.transaction()?;
    let row = tx.query_one(
        "SELECT signing_kid, admin_token_sha256, viewer_token_sha256
         FROM cluster WHERE id = 1 FOR UPDATE",
        &[],
    )?;
    let (kid, token, viewer): (Option<String>, Option<String>, Option<String>) =
        (row.get(0), row.get(1), row.get(2));
    if let Some(cluster) = kid.filter(|k| *k != ours.signing_kid) {
        return Err(PgStartError::SigningKeyMismatch {
            ours: ours.signing_kid.clone(),
            cluster,
        });
    }
    let admin_changed = token.is_some_and(|t| t != ours.admin_token_sha256);
    let viewer_changed = viewer.is_some_and(|t| t != ours.viewer_token_sha256);
    if admin_changed && !ours.rotate_tokens {
        return Err(PgStartError::AdminTokenMismatch);
    }
    if viewer_changed && !ours.rotate_tokens {
        return Err(PgStartError::ViewerTokenMismatch);
    }
    if admin_changed || viewer_changed {
        // Sign-ins made with the old token end on every replica that
        // runs with the new one (their fingerprints no longer match).
        tracing::warn!(
            "--rotate-tokens: this replica's {} token(s) replace the cluster's; restart every \
             other replica with the new token(s)",
            match (admin_changed, viewer_changed) {
                (true, true) => "admin and viewer",
                (true, false) => "admin",
                _ => "viewer",
            }
        );
    }
    tx.execute(
        "UPDATE cluster SET signing_kid = $1, admin_token_sha256 = $2, viewer_token_sha256 = $3
         WHERE id = 1",
        &[
            &ours.signing_kid,
            &ours.admin_token_sha256,
            &ours.viewer_token_sha256,
        ],
    )?;
    tx.commit()?;
    Ok(())
}

/// Make `licenses` the cluster's policy, unless it already is: one `config`
/// event per change, however many replicas load the same file.
pub fn publish_licenses_sync(
    client: &mut Client,
    text: &str,
    licenses: &Licenses,
    why: &str,
) -> Result<Published, PgStartError> {
    let mut tx = client.transaction()?;
    let row = tx.query_one(
        "SELECT licenses_toml, licenses_version FROM cluster WHERE id = 1 FOR UPDATE",
        &[],
    )?;
    let (current, version): (Option<String>, i64) = (row.get(0), row.get(1));
    let current = current
        .map(|t| Licenses::parse(&t))
        .transpose()
        .map_err(|e| PgStartError::ClusterPolicy(e.to_string()))?;
    if current.as_ref() == Some(licenses) {
        tx.commit()?;
        return Ok(Published {
            version,
            changes: Vec::new(),
        });
    }
    // The first replica's file is the cluster's first policy: no event, as
    // a single server logs none for the file it starts with.
    let changes = match &current {
        Some(current) => {
            let changes = current.describe_changes(licenses);
            tracing::warn!(
                "this replica's licenses file differs from the cluster's policy ({}); \
                 the last one loaded wins: this one",
                changes.join("; ")
            );
            changes
        }
        None => Vec::new(),
    };
    if current.is_some() {
        record_config_event(&mut tx, &format!("{why}: {}", changes.join("; ")))?;
    }
    let version: i64 = tx
        .query_one(
            "UPDATE cluster SET licenses_toml = $1, licenses_version = licenses_version + 1
             WHERE id = 1 RETURNING licenses_version",
            &[&text],
        )?
        .get(0);
    tx.execute(&format!("NOTIFY {EVENTS_CHANNEL}"), &[])?;
    tx.commit()?;
    Ok(Published { version, changes })
}

/// An event not tied to a seat (`$1` detail, `$2` kind) at the cluster's
/// time, with the next event id, as a batch numbers its events.
pub(super) const RECORD_EVENT_SQL: &str = "WITH id AS (
         UPDATE cluster SET last_event_id = last_event_id + 1 WHERE id = 1
         RETURNING last_event_id)
     INSERT INTO events (id, at, kind, license_id, seat_id, holder, detail)
     SELECT last_event_id, greatest((extract(epoch FROM clock_timestamp()) * 1000)::bigint,
                                    (SELECT clock_ms FROM cluster WHERE id = 1)),
            $2, NULL, NULL, NULL, $1
     FROM id";

/// A `config` event at the cluster's time, with the next event id.
fn record_config_event(
    tx: &mut postgres::Transaction<'_>,
    detail: &str,
) -> Result<(), postgres::Error> {
    tx.execute(RECORD_EVENT_SQL, &[&detail, &"config"])?;
    Ok(())
}

impl From<PgStartError> for StoreError {
    fn from(e: PgStartError) -> Self {
        StoreError::Unavailable(e.to_string())
    }
}
