//! The query parameters several endpoints read, parsed once: integers,
//! the license and time window of the history endpoints (`license`,
//! `from`, `to`), page size (`limit`) and cursors (`after`), the
//! `tolerance` of a true denial, strict durations, and whether to answer
//! CSV (`format`, `Accept`). Each refuses bad input with the same 400
//! `invalid_request` message wherever it is read; a handler reads its own
//! parameters here first and parses only what is its alone.
//!
//! A leaf of `http`: it uses [`super::error`] and the state, nothing of
//! the handlers.

use std::collections::HashMap;
use std::fmt::Display;
use std::time::Duration;

use leasehold_common::policy::parse_duration;
use leasehold_common::{LicenseConfig, Timestamp};

use super::error::ApiError;
use crate::AppState;
use crate::store::denials::{DEFAULT_TOLERANCE, MAX_TOLERANCE};

/// A request's query string, one value per name (see `filters::query`).
pub type Query = HashMap<String, String>;

type Result<T> = std::result::Result<T, ApiError>;

/// The range when the request names none: the last 24 hours.
const DEFAULT_RANGE: Duration = Duration::from_secs(24 * 3600);

/// A value quoted back in a message, cut short.
pub fn short(v: &str) -> String {
    v.chars().take(64).collect()
}

/// An optional non-negative integer parameter.
pub fn int(query: &Query, name: &str) -> Result<Option<i64>> {
    match query.get(name) {
        None => Ok(None),
        Some(v) => match v.parse::<i64>() {
            Ok(n) if n >= 0 => Ok(Some(n)),
            _ => Err(ApiError::invalid(format!(
                "{name} must be a non-negative integer, not {v:?}"
            ))),
        },
    }
}

/// A sequence number as this server hands them out (an event id, a
/// delivery's `next`): digits only, no sign, within `i64`.
pub fn seq(v: &str) -> Option<i64> {
    v.parse::<i64>()
        .ok()
        .filter(|n| *n >= 0 && v.bytes().all(|b| b.is_ascii_digit()))
}

/// The most rows of one JSON page, and how many when the request says
/// nothing.
#[derive(Debug, Clone, Copy)]
pub struct PageLimit {
    pub default: usize,
    pub max: i64,
}

/// `limit`: 1 to `limits.max`, default `limits.default`.
pub fn limit(query: &Query, limits: PageLimit) -> Result<usize> {
    match int(query, "limit")? {
        None => Ok(limits.default),
        Some(n) if (1..=limits.max).contains(&n) => Ok(n as usize),
        Some(n) => Err(ApiError::invalid(format!(
            "limit must be 1 to {}, not {n}",
            limits.max
        ))),
    }
}

/// `after`: the `next` of a previous page, decoded by the page's cursor
/// type; absent or empty, the first page.
pub fn cursor<C, E: Display>(
    query: &Query,
    decode: impl FnOnce(&str) -> std::result::Result<C, E>,
) -> Result<Option<C>> {
    query
        .get("after")
        .filter(|a| !a.is_empty())
        .map(|a| decode(a))
        .transpose()
        .map_err(|e| ApiError::invalid(e.to_string()))
}

/// A duration as the contract's pattern writes it: only digits and a
/// unit (no spaces, no sign); `None` if it is not one.
pub fn strict_duration(v: &str) -> Option<Duration> {
    v.chars()
        .all(|c| c.is_ascii_alphanumeric())
        .then(|| parse_duration(v).ok())
        .flatten()
}

/// `tolerance`: a duration from `0s` to `1h`, default `60s`.
pub fn tolerance(query: &Query) -> Result<Duration> {
    let Some(v) = query.get("tolerance") else {
        return Ok(DEFAULT_TOLERANCE);
    };
    match strict_duration(v) {
        Some(d) if d <= MAX_TOLERANCE => Ok(d),
        _ => Err(ApiError::invalid(format!(
            "tolerance must be a duration from 0s to 1h such as 0s, 60s or 5m, not {:?}",
            short(v)
        ))),
    }
}

/// JSON (one page) or CSV (the whole range)? `format=csv|json`, else an
/// `Accept` header naming `text/csv`.
pub fn wants_csv(query: &Query, accept: Option<&str>) -> Result<bool> {
    match query.get("format").map(String::as_str) {
        Some("csv") => Ok(true),
        Some("json") => Ok(false),
        Some(other) => Err(ApiError::invalid(format!(
            "format must be json or csv, not {:?}",
            short(other)
        ))),
        None => Ok(accept.is_some_and(|a| a.to_ascii_lowercase().contains("text/csv"))),
    }
}

