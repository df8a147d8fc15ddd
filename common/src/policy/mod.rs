//! Per-license policy and the licenses file (TOML).
//!
//! ```toml
//! [[license]]
//! id = "demo-cad"
//! key = "demo-cad-key"   # clients send: Authorization: Bearer demo-cad-key
//! seats = 10
//! ttl = "60s"
//! skew = "5s"
//! reap_grace = "15s"     # must be > skew
//! overage = 2            # optional seat policies: see [`groups`]
//! linger = "5m"
//! idle_timeout = "30m"  # reclaim a seat whose user is idle this long
//! max_per_holder = 1
//! allow = ["@design", "ci-*"]
//! deny = ["guest"]
//!
//! [[license.group]]
//! name = "design"
//! holders = ["alice", "design-*"]
//! fingerprints = ["render-node-*"]
//! reserve = 3
//! max = 6
//!
//! [license.borrow]
//! max = "7d"
//! seats = 3
//! allow = ["@design"]
//! ```
//!
//! [`Licenses::parse`] rejects the whole file on the first problem and names
//! the license and field, so a bad edit never becomes half a policy.

use std::collections::{BTreeMap, HashSet};
use std::fmt;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use serde::Deserialize;

use duration::DurationText;
pub use duration::{format_duration, parse_duration};

#[cfg(test)]
mod alert_tests;
pub mod alerts;
mod changes;
mod duration;
pub mod groups;
pub mod patterns;
#[cfg(test)]
mod seat_tests;
#[cfg(test)]
mod vendor_tests;
pub mod vendors;

pub use alerts::{Alert, AlertCondition, Webhook, WebhookFormat};
pub use groups::{BorrowPolicy, Group};
pub use patterns::{Pattern, PatternError, Who};
pub use vendors::{Entitled, InForce, Rejected, Vendor};

use crate::entitlement::Grant;

/// The seat policy of one license.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Policy {
    /// Concurrent seats sold. Zero is allowed (a suspended license).
    pub seats: u32,
    /// Lease lifetime granted by each checkout and heartbeat.
    pub ttl: Duration,
    /// Clock tolerance: a lease is live until `expires_at + skew`.
    pub skew: Duration,
    /// The reaper deletes a lease only after `expires_at + reap_grace`.
    pub reap_grace: Duration,
    /// Grants allowed beyond `seats` (a soft limit); at most `seats`. Default 0.
    pub overage: u32,
    /// A seat released by its client keeps counting this long. `None`: freed
    /// at once. At most 30 days.
    pub linger: Option<Duration>,
    /// Live seats one holder name may have. `None`: no cap. Never 0.
    pub max_per_holder: Option<u32>,
    /// A seat whose client reports its user idle this long is reclaimed.
    /// `None`: never. Longer than `ttl`.
    pub idle_timeout: Option<Duration>,
}

impl Policy {
    /// The checks every policy must pass, whatever its source.
    pub fn validate(&self) -> Result<(), PolicyField> {
        if self.ttl.is_zero() {
            return Err(PolicyField::new("ttl", "must be greater than zero"));
        }
        if self.ttl > MAX_DURATION {
            return Err(PolicyField::new("ttl", "must be at most 30 days"));
        }
        if self.skew > MAX_DURATION || self.reap_grace > MAX_DURATION {
            return Err(PolicyField::new("reap_grace", "must be at most 30 days"));
        }
        if self.reap_grace <= self.skew {
            return Err(PolicyField::new(
                "reap_grace",
                format!(
                    "({}) must be greater than skew ({}), or the reaper could delete a lease that still counts as live",
                    format_duration(self.reap_grace),
                    format_duration(self.skew)
                ),
            ));
        }
        if self.overage > self.seats {
            return Err(PolicyField::new(
                "overage",
                format!("({}) must be at most seats ({})", self.overage, self.seats),
            ));
        }
        if let Some(linger) = self.linger
            && linger > MAX_DURATION
        {
            return Err(PolicyField::new(
                "linger",
                format!("({}) must be at most 30 days", format_duration(linger)),
            ));
        }
        if let Some(idle) = self.idle_timeout
            && idle <= self.ttl
        {
            return Err(PolicyField::new(
                "idle_timeout",
                format!(
                    "({}) must be longer than the ttl ({}): a seat is reclaimed only between heartbeats that report it idle",
                    format_duration(idle),
                    format_duration(self.ttl)
                ),
            ));
        }
        if self.max_per_holder == Some(0) {
            return Err(PolicyField::new(
                "max_per_holder",
                "must be at least 1 (leave it out for no cap)",
            ));
        }
        Ok(())
    }
}

