//! `leaseholdd`: the Leasehold seat server.
//!
//! - [`config`]: flags and environment.
//! - [`backup`]: `leaseholdd backup` and `restore` (SQLite only).
//! - [`store`]: the lease rules written once, over SQLite (the default: one
//!   file in WAL mode) or PostgreSQL (several replicas); one writer thread
//!   per server (group commit, the serialization point of checkouts), reads
//!   beside it, versioned schemas.
//! - [`http`]: warp routes and handlers for the v1 contract; [`serve`] is the
//!   accept loop (header-read timeout, connection cap, graceful drain).
//! - [`reaper`]: deletes reapable leases in batches; the alive tick that lets
//!   the store notice stalls.
//! - [`licenses`]: the policy in force and the licenses file;
//!   [`licenses_watch`] hot-reloads it.
//! - [`line`]: the waiting line, first come first served, for a seat (`?wait=`).
//! - [`keys`]: signing key, admin and viewer token files.
//! - [`sign_ins`]: the dashboard's sign-ins (the reaper expires
//!   them; [`http`] adds the cookie and CSRF).
//! - [`metrics`]: Prometheus counters and the latency histogram.
//! - [`proxies`]: trusted reverse proxies and the public URL.
//! - [`clock`]: the clock trait; tests use [`clock::ManualClock`].
//! - [`webhooks`]: the delivery worker that sends the signed webhook
//!   deliveries the rules queue in the store.
//!
//! End-to-end tests run the real `leaseholdd` binary (crate
//! `leasehold-tests`); route tests drive [`http::routes`] in-process.

pub mod backup;
pub mod clock;
pub mod config;
pub mod entitlements;
pub mod http;
pub mod keys;
pub mod licenses;
pub mod licenses_watch;
pub mod line;
pub mod metrics;
pub mod proxies;
pub mod reaper;
pub mod serve;
pub mod sign_ins;
pub mod store;
pub mod usage;
pub mod webhooks;

use std::fs::File;
use std::future::Future;
use std::path::Path;
use std::sync::Arc;

use anyhow::{Context, anyhow};
use leasehold_common::token::TokenSigner;
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::clock::{SharedClock, SystemClock};
use crate::config::Config;
use crate::keys::AdminToken;
use crate::licenses::LicensesHandle;
use crate::metrics::Metrics;
use crate::store::{Store, StoreOptions};

/// Everything a request handler may need.
pub struct AppState {
    pub store: Store,
    pub licenses: LicensesHandle,
    pub signer: TokenSigner,
    pub admin_token: AdminToken,
    pub metrics: Arc<Metrics>,
    pub clock: SharedClock,
    /// Flips to `true` when the server is stopping (ends SSE streams).
    pub shutdown: watch::Receiver<bool>,
    /// Checkouts waiting for a seat (`?wait=`).
    pub lines: Arc<line::Lines>,
    /// Dashboard sign-in: the viewer token, sign-in timeouts, the
    /// failed-login limiter.
    pub ui: http::UiAuth,
}

/// Check the data dir, load the licenses file, bind `config.listen`, and
/// serve until `shutdown` resolves.
pub async fn run(
    config: Config,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let prepared = prepare(&config)?;
    let listener = TcpListener::bind(&config.listen)
        .await
        .with_context(|| format!("cannot listen on {}", config.listen))?;
    serve_prepared(prepared, &config, listener, shutdown).await
}

/// What start-up builds before the socket: every check that can fail with a
/// clear message happens here.
struct Prepared {
    state: Arc<AppState>,
    shutdown_tx: watch::Sender<bool>,
    /// The licenses file as it was read at start, for the watcher.
    licenses_text: String,
    /// SQLite only: the data dir's lock (replicas on PostgreSQL may share one).
    _data_dir_lock: Option<File>,
}

