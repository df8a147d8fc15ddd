//! Patterns of the licenses file: which holders and machines a rule is about.
//!
//! A [`Pattern`] is an exact string, or one where `*` matches any run of
//! characters (the only wildcard). Matching is case-sensitive and linear in
//! the length of the text: the pieces between the stars are matched in order,
//! each at its leftmost place, which is exact for a `*`-only glob.
//!
//! In `allow` and `deny`, a [`Who`] is a pattern or `@name`: "a member of the
//! group `name` of this license".

use std::fmt;

use crate::text::is_unsafe_char;

/// An exact string or a `*` glob. Never empty.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Pattern {
    text: Box<str>,
    /// Byte offsets of the first and the last `*`, if any.
    stars: Option<(usize, usize)>,
}

/// Why a pattern was refused; `Display` completes "`allow` ...".
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PatternError {
    #[error("must not contain an empty pattern")]
    Empty,
    #[error("must not contain control or format characters (found U+{0:04X})")]
    UnsafeChar(u32),
    #[error("must not contain \"@\" without a group name")]
    EmptyGroupName,
}

impl Pattern {
    pub fn parse(s: &str) -> Result<Pattern, PatternError> {
        if s.is_empty() {
            return Err(PatternError::Empty);
        }
        if let Some(c) = s.chars().find(|&c| is_unsafe_char(c)) {
            return Err(PatternError::UnsafeChar(c as u32));
        }
        let stars = s
            .find('*')
            .map(|first| (first, s.rfind('*').unwrap_or(first)));
        Ok(Pattern {
            text: s.into(),
            stars,
        })
    }

    /// Does the whole of `s` match? Linear time, no backtracking.
    pub fn matches(&self, s: &str) -> bool {
        let Some((first, last)) = self.stars else {
            return *self.text == *s;
        };
        let prefix = &self.text[..first];
        let suffix = &self.text[last + 1..];
        if s.len() < prefix.len() + suffix.len() || !s.starts_with(prefix) || !s.ends_with(suffix) {
            return false;
        }
        // Both ends are char boundaries: `s` starts with `prefix` and ends
        // with `suffix`, and they do not overlap.
        let mut rest = &s[prefix.len()..s.len() - suffix.len()];
        if first == last {
            return true;
        }
        for piece in self.text[first + 1..last]
            .split('*')
            .filter(|p| !p.is_empty())
        {
            match rest.find(piece) {
                Some(at) => rest = &rest[at + piece.len()..],
                None => return false,
            }
        }
        true
    }

    /// The pattern as written in the file.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// Has it a `*`?
    pub fn is_wildcard(&self) -> bool {
        self.stars.is_some()
    }
}

impl fmt::Debug for Pattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Pattern({:?})", self.as_str())
    }
}

impl fmt::Display for Pattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One entry of `allow`, `deny` or `borrow.allow`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Who {
    /// Matched against the holder name (machines are named through groups).
    Pattern(Pattern),
    /// `@name`: a member of this license's group `name`.
    Group(String),
}

impl Who {
    /// `"@name"` is a group; anything else a [`Pattern`] of holder names.
    /// Whether the group exists is checked with the rest of the license.
    pub fn parse(s: &str) -> Result<Who, PatternError> {
        match s.strip_prefix('@') {
            Some("") => Err(PatternError::EmptyGroupName),
            Some(name) => {
                // Same character rules as a pattern, so the name prints safely.
                Pattern::parse(name)?;
                Ok(Who::Group(name.to_string()))
            }
            None => Pattern::parse(s).map(Who::Pattern),
        }
    }
}

impl fmt::Display for Who {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Who::Pattern(p) => f.write_str(p.as_str()),
            Who::Group(name) => write!(f, "@{name}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn m(pattern: &str, s: &str) -> bool {
        Pattern::parse(pattern).unwrap().matches(s)
    }

    /// The reference: a dynamic program over chars, obviously right and
    /// quadratic.
    fn reference(pattern: &str, s: &str) -> bool {
        let p: Vec<char> = pattern.chars().collect();
        let t: Vec<char> = s.chars().collect();
        // ok[j] = p[..i] matches t[..j]
        let mut ok = vec![false; t.len() + 1];
        ok[0] = true;
        for &pc in &p {
            let mut next = vec![false; t.len() + 1];
            if pc == '*' {
                let mut any = false;
                for j in 0..=t.len() {
                    any |= ok[j];
                    next[j] = any;
                }
            } else {
                for j in 1..=t.len() {
                    next[j] = ok[j - 1] && t[j - 1] == pc;
                }
            }
            ok = next;
        }
        ok[t.len()]
    }

