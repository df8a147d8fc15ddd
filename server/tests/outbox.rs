//! The webhook outbox and the alerts on a real store with a clock moved by
//! hand, on the store `LEASEHOLD_TEST_STORE` names (SQLite by default):
//! deliveries queued in the commit of their cause (and not at all when it
//! fails), claims, the retry schedule as stored, the admin views, pruning,
//! and each alert's transitions once, across a reopen. Tests named
//! `sqlite_*` are about SQLite itself and run on SQLite either way.

#[allow(dead_code)] // each test binary uses a part of it
mod support;

#[path = "outbox/harness.rs"]
mod harness;

use leasehold_common::alerts::{DeliveryBody, DeliveryStatus, DeliveryType, DeliveryView};
use leasehold_common::api::EventKind;
use leasehold_server::store::outbox::{DeliveriesQuery, KEEP_FINISHED};
use leasehold_server::store::{RevokeOutcome, SCHEMA_VERSION, StoreError, sqlite_migrate_to};

use harness::{DAY_MS, Harness, exec, webhooks_of};
use support::{TestDb, at};

#[tokio::test]
async fn a_forwarded_event_queues_one_delivery_per_subscribed_webhook() {
    let h = Harness::new();
    let seat = h.granted("cad", "alice").await;
    assert!(
        h.deliveries().await.is_empty(),
        "checkout is forwarded by none"
    );
    h.set(1_000);
    let out = h
        .store
        .revoke(&seat.seat_id, None, None, false)
        .await
        .unwrap();
    assert!(matches!(out, RevokeOutcome::Revoked(_)), "{out:?}");
    let events = h.store.events_after(0, 100).await.unwrap();
    let revoke = events.iter().find(|e| e.kind == EventKind::Revoke).unwrap();

    let ds = h.deliveries().await;
    assert_eq!(webhooks_of(&ds), ["chat", "ops"], "none for quiet");
    for d in &ds {
        assert_eq!(
            (d.kind, d.status, d.attempts),
            (DeliveryType::Event, DeliveryStatus::Pending, 0)
        );
        assert_eq!(
            (d.created_at, d.next_attempt_at),
            (at(1_000), Some(at(1_000)))
        );
        assert_eq!(
            (d.license_id.as_deref(), d.last_attempt_at),
            (Some("cad"), None)
        );
    }
    assert!(h.store.deliveries_due(at(1_000)).await.unwrap());
    assert!(!h.store.deliveries_due(at(999)).await.unwrap());
    let due = h.claim().await;
    assert_eq!(due.len(), 2);
    let ops = due.iter().find(|d| d.webhook == "ops").unwrap();
    let body: DeliveryBody = serde_json::from_str(&ops.body).unwrap();
    assert_eq!(body.id, ops.id);
    assert_eq!(body.kind, DeliveryType::Event);
    assert_eq!(body.event.as_ref(), Some(revoke), "the event as numbered");
    let chat = due.iter().find(|d| d.webhook == "chat").unwrap();
    let text: serde_json::Value = serde_json::from_str(&chat.body).unwrap();
    assert_eq!(text, serde_json::json!({ "text": body.text }));
    h.finish().await;
}

#[tokio::test]
async fn a_failed_command_queues_nothing() {
    let h = Harness::new();
    let seat = h.granted("cad", "alice").await;
    exec(
        &h.db,
        "CREATE TRIGGER refuse BEFORE INSERT ON deliveries
         BEGIN SELECT RAISE(ABORT, 'refused by the test'); END;",
        "CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS
             $$ BEGIN RAISE EXCEPTION 'refused by the test'; END $$;
         CREATE TRIGGER refuse BEFORE INSERT ON deliveries
             FOR EACH ROW EXECUTE FUNCTION refuse();",
    );
    let failed = h.store.revoke(&seat.seat_id, None, None, false).await;
    assert!(failed.is_err(), "{failed:?}");
    assert!(h.store.find_seat(&seat.seat_id).await.unwrap().is_some());
    let events = h.store.events_after(0, 100).await.unwrap();
    assert!(
        events.iter().all(|e| e.kind != EventKind::Revoke),
        "{events:?}"
    );
    assert!(h.deliveries().await.is_empty());

    exec(
        &h.db,
        "DROP TRIGGER refuse;",
        "DROP TRIGGER refuse ON deliveries;",
    );
    let unknown = h.store.queue_test_delivery("nobody".into()).await;
    assert!(
        matches!(unknown, Err(StoreError::UnknownWebhook(_))),
        "{unknown:?}"
    );
    assert!(h.deliveries().await.is_empty());
    let out = h
        .store
        .revoke(&seat.seat_id, None, None, false)
        .await
        .unwrap();
    assert!(matches!(out, RevokeOutcome::Revoked(_)));
    assert_eq!(webhooks_of(&h.deliveries().await), ["chat", "ops"]);
    h.finish().await;
}

