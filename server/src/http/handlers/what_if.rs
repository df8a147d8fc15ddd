//! `GET /v1/admin/usage/what-if`: the recorded demand of a range replayed
//! against other seat counts (`usage/what_if.rs` says how). Behind the
//! admin auth filter (a viewer may read it); the range, the license and
//! `tolerance` are read as the usage endpoint reads them
//! ([`crate::http::query`]). Bad input is a
//! 400 `invalid_request` naming the parameter (a license not configured:
//! 404 `unknown_license`) before anything is read.

use std::ops::RangeInclusive;
use std::time::Duration;

use leasehold_common::api::{WhatIfPoint, WhatIfRecommendation, WhatIfResponse, code};
use warp::http::StatusCode;
use warp::reply::Response;

use super::common::{Result, json, store_err};
use crate::AppState;
use crate::http::error::ApiError;
use crate::http::query::{self, Query, short, strict_duration};
use crate::usage::what_if::{MAX_SEAT_COUNTS, Replay, WhatIfQuery};

/// The denial rate the recommendation meets when the request names none.
const DEFAULT_TARGET: f64 = 1.0;

/// `GET /v1/admin/usage/what-if`: the curve of seat counts and the
/// recommendation.
pub async fn admin_what_if(state: &AppState, query: Query) -> Result<Response> {
    let w = query::window(state, &query)?;
    // History stops at now: a `to` after it is taken as now.
    let to = w.to.min(w.now);
    if w.from >= to {
        return Err(ApiError::invalid(format!(
            "from ({}) must be before to ({to}; a later to is taken as now)",
            w.from
        )));
    }
    let seats = seats_param(&query)?;
    let idle_timeout = idle_timeout_param(&query)?;
    let tolerance = query::tolerance(&query)?;
    let target = target_param(&query)?;
    let policy = &w.license.policy;
    let demand = state
        .store
        .what_if_demand(WhatIfQuery {
            license_id: w.license.id.clone(),
            from: w.from,
            to,
            now: w.now,
            skew: policy.skew,
            ttl: policy.ttl,
            idle_timeout,
            tolerance,
        })
        .await
        .map_err(store_err(state))?;
    let seats_now = policy.seats;
    // The replay is a sort and a sweep of every request: off the runtime.
    let (demand, replay) = tokio::task::spawn_blocking(move || {
        let replay = demand.replay();
        (demand, replay)
    })
    .await
    .map_err(|e| {
        tracing::error!("what-if replay: {e}");
        ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            code::INTERNAL,
            "the replay did not finish",
        )
    })?;
    let (curve, recommended) = match seats {
        Some(seats) => replay.curve(seats, target),
        None => default_curve(&replay, seats_now, target),
    };
    Ok(json(
        StatusCode::OK,
        &WhatIfResponse {
            license_id: w.license.id,
            from: w.from,
            covered_from: demand.covered_from(),
            to,
            seats_now,
            requests: replay.requests(),
            sessions: demand.sessions(),
            true_denials: demand.true_denials(),
            episodes: demand.episodes(),
            idle_cut: demand.idle_cut(),
            curve,
            recommended,
        },
    ))
}

/// `1..=max(seats now, demand peak)`; past 1,000 values, the 1,000 around
/// the recommendation (or the highest, without one), so the answer still
/// holds the seat count it recommends.
fn default_curve(
    replay: &Replay,
    seats_now: u32,
    target: f64,
) -> (Vec<WhatIfPoint>, Option<WhatIfRecommendation>) {
    // Past the peak the curve is flat (no denial at any count): a pool far
    // larger than its demand (a vendor's million seats) costs no more.
    let flat_from = replay.peak().saturating_add(MAX_SEAT_COUNTS);
    let top = seats_now.min(flat_from).max(replay.peak()).max(1);
    if top <= MAX_SEAT_COUNTS {
        return replay.curve(1..=top, target);
    }
    let (_, recommended) = replay.curve(1..=top, target);
    let around = recommended.as_ref().map_or(top, |r| r.seats);
    let first = around
        .saturating_sub(MAX_SEAT_COUNTS / 2)
        .clamp(1, top - MAX_SEAT_COUNTS + 1);
    replay.curve(first..=first + MAX_SEAT_COUNTS - 1, target)
}

/// `seats`: `A..B` (or one count `A`), `1 <= A <= B`, at most 1,000 values.
fn seats_param(query: &Query) -> Result<Option<RangeInclusive<u32>>> {
    let Some(v) = query.get("seats") else {
        return Ok(None);
    };
    let bad = || {
        ApiError::invalid(format!(
            "seats must be a range of seat counts A..B with 1 <= A <= B and at most \
             {MAX_SEAT_COUNTS} values, such as 1..40, not {:?}",
            short(v)
        ))
    };
    let count = |t: &str| {
        t.bytes()
            .all(|b| b.is_ascii_digit())
            .then(|| t.parse::<u32>().ok())
            .flatten()
    };
    let (a, b) = match v.split_once("..") {
        Some((a, b)) => (count(a), count(b)),
        None => (count(v), count(v)),
    };
    match (a, b) {
        (Some(a), Some(b)) if 1 <= a && a <= b && b - a < MAX_SEAT_COUNTS => Ok(Some(a..=b)),
        _ => Err(bad()),
    }
}

