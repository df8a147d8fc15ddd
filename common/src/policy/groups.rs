//! Who is who on a license: groups, `allow`/`deny`, and who may borrow.
//!
//! - A checkout is a **member** of every `[[license.group]]` whose `holders`
//!   match its holder or whose `fingerprints` match its fingerprint.
//! - It **counts for** the first of them in file order ([`LicenseConfig::group_of`]).
//! - `deny` is checked first and wins; then `allow` (absent: everyone).
//!   A plain pattern there is matched against the holder name; machines are
//!   named through a group's `fingerprints` and `@group`.

use std::collections::HashSet;
use std::time::Duration;

use serde::Deserialize;

use super::patterns::{Pattern, PatternError, Who};
use super::{DurationText, LicenseConfig, MAX_DURATION, PolicyField, format_duration, intern};

/// One `[[license.group]]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Group {
    pub name: String,
    /// Patterns of holder names.
    pub holders: Vec<Pattern>,
    /// Patterns of machine fingerprints.
    pub fingerprints: Vec<Pattern>,
    /// Seats only members of this group may use. Default 0.
    pub reserve: u32,
    /// The group never holds more live seats than this. `None`: no cap.
    pub max: Option<u32>,
}

impl Group {
    /// Does the holder or the fingerprint match one of the group's patterns?
    pub fn has_member(&self, holder: &str, fingerprint: Option<&str>) -> bool {
        self.holders.iter().any(|p| p.matches(holder))
            || fingerprint.is_some_and(|f| self.fingerprints.iter().any(|p| p.matches(f)))
    }
}

/// `[license.borrow]`: seats that need no heartbeats for a while.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BorrowPolicy {
    /// The longest borrow (1 minute ..= 30 days).
    pub max: Duration,
    /// At most this many seats of the license borrowed at once (1..=seats).
    pub seats: u32,
    /// Who may borrow, on top of `allow`/`deny`. `None`: whoever may check out.
    pub allow: Option<Vec<Who>>,
}

impl LicenseConfig {
    /// The group a checkout counts for: the first in file order it is a member of.
    pub fn group_of(&self, holder: &str, fingerprint: Option<&str>) -> Option<&Group> {
        self.groups
            .iter()
            .find(|g| g.has_member(holder, fingerprint))
    }

    /// The group named `name`.
    pub fn group(&self, name: &str) -> Option<&Group> {
        self.groups.iter().find(|g| g.name == name)
    }

    /// Does one entry of `allow`/`deny` match this checkout? A pattern is
    /// matched against the holder; `@name` is membership of that group.
    pub fn who_matches(&self, who: &Who, holder: &str, fingerprint: Option<&str>) -> bool {
        match who {
            Who::Pattern(p) => p.matches(holder),
            Who::Group(name) => self
                .group(name)
                .is_some_and(|g| g.has_member(holder, fingerprint)),
        }
    }

    fn any_matches(&self, list: &[Who], holder: &str, fingerprint: Option<&str>) -> bool {
        list.iter()
            .any(|w| self.who_matches(w, holder, fingerprint))
    }

    /// deny checked first (deny wins), then allow (absent = everyone).
    pub fn allows(&self, holder: &str, fingerprint: Option<&str>) -> bool {
        if self.any_matches(&self.deny, holder, fingerprint) {
            return false;
        }
        match &self.allow {
            None => true,
            Some(allow) => self.any_matches(allow, holder, fingerprint),
        }
    }

    /// May this requester borrow (borrow present, allowed by `allows`, and by
    /// borrow.allow if present)?
    pub fn allows_borrow(&self, holder: &str, fingerprint: Option<&str>) -> bool {
        let Some(borrow) = &self.borrow else {
            return false;
        };
        self.allows(holder, fingerprint)
            && borrow
                .allow
                .as_ref()
                .is_none_or(|allow| self.any_matches(allow, holder, fingerprint))
    }

    /// Any of the new fields set (a license without them decides exactly as today).
    pub fn has_seat_policies(&self) -> bool {
        self.policy.overage > 0
            || self.policy.linger.is_some()
            || self.policy.max_per_holder.is_some()
            || self.policy.idle_timeout.is_some()
            || !self.groups.is_empty()
            || self.allow.is_some()
            || !self.deny.is_empty()
            || self.borrow.is_some()
    }

    /// The sum of the groups' reserves.
    pub fn reserved_total(&self) -> u64 {
        self.groups.iter().map(|g| u64::from(g.reserve)).sum()
    }
}

