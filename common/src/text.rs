//! Rules for strings that end up in an admin's terminal.
//!
//! Holder names, fingerprints and revoke reasons are printed by the console. A
//! control character there (an ANSI escape, a NUL, a C1 code) or a format
//! character (a bidi override that reverses what the admin reads) is an attack
//! on the admin, so the server rejects them on the way in and the console
//! sanitizes again on the way out.

use std::borrow::Cow;

pub const HOLDER_MAX_CHARS: usize = 128;
pub const FINGERPRINT_MAX_CHARS: usize = 128;
pub const REASON_MAX_CHARS: usize = 512;

/// Is `c` unsafe to print raw: Unicode general category Cc (control) or Cf
/// (format), or a line/paragraph separator?
pub fn is_unsafe_char(c: char) -> bool {
    c.is_control() || is_format_char(c) || matches!(c, '\u{2028}' | '\u{2029}')
}

/// Unicode general category Cf (Unicode 15.1).
fn is_format_char(c: char) -> bool {
    matches!(c as u32,
        0x00AD
        | 0x0600..=0x0605
        | 0x061C
        | 0x06DD
        | 0x070F
        | 0x0890..=0x0891
        | 0x08E2
        | 0x180E
        | 0x200B..=0x200F
        | 0x202A..=0x202E
        | 0x2060..=0x2064
        | 0x2066..=0x206F
        | 0xFEFF
        | 0xFFF9..=0xFFFB
        | 0x110BD
        | 0x110CD
        | 0x13430..=0x1343F
        | 0x1BCA0..=0x1BCA3
        | 0x1D173..=0x1D17A
        | 0xE0001
        | 0xE0020..=0xE007F)
}

/// Why a text field was refused; `Display` is a sentence for the client.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TextError {
    #[error("{field} must not be empty")]
    Empty { field: &'static str },
    #[error("{field} must be at most {max} characters")]
    TooLong { field: &'static str, max: usize },
    #[error("{field} must not contain control or format characters (found U+{code:04X})")]
    UnsafeChar { field: &'static str, code: u32 },
}

/// Check a field: `1..=max` characters (or `0..=max` if `allow_empty`) with no
/// unsafe character.
pub fn check_text(
    field: &'static str,
    value: &str,
    max: usize,
    allow_empty: bool,
) -> Result<(), TextError> {
    if value.is_empty() && !allow_empty {
        return Err(TextError::Empty { field });
    }
    if value.chars().count() > max {
        return Err(TextError::TooLong { field, max });
    }
    if let Some(c) = value.chars().find(|&c| is_unsafe_char(c)) {
        return Err(TextError::UnsafeChar {
            field,
            code: c as u32,
        });
    }
    Ok(())
}

/// Replace every unsafe character with `�` so the text can be printed.
pub fn sanitize_for_terminal(s: &str) -> Cow<'_, str> {
    if s.chars().any(is_unsafe_char) {
        Cow::Owned(
            s.chars()
                .map(|c| if is_unsafe_char(c) { '\u{FFFD}' } else { c })
                .collect(),
        )
    } else {
        Cow::Borrowed(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_ordinary_names_in_any_script() {
        for ok in ["alice", "Zoë Ünal", "山田太郎", "build-agent-07.ci", "🙂"] {
            assert_eq!(
                check_text("holder", ok, HOLDER_MAX_CHARS, false),
                Ok(()),
                "{ok}"
            );
        }
    }

    #[test]
    fn rejects_escapes_nul_c1_and_bidi() {
        for bad in [
            "\u{1b}[2J",
            "a\0b",
            "tab\there",
            "new\nline",
            "c1\u{9b}31m",
            "rtl\u{202e}txt.exe",
            "iso\u{2066}late",
            "zero\u{200b}width",
            "bom\u{feff}",
            "tag\u{e0041}",
            "sep\u{2028}",
        ] {
            let err = check_text("holder", bad, HOLDER_MAX_CHARS, false).unwrap_err();
            assert!(
                matches!(err, TextError::UnsafeChar { .. }),
                "{bad:?}: {err}"
            );
        }
    }

    #[test]
    fn length_is_counted_in_characters() {
        let max = "é".repeat(128);
        assert_eq!(check_text("holder", &max, 128, false), Ok(()));
        let over = "é".repeat(129);
        assert!(matches!(
            check_text("holder", &over, 128, false),
            Err(TextError::TooLong { max: 128, .. })
        ));
        assert!(matches!(
            check_text("holder", "", 128, false),
            Err(TextError::Empty { .. })
        ));
        assert_eq!(check_text("reason", "", 512, true), Ok(()));
    }

    #[test]
    fn sanitizes_for_the_terminal() {
        assert_eq!(sanitize_for_terminal("plain"), Cow::Borrowed("plain"));
        assert_eq!(
            sanitize_for_terminal("a\u{1b}[31mb\u{202e}"),
            "a\u{fffd}[31mb\u{fffd}"
        );
    }
}
