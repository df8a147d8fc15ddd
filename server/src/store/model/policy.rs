//! The licenses the model generates, as values and as the licenses file:
//! timing and seats ([`Pol`]), the seat policies ([`SeatPol`]: groups,
//! caps, overage, allow/deny, linger, borrowing), what a reload may change
//! ([`Change`]), and the model's own reading of who is in which group and
//! who may check out or borrow.

use std::time::Duration;

use super::time::ms;

/// License ids, in the order the rules iterate them (id order).
pub const LICENSE_IDS: [&str; 3] = ["a", "b", "c"];

/// One license's policy in milliseconds (reap_grace > skew and
/// idle_timeout > ttl, as validation demands).
#[derive(Debug, Clone, Copy)]
pub struct Pol {
    pub seats: u32,
    pub ttl_ms: u64,
    pub skew_ms: u64,
    pub grace_ms: u64,
    pub idle_ms: Option<u64>,
}

impl Pol {
    pub fn ttl(&self) -> Duration {
        ms(self.ttl_ms)
    }
    pub fn skew(&self) -> Duration {
        ms(self.skew_ms)
    }
    pub fn grace(&self) -> Duration {
        ms(self.grace_ms)
    }
    pub fn idle_timeout(&self) -> Option<Duration> {
        self.idle_ms.map(ms)
    }
    /// The license's `idle_timeout` line, if it has one.
    fn idle_toml(&self) -> String {
        self.idle_ms
            .map(|t| format!("idle_timeout = \"{t}ms\"\n"))
            .unwrap_or_default()
    }
}

/// One `[[license]]` table with a policy in milliseconds (key `<id>-key`).
pub fn license_toml(id: &str, seats: u32, ttl_ms: u64, skew_ms: u64, grace_ms: u64) -> String {
    format!(
        "[[license]]\nid = \"{id}\"\nkey = \"{id}-key\"\nseats = {seats}\n\
         ttl = \"{ttl_ms}ms\"\nskew = \"{skew_ms}ms\"\nreap_grace = \"{grace_ms}ms\"\n"
    )
}

/// The licenses file of generated licenses, named by [`LICENSE_IDS`].
pub fn licenses_toml(lics: &[(Pol, SeatPol)]) -> String {
    lics.iter()
        .zip(LICENSE_IDS)
        .map(|((p, sp), id)| {
            license_toml(id, p.seats, p.ttl_ms, p.skew_ms, p.grace_ms) + &p.idle_toml() + &sp.toml()
        })
        .collect()
}

/// One `[[license.group]]` of a generated license.
#[derive(Debug, Clone, PartialEq)]
pub struct GroupPol {
    pub name: String,
    pub holders: Vec<String>,
    pub fingerprints: Vec<String>,
    pub reserve: u32,
    pub max: Option<u32>,
}

/// The seat-policy fields of a generated license (all absent: a plain
/// license, which must decide exactly as before them).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SeatPol {
    pub overage: u32,
    pub linger_ms: Option<u64>,
    pub max_per_holder: Option<u32>,
    pub allow: Option<Vec<String>>,
    pub deny: Vec<String>,
    pub groups: Vec<GroupPol>,
    pub borrow: Option<BorrowPol>,
}

/// `[license.borrow]` of a generated license.
#[derive(Debug, Clone, PartialEq)]
pub struct BorrowPol {
    pub max_s: u64,
    pub seats: u32,
    pub allow: Option<Vec<String>>,
}

fn toml_list(items: &[String]) -> String {
    let quoted: Vec<String> = items.iter().map(|i| format!("\"{i}\"")).collect();
    format!("[{}]", quoted.join(", "))
}

impl SeatPol {
    /// The policy's lines of a `[[license]]` (after its plain fields).
    pub fn toml(&self) -> String {
        let mut t = String::new();
        if self.overage > 0 {
            t += &format!("overage = {}\n", self.overage);
        }
        if let Some(l) = self.linger_ms {
            t += &format!("linger = \"{l}ms\"\n");
        }
        if let Some(m) = self.max_per_holder {
            t += &format!("max_per_holder = {m}\n");
        }
        if let Some(allow) = &self.allow {
            t += &format!("allow = {}\n", toml_list(allow));
        }
        if !self.deny.is_empty() {
            t += &format!("deny = {}\n", toml_list(&self.deny));
        }
        for g in &self.groups {
            t += &format!("[[license.group]]\nname = \"{}\"\n", g.name);
            if !g.holders.is_empty() {
                t += &format!("holders = {}\n", toml_list(&g.holders));
            }
            if !g.fingerprints.is_empty() {
                t += &format!("fingerprints = {}\n", toml_list(&g.fingerprints));
            }
            if g.reserve > 0 {
                t += &format!("reserve = {}\n", g.reserve);
            }
            if let Some(m) = g.max {
                t += &format!("max = {m}\n");
            }
        }
        if let Some(b) = &self.borrow {
            t += &format!(
                "[license.borrow]\nmax = \"{}s\"\nseats = {}\n",
                b.max_s, b.seats
            );
            if let Some(allow) = &b.allow {
                t += &format!("allow = {}\n", toml_list(allow));
            }
        }
        t
    }

