//! The worker and one attempt against a receiver on loopback: the headers
//! and signature a receiver checks, retries, redirects not followed, a
//! large answer not read, a clean stop; never the secret in an error.

use std::sync::Arc;
use std::time::Duration;

use leasehold_common::Licenses;
use leasehold_common::alerts::DeliveryStatus;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::sync::{mpsc, watch};

use super::send::{Sender, Target};
use super::sign::signature;
use crate::clock::SystemClock;
use crate::licenses::LicensesHandle;
use crate::metrics::{AlertGauge, Metrics, WebhookGauges};
use crate::store::outbox::{DeliveriesQuery, DeliveryRow};
use crate::store::{self, Store, StoreOptions};

const SECRET: &str = "receiver-secret-0123";

/// One request as the receiver got it.
#[derive(Debug)]
struct Received {
    head: String,
    body: Vec<u8>,
}

impl Received {
    fn header(&self, name: &str) -> Option<&str> {
        self.head.lines().find_map(|l| {
            let (n, v) = l.split_once(':')?;
            n.eq_ignore_ascii_case(name).then(|| v.trim())
        })
    }
}

/// A receiver on loopback that answers each request with the next of
/// `answers` (the last one again when they run out); its URL and what it
/// got.
async fn receiver(answers: Vec<String>) -> (String, mpsc::UnboundedReceiver<Received>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        let mut n = 0;
        while let Ok((mut conn, _)) = listener.accept().await {
            let answer = answers[n.min(answers.len() - 1)].clone();
            n += 1;
            let tx = tx.clone();
            tokio::spawn(async move {
                if let Some(r) = read_request(&mut conn).await {
                    let _ = tx.send(r);
                }
                let _ = conn.write_all(answer.as_bytes()).await;
                let _ = conn.shutdown().await;
            });
        }
    });
    (url, rx)
}

async fn read_request(conn: &mut tokio::net::TcpStream) -> Option<Received> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).to_string();
            let mut r = Received {
                head,
                body: buf[end + 4..].to_vec(),
            };
            let len: usize = r.header("content-length")?.parse().ok()?;
            while r.body.len() < len {
                let n = conn.read(&mut chunk).await.ok()?;
                if n == 0 {
                    return None;
                }
                r.body.extend_from_slice(&chunk[..n]);
            }
            return Some(r);
        }
        let n = conn.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