/// `idle_timeout`: any duration from 1 s (not held to the licenses file's
/// "longer than the TTL": the question is hypothetical); absent, none.
fn idle_timeout_param(query: &Query) -> Result<Option<Duration>> {
    let Some(v) = query.get("idle_timeout") else {
        return Ok(None);
    };
    match strict_duration(v) {
        Some(d) if d >= Duration::from_secs(1) => Ok(Some(d)),
        _ => Err(ApiError::invalid(format!(
            "idle_timeout must be a duration of at least 1s such as 15m or 1h, not {:?}",
            short(v)
        ))),
    }
}

/// `target`: the denial rate to meet, in percent, 0 to 100 (default 1).
fn target_param(query: &Query) -> Result<f64> {
    let Some(v) = query.get("target") else {
        return Ok(DEFAULT_TARGET);
    };
    match v.parse::<f64>() {
        Ok(t) if (0.0..=100.0).contains(&t) => Ok(t),
        _ => Err(ApiError::invalid(format!(
            "target must be a denial rate in percent from 0 to 100 such as 1 or 0.5, not {:?}",
            short(v)
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(pairs: &[(&str, &str)]) -> Query {
        crate::http::query::of_pairs(pairs)
    }

    #[test]
    fn seats_are_a_range_of_at_most_a_thousand_counts() {
        assert_eq!(seats_param(&q(&[])).unwrap(), None);
        assert_eq!(seats_param(&q(&[("seats", "3..7")])).unwrap(), Some(3..=7));
        assert_eq!(seats_param(&q(&[("seats", "5")])).unwrap(), Some(5..=5));
        assert_eq!(
            seats_param(&q(&[("seats", "1..1000")])).unwrap(),
            Some(1..=1000)
        );
        for bad in [
            "",
            "..",
            "0..3",
            "7..3",
            "1..1001",
            "a..b",
            "1..",
            "..4",
            "+1..4",
            "1...4",
            "1..4..5",
            "-1..4",
            " 1..4",
            "1..99999999999",
        ] {
            let e = seats_param(&q(&[("seats", bad)])).unwrap_err();
            assert!(
                e.message.starts_with("seats must"),
                "{bad:?}: {}",
                e.message
            );
        }
    }

    #[test]
    fn idle_timeout_is_a_duration_from_a_second() {
        assert_eq!(idle_timeout_param(&q(&[])).unwrap(), None);
        assert_eq!(
            idle_timeout_param(&q(&[("idle_timeout", "1s")])).unwrap(),
            Some(Duration::from_secs(1))
        );
        assert_eq!(
            idle_timeout_param(&q(&[("idle_timeout", "30m")])).unwrap(),
            Some(Duration::from_secs(1800))
        );
        for bad in ["", "0s", "999ms", "soon", "-5m", "5 m", "1y"] {
            let e = idle_timeout_param(&q(&[("idle_timeout", bad)])).unwrap_err();
            assert!(e.message.starts_with("idle_timeout must"), "{bad:?}");
        }
    }

    #[test]
    fn a_default_of_more_than_a_thousand_counts_keeps_the_thousand_around_the_recommendation() {
        use crate::usage::what_if::DemandBuilder;
        use leasehold_common::Timestamp;
        let t = Timestamp::from_millis;
        let mut b = DemandBuilder::new(t(0), t(100), None);
        for _ in 0..1500 {
            b.session(t(0), Some(t(100)), &[]);
        }
        let replay = b
            .finish([], Duration::from_secs(60), Duration::from_secs(60))
            .replay();
        // 1% of 1500 requests: at most 15 denied, so 1485 seats.
        let (curve, recommended) = default_curve(&replay, 3, 1.0);
        assert_eq!(curve.len(), 1000);
        assert_eq!((curve[0].seats, curve[999].seats), (501, 1500));
        assert_eq!(recommended.map(|r| r.seats), Some(1485));
        let (curve, _) = default_curve(&replay, 3, 100.0);
        assert_eq!((curve[0].seats, curve[999].seats), (1, 1000));
        let (curve, _) = default_curve(&replay, 2000, 0.0);
        assert_eq!((curve[0].seats, curve[999].seats), (1000, 1999));
    }

    #[test]
    fn target_is_a_percentage() {
        assert_eq!(target_param(&q(&[])).unwrap(), 1.0);
        assert_eq!(target_param(&q(&[("target", "0")])).unwrap(), 0.0);
        assert_eq!(target_param(&q(&[("target", "100")])).unwrap(), 100.0);
        assert_eq!(target_param(&q(&[("target", "2.5")])).unwrap(), 2.5);
        for bad in ["", "-1", "100.1", "NaN", "inf", "five"] {
            let e = target_param(&q(&[("target", bad)])).unwrap_err();
            assert!(e.message.starts_with("target must"), "{bad:?}");
        }
    }
}
