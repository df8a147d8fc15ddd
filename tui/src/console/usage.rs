//! The pools pane's usage, fetched every 30 s (less often when a round is
//! expensive, see [`next_round_in`]) apart from the 1 s poll, and soon
//! after the stream reports a checkout, release, reap, revoke, denial or
//! config change (see [`after_change_in`]), so DENIED and LAST HOUR keep up
//! with the event feed: per
//! pool, `GET /v1/admin/usage` for the last hour by minute, and once more
//! from 00:00 UTC for today's denials, both on the server's clock (its `now`
//! from `GET /v1/admin/licenses`). What fails is left out of the update, so
//! the console keeps showing the last data it had.

use std::sync::Arc;
use std::time::Duration;

use leasehold_common::Timestamp;
use leasehold_common::api::EventKind;
use tokio::sync::{Notify, mpsc};

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

/// Does an event of this kind change what the pools pane shows of usage?
/// Seats coming and going move LAST HOUR, a denial DENIED, a config
/// change the pool size the marks are scaled to. (Denied events cannot
/// simply be counted: the server throttles them to one per license and
/// holder every 10 s. Its exact count is fetched instead.)
pub fn changes_usage(kind: EventKind) -> bool {
    match kind {
        EventKind::Checkout
        | EventKind::Release
        | EventKind::Reap
        | EventKind::Revoke
        | EventKind::Denied
        | EventKind::Config
        | EventKind::Reclaim => true,
        // An alert's firing or resolving is fetched with the pools.
        // An entitlement's change is fetched with the pools too.
        EventKind::Lost | EventKind::Alert | EventKind::Entitlement => false,
    }
}

/// After a change, rounds come at most this often...
const CHANGE_GAP: Duration = Duration::from_secs(1);
/// ...and at least this many times the last round's time apart: a busy
/// stream keeps the server's usage sweeps to 1/20 of its time.
const CHANGE_COST_FACTOR: u32 = 20;
/// A burst of events (a pool filling up) costs one round, not one each.
const CHANGE_SETTLE: Duration = Duration::from_millis(200);

/// How long to wait, once a change is reported `since_round` after the
/// last round ended (which took `took`), before the next round.
pub fn after_change_in(took: Duration, since_round: Duration) -> Duration {
    let soonest = CHANGE_GAP.max(took * CHANGE_COST_FACTOR);
    soonest.saturating_sub(since_round).max(CHANGE_SETTLE)
}

/// Wait for the next round: the regular one, or sooner after a change.
async fn wait_for_round(took: Duration, changed: &Notify) {
    let ended = tokio::time::Instant::now();
    tokio::select! {
        _ = tokio::time::sleep(next_round_in(took)) => {}
        _ = changed.notified() => {
            tokio::time::sleep(after_change_in(took, ended.elapsed())).await;
        }
    }
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

/// Fetch rounds until the app goes away; `changed` is notified when the
/// stream reports a change the pane counts.
pub async fn run(client: AdminClient, tx: mpsc::UnboundedSender<AppEvent>, changed: Arc<Notify>) {
    loop {
        let started = tokio::time::Instant::now();
        let round = fetch_all(&client).await;
        let took = started.elapsed();
        match round {
            Ok(updates) => {
                for u in updates {
                    if tx.send(AppEvent::Usage(Box::new(u))).is_err() {
                        return;
                    }
                }
            }
            Err(e) => tracing::warn!("usage: {e}"),
        }
        wait_for_round(took, &changed).await;
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
    fn a_denial_or_a_seat_change_asks_for_the_usage_a_lost_seat_not() {
        for kind in EventKind::ALL {
            // A heartbeat on a vanished seat changes no count, nor does
            // an alert firing or resolving, nor an entitlement's change
            // (the pools' poll shows both).
            let no_count = matches!(
                kind,
                EventKind::Lost | EventKind::Alert | EventKind::Entitlement
            );
            assert_eq!(changes_usage(kind), !no_count, "{kind:?}");
        }
    }

    #[test]
    fn a_change_brings_the_next_round_within_a_second_or_two() {
        let cheap = Duration::from_millis(20);
        // Long after the last round: at once, once the burst settles.
        assert_eq!(
            after_change_in(cheap, Duration::from_secs(10)),
            CHANGE_SETTLE
        );
        // Right after one: a second after it, not 30 s.
        assert_eq!(
            after_change_in(cheap, Duration::from_millis(100)),
            Duration::from_millis(900)
        );
        // An expensive round (100,000 holders) keeps its distance.
        assert_eq!(
            after_change_in(Duration::from_millis(450), Duration::from_secs(1)),
            Duration::from_secs(8)
        );
        assert!(after_change_in(cheap, Duration::ZERO) < next_round_in(cheap));
    }

    // On tokio's paused clock: the times are exact, not this machine's.
    #[tokio::test(start_paused = true)]
    async fn a_change_cuts_the_wait_for_the_next_round_short() {
        let changed = Arc::new(Notify::new());
        let started = tokio::time::Instant::now();
        let notify = changed.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(300)).await;
            notify.notify_one();
        });
        wait_for_round(Duration::from_millis(1), &changed).await;
        let waited = started.elapsed();
        // One second after the round (CHANGE_GAP), far from USAGE_EVERY.
        assert_eq!(waited, CHANGE_GAP);
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
