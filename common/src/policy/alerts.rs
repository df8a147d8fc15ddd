//! `[[webhook]]` and `[[license.alert]]` in the licenses file: where
//! deliveries go, and what fires.
//!
//! ```toml
//! [[webhook]]
//! name = "ops"
//! url = "https://hooks.example.com/leasehold"  # http or https, no credentials
//! secret = "a-long-random-string"              # HMAC key, ≥ 16 characters
//! format = "json"                              # or "slack"
//! events = ["revoke", "reclaim", "config"]     # forwarded as they happen
//!
//! [[license]]
//! # ...
//! [[license.alert]]
//! name = "cad-full"
//! when = "full"          # or "usage" (with percent) or "denials" (count, within)
//! for = "5m"
//! webhooks = ["ops"]     # default: every webhook
//! ```

use std::fmt;
use std::time::Duration;

use serde::Deserialize;

use super::{DurationText, PolicyField, format_duration};
use crate::alerts::AlertSettings;
use crate::api::EventKind;

/// The shortest `for` or `within`.
pub const MIN_ALERT_DURATION: Duration = Duration::from_secs(1);
/// The shortest webhook secret.
pub const MIN_SECRET_LEN: usize = 16;

/// How a webhook's body is shaped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WebhookFormat {
    /// The whole delivery as JSON.
    Json,
    /// `{"text": …}`, for Slack and Mattermost incoming webhooks.
    Slack,
}

impl WebhookFormat {
    pub fn as_str(self) -> &'static str {
        match self {
            WebhookFormat::Json => "json",
            WebhookFormat::Slack => "slack",
        }
    }
}

/// One `[[webhook]]`.
#[derive(Clone, PartialEq, Eq)]
pub struct Webhook {
    pub name: String,
    /// `http` or `https`, without userinfo.
    pub url: String,
    /// The HMAC key. Never shown, logged or sent.
    pub secret: String,
    pub format: WebhookFormat,
    /// Event kinds forwarded as they happen (never `alert`).
    pub events: Vec<EventKind>,
}

impl fmt::Debug for Webhook {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Webhook")
            .field("name", &self.name)
            .field("url", &self.url)
            .field("secret", &"<redacted>")
            .field("format", &self.format)
            .field("events", &self.events)
            .finish()
    }
}

/// What an alert watches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AlertCondition {
    /// No free seat for a holder in no group, continuously for `for_`.
    Full { for_: Duration },
    /// Live seats ≥ `percent` % of `seats`, continuously for `for_`.
    Usage { percent: u32, for_: Duration },
    /// At least `count` denials of reason `full` in any `within`.
    Denials { count: u32, within: Duration },
    /// A license with a vendor: its entitled seats drop within `before`,
    /// or its entitlement is in grace.
    Expiry { before: Duration },
}

impl AlertCondition {
    pub fn when(&self) -> &'static str {
        match self {
            AlertCondition::Full { .. } => "full",
            AlertCondition::Usage { .. } => "usage",
            AlertCondition::Denials { .. } => "denials",
            AlertCondition::Expiry { .. } => "expiry",
        }
    }

    /// How long the condition must hold before the alert fires (zero for
    /// `denials`, which fires at the denial that reaches `count`).
    pub fn hold_for(&self) -> Duration {
        match *self {
            AlertCondition::Full { for_ } | AlertCondition::Usage { for_, .. } => for_,
            AlertCondition::Denials { .. } | AlertCondition::Expiry { .. } => Duration::ZERO,
        }
    }
}

/// One `[[license.alert]]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Alert {
    /// Unique in the file.
    pub name: String,
    pub condition: AlertCondition,
    /// The webhooks its transitions go to (every webhook when the file
    /// names none).
    pub webhooks: Vec<String>,
}