fn answer(status: &str, body: &str) -> String {
    format!(
        "HTTP/1.1 {status}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )
}

fn licenses(url: &str) -> LicensesHandle {
    let text = format!(
        "[[webhook]]\nname = \"ops\"\nurl = \"{url}\"\nsecret = \"{SECRET}\"\n\n\
         [[license]]\nid = \"cad\"\nkey = \"k\"\nseats = 1\n"
    );
    LicensesHandle::new(Licenses::parse(&text).expect("licenses"))
}

async fn newest(store: &Store) -> DeliveryRow {
    let q = DeliveriesQuery {
        limit: 1,
        ..DeliveriesQuery::default()
    };
    store.deliveries_page(q).await.expect("page").remove(0)
}

/// Wait (at most 10 s) until the newest delivery passes `done`.
async fn wait_for(store: &Store, done: impl Fn(&DeliveryRow) -> bool) -> DeliveryRow {
    for _ in 0..200 {
        let row = newest(store).await;
        if done(&row) {
            return row;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the delivery never got there: {:?}", newest(store).await);
}

#[tokio::test]
async fn the_worker_signs_retries_delivers_counts_and_stops() {
    let (url, mut got) = receiver(vec![
        answer("500 Internal Server Error", "boom"),
        answer("204 No Content", ""),
    ])
    .await;
    let dir = tempfile::tempdir().expect("temp dir");
    let licenses = licenses(&url);
    let clock = Arc::new(SystemClock);
    let store = Store::open(
        &store::database_path(dir.path()),
        licenses.clone(),
        clock.clone(),
        StoreOptions::default(),
    )
    .expect("store opens");
    let metrics = Arc::new(Metrics::default());
    let (stop, stopped) = watch::channel(false);
    let worker = tokio::spawn(super::run(
        store.clone(),
        licenses,
        metrics.clone(),
        clock,
        stopped,
    ));

    let id = store
        .queue_test_delivery("ops".into())
        .await
        .expect("queued");
    let wait = Duration::from_secs(10);
    let mut signatures = Vec::new();
    for attempt in 1..=2 {
        let r = tokio::time::timeout(wait, got.recv())
            .await
            .expect("a request in time")
            .expect("a request");
        assert!(r.head.starts_with("POST /hook HTTP/1.1"), "{}", r.head);
        assert_eq!(r.header("content-type"), Some("application/json"));
        assert_eq!(r.header("leasehold-delivery"), Some(id.as_str()));
        assert!(r.header("user-agent").unwrap().starts_with("leasehold/"));
        let sig = r.header("leasehold-signature").expect("signed").to_string();
        let t: i64 = sig
            .strip_prefix("t=")
            .and_then(|s| s.split(',').next())
            .and_then(|t| t.parse().ok())
            .expect("t=<unix seconds>");
        assert_eq!(sig, signature(SECRET, t, &r.body), "attempt {attempt}");
        let body: serde_json::Value = serde_json::from_slice(&r.body).expect("JSON body");
        assert_eq!(body["id"], id.as_str());
        assert_eq!(body["type"], "test");
        signatures.push(sig);
    }
    let row = wait_for(&store, |r| r.view.status == DeliveryStatus::Delivered).await;
    assert_eq!(row.view.id, id);
    assert_eq!(row.view.attempts, 2);
    assert_eq!(row.view.last_error, None);

    let text = metrics.render_webhooks(&WebhookGauges::default());
    for line in [
        "leasehold_webhook_deliveries_total{webhook=\"ops\",result=\"delivered\"} 1",
        "leasehold_webhook_deliveries_total{webhook=\"ops\",result=\"retry\"} 1",
        "leasehold_webhook_deliveries_total{webhook=\"ops\",result=\"failed\"} 0",
    ] {
        assert!(text.lines().any(|l| l == line), "no {line:?} in {text}");
    }

    stop.send(true).unwrap();
    tokio::time::timeout(Duration::from_secs(3), worker)
        .await
        .expect("the worker stops")
        .expect("cleanly");
    store.close().await;
}

fn target(url: &str) -> Target {
    Target {
        url: url.to_string(),
        secret: SECRET.to_string(),
    }
}

#[tokio::test]
async fn an_attempt_follows_no_redirect_and_reads_little_of_an_answer() {
    let sender = Sender::new().expect("client");
    let (url, _got) = receiver(vec![answer(
        "302 Found\r\nlocation: http://127.0.0.1:9/elsewhere",
        "",
    )])
    .await;
    let err = sender.send(&target(&url), "d1", "{}", 1).await.unwrap_err();
    assert_eq!(err, "HTTP 302 Found (redirects are not followed)");

    let huge = format!("{}\u{1b}[31m", "x".repeat(4 << 20));
    let (url, _got) = receiver(vec![answer("500 Internal Server Error", &huge)]).await;
    let err = sender.send(&target(&url), "d2", "{}", 1).await.unwrap_err();
    assert!(
        err.starts_with("HTTP 500 Internal Server Error: xxx"),
        "{err}"
    );
    assert!(err.chars().count() < 260, "{} chars", err.len());

    let echo = format!("your secret is {SECRET}");
    let (url, _got) = receiver(vec![answer("400 Bad Request", &echo)]).await;
    let err = sender.send(&target(&url), "d3", "{}", 1).await.unwrap_err();
    assert_eq!(err, "HTTP 400 Bad Request: your secret is <redacted>");
}

#[tokio::test]
async fn a_dead_receiver_is_a_short_error_without_the_url() {
    // A port nothing listens on: bound, then closed.
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let url = format!("http://127.0.0.1:{port}/hook?token=abc");
    let err = Sender::new()
        .unwrap()
        .send(&target(&url), "d", "{}", 1)
        .await
        .unwrap_err();
    assert!(err.starts_with("cannot connect"), "{err}");
    assert!(!err.contains("token=abc") && !err.contains(SECRET), "{err}");
}

#[tokio::test]
async fn a_delivery_whose_webhook_left_the_file_fails_without_being_sent() {
    let (url, mut got) = receiver(vec![answer("204 No Content", "")]).await;
    let dir = tempfile::tempdir().expect("temp dir");
    let licenses = licenses(&url);
    let clock = Arc::new(SystemClock);
    let store = Store::open(
        &store::database_path(dir.path()),
        licenses.clone(),
        clock.clone(),
        StoreOptions::default(),
    )
    .expect("store opens");
    let id = store
        .queue_test_delivery("ops".into())
        .await
        .expect("queued");
    let without = "[[license]]\nid = \"cad\"\nkey = \"k\"\nseats = 1\n";
    licenses.replace(Licenses::parse(without).expect("licenses"));
    let metrics = Arc::new(Metrics::default());
    let (stop, stopped) = watch::channel(false);
    let worker = tokio::spawn(super::run(
        store.clone(),
        licenses,
        metrics.clone(),
        clock,
        stopped,
    ));
    let row = wait_for(&store, |r| r.view.status == DeliveryStatus::Failed).await;
    assert_eq!(row.view.id, id);
    assert!(
        row.view
            .last_error
            .as_deref()
            .unwrap()
            .contains("no longer"),
        "{row:?}"
    );
    assert!(got.try_recv().is_err(), "nothing was sent");
    let text = metrics.render_webhooks(&WebhookGauges::default());
    assert!(
        text.contains("leasehold_webhook_deliveries_total{webhook=\"ops\",result=\"failed\"} 1"),
        "{text}"
    );
    stop.send(true).unwrap();
    worker.await.unwrap();
    store.close().await;
}

#[test]
fn webhook_and_alert_series_are_shown_for_everything_configured() {
    let m = Metrics::default();
    m.count_delivery("ops", DeliveryStatus::Pending);
    m.count_delivery("ops", DeliveryStatus::Delivered);
    m.count_delivery("gone", DeliveryStatus::Failed);
    let gauges = WebhookGauges {
        webhooks: vec!["ops".into(), "chat".into()],
        pending: Some(vec![("ops".into(), 2), ("chat".into(), 0)]),
        alerts: Some(vec![
            AlertGauge {
                license: "cad".into(),
                alert: "cad-full".into(),
                firing: true,
            },
            AlertGauge {
                license: "cad".into(),
                alert: "cad-busy".into(),
                firing: false,
            },
        ]),
    };
    let text = m.render_webhooks(&gauges);
    for line in [
        "leasehold_webhook_deliveries_total{webhook=\"ops\",result=\"delivered\"} 1",
        "leasehold_webhook_deliveries_total{webhook=\"ops\",result=\"retry\"} 1",
        "leasehold_webhook_deliveries_total{webhook=\"ops\",result=\"failed\"} 0",
        "leasehold_webhook_deliveries_total{webhook=\"chat\",result=\"delivered\"} 0",
        "leasehold_webhook_deliveries_total{webhook=\"gone\",result=\"failed\"} 1",
        "leasehold_webhook_pending{webhook=\"ops\"} 2",
        "leasehold_webhook_pending{webhook=\"chat\"} 0",
        "leasehold_alerts_firing{license=\"cad\",alert=\"cad-full\"} 1",
        "leasehold_alerts_firing{license=\"cad\",alert=\"cad-busy\"} 0",
        "# TYPE leasehold_webhook_deliveries_total counter",
        "# TYPE leasehold_webhook_pending gauge",
        "# TYPE leasehold_alerts_firing gauge",
    ] {
        assert!(text.lines().any(|l| l == line), "no {line:?} in {text}");
    }
    let empty = Metrics::default().render_webhooks(&WebhookGauges::default());
    assert_eq!(
        empty.lines().filter(|l| !l.starts_with('#')).count(),
        0,
        "{empty}"
    );
}