const MAX_DURATION: Duration = Duration::from_secs(30 * 24 * 3600);

/// One `[[license]]` entry.
#[derive(Clone, PartialEq, Eq)]
pub struct LicenseConfig {
    pub id: String,
    /// The bearer key clients of this license present. Never logged.
    pub key: String,
    pub policy: Policy,
    /// `[[license.group]]` entries, in file order.
    pub groups: Vec<Group>,
    /// Who may check out. `None`: everyone.
    pub allow: Option<Vec<Who>>,
    /// Who may not check out; checked before `allow`.
    pub deny: Vec<Who>,
    /// `[license.borrow]`. `None`: no borrowing.
    pub borrow: Option<BorrowPolicy>,
    /// `[[license.alert]]` entries, in file order.
    pub alerts: Vec<Alert>,
    /// The `[[vendor]]` whose entitlements grant the seats. `None`: the
    /// file's `seats` are the seats.
    pub vendor: Option<String>,
}

/// A vendor's license without `seats` in the file: the entitlements alone
/// decide, so the file narrows nothing.
pub const SEATS_NOT_NARROWED: u32 = u32::MAX;

impl LicenseConfig {
    /// The file's `seats`, if it wrote any.
    pub fn seats_in_file(&self) -> Option<u32> {
        Some(self.policy.seats).filter(|&s| s != SEATS_NOT_NARROWED)
    }
}

impl fmt::Debug for LicenseConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LicenseConfig")
            .field("id", &self.id)
            .field("key", &"<redacted>")
            .field("policy", &self.policy)
            .field("groups", &self.groups)
            .field("allow", &self.allow)
            .field("deny", &self.deny)
            .field("borrow", &self.borrow)
            .field("alerts", &self.alerts)
            .field("vendor", &self.vendor)
            .finish()
    }
}

/// A validated licenses file: unique ids, every policy valid.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Licenses {
    by_id: BTreeMap<String, LicenseConfig>,
    /// `[[webhook]]` entries, in file order.
    webhooks: Vec<Webhook>,
    /// `[[vendor]]` entries, in file order.
    vendors: Vec<Vendor>,
    /// The verified entitlements in force (the server's last scan of its
    /// entitlements directory; none until it ran).
    entitled: Entitled,
}

impl Licenses {
    /// Parse and validate a licenses file. Any problem rejects the whole file.
    pub fn parse(toml_text: &str) -> Result<Licenses, PolicyError> {
        let file: FileV1 =
            toml::from_str(toml_text).map_err(|e| PolicyError::Syntax(e.to_string()))?;
        let webhooks = parse_webhooks(file.webhook)?;
        let vendors = vendors::parse_vendors(file.vendor).map_err(|e| PolicyError::Vendor {
            vendor: e.vendor,
            field: e.field,
            problem: e.problem,
        })?;
        let mut alert_names = HashSet::new();
        let mut by_id = BTreeMap::new();
        let mut seen = HashSet::new();
        for (index, raw) in file.license.into_iter().enumerate() {
            let named = |field: PolicyField| PolicyError::Invalid {
                license: if raw.id.is_empty() {
                    format!("#{}", index + 1)
                } else {
                    raw.id.clone()
                },
                field: field.field,
                problem: field.problem,
            };
            validate_id(&raw.id).map_err(named)?;
            validate_key(&raw.key).map_err(named)?;
            if !seen.insert(raw.id.clone()) {
                return Err(named(PolicyField::new("id", "is used by another license")));
            }
            if let Some(vendor) = &raw.vendor
                && !vendors.iter().any(|v| &v.name == vendor)
            {
                return Err(named(PolicyField::new(
                    "vendor",
                    format!("{vendor:?} is no [[vendor]] of this file"),
                )));
            }
            let seats = match (raw.seats, &raw.vendor) {
                (Some(seats), _) => seats,
                (None, Some(_)) => SEATS_NOT_NARROWED,
                (None, None) => {
                    return Err(named(PolicyField::new(
                        "seats",
                        "is required (or a vendor = \"...\" whose entitlements grant the seats)",
                    )));
                }
            };
            let policy = Policy {
                seats,
                ttl: raw.ttl.0,
                skew: raw.skew.0,
                reap_grace: raw.reap_grace.0,
                overage: raw.overage,
                // `linger = "0s"` is no linger.
                linger: raw.linger.map(|d| d.0).filter(|d| !d.is_zero()),
                max_per_holder: raw.max_per_holder,
                idle_timeout: raw.idle_timeout.map(|d| d.0),
            };
            policy.validate().map_err(named)?;
            let seat = groups::seat_policies(seats, raw.group, raw.allow, raw.deny, raw.borrow)
                .map_err(named)?;
            let mut license_alerts = Vec::with_capacity(raw.alert.len());
            for raw_alert in raw.alert {
                let alert = alerts::alert(raw_alert, &webhooks).map_err(named)?;
                if matches!(alert.condition, AlertCondition::Expiry { .. }) && raw.vendor.is_none()
                {
                    return Err(named(PolicyField::new(
                        "alert.when",
                        "is \"expiry\", which needs a license with a vendor = \"...\"",
                    )));
                }
                if !alert_names.insert(alert.name.clone()) {
                    return Err(named(PolicyField::new(
                        "alert.name",
                        format!("{:?} is used by another alert", alert.name),
                    )));
                }
                license_alerts.push(alert);
            }
            by_id.insert(
                raw.id.clone(),
                LicenseConfig {
                    id: raw.id,
                    key: raw.key,
                    policy,
                    groups: seat.groups,
                    allow: seat.allow,
                    deny: seat.deny,
                    borrow: seat.borrow,
                    alerts: license_alerts,
                    vendor: raw.vendor,
                },
            );
        }
        Ok(Licenses {
            by_id,
            webhooks,
            vendors,
            entitled: Entitled::default(),
        })
    }

