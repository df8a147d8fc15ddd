//! The report's time range: `--from` as RFC 3339 or a duration back from
//! now (`7d`, `24h`), `--to` as RFC 3339 or now, both on the server's clock.

use std::time::Duration;

use leasehold_common::Timestamp;
use leasehold_common::policy::parse_duration;

/// What `--from` said.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FromArg {
    At(Timestamp),
    /// This long before now.
    Ago(Duration),
}

/// The resolved range, `from < to`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Range {
    pub from: Timestamp,
    pub to: Timestamp,
}

impl Range {
    pub fn millis(&self) -> i64 {
        self.to.millis_since(self.from)
    }
}

/// `--from`: RFC 3339, else a duration (`7d`, `24h`, `90m`).
pub fn parse_from(s: &str) -> Result<FromArg, String> {
    if let Some(t) = Timestamp::parse_rfc3339(s) {
        return Ok(FromArg::At(t));
    }
    match parse_duration(s) {
        Ok(d) if !d.is_zero() => Ok(FromArg::Ago(d)),
        _ => Err(format!(
            "{s:?} is neither an RFC 3339 time (2026-11-23T00:00:00Z) nor a duration back from now (7d, 24h, 90m)"
        )),
    }
}

/// `--to`: RFC 3339.
pub fn parse_to(s: &str) -> Result<Timestamp, String> {
    Timestamp::parse_rfc3339(s)
        .ok_or_else(|| format!("{s:?} is not an RFC 3339 time (e.g. 2026-11-30T00:00:00Z)"))
}

/// `--step`: a duration of whole seconds, at least one.
pub fn parse_step(s: &str) -> Result<Duration, String> {
    let d = parse_duration(s)?;
    if d.as_millis() < 1000 || d.as_millis() % 1000 != 0 {
        return Err(format!("{s:?}: the step is whole seconds, at least 1s"));
    }
    Ok(d)
}

/// The range at server time `now`. A duration counts back from now (not
/// from `--to`), as the flag's help says.
pub fn resolve(from: FromArg, to: Option<Timestamp>, now: Timestamp) -> Result<Range, String> {
    let to = to.unwrap_or(now);
    let from = match from {
        FromArg::At(t) => t,
        FromArg::Ago(d) => now.saturating_sub(d),
    };
    if from >= to {
        return Err(format!(
            "the range is empty: --from {from} is not before --to {to}"
        ));
    }
    Ok(Range { from, to })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: i64) -> Timestamp {
        Timestamp::from_millis(1_796_011_200_000 + s * 1000)
    }

    #[test]
    fn from_is_a_time_or_a_duration() {
        assert_eq!(parse_from("2026-11-30T04:00:00Z"), Ok(FromArg::At(t(0))));
        assert_eq!(
            parse_from("2026-11-30T05:00:00+01:00"),
            Ok(FromArg::At(t(0)))
        );
        assert_eq!(
            parse_from("7d"),
            Ok(FromArg::Ago(Duration::from_secs(7 * 86_400)))
        );
        assert_eq!(
            parse_from("24h"),
            Ok(FromArg::Ago(Duration::from_secs(86_400)))
        );
        assert!(parse_from("0s").is_err());
        assert!(parse_from("last week").unwrap_err().contains("RFC 3339"));
        assert!(parse_to("7d").is_err());
        assert_eq!(parse_to("2026-11-30T04:00:00.000Z"), Ok(t(0)));
    }

    #[test]
    fn steps_are_whole_seconds() {
        assert_eq!(parse_step("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(parse_step("60"), Ok(Duration::from_secs(60)));
        assert!(parse_step("500ms").is_err());
        assert!(parse_step("1500ms").is_err());
        assert!(parse_step("0s").is_err());
    }

    #[test]
    fn ranges_resolve_against_server_now() {
        let now = t(1_000_000);
        let week = Duration::from_secs(7 * 86_400);
        assert_eq!(
            resolve(FromArg::Ago(week), None, now),
            Ok(Range {
                from: t(1_000_000 - 7 * 86_400),
                to: now
            })
        );
        assert_eq!(
            resolve(FromArg::At(t(0)), Some(t(60)), now).map(|r| r.millis()),
            Ok(60_000)
        );
        assert!(
            resolve(FromArg::At(t(60)), Some(t(60)), now)
                .unwrap_err()
                .contains("is not before")
        );
    }
}
