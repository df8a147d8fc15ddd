//! Loading the entitlements directory into the policy in force: at start,
//! whenever the directory changes (watched with `notify`, debounced like
//! the licenses file), after a licenses-file reload (a new `[[vendor]]`
//! key may make a rejected file verify), and in any case once a minute (a
//! watch can miss changes on network and bind mounts).
//!
//! Each scan judges every file alone ([`judge`](super::judge)), tells the
//! store the newest `iat` of each id it verified (so an older file stays
//! replaced across restarts and replicas), publishes the entitlements in
//! force with the licenses file ([`LicensesHandle::set_entitled`]), and
//! records one `entitlement` event per change: a file loaded, rejected or
//! removed, an entitlement replaced, in grace, ended, and the wall clock
//! more than an hour behind the decision clock. The server never writes
//! to the directory.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::atomic::Ordering;

use leasehold_common::api::EventKind;
use leasehold_common::entitlement::{Entitlement, Newest, State};
use leasehold_common::policy::Entitled;
use leasehold_common::policy::vendors::keys_by_name;
use leasehold_common::{Licenses, Timestamp};

use super::judge::{Judge, Verdict, judge_all};
use crate::clock::SharedClock;
use crate::licenses::LicensesHandle;
use crate::store::Store;
use crate::store::entitlement_ids::EntitlementId;
use crate::store::entitlement_set::{JudgedFile, JudgedSet};

/// A wall clock this far behind the decision clock is an error worth an
/// event (once per episode).
const CLOCK_BEHIND_ALARM_MS: i64 = 3_600_000;

/// What one server's scans keep between them.
pub struct Loader {
    pub dir: PathBuf,
    /// This server's `kid`s (a bound file must name one).
    pub kids: Vec<String>,
    pub licenses: LicensesHandle,
    pub store: Store,
    /// The wall clock (`iat` in the future is judged on it).
    pub clock: SharedClock,
    verdicts: BTreeMap<String, Verdict>,
    /// Each in-force entitlement's state at the last scan, by file and
    /// claims hash.
    states: HashMap<(String, String), State>,
    clock_behind_told: bool,
    /// Each license's last word on its reserves (see `reserve_events`).
    reserves: HashMap<String, String>,
}

impl Loader {
    pub fn new(
        dir: PathBuf,
        kids: Vec<String>,
        licenses: LicensesHandle,
        store: Store,
        clock: SharedClock,
    ) -> Self {
        Loader {
            dir,
            kids,
            licenses,
            store,
            clock,
            verdicts: BTreeMap::new(),
            states: HashMap::new(),
            clock_behind_told: false,
            reserves: HashMap::new(),
        }
    }

    /// The decision time as near as the loader can tell: the writer's last
    /// batch's, or the wall clock if that is later.
    fn decision_time(&self) -> Timestamp {
        self.store.decision_time(self.clock.now())
    }

    /// Read, judge, remember, publish, and tell what changed.
    pub async fn scan(&mut self) {
        let files = match super::read_dir(&self.dir) {
            Ok(files) => files,
            Err(e) => {
                tracing::error!(
                    "cannot read the entitlements directory {}: {e}; the entitlements in force stay",
                    self.dir.display()
                );
                return;
            }
        };
        let remembered = match self.store.entitlement_ids().await {
            Ok(ids) => remembered_of(ids),
            Err(e) => {
                tracing::error!("cannot read the remembered entitlement ids: {e}; scanning later");
                return;
            }
        };
        let licenses = self.licenses.current();
        let vendors = keys_by_name(licenses.vendors());
        let judge = Judge {
            vendors: &vendors,
            kids: &self.kids,
            wall_s: self.clock.now().as_millis().div_euclid(1000),
            remembered: &remembered,
        };
        let verdicts = judge_all(&files, &self.verdicts, judge);
        let newest_ids = newest_of(&verdicts);
        if let Err(e) = self.store.remember_entitlement_ids(newest_ids).await {
            // Not in force until remembered: an older file must never
            // outrank a newer one the store did not take.
            tracing::error!("cannot remember entitlement ids: {e}; scanning later");
            return;
        }
        let remembered = match self.store.entitlement_ids().await {
            Ok(ids) => ids,
            Err(e) => {
                tracing::error!("cannot read the remembered entitlement ids: {e}; scanning later");
                return;
            }
        };
        let set = judged_set_of(&verdicts);
        let entitled = set.entitled(licenses.vendors(), &remembered);
        let file_events = file_events(&self.verdicts, &verdicts);
        let mut once = self.state_events(&entitled);
        once.extend(self.reserve_events(&licenses, &entitled, &set));
        let clock_events = self.clock_events();
        self.verdicts = verdicts;
        self.licenses.set_entitled(entitled);
        self.tell(set, file_events, once, clock_events).await;
    }