    /// The `[[vendor]]` entries, in file order.
    pub fn vendors(&self) -> &[Vendor] {
        &self.vendors
    }

    /// The entitlements in force.
    pub fn entitled(&self) -> &Entitled {
        &self.entitled
    }

    /// This file with `entitled` in force instead.
    pub fn with_entitled(mut self, entitled: Entitled) -> Licenses {
        self.entitled = entitled;
        self
    }

    /// What the vendor's entitlements grant `lic` at `t_ms` (decision
    /// clock, ms); `None` for a license without a vendor.
    pub fn grant(&self, lic: &LicenseConfig, t_ms: i64) -> Option<Grant> {
        let vendor = lic.vendor.as_deref()?;
        Some(self.entitled.ledger().grant(vendor, &lic.id, t_ms))
    }

    /// The `[[webhook]]` entries, in file order.
    pub fn webhooks(&self) -> &[Webhook] {
        &self.webhooks
    }

    pub fn webhook(&self, name: &str) -> Option<&Webhook> {
        self.webhooks.iter().find(|w| w.name == name)
    }

    /// Every `[[license.alert]]`, with its license, in license order.
    pub fn alerts(&self) -> impl Iterator<Item = (&LicenseConfig, &Alert)> {
        self.iter()
            .flat_map(|l| l.alerts.iter().map(move |a| (l, a)))
    }

    pub fn get(&self, id: &str) -> Option<&LicenseConfig> {
        self.by_id.get(id)
    }

    /// Licenses in id order.
    pub fn iter(&self) -> impl Iterator<Item = &LicenseConfig> {
        self.by_id.values()
    }

    pub fn len(&self) -> usize {
        self.by_id.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_id.is_empty()
    }
}

impl FromIterator<LicenseConfig> for Licenses {
    fn from_iter<I: IntoIterator<Item = LicenseConfig>>(iter: I) -> Self {
        Licenses {
            by_id: iter.into_iter().map(|l| (l.id.clone(), l)).collect(),
            webhooks: Vec::new(),
            vendors: Vec::new(),
            entitled: Entitled::default(),
        }
    }
}

/// Why a licenses file was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PolicyError {
    #[error("licenses file is not valid TOML for Leasehold: {0}")]
    Syntax(String),
    #[error("license {license:?}: {field} {problem}")]
    Invalid {
        license: String,
        field: &'static str,
        problem: String,
    },
    #[error("webhook {webhook:?}: {field} {problem}")]
    Webhook {
        webhook: String,
        field: &'static str,
        problem: String,
    },
    #[error("vendor {vendor:?}: {field} {problem}")]
    Vendor {
        vendor: String,
        field: &'static str,
        problem: String,
    },
}