#[tokio::test]
async fn a_claim_holds_for_its_time_and_retries_follow_the_schedule() {
    let h = Harness::new();
    let id = h.store.queue_test_delivery("ops".into()).await.unwrap();
    let first = h.claim().await;
    assert_eq!(
        (first.len(), first[0].id.as_str(), first[0].attempts),
        (1, id.as_str(), 0)
    );
    assert!(h.claim().await.is_empty(), "claimed");
    assert!(!h.store.deliveries_due(at(0)).await.unwrap());
    h.set(29_999);
    assert!(h.claim().await.is_empty(), "claimed for 30 s");
    h.set(30_000);
    let again = h.claim().await;
    assert_eq!(again, first, "the same delivery, the same bytes");

    let status = h
        .attempt(&again[0], Err("HTTP 500 Internal Server Error"))
        .await;
    assert_eq!(status, DeliveryStatus::Pending);
    let v = h.delivery(&id).await;
    assert_eq!((v.status, v.attempts), (DeliveryStatus::Pending, 1));
    assert_eq!(
        (v.last_attempt_at, v.next_attempt_at),
        (Some(at(30_000)), Some(at(31_000)))
    );
    assert_eq!(
        v.last_error.as_deref(),
        Some("HTTP 500 Internal Server Error")
    );
    h.set(30_999);
    assert!(h.claim().await.is_empty(), "not due before its retry");
    h.set(31_000);
    let second = h.claim().await;
    assert_eq!((second[0].attempts, &second[0].body), (1, &first[0].body));
    assert_eq!(
        h.attempt(&second[0], Err("timeout")).await,
        DeliveryStatus::Pending
    );
    assert_eq!(
        h.delivery(&id).await.next_attempt_at,
        Some(at(33_000)),
        "2 s"
    );
    h.set(33_000);
    let third = h.claim().await;
    assert_eq!(third[0].body, first[0].body);
    assert_eq!(
        h.attempt(&third[0], Ok(())).await,
        DeliveryStatus::Delivered
    );
    let v = h.delivery(&id).await;
    assert_eq!(
        (v.status, v.attempts, v.last_error.as_deref()),
        (DeliveryStatus::Delivered, 3, None)
    );
    assert_eq!(
        (v.last_attempt_at, v.next_attempt_at),
        (Some(at(33_000)), None)
    );
    // A late answer to an old claim changes nothing.
    h.set(34_000);
    h.attempt(&second[0], Err("late")).await;
    assert_eq!(h.delivery(&id).await, v);
    assert!(h.claim().await.is_empty());
    h.finish().await;
}

#[tokio::test]
async fn a_delivery_not_delivered_within_a_day_fails() {
    let h = Harness::new();
    let id = h.store.queue_test_delivery("chat".into()).await.unwrap();
    h.set(1_000);
    let due = h.claim().await;
    assert_eq!(
        h.attempt(&due[0], Err("connection refused")).await,
        DeliveryStatus::Pending
    );
    h.set(DAY_MS - 1_000);
    let due = h.claim().await;
    assert_eq!(due.len(), 1);
    // The next try would come 2 s later: past the day.
    assert_eq!(
        h.attempt(&due[0], Err("HTTP 503")).await,
        DeliveryStatus::Failed
    );
    let v = h.delivery(&id).await;
    assert_eq!(
        (v.status, v.attempts, v.next_attempt_at),
        (DeliveryStatus::Failed, 2, None)
    );
    assert_eq!(v.last_error.as_deref(), Some("HTTP 503"));
    h.set(2 * DAY_MS);
    assert!(h.claim().await.is_empty());
    assert!(!h.store.deliveries_due(at(2 * DAY_MS)).await.unwrap());
    h.finish().await;
}

