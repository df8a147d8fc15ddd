//! Timestamps: integer milliseconds since the Unix epoch, UTC.
//!
//! Stored as integers (SQLite column, arithmetic in the predicates) and written
//! on the wire as RFC 3339 with milliseconds, e.g. `2026-11-30T04:00:00.123Z`.

use std::fmt;
use std::time::Duration;

use chrono::{DateTime, SecondsFormat, Utc};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A point in time, in milliseconds since the Unix epoch (UTC).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Timestamp(i64);

impl Timestamp {
    pub const fn from_millis(ms: i64) -> Self {
        Timestamp(ms)
    }

    pub const fn as_millis(self) -> i64 {
        self.0
    }

    /// Whole seconds, rounded towards the past (a JWT `exp` rounded down never
    /// promises more than the server granted).
    pub const fn as_secs_floor(self) -> i64 {
        self.0.div_euclid(1000)
    }

    /// `self + d`, saturating instead of overflowing on absurd inputs.
    pub fn saturating_add(self, d: Duration) -> Self {
        Timestamp(self.0.saturating_add(duration_millis(d)))
    }

    /// `self - d`, saturating instead of overflowing on absurd inputs.
    pub fn saturating_sub(self, d: Duration) -> Self {
        Timestamp(self.0.saturating_sub(duration_millis(d)))
    }

    /// Milliseconds from `earlier` to `self` (negative if `earlier` is later).
    pub fn millis_since(self, earlier: Timestamp) -> i64 {
        self.0.saturating_sub(earlier.0)
    }

    pub fn to_datetime(self) -> DateTime<Utc> {
        DateTime::<Utc>::from_timestamp_millis(self.0).unwrap_or(DateTime::<Utc>::MAX_UTC)
    }

    pub fn from_datetime(dt: DateTime<Utc>) -> Self {
        Timestamp(dt.timestamp_millis())
    }

    /// RFC 3339, UTC, always three fractional digits and a `Z`.
    pub fn to_rfc3339(self) -> String {
        self.to_datetime()
            .to_rfc3339_opts(SecondsFormat::Millis, true)
    }

    pub fn parse_rfc3339(s: &str) -> Option<Self> {
        DateTime::parse_from_rfc3339(s)
            .ok()
            .map(|dt| Timestamp::from_datetime(dt.with_timezone(&Utc)))
    }
}

/// A `Duration` as whole milliseconds, saturating at `i64::MAX`.
pub fn duration_millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_rfc3339())
    }
}

impl Serialize for Timestamp {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_rfc3339())
    }
}

impl<'de> Deserialize<'de> for Timestamp {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Timestamp::parse_rfc3339(&s)
            .ok_or_else(|| serde::de::Error::custom(format!("not an RFC 3339 time: {s:?}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_format_is_rfc3339_utc_with_millis() {
        let t = Timestamp::from_millis(1_796_011_200_123);
        assert_eq!(t.to_rfc3339(), "2026-11-30T04:00:00.123Z");
        assert_eq!(
            Timestamp::parse_rfc3339("2026-11-30T04:00:00.123Z"),
            Some(t)
        );
        assert_eq!(
            serde_json::to_string(&t).unwrap(),
            "\"2026-11-30T04:00:00.123Z\""
        );
    }

    #[test]
    fn offsets_are_normalised_to_utc() {
        let t = Timestamp::parse_rfc3339("2026-11-30T05:00:00.123+01:00").unwrap();
        assert_eq!(t.to_rfc3339(), "2026-11-30T04:00:00.123Z");
    }

    #[test]
    fn seconds_round_towards_the_past() {
        assert_eq!(Timestamp::from_millis(1999).as_secs_floor(), 1);
        assert_eq!(Timestamp::from_millis(-1).as_secs_floor(), -1);
    }
}