fn prepare(config: &Config) -> anyhow::Result<Prepared> {
    let lock = match config.database {
        None => Some(prepare_data_dir(&config.data_dir)?),
        Some(_) => {
            std::fs::create_dir_all(&config.data_dir)
                .with_context(|| format!("cannot create data dir {}", config.data_dir.display()))?;
            None
        }
    };
    let licenses_text = licenses::read_file(&config.licenses)?;
    let entitlements_dir = config.entitlements_dir();
    std::fs::create_dir_all(&entitlements_dir).with_context(|| {
        format!(
            "cannot create the entitlements directory {}",
            entitlements_dir.display()
        )
    })?;
    let licenses = licenses::parse_file(&config.licenses, &licenses_text)?;
    let files = keys::SecretFiles {
        data_dir: &config.data_dir,
        allow_insecure: config.allow_insecure_files,
    };
    let signer = keys::load_or_create_signer(files)?;
    let admin_token = keys::load_or_create_admin_token(files, config.admin_token.clone())?;
    let viewer_token = keys::load_or_create_viewer_token(files, config.viewer_token.clone())?;
    if viewer_token.sha256_hex() == admin_token.sha256_hex() {
        return Err(anyhow!(
            "the viewer token is the admin token: a viewer would be an admin; \
             give LEASEHOLD_VIEWER_TOKEN (or viewer.token) a value of its own"
        ));
    }
    if config.body_timeout.is_zero() {
        return Err(anyhow!("--body-timeout must be longer than 0"));
    }
    if config.ui_idle_timeout.is_zero() || config.ui_session_lifetime.is_zero() {
        return Err(anyhow!(
            "--ui-idle-timeout and --ui-session-lifetime must be longer than 0"
        ));
    }
    let handle = LicensesHandle::new(licenses.clone());
    let clock: SharedClock = Arc::new(SystemClock);
    let options = StoreOptions {
        stall_threshold: config.stall_threshold,
        history_retention: config.history_retention,
        ..StoreOptions::default()
    };
    let store = match &config.database {
        None => {
            let db = store::database_path(&config.data_dir);
            Store::open(&db, handle.clone(), clock.clone(), options)
                .with_context(|| format!("cannot open database {}", db.display()))?
        }
        Some(url) => {
            let pg_config = store::pg::config(url)?;
            let identity = store::pg::ReplicaIdentity {
                signing_kid: signer.kid().to_string(),
                admin_token_sha256: admin_token.sha256_hex(),
                viewer_token_sha256: viewer_token.sha256_hex(),
                rotate_tokens: config.rotate_tokens,
            };
            let start = store::pg::prepare(&pg_config, &identity, &licenses_text, &licenses)?;
            Store::open_postgres(
                pg_config,
                store::pg::writer::DecisionClock::Database,
                start,
                handle.clone(),
                options,
            )?
        }
    };
    let lines = match store.shared_waiting_line() {
        Some(db) => line::Lines::shared(db),
        None => line::Lines::default(),
    };
    let (shutdown_tx, shutdown_rx) = watch::channel(false);
    Ok(Prepared {
        state: Arc::new(AppState {
            store,
            licenses: handle,
            signer,
            admin_token,
            metrics: Arc::new(Metrics::default()),
            clock,
            shutdown: shutdown_rx,
            lines: Arc::new(lines),
            ui: http::UiAuth::new(
                viewer_token,
                config.ui_idle_timeout,
                config.ui_session_lifetime,
            )
            .with_proxies(config.proxy_policy())
            .with_failure_limit(config.auth_failures),
        }),
        shutdown_tx,
        licenses_text,
        _data_dir_lock: lock,
    })
}

/// Scan the entitlements directory once, before anyone is answered: a
/// license with a vendor grants what its entitlements say from the first
/// request on. The loader then goes on watching.
async fn first_entitlements_scan(
    state: &AppState,
    config: &Config,
) -> entitlements::loader::Loader {
    let mut loader = entitlements::loader::Loader::new(
        config.entitlements_dir(),
        vec![state.signer.kid().to_string()],
        state.licenses.clone(),
        state.store.clone(),
        state.clock.clone(),
    );
    loader.scan().await;
    loader
}

