//! The pools pane's usage, fetched every 30 s (less often when a round is
//! expensive, see [`next_round_in`]) apart from the 1 s poll: per
//! pool, `GET /v1/admin/usage` for the last hour by minute, and once more
//! from 00:00 UTC for today's denials, both on the server's clock (its `now`
//! from `GET /v1/admin/licenses`). What fails is left out of the update, so
//! the console keeps showing the last data it had.

use std::time::Duration;

use leasehold_common::Timestamp;
use tokio::sync::mpsc;

use crate::api::{AdminClient, ApiError, UsageQuery};
use crate::app::{AppEvent, SPARK_MINUTES, UsageUpdate};

/// How often the usage is fetched, at most.
pub const USAGE_EVERY: Duration = Duration::from_secs(30);
/// A round waits at least this many times as long as the last one took:
/// the server sweeps every session of the range, ≈ 0.2 s per request with
/// 100,000 holders, so an idle console keeps it busy at most 1/200 of the
/// time (every ≈ 90 s there) instead of 1.5 % (every 30 s).
const COST_FACTOR: u32 = 200;

/// How long to wait after a round that took `took`.
pub fn next_round_in(took: Duration) -> Duration {
    USAGE_EVERY.max(took * COST_FACTOR)
}
const MINUTE: Duration = Duration::from_secs(60);
const DAY_MS: i64 = 86_400_000;

/// The two ranges asked for at server time `now`: the last hour, and today
/// since 00:00 UTC (`None` in the first millisecond of the day, when the
/// range would be empty and today's denials are 0 by definition).
pub fn windows(now: Timestamp) -> ((Timestamp, Timestamp), Option<(Timestamp, Timestamp)>) {
    let hour = Timestamp::from_millis(now.as_millis() - SPARK_MINUTES as i64 * 60_000);
    let midnight = Timestamp::from_millis(now.as_millis().div_euclid(DAY_MS) * DAY_MS);
    let today = (midnight < now).then_some((midnight, now));
    ((hour, now), today)
}

pub async fn run(client: AdminClient, tx: mpsc::UnboundedSender<AppEvent>) {
    loop {
        let started = tokio::time::Instant::now();
        let round = fetch_all(&client).await;
        let wait = next_round_in(started.elapsed());
        let updates = match round {
            Ok(u) => u,
            Err(e) => {
                tracing::warn!("usage: {e}");
                tokio::time::sleep(wait).await;
                continue;
            }
        };
        for u in updates {
            if tx.send(AppEvent::Usage(Box::new(u))).is_err() {
                return;
            }
        }
        tokio::time::sleep(wait).await;
    }
}

/// One round: every pool the server lists, one after another (a round is
/// every 30 s; there is no hurry, and the server is spared a burst).
async fn fetch_all(client: &AdminClient) -> Result<Vec<UsageUpdate>, ApiError> {
    let pools = client.licenses().await?;
    let (hour, today) = windows(pools.now);
    let mut first_error: Option<ApiError> = None;
    let mut updates = Vec::with_capacity(pools.licenses.len());
    for pool in &pools.licenses {
        let hour_query = UsageQuery {
            license: &pool.id,
            from: Some(hour.0),
            to: Some(hour.1),
            step: Some(MINUTE),
        };
        let last_hour = client.usage(&hour_query);
        let denials = async {
            match today {
                Some((from, to)) => client
                    .usage(&UsageQuery {
                        license: &pool.id,
                        from: Some(from),
                        to: Some(to),
                        // Only the summary is read: a few points are plenty.
                        step: Some(Duration::from_secs(3600)),
                    })
                    .await
                    .map(|u| u.summary.denials),
                None => Ok(0),
            }
        };
        let (last_hour, denials) = tokio::join!(last_hour, denials);
        updates.push(UsageUpdate {
            license_id: pool.id.clone(),
            last_hour: keep(last_hour.map(|u| u.points), &mut first_error),
            denials_today: keep(denials, &mut first_error),
        });
    }
    // One log line per round, not one per pool: a server without the
    // usage endpoint would otherwise fill the log every 30 s.
    if let Some(e) = first_error {
        tracing::warn!("usage: {e} (the pools pane keeps its last data)");
    }
    Ok(updates)
}

/// The value, or `None` with the round's first error remembered.
fn keep<T>(r: Result<T, ApiError>, first_error: &mut Option<ApiError>) -> Option<T> {
    match r {
        Ok(v) => Some(v),
        Err(e) => {
            first_error.get_or_insert(e);
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_expensive_round_makes_the_next_later() {
        assert_eq!(next_round_in(Duration::from_millis(20)), USAGE_EVERY);
        assert_eq!(
            next_round_in(Duration::from_millis(450)),
            Duration::from_secs(90)
        );
    }

    #[test]
    fn the_last_hour_and_today_on_the_server_clock() {
        // 2026-11-30T04:00:00.500Z
        let now = Timestamp::from_millis(1_796_011_200_500);
        let (hour, today) = windows(now);
        assert_eq!(hour.0.to_string(), "2026-11-30T03:00:00.500Z");
        assert_eq!(hour.1, now);
        let today = today.unwrap();
        assert_eq!(today.0.to_string(), "2026-11-30T00:00:00.000Z");
        assert_eq!(today.1, now);
        // At midnight exactly, today is empty: nothing to ask.
        let midnight = Timestamp::from_millis(1_796_011_200_000 - 4 * 3_600_000);
        assert_eq!(windows(midnight).1, None);
        assert_eq!(
            windows(Timestamp::from_millis(midnight.as_millis() + 1)).1,
            Some((midnight, Timestamp::from_millis(midnight.as_millis() + 1)))
        );
    }
}