    #[test]
    fn exact() {
        assert!(m("alice", "alice"));
        assert!(!m("alice", "Alice"), "case-sensitive");
        assert!(!m("alice", "alice2"));
        assert!(!m("alice", "alic"));
        assert!(!m("alice", ""));
        assert!(!Pattern::parse("alice").unwrap().is_wildcard());
    }

    #[test]
    fn star_alone_and_doubled_match_everything() {
        for p in ["*", "**", "***"] {
            for s in ["", "a", "design-7", "é*"] {
                assert!(m(p, s), "{p:?} {s:?}");
            }
        }
    }

    #[test]
    fn prefix_suffix_and_middle() {
        assert!(m("a*", "a"));
        assert!(m("a*", "abc"));
        assert!(!m("a*", "ba"));
        assert!(m("*a", "a"));
        assert!(m("*a", "cba"));
        assert!(!m("*a", "ab"));
        assert!(m("a*b*c", "abc"));
        assert!(m("a*b*c", "axxbyyc"));
        assert!(m("a*b*c", "abbcbc"));
        assert!(!m("a*b*c", "acb"));
        assert!(!m("a*b*c", "ab"));
        assert!(m("a**b", "ab"));
        assert!(m("aa*aa", "aaa") == reference("aa*aa", "aaa"));
        assert!(!m("aa*aa", "aaa"), "prefix and suffix must not overlap");
        assert!(m("aa*aa", "aaaa"));
        assert!(m("*ab*ab*", "abab"));
        assert!(!m("*ab*ab*", "aba"));
        assert!(m("ré*né", "rééné"));
        assert!(m("design-*", "design-"));
        assert!(!m("design-*", "Design-1"));
    }

    #[test]
    fn refuses_empty_and_unsafe() {
        assert_eq!(Pattern::parse(""), Err(PatternError::Empty));
        assert_eq!(
            Pattern::parse("a\u{1b}[2J"),
            Err(PatternError::UnsafeChar(0x1b))
        );
        assert_eq!(Who::parse("@"), Err(PatternError::EmptyGroupName));
        assert_eq!(Who::parse(""), Err(PatternError::Empty));
        assert_eq!(Who::parse("@design"), Ok(Who::Group("design".into())));
        assert_eq!(
            Who::parse("ci-*"),
            Ok(Who::Pattern(Pattern::parse("ci-*").unwrap()))
        );
        assert_eq!(Who::parse("@design").unwrap().to_string(), "@design");
        assert_eq!(Who::parse("ci-*").unwrap().to_string(), "ci-*");
    }

    #[test]
    fn long_inputs_stay_fast() {
        let s = "a".repeat(100_000);
        let p = format!("{}b", "a*".repeat(500));
        assert!(!m(&p, &s));
        assert!(m(&"a*".repeat(500), &s));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(4000))]

        #[test]
        fn agrees_with_the_reference(
            pattern in "[ab*é]{1,8}",
            s in "[abé]{0,10}",
        ) {
            prop_assert_eq!(m(&pattern, &s), reference(&pattern, &s), "{:?} {:?}", pattern, s);
        }

        #[test]
        fn a_pattern_matches_itself_without_stars(s in "[a-zé0-9-]{1,12}") {
            prop_assert!(m(&s, &s));
        }

        #[test]
        fn a_string_matches_its_starred_pieces(s in "[ab]{0,12}", cuts in proptest::collection::vec(0usize..13, 0..4)) {
            // Replace some cut points' surroundings by `*`: the result matches s.
            let chars: Vec<char> = s.chars().collect();
            let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c.min(chars.len())).collect();
            cuts.sort_unstable();
            let mut pattern = String::new();
            let mut at = 0;
            for c in cuts {
                pattern.extend(&chars[at..c]);
                pattern.push('*');
                at = c;
            }
            pattern.extend(&chars[at..]);
            if !pattern.is_empty() {
                prop_assert!(m(&pattern, &s), "{:?} {:?}", pattern, s);
            }
        }
    }
}