    /// allow/deny, then `borrow.allow` (absent: whoever may check out).
    pub fn allows_borrow(&self, holder: &str, fp: Option<&str>) -> bool {
        let Some(b) = &self.borrow else {
            return false;
        };
        self.allows(holder, fp)
            && b.allow
                .as_ref()
                .is_none_or(|a| a.iter().any(|w| self.who(w, holder, fp)))
    }

    /// `*` only at the end in the generated patterns.
    fn pattern_matches(p: &str, s: &str) -> bool {
        match p.strip_suffix('*') {
            Some(prefix) => s.starts_with(prefix),
            None => p == s,
        }
    }

    fn member(g: &GroupPol, holder: &str, fp: Option<&str>) -> bool {
        g.holders.iter().any(|p| Self::pattern_matches(p, holder))
            || fp.is_some_and(|f| g.fingerprints.iter().any(|p| Self::pattern_matches(p, f)))
    }

    /// The first group in file order the checkout is a member of.
    pub fn group_of(&self, holder: &str, fp: Option<&str>) -> Option<&GroupPol> {
        self.groups.iter().find(|g| Self::member(g, holder, fp))
    }

    fn who(&self, who: &str, holder: &str, fp: Option<&str>) -> bool {
        match who.strip_prefix('@') {
            Some(name) => self
                .groups
                .iter()
                .any(|g| g.name == name && Self::member(g, holder, fp)),
            None => Self::pattern_matches(who, holder),
        }
    }

    /// deny first, then allow (absent: everyone).
    pub fn allows(&self, holder: &str, fp: Option<&str>) -> bool {
        if self.deny.iter().any(|w| self.who(w, holder, fp)) {
            return false;
        }
        self.allow
            .as_ref()
            .is_none_or(|a| a.iter().any(|w| self.who(w, holder, fp)))
    }

    /// A valid policy for `seats` from raw generated parts: reserves fit in
    /// the seats, a max is at least its reserve, overage at most seats, no
    /// borrowing from a license of no seats.
    pub fn clamp(mut self, seats: u32) -> Self {
        self.overage = self.overage.min(seats);
        let mut reserved = 0;
        for g in &mut self.groups {
            g.reserve = g.reserve.min(seats - reserved);
            reserved += g.reserve;
            g.max = g.max.map(|m| m.max(g.reserve).max(1));
        }
        let names: Vec<String> = self.groups.iter().map(|g| format!("@{}", g.name)).collect();
        let known = |w: &String| !w.starts_with('@') || names.contains(w);
        self.deny.retain(known);
        if seats == 0 {
            self.borrow = None;
        }
        if let Some(b) = &mut self.borrow {
            b.seats = b.seats.clamp(1, seats);
            if let Some(a) = &mut b.allow {
                a.retain(known);
                if a.is_empty() {
                    b.allow = None;
                }
            }
        }
        if let Some(a) = &mut self.allow {
            a.retain(known);
            if a.is_empty() {
                self.allow = None;
            }
        }
        self
    }
}

/// A policy change: what a reload of the licenses file may do to one
/// license (never its seats, overage or timing).
#[derive(Debug, Clone, Copy)]
pub enum Change {
    /// Every group's max down to its reserve (at least 1).
    LowerMaxes,
    /// The last group goes (its seats count as ungrouped).
    DropGroup,
    /// No more linger (lingering seats keep their expiry).
    DropLinger,
    /// One live seat per holder.
    OneEach,
    /// `h0` denied.
    DenyH0,
    /// A 3 s linger.
    AddLinger,
}

impl Change {
    pub fn apply(self, sp: &mut SeatPol) {
        match self {
            Change::LowerMaxes => {
                for g in &mut sp.groups {
                    g.max = Some(g.reserve.max(1).min(g.max.unwrap_or(u32::MAX)));
                }
            }
            Change::DropGroup => {
                sp.groups.pop();
            }
            Change::DropLinger => sp.linger_ms = None,
            Change::OneEach => sp.max_per_holder = Some(1),
            Change::DenyH0 => sp.deny.push("h0".to_string()),
            Change::AddLinger => sp.linger_ms = Some(3_000),
        }
    }
}