impl Alert {
    /// Its settings as deliveries and the admin API show them.
    pub fn settings(&self) -> AlertSettings {
        let mut s = AlertSettings {
            name: self.name.clone(),
            when: self.condition.when().to_string(),
            for_: None,
            percent: None,
            count: None,
            within: None,
            before: None,
        };
        match self.condition {
            AlertCondition::Full { for_ } => s.for_ = Some(format_duration(for_)),
            AlertCondition::Usage { percent, for_ } => {
                s.percent = Some(percent);
                s.for_ = Some(format_duration(for_));
            }
            AlertCondition::Denials { count, within } => {
                s.count = Some(count);
                s.within = Some(format_duration(within));
            }
            AlertCondition::Expiry { before } => s.before = Some(format_duration(before)),
        }
        s
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawWebhook {
    #[serde(default)]
    pub(super) name: String,
    #[serde(default)]
    url: String,
    #[serde(default)]
    secret: String,
    #[serde(default = "default_format")]
    format: String,
    #[serde(default)]
    events: Vec<String>,
}

fn default_format() -> String {
    "json".to_string()
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawAlert {
    #[serde(default)]
    name: String,
    #[serde(default)]
    when: String,
    #[serde(rename = "for", default)]
    for_: Option<DurationText>,
    #[serde(default)]
    percent: Option<u32>,
    #[serde(default)]
    count: Option<u32>,
    #[serde(default)]
    within: Option<DurationText>,
    #[serde(default)]
    before: Option<DurationText>,
    #[serde(default)]
    webhooks: Option<Vec<String>>,
}

/// A webhook or alert name: like a license id (it appears in metrics
/// labels, URL paths and terminals).
fn validate_name(name: &str) -> Result<(), PolicyField> {
    if name.is_empty() {
        return Err(PolicyField::new("name", "must not be empty"));
    }
    if name.len() > 64
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
    {
        return Err(PolicyField::new(
            "name",
            "must be at most 64 ASCII letters, digits, '-', '_' and '.'",
        ));
    }
    Ok(())
}

/// `http(s)://host[:port][/path]`, no userinfo: the file is not a place for
/// credentials (a receiver authenticates deliveries by their signature).
fn validate_url(url: &str) -> Result<(), PolicyField> {
    let bad = |problem: &str| Err(PolicyField::new("url", problem.to_string()));
    let rest = if let Some(rest) = url.strip_prefix("https://") {
        rest
    } else if let Some(rest) = url.strip_prefix("http://") {
        rest
    } else {
        return bad("must start with http:// or https://");
    };
    if url.len() > 2048 || !url.chars().all(|c| c.is_ascii_graphic()) {
        return bad("must be at most 2048 printable ASCII characters without spaces");
    }
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    if authority.contains('@') {
        return bad("must not carry a user name or password (deliveries are signed instead)");
    }
    let host = match authority.rsplit_once(':') {
        // An IPv6 literal holds colons of its own.
        Some((host, port)) if !authority.ends_with(']') => {
            if port.is_empty() || port.parse::<u16>().is_err() {
                return bad("has a port that is not a number from 0 to 65535");
            }
            host
        }
        _ => authority,
    };
    if host.is_empty() {
        return bad("has no host");
    }
    Ok(())
}

fn event_kinds(raw: &[String]) -> Result<Vec<EventKind>, PolicyField> {
    let mut kinds = Vec::with_capacity(raw.len());
    for name in raw {
        match EventKind::parse(name) {
            Some(EventKind::Alert) => {
                return Err(PolicyField::new(
                    "events",
                    "may not name \"alert\": alert transitions reach webhooks as alert.* deliveries",
                ));
            }
            Some(kind) if !kinds.contains(&kind) => kinds.push(kind),
            Some(_) => {}
            None => {
                let known: Vec<&str> = EventKind::ALL
                    .iter()
                    .filter(|k| **k != EventKind::Alert)
                    .map(|k| k.as_str())
                    .collect();
                return Err(PolicyField::new(
                    "events",
                    format!("names {name:?}, not an event kind ({})", known.join(", ")),
                ));
            }
        }
    }
    Ok(kinds)
}

/// Validate one `[[webhook]]`.
pub(super) fn webhook(raw: RawWebhook) -> Result<Webhook, PolicyField> {
    validate_name(&raw.name)?;
    validate_url(&raw.url)?;
    if raw.secret.chars().count() < MIN_SECRET_LEN {
        return Err(PolicyField::new(
            "secret",
            format!("must be at least {MIN_SECRET_LEN} characters"),
        ));
    }
    let format = match raw.format.as_str() {
        "json" => WebhookFormat::Json,
        "slack" => WebhookFormat::Slack,
        other => {
            return Err(PolicyField::new(
                "format",
                format!("is {other:?}; use \"json\" or \"slack\""),
            ));
        }
    };
    Ok(Webhook {
        name: raw.name,
        url: raw.url,
        secret: raw.secret,
        format,
        events: event_kinds(&raw.events)?,
    })
}

fn at_least_a_second(
    field: &'static str,
    d: Option<DurationText>,
) -> Result<Duration, PolicyField> {
    let Some(DurationText(d)) = d else {
        return Err(PolicyField::new(field, "is required"));
    };
    if d < MIN_ALERT_DURATION {
        return Err(PolicyField::new(
            field,
            format!("({}) must be at least 1s", format_duration(d)),
        ));
    }
    Ok(d)
}

/// An `expiry` alert without `before` holds within 30 days of the drop.
const DEFAULT_EXPIRY_BEFORE: Duration = Duration::from_secs(30 * 24 * 3600);

/// Refuse a setting the alert's kind does not use, so a typo'd alert is
/// not silently a different one.
fn unused<T>(field: &'static str, value: &Option<T>, when: &str) -> Result<(), PolicyField> {
    match value {
        Some(_) => Err(PolicyField::new(
            field,
            format!("is not a setting of when = {when:?}"),
        )),
        None => Ok(()),
    }
}

/// Validate one `[[license.alert]]` against the file's webhooks (by name).
pub(super) fn alert(raw: RawAlert, webhooks: &[Webhook]) -> Result<Alert, PolicyField> {
    let field = |f: &'static str| f;
    validate_name(&raw.name).map_err(|e| PolicyField::new(field("alert.name"), e.problem))?;
    let condition = match raw.when.as_str() {
        "full" => {
            unused("alert.percent", &raw.percent, "full")?;
            unused("alert.count", &raw.count, "full")?;
            unused("alert.within", &raw.within, "full")?;
            unused("alert.before", &raw.before, "full")?;
            AlertCondition::Full {
                for_: at_least_a_second("alert.for", raw.for_)?,
            }
        }
        "usage" => {
            unused("alert.count", &raw.count, "usage")?;
            unused("alert.within", &raw.within, "usage")?;
            unused("alert.before", &raw.before, "usage")?;
            let percent = match raw.percent {
                Some(p) if (1..=100).contains(&p) => p,
                Some(p) => {
                    return Err(PolicyField::new(
                        "alert.percent",
                        format!("({p}) must be from 1 to 100"),
                    ));
                }
                None => return Err(PolicyField::new("alert.percent", "is required")),
            };
            AlertCondition::Usage {
                percent,
                for_: at_least_a_second("alert.for", raw.for_)?,
            }
        }
        "denials" => {
            unused("alert.percent", &raw.percent, "denials")?;
            unused("alert.for", &raw.for_, "denials")?;
            unused("alert.before", &raw.before, "denials")?;
            let count = match raw.count {
                Some(c) if c >= 1 => c,
                Some(_) => return Err(PolicyField::new("alert.count", "must be at least 1")),
                None => return Err(PolicyField::new("alert.count", "is required")),
            };
            AlertCondition::Denials {
                count,
                within: at_least_a_second("alert.within", raw.within)?,
            }
        }
        "expiry" => {
            unused("alert.percent", &raw.percent, "expiry")?;
            unused("alert.count", &raw.count, "expiry")?;
            unused("alert.within", &raw.within, "expiry")?;
            unused("alert.for", &raw.for_, "expiry")?;
            AlertCondition::Expiry {
                before: raw.before.map_or(DEFAULT_EXPIRY_BEFORE, |d| d.0),
            }
        }
        other => {
            return Err(PolicyField::new(
                "alert.when",
                format!("is {other:?}; use \"full\", \"usage\", \"denials\" or \"expiry\""),
            ));
        }
    };
    let names = match raw.webhooks {
        None => webhooks.iter().map(|w| w.name.clone()).collect(),
        Some(names) => {
            for name in &names {
                if !webhooks.iter().any(|w| &w.name == name) {
                    return Err(PolicyField::new(
                        "alert.webhooks",
                        format!("names {name:?}, which is no [[webhook]] of this file"),
                    ));
                }
            }
            let mut unique: Vec<String> = Vec::with_capacity(names.len());
            for name in names {
                if !unique.contains(&name) {
                    unique.push(name);
                }
            }
            unique
        }
    };
    Ok(Alert {
        name: raw.name,
        condition,
        webhooks: names,
    })
}

/// One line per webhook added, removed or changed (never the secret
/// itself: "secret changed").
pub(super) fn describe_webhook_changes(old: &[Webhook], new: &[Webhook], out: &mut Vec<String>) {
    for o in old {
        match new.iter().find(|n| n.name == o.name) {
            None => out.push(format!("webhook {}: removed", o.name)),
            Some(n) if n != o => {
                let mut parts = Vec::new();
                if n.url != o.url {
                    parts.push(format!("url {}", n.url));
                }
                if n.secret != o.secret {
                    parts.push("secret changed".to_string());
                }
                if n.format != o.format {
                    parts.push(format!("format {}", n.format.as_str()));
                }
                if n.events != o.events {
                    let kinds: Vec<&str> = n.events.iter().map(|k| k.as_str()).collect();
                    parts.push(format!("events [{}]", kinds.join(", ")));
                }
                out.push(format!("webhook {}: {}", o.name, parts.join(", ")));
            }
            Some(_) => {}
        }
    }
    for n in new.iter().filter(|n| !old.iter().any(|o| o.name == n.name)) {
        out.push(format!("webhook {}: added ({})", n.name, n.format.as_str()));
    }
}