/// Queue `n` test deliveries to `webhook`, one a second from `from_ms`.
async fn queue_tests(h: &Harness, webhook: &str, from_ms: i64, n: i64) -> Vec<String> {
    let mut ids = Vec::new();
    for i in 0..n {
        h.set(from_ms + i * 1_000);
        ids.push(h.store.queue_test_delivery(webhook.into()).await.unwrap());
    }
    ids
}

/// Five test deliveries to `ops` and three to `chat`, claimed at 10 s and
/// attempted: ops 0, 1, 3 delivered, ops 2 retrying, ops 4 not yet; chat 0
/// delivered, chat 1 retrying (the newest attempt), chat 2 not yet.
async fn attempted_mix(h: &Harness) -> (Vec<String>, Vec<String>) {
    let ops = queue_tests(h, "ops", 0, 5).await;
    let chat = queue_tests(h, "chat", 5_000, 3).await;
    h.set(10_000);
    let due = h.claim().await;
    let claimed: Vec<&String> = due.iter().map(|d| &d.id).collect();
    let queued = [ops.clone(), chat.clone()].concat();
    assert_eq!(
        claimed,
        queued.iter().collect::<Vec<_>>(),
        "earliest due first"
    );
    let by_id = |id: &String| due.iter().find(|d| &d.id == id).unwrap().clone();
    h.attempt(&by_id(&ops[0]), Ok(())).await;
    h.set(11_000);
    h.attempt(&by_id(&ops[1]), Ok(())).await;
    h.set(12_000);
    h.attempt(&by_id(&ops[2]), Err("HTTP 404")).await;
    h.attempt(&by_id(&chat[0]), Ok(())).await;
    h.set(13_000);
    h.attempt(&by_id(&chat[1]), Err("timeout")).await;
    h.set(14_000);
    h.attempt(&by_id(&ops[3]), Ok(())).await;
    (ops, chat)
}

#[tokio::test]
async fn webhook_stats_count_by_status_with_the_newest_error() {
    let h = Harness::new();
    attempted_mix(&h).await;
    let stats = h.store.webhook_stats().await.unwrap();
    let names: Vec<&str> = stats.iter().map(|s| s.webhook.as_str()).collect();
    assert_eq!(names, ["chat", "ops"], "only webhooks with deliveries");
    let (c, o) = (&stats[0], &stats[1]);
    assert_eq!((c.pending, c.delivered, c.failed), (2, 1, 0));
    assert_eq!(
        (c.last_success_at, c.last_error.as_deref()),
        (Some(at(12_000)), Some("timeout"))
    );
    assert_eq!((o.pending, o.delivered, o.failed), (2, 3, 0));
    assert_eq!(
        (o.last_success_at, o.last_error.as_deref()),
        (Some(at(14_000)), None),
        "the newest attempt succeeded"
    );
    h.finish().await;
}

fn ids(page: Vec<(i64, DeliveryView)>) -> Vec<String> {
    page.into_iter().map(|(_, v)| v.id).collect()
}

/// Every page of `q` in pages of `limit`, through the cursor.
async fn all_pages(h: &Harness, mut q: DeliveriesQuery, limit: usize) -> Vec<String> {
    let mut seen = Vec::new();
    q.limit = limit;
    loop {
        let page = h.page(q.clone()).await;
        assert!(page.len() <= limit);
        let Some((last, _)) = page.last() else {
            return seen;
        };
        q.after = Some(*last);
        seen.extend(ids(page));
    }
}