/// Validate the `[[webhook]]` entries: each valid, names unique.
fn parse_webhooks(raw: Vec<alerts::RawWebhook>) -> Result<Vec<Webhook>, PolicyError> {
    let mut webhooks: Vec<Webhook> = Vec::with_capacity(raw.len());
    for (index, raw) in raw.into_iter().enumerate() {
        let label = if raw.name.is_empty() {
            format!("#{}", index + 1)
        } else {
            raw.name.clone()
        };
        let named = |field: PolicyField| PolicyError::Webhook {
            webhook: label.clone(),
            field: field.field,
            problem: field.problem,
        };
        let webhook = alerts::webhook(raw).map_err(named)?;
        if webhooks.iter().any(|w| w.name == webhook.name) {
            return Err(named(PolicyField::new(
                "name",
                "is used by another webhook",
            )));
        }
        webhooks.push(webhook);
    }
    Ok(webhooks)
}

/// A problem with one field, before we know which license it belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyField {
    pub field: &'static str,
    pub problem: String,
}

impl PolicyField {
    pub(crate) fn new(field: &'static str, problem: impl Into<String>) -> Self {
        PolicyField {
            field,
            problem: problem.into(),
        }
    }
}

/// A field name built at run time (`group.design.max`) as the `&'static str`
/// that [`PolicyError::Invalid`] carries. Only rejected files get here, and
/// each distinct name is leaked once, so the memory is bounded by the names
/// an admin has ever written wrong.
fn intern(name: String) -> &'static str {
    static NAMES: OnceLock<Mutex<HashSet<&'static str>>> = OnceLock::new();
    let mut names = NAMES
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some(&known) = names.get(name.as_str()) {
        return known;
    }
    let leaked: &'static str = Box::leak(name.into_boxed_str());
    names.insert(leaked);
    leaked
}

/// License ids appear in URL paths and admins' terminals: keep them plain.
fn validate_id(id: &str) -> Result<(), PolicyField> {
    if id.is_empty() {
        return Err(PolicyField::new("id", "must not be empty"));
    }
    if id.len() > 64 {
        return Err(PolicyField::new("id", "must be at most 64 characters"));
    }
    if !id
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
    {
        return Err(PolicyField::new(
            "id",
            "may contain only ASCII letters, digits, '-', '_' and '.'",
        ));
    }
    Ok(())
}

/// Keys travel in an HTTP header: printable ASCII without spaces.
fn validate_key(key: &str) -> Result<(), PolicyField> {
    if key.is_empty() {
        return Err(PolicyField::new("key", "must not be empty"));
    }
    if key.len() > 256 || !key.chars().all(|c| c.is_ascii_graphic()) {
        return Err(PolicyField::new(
            "key",
            "must be at most 256 printable ASCII characters without spaces",
        ));
    }
    Ok(())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileV1 {
    #[serde(default)]
    vendor: Vec<vendors::RawVendor>,
    #[serde(default)]
    webhook: Vec<alerts::RawWebhook>,
    #[serde(default)]
    license: Vec<RawLicense>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLicense {
    #[serde(default)]
    id: String,
    #[serde(default)]
    key: String,
    #[serde(default)]
    seats: Option<u32>,
    #[serde(default)]
    vendor: Option<String>,
    #[serde(default = "default_ttl")]
    ttl: DurationText,
    #[serde(default = "default_skew")]
    skew: DurationText,
    #[serde(default = "default_reap_grace")]
    reap_grace: DurationText,
    #[serde(default)]
    overage: u32,
    #[serde(default)]
    linger: Option<DurationText>,
    #[serde(default)]
    max_per_holder: Option<u32>,
    #[serde(default)]
    idle_timeout: Option<DurationText>,
    #[serde(default)]
    allow: Option<Vec<String>>,
    #[serde(default)]
    deny: Vec<String>,
    #[serde(default)]
    group: Vec<groups::RawGroup>,
    #[serde(default)]
    borrow: Option<groups::RawBorrow>,
    #[serde(default)]
    alert: Vec<alerts::RawAlert>,
}

fn default_ttl() -> DurationText {
    DurationText(Duration::from_secs(60))
}
fn default_skew() -> DurationText {
    DurationText(Duration::from_secs(5))
}
fn default_reap_grace() -> DurationText {
    DurationText(Duration::from_secs(15))
}

#[cfg(test)]
mod tests;