/// The license (a license with a vendor as it decides now) and
/// `[from, to)` a history request is about, judged at `now`.
pub struct Window {
    pub license: LicenseConfig,
    pub from: Timestamp,
    pub to: Timestamp,
    pub now: Timestamp,
}

/// `license` (required, configured), `from` and `to` (RFC 3339; default the
/// 24 hours up to now, rounded up to a whole second so per-second denial
/// counts fall wholly inside or outside the range).
pub fn window(state: &AppState, query: &Query) -> Result<Window> {
    let Some(license_id) = query.get("license").filter(|l| !l.is_empty()) else {
        return Err(ApiError::invalid(
            "license is required (?license=<license id>)",
        ));
    };
    let licenses = state.licenses.current();
    let in_file = licenses
        .get(license_id)
        .ok_or_else(|| ApiError::unknown_license(license_id))?;
    let now = state.clock.now();
    // A license with a vendor as it decides now: its entitled seats, never
    // the file's "not narrowed" placeholder.
    let decided = state.store.decision_time(now);
    let license = crate::store::rules::effective(&licenses, in_file, decided)
        .lic
        .into_owned();
    let to = match time(query, "to")? {
        Some(t) => t,
        None => Timestamp::from_millis(now.as_millis().div_euclid(1000) * 1000 + 1000),
    };
    let from = time(query, "from")?.unwrap_or(to.saturating_sub(DEFAULT_RANGE));
    if from >= to {
        return Err(ApiError::invalid(format!(
            "from ({from}) must be before to ({to})"
        )));
    }
    Ok(Window {
        license,
        from,
        to,
        now,
    })
}

/// An optional RFC 3339 time.
fn time(query: &Query, name: &str) -> Result<Option<Timestamp>> {
    query
        .get(name)
        .map(|v| {
            Timestamp::parse_rfc3339(v).ok_or_else(|| {
                ApiError::invalid(format!(
                    "{name} must be an RFC 3339 time such as 2027-01-15T08:00:00Z, not {:?}",
                    short(v)
                ))
            })
        })
        .transpose()
}

/// A query from `(name, value)` pairs, for the handlers' tests.
#[cfg(test)]
pub(crate) fn of_pairs(pairs: &[(&str, &str)]) -> Query {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(pairs: &[(&str, &str)]) -> Query {
        of_pairs(pairs)
    }

    #[test]
    fn a_limit_is_within_its_bounds() {
        let limits = PageLimit {
            default: 100,
            max: 1000,
        };
        assert_eq!(limit(&q(&[]), limits).unwrap(), 100);
        assert_eq!(limit(&q(&[("limit", "1000")]), limits).unwrap(), 1000);
        let e = limit(&q(&[("limit", "1001")]), limits).unwrap_err();
        assert_eq!(e.message, "limit must be 1 to 1000, not 1001");
        let e = limit(&q(&[("limit", "0")]), limits).unwrap_err();
        assert_eq!(e.message, "limit must be 1 to 1000, not 0");
        let e = limit(&q(&[("limit", "-1")]), limits).unwrap_err();
        assert_eq!(
            e.message,
            "limit must be a non-negative integer, not \"-1\""
        );
    }

    #[test]
    fn a_seq_is_digits_only() {
        assert_eq!(seq("0"), Some(0));
        assert_eq!(seq("42"), Some(42));
        for bad in ["", "+1", "-1", " 1", "1.0", "99999999999999999999"] {
            assert_eq!(seq(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn format_and_accept_choose_csv() {
        assert!(!wants_csv(&q(&[]), None).unwrap());
        assert!(wants_csv(&q(&[]), Some("Text/CSV")).unwrap());
        assert!(!wants_csv(&q(&[("format", "json")]), Some("text/csv")).unwrap());
        assert!(wants_csv(&q(&[("format", "csv")]), None).unwrap());
        assert!(wants_csv(&q(&[("format", "xml")]), None).is_err());
    }

    #[test]
    fn a_tolerance_is_a_strict_duration_up_to_an_hour() {
        assert_eq!(tolerance(&q(&[])).unwrap(), DEFAULT_TOLERANCE);
        assert_eq!(
            tolerance(&q(&[("tolerance", "5m")])).unwrap(),
            Duration::from_secs(300)
        );
        for bad in ["", "5 m", "-5m", "2h", "soon"] {
            let e = tolerance(&q(&[("tolerance", bad)])).unwrap_err();
            assert!(e.message.starts_with("tolerance must"), "{bad:?}");
        }
    }
}
