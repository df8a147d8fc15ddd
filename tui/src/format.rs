//! How values are printed for people, shared by the console, the one-shot
//! commands and `simulate`: compact durations, policy durations as the
//! licenses file writes them, short seat ids, counts (exact,
//! grouped, or compact), text cut to a width with `…`, and JSON made safe
//! for a terminal; plain-text tables of the one-shot commands.

use std::borrow::Cow;

use leasehold_common::policy::format_duration;
use leasehold_common::text::is_unsafe_char;
use unicode_width::{UnicodeWidthChar, UnicodeWidthStr};

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

/// A policy duration (the API's seconds) as the licenses file writes it:
/// `60s`, `5m`, `500ms`.
pub fn policy_secs(s: f64) -> String {
    if s.is_finite() && s >= 0.0 {
        format_duration(std::time::Duration::from_secs_f64(s.min(1e12)))
    } else {
        format!("{s}s")
    }
}

/// Terminal cells `s` takes: a CJK character two, a combining mark none.
pub fn cells(s: &str) -> usize {
    s.width()
}

/// `s` in at most `width` cells: whole when it fits, otherwise cut and ended
/// with `…`. A cut never ends inside a number (`1000…` of `1000000`, `97.4…`
/// of `97.4k` would read as a different figure): the cut digits go whole.
pub fn ellipsize(s: &str, width: usize) -> Cow<'_, str> {
    if s.width() <= width {
        return Cow::Borrowed(s);
    }
    if width == 0 {
        return Cow::Borrowed("");
    }
    let budget = width - 1; // one cell for `…`
    let (mut used, mut end) = (0, 0);
    for (i, c) in s.char_indices() {
        let w = c.width().unwrap_or(0);
        if used + w > budget {
            break;
        }
        used += w;
        end = i + c.len_utf8();
    }
    let (mut kept, rest) = s.split_at(end);
    // Digits and what joins them in figures and times: 1,000 97.4k 04:00.
    let joins = |c: char| matches!(c, '.' | ',' | ':');
    let number_tail = kept.len()
        - kept
            .trim_end_matches(|c: char| c.is_ascii_digit() || joins(c))
            .len();
    let tail = &kept[kept.len() - number_tail..];
    if tail.contains(|c: char| c.is_ascii_digit())
        && rest.starts_with(|c: char| c.is_alphanumeric() || joins(c))
    {
        kept = &kept[..kept.len() - number_tail];
    }
    Cow::Owned(format!("{kept}…"))
}

/// `s` cut into lines of at most `width` cells (at any character: ids and
/// names have no spaces to break at). Empty text is one empty line.
pub fn wrap_cells(s: &str, width: usize) -> Vec<String> {
    let width = width.max(2); // a wide character always fits
    let mut lines = vec![String::new()];
    let mut used = 0;
    for c in s.chars() {
        let w = c.width().unwrap_or(0);
        if used + w > width {
            lines.push(String::new());
            used = 0;
        }
        used += w;
        lines.last_mut().expect("one line at least").push(c);
    }
    lines
}

/// Prose in lines of at most `width` cells, broken between words; a word
/// longer than a line is cut by [`wrap_cells`]. Runs of spaces collapse.
pub fn wrap_words(s: &str, width: usize) -> Vec<String> {
    let mut lines: Vec<String> = vec![String::new()];
    for word in s.split_whitespace() {
        let line = lines.last_mut().expect("one line at least");
        let need = cells(word) + usize::from(!line.is_empty());
        if cells(line) + need <= width {
            if !line.is_empty() {
                line.push(' ');
            }
            line.push_str(word);
            continue;
        }
        if line.is_empty() {
            lines.pop();
        }
        lines.extend(wrap_cells(word, width));
    }
    lines
}

/// A count with thousands separators: `1,000,000`.
pub fn grouped(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, d) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(d);
    }
    out
}

/// A count in at most five characters, for columns too narrow for the exact
/// figure: exact below 1000, else at most three significant digits and an
/// SI suffix (`97.4k`, `1M`, `902k`, `18.4E`). Digits are cut, never rounded
/// up, so the true count is at least what is shown and below the next value
/// of its last digit; the suffix keeps it from passing for an exact figure.
pub fn compact_count(n: u64) -> String {
    const SUFFIXES: [char; 6] = ['k', 'M', 'G', 'T', 'P', 'E'];
    if n < 1000 {
        return n.to_string();
    }
    let (mut scale, mut i) = (1000u64, 0);
    while n / scale >= 1000 {
        scale *= 1000;
        i += 1;
    }
    let whole = n / scale;
    let decimals: u32 = match whole {
        100.. => 0,
        10.. => 1,
        _ => 2,
    };
    let mut out = whole.to_string();
    if decimals > 0 {
        let frac = (n % scale) / (scale / 10u64.pow(decimals));
        let frac = format!("{frac:0w$}", w = decimals as usize);
        let frac = frac.trim_end_matches('0');
        if !frac.is_empty() {
            out.push('.');
            out.push_str(frac);
        }
    }
    out.push(SUFFIXES[i]);
    out
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

/// Left-aligned columns, two spaces apart, widths in terminal cells (`⏳`
/// and CJK take two).
pub fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| cells(h)).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cells(cell));
        }
    }
    let mut out = String::new();
    let mut line = |row: &mut dyn Iterator<Item = &str>| {
        let mut l = String::new();
        for (i, cell) in row.enumerate() {
            if i > 0 {
                l.push_str("  ");
            }
            l.push_str(cell);
            let pad = widths[i].saturating_sub(cells(cell));
            l.extend(std::iter::repeat_n(' ', pad));
        }
        out.push_str(l.trim_end());
        out.push('\n');
    };
    line(&mut header.iter().copied());
    for row in rows {
        line(&mut row.iter().map(String::as_str));
    }
    out
}