// ---- the file ---------------------------------------------------------------

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawGroup {
    #[serde(default)]
    name: String,
    #[serde(default)]
    holders: Vec<String>,
    #[serde(default)]
    fingerprints: Vec<String>,
    #[serde(default)]
    reserve: u32,
    #[serde(default)]
    max: Option<u32>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawBorrow {
    max: DurationText,
    seats: u32,
    #[serde(default)]
    allow: Option<Vec<String>>,
}

/// The validated seat-policy fields of one license (besides those in `Policy`).
pub(super) struct SeatPolicies {
    pub groups: Vec<Group>,
    pub allow: Option<Vec<Who>>,
    pub deny: Vec<Who>,
    pub borrow: Option<BorrowPolicy>,
}

const MIN_BORROW: Duration = Duration::from_secs(60);

/// Validate groups, `allow`, `deny` and `[license.borrow]` of a license with
/// `seats` seats; the first problem names its field.
pub(super) fn seat_policies(
    seats: u32,
    raw_groups: Vec<RawGroup>,
    allow: Option<Vec<String>>,
    deny: Vec<String>,
    borrow: Option<RawBorrow>,
) -> Result<SeatPolicies, PolicyField> {
    let mut groups: Vec<Group> = Vec::with_capacity(raw_groups.len());
    let mut reserved: u64 = 0;
    for raw in raw_groups {
        validate_group_name(&raw.name)?;
        if groups.iter().any(|g| g.name == raw.name) {
            return Err(PolicyField::new(
                "group",
                format!("{:?} is defined twice", raw.name),
            ));
        }
        let field = |what: &str| intern(format!("group.{}.{what}", raw.name));
        let holders = patterns(&raw.holders)
            .map_err(|e| PolicyField::new(field("holders"), e.to_string()))?;
        let fingerprints = patterns(&raw.fingerprints)
            .map_err(|e| PolicyField::new(field("fingerprints"), e.to_string()))?;
        if let Some(max) = raw.max
            && max < raw.reserve
        {
            return Err(PolicyField::new(
                field("max"),
                format!(
                    "({max}) must not be below the group's reserve ({})",
                    raw.reserve
                ),
            ));
        }
        reserved += u64::from(raw.reserve);
        if reserved > u64::from(seats) {
            return Err(PolicyField::new(
                field("reserve"),
                format!(
                    "({}) brings the reserves of this license to {reserved}, more than its {seats} seats",
                    raw.reserve
                ),
            ));
        }
        groups.push(Group {
            name: raw.name,
            holders,
            fingerprints,
            reserve: raw.reserve,
            max: raw.max,
        });
    }
    let allow = allow.map(|a| whos("allow", &a, &groups)).transpose()?;
    let deny = whos("deny", &deny, &groups)?;
    let borrow = match borrow {
        None => None,
        Some(raw) => {
            let max = raw.max.0;
            if max < MIN_BORROW {
                return Err(PolicyField::new(
                    "borrow.max",
                    format!("({}) must be at least 1 minute", format_duration(max)),
                ));
            }
            if max > MAX_DURATION {
                return Err(PolicyField::new(
                    "borrow.max",
                    format!("({}) must be at most 30 days", format_duration(max)),
                ));
            }
            if raw.seats == 0 {
                return Err(PolicyField::new(
                    "borrow.seats",
                    "must be at least 1 (leave [license.borrow] out for no borrowing)",
                ));
            }
            if raw.seats > seats {
                return Err(PolicyField::new(
                    "borrow.seats",
                    format!("({}) must be at most seats ({seats})", raw.seats),
                ));
            }
            let allow = raw
                .allow
                .map(|a| whos("borrow.allow", &a, &groups))
                .transpose()?;
            Some(BorrowPolicy {
                max,
                seats: raw.seats,
                allow,
            })
        }
    };
    Ok(SeatPolicies {
        groups,
        allow,
        deny,
        borrow,
    })
}

fn patterns(raw: &[String]) -> Result<Vec<Pattern>, PatternError> {
    raw.iter().map(|s| Pattern::parse(s)).collect()
}

fn whos(field: &'static str, raw: &[String], groups: &[Group]) -> Result<Vec<Who>, PolicyField> {
    let mut out = Vec::with_capacity(raw.len());
    for s in raw {
        let who = Who::parse(s).map_err(|e| PolicyField::new(field, e.to_string()))?;
        if let Who::Group(name) = &who
            && !groups.iter().any(|g| &g.name == name)
        {
            return Err(PolicyField::new(
                "group",
                format!(
                    "{name:?} (named by \"@{name}\" in {field}) is not defined by any [[license.group]] of this license"
                ),
            ));
        }
        out.push(who);
    }
    Ok(out)
}

/// Group names appear in answers, metrics and field names: keep them plain,
/// like license ids.
fn validate_group_name(name: &str) -> Result<(), PolicyField> {
    if name.is_empty() {
        return Err(PolicyField::new("group", "name must not be empty"));
    }
    if name.len() > 64
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
    {
        return Err(PolicyField::new(
            "group",
            format!("name {name:?} must be at most 64 ASCII letters, digits, '-', '_' and '.'"),
        ));
    }
    Ok(())
}

// ---- describing a reload ----------------------------------------------------

/// The changes of the seat-policy fields, for [`super::Licenses::describe_changes`].
pub(super) fn describe_seat_changes(a: &LicenseConfig, b: &LicenseConfig, parts: &mut Vec<String>) {
    let (p, q) = (&a.policy, &b.policy);
    if p.overage != q.overage {
        parts.push(format!("overage {}→{}", p.overage, q.overage));
    }
    if p.linger != q.linger {
        parts.push(format!(
            "linger {}→{}",
            or_none(p.linger.map(format_duration)),
            or_none(q.linger.map(format_duration))
        ));
    }
    if p.idle_timeout != q.idle_timeout {
        parts.push(format!(
            "idle_timeout {}→{}",
            or_none(p.idle_timeout.map(format_duration)),
            or_none(q.idle_timeout.map(format_duration))
        ));
    }
    if p.max_per_holder != q.max_per_holder {
        parts.push(format!(
            "max_per_holder {}→{}",
            or_none(p.max_per_holder.map(|n| n.to_string())),
            or_none(q.max_per_holder.map(|n| n.to_string()))
        ));
    }
    if a.allow != b.allow {
        let show = |l: &Option<Vec<Who>>| l.as_deref().map_or("everyone".to_string(), list);
        parts.push(format!("allow {}→{}", show(&a.allow), show(&b.allow)));
    }
    if a.deny != b.deny {
        parts.push(format!("deny {}→{}", list(&a.deny), list(&b.deny)));
    }
    if a.groups != b.groups {
        describe_groups(&a.groups, &b.groups, parts);
    }
    if a.borrow != b.borrow {
        match (&a.borrow, &b.borrow) {
            (None, Some(n)) => parts.push(format!(
                "borrow added (max {}, {} seats)",
                format_duration(n.max),
                n.seats
            )),
            (Some(_), None) => parts.push("borrow removed".to_string()),
            (Some(o), Some(n)) => {
                if o.max != n.max {
                    parts.push(format!(
                        "borrow.max {}→{}",
                        format_duration(o.max),
                        format_duration(n.max)
                    ));
                }
                if o.seats != n.seats {
                    parts.push(format!("borrow.seats {}→{}", o.seats, n.seats));
                }
                if o.allow != n.allow {
                    let show =
                        |l: &Option<Vec<Who>>| l.as_deref().map_or("as checkout".to_string(), list);
                    parts.push(format!(
                        "borrow.allow {}→{}",
                        show(&o.allow),
                        show(&n.allow)
                    ));
                }
            }
            (None, None) => {}
        }
    }
}

fn describe_groups(old: &[Group], new: &[Group], parts: &mut Vec<String>) {
    let before = parts.len();
    for o in old {
        match new.iter().find(|n| n.name == o.name) {
            None => parts.push(format!("group {} removed", o.name)),
            Some(n) if n != o => {
                let mut what = Vec::new();
                if o.reserve != n.reserve {
                    what.push(format!("reserve {}→{}", o.reserve, n.reserve));
                }
                if o.max != n.max {
                    let show = |m: Option<u32>| or_none(m.map(|m| m.to_string()));
                    what.push(format!("max {}→{}", show(o.max), show(n.max)));
                }
                if o.holders != n.holders || o.fingerprints != n.fingerprints {
                    what.push("members changed".to_string());
                }
                parts.push(format!("group {} {}", o.name, what.join(", ")));
            }
            Some(_) => {}
        }
    }
    let names: HashSet<&str> = old.iter().map(|g| g.name.as_str()).collect();
    for n in new.iter().filter(|n| !names.contains(n.name.as_str())) {
        parts.push(format!("group {} added", n.name));
    }
    if parts.len() == before {
        parts.push("groups reordered".to_string());
    }
}

fn or_none(x: Option<String>) -> String {
    x.unwrap_or_else(|| "none".to_string())
}

fn list(l: &[Who]) -> String {
    let items: Vec<String> = l.iter().map(Who::to_string).collect();
    format!("[{}]", items.join(", "))
}
