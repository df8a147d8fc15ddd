//! Durations in the licenses file: `"60s"`, `"500ms"`, `"5m"`, `"1h"`,
//! `"2d"` or a bare integer of seconds.

use std::time::Duration;

use serde::Deserialize;

/// `"60s"`, `"500ms"`, `"5m"`, `"1h"`, or a bare integer of seconds.
pub(super) struct DurationText(pub(super) Duration);

impl<'de> Deserialize<'de> for DurationText {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Secs(u64),
            Text(String),
        }
        match Raw::deserialize(d)? {
            Raw::Secs(s) => Ok(DurationText(Duration::from_secs(s))),
            Raw::Text(t) => parse_duration(&t)
                .map(DurationText)
                .map_err(serde::de::Error::custom),
        }
    }
}

/// Parse `"60s"`, `"500ms"`, `"5m"`, `"1h"`, `"2d"` or `"90"` (seconds).
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (digits, unit) = t.split_at(split);
    let bad =
        || format!("{text:?} is not a duration (use e.g. \"500ms\", \"60s\", \"5m\", \"1h\")");
    let n: u64 = digits.parse().map_err(|_| bad())?;
    let ms_per_unit: u64 = match unit.trim() {
        "ms" => 1,
        "" | "s" => 1000,
        "m" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        _ => return Err(bad()),
    };
    n.checked_mul(ms_per_unit)
        .map(Duration::from_millis)
        .ok_or_else(bad)
}

/// The shortest exact rendering: `1500ms`, `60s`, `5m`, `1h`.
pub fn format_duration(d: Duration) -> String {
    let ms = d.as_millis();
    if !ms.is_multiple_of(1000) {
        format!("{ms}ms")
    } else if ms.is_multiple_of(3_600_000) && ms > 0 {
        format!("{}h", ms / 3_600_000)
    } else if ms.is_multiple_of(60_000) && ms > 0 {
        format!("{}m", ms / 60_000)
    } else {
        format!("{}s", ms / 1000)
    }
}