#[tokio::test]
async fn deliveries_page_newest_first_through_filters_and_cursor() {
    let h = Harness::new();
    let (ops, chat) = attempted_mix(&h).await;
    let newest_first =
        |ids: &[&String]| ids.iter().rev().map(|s| s.to_string()).collect::<Vec<_>>();
    let of = |webhook: Option<&str>, status: Option<DeliveryStatus>| DeliveriesQuery {
        webhook: webhook.map(str::to_string),
        status,
        after: None,
        limit: 100,
    };
    let all: Vec<&String> = ops.iter().chain(&chat).collect();
    assert_eq!(all_pages(&h, of(None, None), 3).await, newest_first(&all));
    let ops_all: Vec<&String> = ops.iter().collect();
    assert_eq!(
        all_pages(&h, of(Some("ops"), None), 2).await,
        newest_first(&ops_all)
    );
    let delivered = [&ops[0], &ops[1], &ops[3], &chat[0]];
    let q = of(None, Some(DeliveryStatus::Delivered));
    assert_eq!(all_pages(&h, q, 1).await, newest_first(&delivered));
    let q = of(Some("chat"), Some(DeliveryStatus::Pending));
    assert_eq!(ids(h.page(q).await), newest_first(&[&chat[1], &chat[2]]));
    assert!(h.page(of(Some("quiet"), None)).await.is_empty());
    assert!(
        h.page(of(None, Some(DeliveryStatus::Failed)))
            .await
            .is_empty()
    );
    let q = DeliveriesQuery {
        limit: 0,
        ..of(None, None)
    };
    assert!(h.page(q).await.is_empty());
    h.finish().await;
}

#[tokio::test]
async fn finished_deliveries_are_pruned_a_week_after_they_were_queued() {
    let h = Harness::new();
    let (ops, chat) = attempted_mix(&h).await;
    let week = KEEP_FINISHED.as_millis() as i64;
    h.set(week);
    assert_eq!(h.store.prune_history(100).await.unwrap(), 0, "not before");
    h.set(week + 1_000);
    assert_eq!(h.store.prune_history(100).await.unwrap(), 1, "ops 0 only");
    h.set(week + 10_000);
    let limited = h.store.prune_history(1).await.unwrap();
    assert_eq!(limited, 1, "at most the limit");
    assert_eq!(h.store.prune_history(100).await.unwrap(), 2);
    assert_eq!(h.store.prune_history(100).await.unwrap(), 0);
    let left = ids(h
        .page(DeliveriesQuery {
            limit: 100,
            ..DeliveriesQuery::default()
        })
        .await);
    assert_eq!(
        left,
        [&chat[2], &chat[1], &ops[4], &ops[2]].map(String::clone),
        "pending stay"
    );
    h.finish().await;
}

#[tokio::test]
async fn a_usage_alert_fires_once_resolves_once_and_survives_a_reopen() {
    let h = Harness::new();
    assert!(h.tick().await.is_empty());
    let seat = h.granted("busy", "alice").await;
    assert!(h.tick().await.is_empty(), "holds, not yet for 10 s");
    h.set(9_999);
    assert!(h.tick().await.is_empty());
    h.set(10_000);
    assert_eq!(h.tick().await, ["firing busy-usage"]);
    h.set(11_000);
    assert!(h.tick().await.is_empty(), "never twice while it fires");
    let states = h.store.alert_states().await.unwrap();
    assert_eq!(states.len(), 1);
    assert_eq!(
        (states[0].alert.as_str(), states[0].license_id.as_str()),
        ("busy-usage", "busy")
    );
    assert_eq!(
        (states[0].holding_since, states[0].firing_since),
        (Some(at(0)), Some(at(10_000)))
    );

    let h = h.reopen().await;
    h.set(12_000);
    assert!(h.tick().await.is_empty(), "no second firing after a reopen");
    assert_eq!(h.store.alert_states().await.unwrap(), states);
    h.release(&seat).await;
    assert_eq!(h.tick().await, ["resolved busy-usage"]);
    h.set(13_000);
    assert!(h.tick().await.is_empty());
    let states = h.store.alert_states().await.unwrap();
    assert!(
        states
            .iter()
            .all(|s| s.firing_since.is_none() && s.holding_since.is_none())
    );

    let ds = h.deliveries().await;
    assert_eq!(webhooks_of(&ds), ["ops", "ops"], "its webhooks only");
    assert_eq!(
        (ds[0].kind, ds[1].kind),
        (DeliveryType::AlertResolved, DeliveryType::AlertFiring)
    );
    let due = h.claim().await;
    let firing: DeliveryBody = serde_json::from_str(&due[0].body).unwrap();
    assert_eq!(firing.kind, DeliveryType::AlertFiring);
    assert_eq!(
        (firing.at, firing.license_id.as_deref()),
        (at(10_000), Some("busy"))
    );
    assert_eq!(firing.alert.map(|a| a.name), Some("busy-usage".to_string()));
    assert!(
        firing.text.starts_with("busy-usage firing: "),
        "{}",
        firing.text
    );
    h.finish().await;
}