    /// Record the scan's events. On PostgreSQL the scan's set is published
    /// as the cluster's with its file events (recorded only by the replica
    /// whose scan changed the set), and an event of an instant (grace,
    /// ended, reserves shrunk) once for the cluster, by its key.
    async fn tell(
        &self,
        set: JudgedSet,
        file_events: Vec<String>,
        once: Vec<Once>,
        clock_events: Vec<String>,
    ) {
        for detail in file_events.iter().chain(once.iter().map(|o| &o.detail)) {
            tracing::info!("entitlement: {detail}");
        }
        let mut plain: Vec<(EventKind, String)> = clock_events
            .into_iter()
            .map(|d| (EventKind::Entitlement, d))
            .collect();
        match self
            .store
            .publish_entitlements(set.to_json(), file_events.clone())
            .await
        {
            None => {
                plain.extend(file_events.into_iter().map(|d| (EventKind::Entitlement, d)));
                plain.extend(once.into_iter().map(|o| (o.kind, o.detail)));
            }
            Some(published) => {
                if let Err(e) = published {
                    tracing::error!("cannot publish the cluster's entitlements: {e}");
                }
                for o in once {
                    if let Some(Err(e)) =
                        self.store.record_event_once(o.key, o.kind, o.detail).await
                    {
                        tracing::error!("cannot record an entitlement event: {e}");
                    }
                }
            }
        }
        for (kind, detail) in plain {
            if let Err(e) = self.store.record_event(kind, None, detail).await {
                tracing::error!("cannot record an entitlement event: {e}");
            }
        }
    }

    /// Replaced, in grace, ended, conflicting: each once, when it begins.
    fn state_events(&mut self, entitled: &Entitled) -> Vec<Once> {
        let t = self.decision_time().as_millis();
        let ledger = entitled.ledger();
        let mut now = HashMap::new();
        let mut events = Vec::new();
        for ((e, file), state) in ledger
            .entitlements()
            .iter()
            .zip(entitled.files())
            .zip(ledger.states(t))
        {
            let key = (file.file.clone(), e.claims_hash.clone());
            let before = self.states.get(&key).copied();
            let changed =
                before.is_some_and(|b| b != state) || (before.is_none() && state != State::Active);
            if changed && let Some(detail) = state_detail(e, &file.file, state) {
                events.push(Once {
                    key: format!("{}:{}:{}", file.file, e.claims_hash, state.as_str()),
                    kind: EventKind::Entitlement,
                    detail,
                });
            }
            now.insert(key, state);
        }
        self.states = now;
        events
    }

    /// A `config` event when the entitled seats fall below a license's
    /// reserves (the later groups' shrink first), and when they fit again.
    fn reserve_events(
        &mut self,
        licenses: &Licenses,
        entitled: &Entitled,
        set: &JudgedSet,
    ) -> Vec<Once> {
        let now = self.decision_time();
        let with_set = Licenses::clone(licenses).with_entitled(entitled.clone());
        let mut events = Vec::new();
        for lic in with_set
            .iter()
            .filter(|l| l.vendor.is_some() && !l.groups.is_empty())
        {
            let effective = crate::store::rules::effective(&with_set, lic, now);
            let shrunk: Vec<String> = lic
                .groups
                .iter()
                .zip(&effective.lic.groups)
                .filter(|(file, now)| now.reserve < file.reserve)
                .map(|(_, now)| format!("{} {}", now.name, now.reserve))
                .collect();
            let detail = if shrunk.is_empty() {
                format!(
                    "{}: the groups' reserves are as the file says again",
                    lic.id
                )
            } else {
                format!(
                    "{}: the entitled seats ({}) are fewer than the groups' reserves; reserves now {}",
                    lic.id,
                    effective.lic.policy.seats,
                    shrunk.join(", ")
                )
            };
            let before = self.reserves.insert(lic.id.clone(), detail.clone());
            let changed = before.as_ref() != Some(&detail);
            if changed && (before.is_some() || !shrunk.is_empty()) {
                events.push(Once {
                    key: format!("reserves:{}:{detail}:{}", lic.id, set_digest(set)),
                    kind: EventKind::Config,
                    detail,
                });
            }
        }
        events
    }

    /// `clock behind by …`, once per episode of a wall clock more than an
    /// hour behind the decision clock.
    fn clock_events(&mut self) -> Vec<String> {
        let behind = self
            .store
            .writer_stats()
            .clock_behind_ms
            .load(Ordering::Relaxed);
        if behind <= CLOCK_BEHIND_ALARM_MS {
            self.clock_behind_told = false;
            return Vec::new();
        }
        if self.clock_behind_told {
            return Vec::new();
        }
        self.clock_behind_told = true;
        let detail = format!(
            "clock behind by {}: this server's wall clock reads behind the time it has \
             already decided by; leases and terms go on by the decision clock",
            leasehold_common::policy::format_duration(std::time::Duration::from_secs(
                (behind / 1000) as u64
            ))
        );
        tracing::error!("{detail}");
        vec![detail]
    }
}