/// The file in a data dir that a server (and `leaseholdd restore`) holds an
/// `flock` on.
pub const DATA_DIR_LOCK: &str = "leaseholdd.lock";

/// Create the data dir if needed, make sure we can write to it, and lock it:
/// two servers on one database would each believe they alone count seats.
fn prepare_data_dir(dir: &Path) -> anyhow::Result<File> {
    std::fs::create_dir_all(dir)
        .with_context(|| format!("cannot create data dir {}", dir.display()))?;
    let lock_path = dir.join(DATA_DIR_LOCK);
    let lock = File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .with_context(|| format!("data dir {} is not writable", dir.display()))?;
    match lock.try_lock() {
        Ok(()) => Ok(lock),
        Err(std::fs::TryLockError::WouldBlock) => Err(anyhow!(
            "data dir {} is in use by another leaseholdd",
            dir.display()
        )),
        Err(std::fs::TryLockError::Error(e)) => {
            Err(anyhow!("cannot lock {}: {e}", lock_path.display()))
        }
    }
}

async fn serve_prepared(
    prepared: Prepared,
    config: &Config,
    listener: TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let Prepared {
        state,
        shutdown_tx,
        licenses_text,
        _data_dir_lock,
    } = prepared;
    let addr = listener.local_addr().context("listener has no address")?;
    let store = match state.store.kind() {
        store::StoreKind::Sqlite => format!("SQLite in {}", config.data_dir.display()),
        // The URL may carry a password: name only what is not secret.
        store::StoreKind::Postgres => format!(
            "PostgreSQL (a replica), keys in {}",
            config.data_dir.display()
        ),
    };
    tracing::info!(
        "serving {} license(s) from {}; store: {store}",
        state.licenses.current().len(),
        config.licenses.display(),
    );
    tracing::info!("listening on http://{addr}");

    let stop = state.shutdown.clone();
    let loader = first_entitlements_scan(&state, config).await;
    let tasks = [
        tokio::spawn(reaper::run_reaper(
            state.store.clone(),
            state.metrics.clone(),
            config.reap_interval,
            stop.clone(),
        )),
        tokio::spawn(reaper::run_sign_in_reaper(
            state.store.clone(),
            state.ui.sign_ins.clone(),
            state.clock.clone(),
            config.reap_interval,
            stop.clone(),
        )),
        tokio::spawn(reaper::run_alive_tick(
            state.store.clone(),
            reaper::AlertLines {
                lines: state.lines.clone(),
                licenses: state.licenses.clone(),
            },
            config.stall_threshold,
            stop.clone(),
        )),
        tokio::spawn(line::forward_events(
            state.lines.clone(),
            state.store.subscribe(),
            stop.clone(),
        )),
        tokio::spawn(line::refresh_shared_line(state.lines.clone(), stop.clone())),
        tokio::spawn(webhooks::run(
            state.store.clone(),
            state.licenses.clone(),
            state.metrics.clone(),
            state.clock.clone(),
            stop.clone(),
        )),
        tokio::spawn(entitlements::watch::run(loader, stop.clone())),
        tokio::spawn(licenses_watch::watch_file(
            config.licenses.clone(),
            licenses_text.into_bytes(),
            state.licenses.clone(),
            state.store.clone(),
            stop.clone(),
        )),
    ];
    tokio::spawn(async move {
        shutdown.await;
        tracing::info!("shutting down");
        let _ = shutdown_tx.send(true);
    });

    serve::serve(
        listener,
        http::routes(state.clone()),
        config.serve_options(),
        stop,
    )
    .await;
    for t in tasks {
        let _ = t.await;
    }
    state.store.close().await;
    tracing::info!("stopped");
    Ok(())
}