/// What a printed count can stand for: `1234` exactly that, `97.4k` every
/// count from 97,400 up to (not including) 97,500. `None` if `s` is not a
/// count as [`compact_count`] or `to_string` prints it. Used by the tests
/// that check no figure on screen is cut.
#[cfg(test)]
pub fn count_range(s: &str) -> Option<std::ops::Range<u128>> {
    let (body, scale) = match s.chars().last()? {
        c @ ('k' | 'M' | 'G' | 'T' | 'P' | 'E') => {
            let i = "kMGTPE".find(c)? as u32;
            (&s[..s.len() - 1], 1000u128.pow(i + 1))
        }
        _ => (s, 1),
    };
    let (whole, frac) = body.split_once('.').unwrap_or((body, ""));
    if whole.is_empty()
        || !whole
            .bytes()
            .chain(frac.bytes())
            .all(|b| b.is_ascii_digit())
    {
        return None;
    }
    let ulp = scale / 10u128.pow(frac.len() as u32);
    let low = whole.parse::<u128>().ok()? * scale + frac.parse::<u128>().unwrap_or(0) * ulp;
    Some(low..low + ulp)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Columns line up in terminal cells: `⏳` and CJK take two.
    #[test]
    fn table_columns_are_measured_in_cells() {
        let rows = vec![
            vec!["⏳ 1d".to_string(), "x".into()],
            vec!["ab".into(), "y".into()],
            vec!["山田".into(), "z".into()],
        ];
        assert_eq!(
            table(&["A", "B"], &rows),
            "A      B\n⏳ 1d  x\nab     y\n山田   z\n"
        );
    }

    #[test]
    fn compact_counts_are_cut_never_rounded_up() {
        let cases = [
            (0, "0"),
            (999, "999"),
            (1000, "1k"),
            (1234, "1.23k"),
            (1205, "1.2k"),
            (97_449, "97.4k"),
            (902_551, "902k"),
            (999_999, "999k"),
            (1_000_000, "1M"),
            (999_999_999_999, "999G"),
            (123_456_789_012, "123G"),
            (u64::MAX, "18.4E"),
        ];
        for (n, want) in cases {
            assert_eq!(compact_count(n), want, "{n}");
            assert!(count_range(want).unwrap().contains(&u128::from(n)), "{n}");
            assert!(want.len() <= 5);
        }
        assert_eq!(grouped(0), "0");
        assert_eq!(grouped(97_449), "97,449");
        assert_eq!(grouped(1_000_000), "1,000,000");
        assert_eq!(count_range("1.2k"), Some(1200..1300));
        assert_eq!(count_range("12x"), None);
    }

    #[test]
    fn ellipsize_cuts_to_the_width_and_marks_the_cut() {
        assert_eq!(ellipsize("alice", 5), "alice");
        assert_eq!(ellipsize("alice", 4), "ali…");
        assert_eq!(ellipsize("alice", 1), "…");
        assert_eq!(ellipsize("alice", 0), "");
        // Wide characters take two cells; the result never passes the width.
        assert_eq!(ellipsize("日本語です", 10), "日本語です");
        assert_eq!(ellipsize("日本語です", 5), "日本…");
        assert_eq!(ellipsize("日本語です", 4), "日…");
        assert_eq!(cells("日本…"), 5);
        // A combining mark stays with its letter.
        assert_eq!(ellipsize("e\u{301}tienne", 3), "e\u{301}t…");
        // No cut figure: the digits of a cut number go whole.
        assert_eq!(ellipsize("(97449 of 1000000 live)", 15), "(97449 of …");
        assert_eq!(ellipsize("used 97.4k", 9), "used …");
        assert_eq!(ellipsize("user-09999", 8), "user-…");
        assert_eq!(ellipsize("3 of 3 live", 6), "3 of …");
        assert_eq!(ellipsize("since 00:00 UTC", 10), "since …");
        assert_eq!(ellipsize("at 04:00:00 UTC", 12), "at 04:00:00…");
        assert_eq!(ellipsize("at 04:00:00 UTC", 11), "at …");
        for w in 0..30 {
            assert!(cells(&ellipsize("licence-日本-12345-ÉÉ", w)) <= w);
        }
    }

    #[test]
    fn wrap_words_breaks_between_words() {
        assert_eq!(
            wrap_words("its token stays  valid offline", 12),
            ["its token", "stays valid", "offline"]
        );
        assert_eq!(
            wrap_words("a 0123456789abc b", 6),
            ["a", "012345", "6789ab", "c b"]
        );
        assert_eq!(wrap_words("", 6), [""]);
    }

    #[test]
    fn wrap_cells_keeps_every_character() {
        assert_eq!(wrap_cells("abcdef", 4), ["abcd", "ef"]);
        assert_eq!(wrap_cells("", 4), [""]);
        assert_eq!(wrap_cells("日本語", 5), ["日本", "語"]);
        let long = "x".repeat(100);
        assert_eq!(wrap_cells(&long, 30).concat(), long);
    }

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