/// A digest of a judged set: the same on every replica of one build.
fn set_digest(set: &JudgedSet) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    set.to_json().hash(&mut h);
    h.finish()
}

/// An event to record once for the cluster (on PostgreSQL, by `key`).
struct Once {
    key: String,
    kind: EventKind,
    detail: String,
}

/// The store's memory as the judge and ledger want it.
fn remembered_of(ids: Vec<EntitlementId>) -> HashMap<(String, String), (Newest, String)> {
    ids.into_iter()
        .map(|e| (e.key(), (e.newest(), e.claims_hash)))
        .collect()
}

/// The ids the scan verified, each at its newest `iat`.
fn newest_of(verdicts: &BTreeMap<String, Verdict>) -> Vec<EntitlementId> {
    let mut newest: BTreeMap<(String, String), EntitlementId> = BTreeMap::new();
    for e in verdicts.values().filter_map(Verdict::in_force) {
        let c = &e.claims;
        let id = EntitlementId {
            vendor: c.iss.clone(),
            id: c.jti.clone(),
            iat: c.iat,
            nbf: c.nbf,
            claims_hash: e.claims_hash.clone(),
        };
        let slot = newest
            .entry((c.iss.clone(), c.jti.clone()))
            .or_insert(id.clone());
        if id.iat > slot.iat {
            *slot = id;
        }
    }
    newest.into_values().collect()
}

/// The scan's outcome as a store keeps it: each file's JWS in force
/// (loaded, or kept at its last good content) or why it is rejected.
fn judged_set_of(verdicts: &BTreeMap<String, Verdict>) -> JudgedSet {
    let files = verdicts
        .iter()
        .map(|(file, verdict)| {
            let (jws, error) = match verdict {
                Verdict::Loaded(e) => (Some(e.jws.clone()), None),
                Verdict::Kept { why, last_good } => {
                    (Some(last_good.jws.clone()), Some(why.clone()))
                }
                Verdict::Rejected(why) => (None, Some(why.clone())),
            };
            JudgedFile {
                file: file.clone(),
                jws,
                error,
            }
        })
        .collect();
    JudgedSet { files }
}

/// One event per file whose verdict changed: loaded, rejected (kept or
/// not), removed.
fn file_events(
    before: &BTreeMap<String, Verdict>,
    after: &BTreeMap<String, Verdict>,
) -> Vec<String> {
    let mut events = Vec::new();
    for (file, verdict) in after {
        let previous = before.get(file);
        if previous == Some(verdict) {
            continue;
        }
        match verdict {
            Verdict::Loaded(e) => {
                events.push(format!("loaded {} ({file}): {}", label(e), terms(e)))
            }
            Verdict::Rejected(why) => events.push(format!("rejected {file}: {why}")),
            Verdict::Kept { why, last_good } => events.push(format!(
                "rejected {file}: {why}; its last good content ({}) stays in force",
                label(last_good)
            )),
        }
    }
    for (file, verdict) in before {
        if !after.contains_key(file)
            && let Some(e) = verdict.in_force()
        {
            events.push(format!(
                "removed {} ({file}): it grants nothing now",
                label(e)
            ));
        }
    }
    events
}

fn label(e: &Entitlement) -> String {
    format!("{}/{}", e.claims.iss, e.claims.jti)
}

/// `cad 10, ide 3, until 2027-01-01T00:00:00Z` (or `perpetual`).
fn terms(e: &Entitlement) -> String {
    let c = &e.claims;
    let seats: Vec<String> = c
        .licenses
        .iter()
        .map(|g| format!("{} {}", g.id, g.seats))
        .collect();
    let seats = if seats.is_empty() {
        "withdrawn (no licenses)".to_string()
    } else {
        seats.join(", ")
    };
    match c.exp {
        Some(exp) => format!("{seats}, until {}", Timestamp::from_millis(exp * 1000)),
        None => format!("{seats}, perpetual"),
    }
}

fn state_detail(e: &Entitlement, file: &str, state: State) -> Option<String> {
    let c = &e.claims;
    let at = |s: i64| Timestamp::from_millis(s.saturating_mul(1000));
    Some(match state {
        State::Replaced => format!(
            "replaced {} ({file}): a newer issue of it is in force",
            label(e)
        ),
        State::Grace => format!(
            "grace {} ({file}): its term ended at {}; it grants until {}",
            label(e),
            at(c.exp.unwrap_or_default()),
            at(c.exp.unwrap_or_default().saturating_add(c.grace))
        ),
        State::Ended => format!("ended {} ({file}): it grants nothing now", label(e)),
        State::Conflict => format!(
            "conflict {} ({file}): its version range differs from the newest entitlement's; \
             it grants nothing while it differs",
            label(e)
        ),
        State::NotYet => format!(
            "not yet {} ({file}): it grants from {}",
            label(e),
            at(c.nbf.unwrap_or_default())
        ),
        State::Active => return None,
    })
}
