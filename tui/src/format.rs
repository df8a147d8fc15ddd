//! How values are printed for people, shared by the console, the one-shot
//! commands and `simulate`: compact durations, short seat ids, and JSON made
//! safe for a terminal.

use leasehold_common::text::is_unsafe_char;

/// The first 8 characters of a seat id, as shown in tables and messages.
pub fn short_id(seat_id: &str) -> &str {
    match seat_id.char_indices().nth(8) {
        Some((i, _)) => &seat_id[..i],
        None => seat_id,
    }
}

/// A compact signed duration: `42s`, `5m03s`, `3h05m`, `2d03h`, `-7s`.
pub fn fmt_duration_ms(ms: i64) -> String {
    let sign = if ms < 0 { "-" } else { "" };
    // Whole seconds towards zero: a countdown shows 0s only in its last second.
    let s = (ms / 1000).unsigned_abs();
    let body = if s < 60 {
        format!("{s}s")
    } else if s < 3600 {
        format!("{}m{:02}s", s / 60, s % 60)
    } else if s < 86_400 {
        format!("{}h{:02}m", s / 3600, (s % 3600) / 60)
    } else {
        format!("{}d{:02}h", s / 86_400, (s % 86_400) / 3600)
    };
    format!("{sign}{body}")
}

/// Escape, as `\uXXXX`, every character a terminal would act on that
/// serde_json leaves raw (C1 controls, DEL, bidi and other format
/// characters). Such characters can only occur inside JSON strings, where
/// the escape means the same character: the data stays exact.
pub fn json_for_terminal(json: &str) -> String {
    if !json.chars().any(|c| c != '\n' && is_unsafe_char(c)) {
        return json.to_string();
    }
    let mut out = String::with_capacity(json.len() + 16);
    for c in json.chars() {
        if c != '\n' && is_unsafe_char(c) {
            let mut units = [0u16; 2];
            for u in c.encode_utf16(&mut units) {
                out.push_str(&format!("\\u{u:04x}"));
            }
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_are_compact() {
        assert_eq!(fmt_duration_ms(0), "0s");
        assert_eq!(fmt_duration_ms(999), "0s");
        assert_eq!(fmt_duration_ms(59_999), "59s");
        assert_eq!(fmt_duration_ms(61_000), "1m01s");
        assert_eq!(fmt_duration_ms(3_723_000), "1h02m");
        assert_eq!(fmt_duration_ms(2 * 86_400_000 + 3_600_000), "2d01h");
        assert_eq!(fmt_duration_ms(-7_400), "-7s");
        assert_eq!(short_id("abcdef0123456789"), "abcdef01");
        assert_eq!(short_id("ab"), "ab");
    }

    #[test]
    fn json_output_escapes_terminal_controls_but_keeps_the_data() {
        let raw =
            serde_json::to_string(&serde_json::json!({"h": "a\u{1b}b\u{9b}c\u{202e}d\u{e0041}é"}))
                .unwrap();
        let safe = json_for_terminal(&raw);
        assert!(
            !safe.chars().any(|c| is_unsafe_char(c) && c != '\n'),
            "{safe}"
        );
        let back: serde_json::Value = serde_json::from_str(&safe).unwrap();
        assert_eq!(back["h"], "a\u{1b}b\u{9b}c\u{202e}d\u{e0041}é");
        assert_eq!(json_for_terminal("{\n  \"a\": 1\n}"), "{\n  \"a\": 1\n}");
    }
}
