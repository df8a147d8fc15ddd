//! The right-sizing endpoints: the usage summary read with a tolerance for
//! true denials, and `GET /v1/admin/usage/what-if`, the recorded demand
//! replayed against other seat counts.

use std::time::Duration;

use leasehold_common::Timestamp;
use leasehold_common::api::{UsageResponse, WhatIfResponse};
use leasehold_common::policy::format_duration;

use super::{AdminClient, ApiError, Query, UsageQuery};

impl AdminClient {
    /// `GET /v1/admin/usage` with `tolerance` (how soon a grant after a
    /// denial while full makes it a false denial); `None`: the server's
    /// default, and the same request as [`AdminClient::usage`].
    pub async fn usage_within(
        &self,
        q: &UsageQuery<'_>,
        tolerance: Option<Duration>,
    ) -> Result<UsageResponse, ApiError> {
        let mut query = Query(q.to_query());
        if let Some(t) = tolerance {
            query.push("tolerance", &format_duration(t));
        }
        self.get_json(&format!("/v1/admin/usage?{}", query.0)).await
    }

    /// `GET /v1/admin/usage/what-if`: one license's recorded demand
    /// replayed against a range of seat counts.
    pub async fn what_if(&self, q: &WhatIfQuery<'_>) -> Result<WhatIfResponse, ApiError> {
        self.get_json(&format!("/v1/admin/usage/what-if?{}", q.to_query()))
            .await
    }
}

/// The parameters of `GET /v1/admin/usage/what-if`; absent ones are left
/// to the server (seats `1..max(now, demand peak)`, no idle timeout, a
/// 60 s tolerance, a 1 % target).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct WhatIfQuery<'a> {
    pub license: &'a str,
    pub from: Option<Timestamp>,
    pub to: Option<Timestamp>,
    /// The seat counts to replay, both ends included.
    pub seats: Option<(u32, u32)>,
    pub idle_timeout: Option<Duration>,
    pub tolerance: Option<Duration>,
    /// The denial rate to meet, in percent.
    pub target: Option<f64>,
}

impl WhatIfQuery<'_> {
    /// The query string, without the `?`.
    pub fn to_query(&self) -> String {
        let mut q = Query::default();
        q.push("license", self.license);
        q.push_time("from", self.from);
        q.push_time("to", self.to);
        if let Some((a, b)) = self.seats {
            q.push("seats", &format!("{a}..{b}"));
        }
        if let Some(d) = self.idle_timeout {
            q.push("idle_timeout", &format_duration(d));
        }
        if let Some(d) = self.tolerance {
            q.push("tolerance", &format_duration(d));
        }
        if let Some(p) = self.target {
            q.push("target", &p.to_string());
        }
        q.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_if_query_sends_only_what_is_set() {
        let q = WhatIfQuery {
            license: "demo cad",
            ..WhatIfQuery::default()
        };
        assert_eq!(q.to_query(), "license=demo%20cad");
        let t = Timestamp::from_millis(1_796_011_200_000);
        let q = WhatIfQuery {
            license: "x",
            from: Some(t),
            to: Some(t),
            seats: Some((2, 40)),
            idle_timeout: Some(Duration::from_secs(1800)),
            tolerance: Some(Duration::ZERO),
            target: Some(0.5),
        };
        assert_eq!(
            q.to_query(),
            "license=x&from=2026-11-30T04%3A00%3A00.000Z&to=2026-11-30T04%3A00%3A00.000Z\
             &seats=2..40&idle_timeout=30m&tolerance=0s&target=0.5"
        );
        assert_eq!(
            WhatIfQuery {
                target: Some(1.0),
                ..q
            }
            .to_query()
            .rsplit('&')
            .next(),
            Some("target=1")
        );
    }
}
