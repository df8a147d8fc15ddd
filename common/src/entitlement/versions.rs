//! Version ranges of an entitlement's license item: comma-separated
//! comparators over dotted numeric versions, `">=2025.1, <2027"`.
//!
//! Missing parts are 0, so `2026` = `2026.0` = `2026.0.0` and `<=2026`
//! excludes `2026.1` (write `<2027`).

use std::cmp::Ordering;
use std::fmt;

/// At most this many parts in a version, and comparators in a range: a
/// range is typed by a person, and a longer one is a mistake.
const MAX_PARTS: usize = 8;
const MAX_COMPARATORS: usize = 8;

/// A dotted numeric version: `2026.2`, `3.2.10`.
#[derive(Debug, Clone)]
pub struct Version(Vec<u64>);

impl Version {
    /// Parses `2026.2`; `None` if it is not dotted numbers (no sign, no
    /// empty part, no suffix such as `-beta`).
    pub fn parse(text: &str) -> Option<Version> {
        let parts: Vec<u64> = text
            .split('.')
            .map(|p| {
                (!p.is_empty() && p.len() <= 19 && p.bytes().all(|b| b.is_ascii_digit()))
                    .then(|| p.parse().ok())
                    .flatten()
            })
            .collect::<Option<_>>()?;
        (parts.len() <= MAX_PARTS).then_some(Version(parts))
    }

    fn part(&self, i: usize) -> u64 {
        self.0.get(i).copied().unwrap_or(0)
    }
}

impl Ord for Version {
    fn cmp(&self, other: &Self) -> Ordering {
        let len = self.0.len().max(other.0.len());
        (0..len)
            .map(|i| self.part(i).cmp(&other.part(i)))
            .find(|o| o.is_ne())
            .unwrap_or(Ordering::Equal)
    }
}

impl PartialOrd for Version {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for Version {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other).is_eq()
    }
}

impl Eq for Version {}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let text: Vec<String> = self.0.iter().map(u64::to_string).collect();
        f.write_str(&text.join("."))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Ge,
    Gt,
    Le,
    Lt,
    Eq,
}

impl Op {
    fn holds(self, o: Ordering) -> bool {
        match self {
            Op::Ge => o.is_ge(),
            Op::Gt => o.is_gt(),
            Op::Le => o.is_le(),
            Op::Lt => o.is_lt(),
            Op::Eq => o.is_eq(),
        }
    }

    fn text(self) -> &'static str {
        match self {
            Op::Ge => ">=",
            Op::Gt => ">",
            Op::Le => "<=",
            Op::Lt => "<",
            Op::Eq => "=",
        }
    }
}

/// A range: every comparator must hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VersionRange(Vec<(Op, Version)>);

impl VersionRange {
    /// Parses `">=2025.1, <2027"`; the error says what is wrong, for an
    /// event or an admin's terminal.
    pub fn parse(text: &str) -> Result<VersionRange, String> {
        let comparators = text
            .split(',')
            .map(|c| parse_comparator(c.trim()))
            .collect::<Result<Vec<_>, _>>()?;
        if comparators.len() > MAX_COMPARATORS {
            return Err(format!("at most {MAX_COMPARATORS} comparators"));
        }
        Ok(VersionRange(comparators))
    }

    pub fn contains(&self, v: &Version) -> bool {
        self.0.iter().all(|(op, bound)| op.holds(v.cmp(bound)))
    }
}

fn parse_comparator(c: &str) -> Result<(Op, Version), String> {
    let (op, rest) = [
        (">=", Op::Ge),
        ("<=", Op::Le),
        (">", Op::Gt),
        ("<", Op::Lt),
        ("=", Op::Eq),
    ]
    .into_iter()
    .find_map(|(prefix, op)| c.strip_prefix(prefix).map(|rest| (op, rest)))
    .ok_or_else(|| format!("{c:?} does not start with >=, >, <=, < or ="))?;
    let version = Version::parse(rest.trim())
        .ok_or_else(|| format!("{:?} is not a dotted numeric version", rest.trim()))?;
    Ok((op, version))
}

impl fmt::Display for VersionRange {
    /// The normal form, `>=2025.1, <2027`: what the API shows and what
    /// two entitlements are compared by.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = self
            .0
            .iter()
            .map(|(op, v)| format!("{}{v}", op.text()))
            .collect();
        f.write_str(&parts.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn v(s: &str) -> Version {
        Version::parse(s).unwrap()
    }

    #[test]
    fn missing_parts_are_zero() {
        assert_eq!(v("2026"), v("2026.0.0"));
        assert!(v("2026.1") > v("2026"));
        assert!(v("3.2.10") > v("3.2.9"));
        let r = VersionRange::parse("<=2026").unwrap();
        assert!(r.contains(&v("2026.0")));
        assert!(!r.contains(&v("2026.1")), "write <2027 for all of 2026");
    }

    #[test]
    fn a_range_is_every_comparator() {
        let r = VersionRange::parse(">=2025.1, <2027").unwrap();
        assert_eq!(r.to_string(), ">=2025.1, <2027");
        for (version, inside) in [
            ("2025", false),
            ("2025.1", true),
            ("2026.12.3", true),
            ("2027", false),
        ] {
            assert_eq!(r.contains(&v(version)), inside, "{version}");
        }
        let exact = VersionRange::parse("=3.2").unwrap();
        assert!(exact.contains(&v("3.2.0")) && !exact.contains(&v("3.2.1")));
        let open = VersionRange::parse(" >3 ").unwrap();
        assert!(open.contains(&v("3.0.1")) && !open.contains(&v("3")));
    }

    #[test]
    fn what_is_not_a_version_or_range_is_refused() {
        for bad in [
            "",
            "2026.",
            ".1",
            "1..2",
            "-1",
            "2026-beta",
            "v2",
            "1.2.3.4.5.6.7.8.9",
        ] {
            assert!(Version::parse(bad).is_none(), "{bad:?}");
        }
        for bad in ["", "2026", ">=", ">=2025,", "~2025", ">= 2025.x", "=>2025"] {
            let err = VersionRange::parse(bad).unwrap_err();
            assert!(!err.is_empty(), "{bad:?}");
        }
    }

    proptest! {
        /// The order is numeric part by part with zeros appended, the same
        /// as comparing the parts padded to one length.
        #[test]
        fn order_is_padded_numeric(a in proptest::collection::vec(0u64..20, 1..5),
                                   b in proptest::collection::vec(0u64..20, 1..5)) {
            let text = |p: &[u64]| p.iter().map(u64::to_string).collect::<Vec<_>>().join(".");
            let (va, vb) = (v(&text(&a)), v(&text(&b)));
            let pad = |p: &[u64]| { let mut p = p.to_vec(); p.resize(5, 0); p };
            prop_assert_eq!(va.cmp(&vb), pad(&a).cmp(&pad(&b)));
            prop_assert_eq!(VersionRange::parse(&format!(">={}", text(&a))).unwrap().contains(&vb),
                            pad(&b) >= pad(&a));
        }
    }
}