#[tokio::test]
async fn a_full_alert_goes_to_every_webhook_by_default() {
    let h = Harness::new();
    let seat = h.granted("pool", "alice").await;
    assert!(h.tick().await.is_empty());
    h.set(4_999);
    assert!(h.tick().await.is_empty());
    h.set(5_000);
    assert_eq!(h.tick().await, ["firing pool-full"]);
    let ds = h.deliveries().await;
    assert_eq!(webhooks_of(&ds), ["chat", "ops", "quiet"]);
    assert!(ds.iter().all(|d| d.kind == DeliveryType::AlertFiring));
    h.set(6_000);
    h.release(&seat).await;
    assert_eq!(h.tick().await, ["resolved pool-full"]);
    let resolved: Vec<DeliveryView> = h.deliveries().await.into_iter().take(3).collect();
    assert!(
        resolved
            .iter()
            .all(|d| d.kind == DeliveryType::AlertResolved)
    );
    assert_eq!(webhooks_of(&resolved), ["chat", "ops", "quiet"]);
    h.finish().await;
}

/// The window `(now − 10 s, now]` read to the millisecond, inside one
/// stored second and across two.
#[tokio::test]
async fn a_denials_alert_counts_its_window_to_the_millisecond() {
    let h = Harness::new();
    h.granted("deny", "alice").await;
    h.set(1_500);
    h.refused("deny", "bob").await;
    assert!(h.tick().await.is_empty(), "one denial");
    h.set(1_700);
    h.refused("deny", "carol").await;
    assert_eq!(h.tick().await, ["firing deny-refused"], "at the second");
    h.set(11_499);
    assert!(h.tick().await.is_empty(), "1.500 is 9.999 s ago: still in");
    h.set(11_500);
    assert_eq!(h.tick().await, ["resolved deny-refused"], "1.500 has left");
    h.set(12_999);
    h.refused("deny", "bob").await;
    h.set(13_000);
    h.refused("deny", "bob").await;
    assert_eq!(h.tick().await, ["firing deny-refused"]);
    h.set(22_998);
    assert!(h.tick().await.is_empty(), "12.999 is still in");
    h.set(22_999);
    assert_eq!(
        h.tick().await,
        ["resolved deny-refused"],
        "12.999 has left, 13.000 alone"
    );
    h.set(23_000);
    assert!(h.tick().await.is_empty());
    let ds = h.deliveries().await;
    assert_eq!(webhooks_of(&ds), ["chat"; 4]);
    h.finish().await;
}

#[tokio::test]
async fn sqlite_a_v11_database_gains_the_outbox() {
    let db = TestDb::sqlite();
    {
        let mut c = rusqlite::Connection::open(db.sqlite_path()).unwrap();
        sqlite_migrate_to(&mut c, 11).unwrap();
        c.execute(
            "INSERT INTO leases (seat_id, license_id, holder, checked_out_at, issued_at, expires_at)
             VALUES ('00aa', 'busy', 'alice', ?1, ?1, ?2)",
            rusqlite::params![at(0).as_millis(), at(3_600_000).as_millis()],
        )
        .unwrap();
    }
    let h = Harness::on(db);
    let version: i64 = rusqlite::Connection::open(h.db.sqlite_path())
        .unwrap()
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap();
    assert_eq!(version, SCHEMA_VERSION);
    assert_eq!(SCHEMA_VERSION, 13);
    assert!(h.store.find_seat("00aa").await.unwrap().is_some());
    h.tick().await;
    h.set(10_000);
    assert_eq!(h.tick().await, ["firing busy-usage"], "the old seat counts");
    assert_eq!(h.deliveries().await.len(), 1);
    h.finish().await;
}

/// SQLite has one owner: a claim of a process killed mid-attempt is let
/// go when the store opens again, so the delivery is tried at once.
#[tokio::test]
async fn sqlite_a_reopen_lets_go_of_claims() {
    let h = Harness::on(TestDb::sqlite());
    let id = h.store.queue_test_delivery("ops".into()).await.unwrap();
    assert_eq!(h.claim().await.len(), 1);
    assert!(h.claim().await.is_empty());
    let h = h.reopen().await;
    let due = h.claim().await;
    assert_eq!((due.len(), due[0].id.as_str()), (1, id.as_str()));
    h.finish().await;
}
