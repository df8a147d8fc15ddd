//! Prometheus text exposition, hand-rolled: a few atomics and one histogram
//! do not justify a metrics framework on the hot path.

use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

use leasehold_common::alerts::DeliveryStatus;

use crate::store::WriterStats;

/// Upper bounds of the request latency histogram, in seconds.
const BUCKETS: [f64; 12] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
];

/// (name, help, [(outcome label, counter)])
type CounterFamily<'a> = (
    &'static str,
    &'static str,
    &'a [(&'static str, &'a AtomicU64)],
);

/// (name, help, the gauge's value in a pool)
type GaugeFamily = (&'static str, &'static str, fn(&PoolGauges) -> u32);

/// The gauges of one license pool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolGauges {
    pub license: String,
    pub seats: u32,
    pub live: u32,
    pub waiting: u32,
}

#[derive(Default)]
pub struct Metrics {
    pub checkouts: AtomicU64,
    pub checkouts_reused: AtomicU64,
    pub denials_full: AtomicU64,
    pub denials_blocked: AtomicU64,
    pub denials_limit: AtomicU64,
    pub denials_not_allowed: AtomicU64,
    /// `not_entitled` and `version_not_entitled`.
    pub denials_entitlement: AtomicU64,
    pub heartbeats: AtomicU64,
    pub heartbeats_lost: AtomicU64,
    pub releases: AtomicU64,
    pub reaps: AtomicU64,
    pub revokes: AtomicU64,
    pub store_errors: AtomicU64,
    latency_buckets: [AtomicU64; BUCKETS.len()],
    latency_count: AtomicU64,
    latency_sum_us: AtomicU64,
    status_classes: [AtomicU64; 5],
    /// Grants beyond a license's `seats`, per license.
    overage_grants: std::sync::Mutex<std::collections::BTreeMap<String, u64>>,
    /// Webhook delivery attempts by webhook, counted by this replica's
    /// worker: delivered, retry, failed ([`DELIVERY_RESULTS`]).
    webhook_deliveries: std::sync::Mutex<std::collections::BTreeMap<String, [u64; 3]>>,
}

/// The `result` label of `leasehold_webhook_deliveries_total`, in the order
/// of [`Metrics::count_delivery`]'s slots.
const DELIVERY_RESULTS: [&str; 3] = ["delivered", "retry", "failed"];

/// What `/metrics` shows of webhooks and alerts, read from the store at
/// scrape time (`crate::webhooks::gauges`). `None`: the store could not
/// answer, and the series are left out rather than shown as 0.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WebhookGauges {
    /// The configured webhooks, in file order.
    pub webhooks: Vec<String>,
    /// Pending deliveries per webhook.
    pub pending: Option<Vec<(String, u64)>>,
    pub alerts: Option<Vec<AlertGauge>>,
}

/// One configured alert and whether it fires.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AlertGauge {
    pub license: String,
    pub alert: String,
    pub firing: bool,
}

impl Metrics {
    pub fn inc(counter: &AtomicU64) {
        counter.fetch_add(1, Relaxed);
    }

    /// One seat granted from `license_id`'s overage allowance.
    pub fn count_overage(&self, license_id: &str) {
        if let Ok(mut grants) = self.overage_grants.lock() {
            *grants.entry(license_id.to_string()).or_default() += 1;
        }
    }

    /// One delivery attempt's result, by the status it left the delivery
    /// in: delivered, `retry` (still pending) or failed.
    pub fn count_delivery(&self, webhook: &str, status: DeliveryStatus) {
        let slot = match status {
            DeliveryStatus::Delivered => 0,
            DeliveryStatus::Pending => 1,
            DeliveryStatus::Failed => 2,
        };
        if let Ok(mut counts) = self.webhook_deliveries.lock() {
            counts.entry(webhook.to_string()).or_default()[slot] += 1;
        }
    }

    /// The webhook and alert families: every configured webhook's
    /// delivery counters (0 until its first attempt here, and any webhook
    /// since removed that had some), its pending deliveries, and every
    /// configured alert as 1 (firing) or 0.
    pub fn render_webhooks(&self, gauges: &WebhookGauges) -> String {
        let mut out = String::with_capacity(1024);
        let mut counts = self
            .webhook_deliveries
            .lock()
            .map(|c| c.clone())
            .unwrap_or_default();
        for w in &gauges.webhooks {
            counts.entry(w.clone()).or_default();
        }
        let name = "leasehold_webhook_deliveries_total";
        let _ = writeln!(
            out,
            "# HELP {name} Webhook delivery attempts by this server, by what each left the delivery: delivered, retry (pending) or failed.\n# TYPE {name} counter"
        );
        for (webhook, n) in &counts {
            for (result, n) in DELIVERY_RESULTS.iter().zip(n) {
                let _ = writeln!(
                    out,
                    "{name}{{webhook=\"{webhook}\",result=\"{result}\"}} {n}"
                );
            }
        }
        let name = "leasehold_webhook_pending";
        let _ = writeln!(
            out,
            "# HELP {name} Webhook deliveries waiting to be delivered (stored, all replicas).\n# TYPE {name} gauge"
        );
        for (webhook, n) in gauges.pending.iter().flatten() {
            let _ = writeln!(out, "{name}{{webhook=\"{webhook}\"}} {n}");
        }
        let name = "leasehold_alerts_firing";
        let _ = writeln!(
            out,
            "# HELP {name} Whether an alert of the licenses file fires (1) or not (0).\n# TYPE {name} gauge"
        );
        for a in gauges.alerts.iter().flatten() {
            let _ = writeln!(
                out,
                "{name}{{license=\"{}\",alert=\"{}\"}} {}",
                a.license,
                a.alert,
                u8::from(a.firing)
            );
        }
        out
    }

    pub fn observe_request(&self, status: u16, elapsed: Duration) {
        let secs = elapsed.as_secs_f64();
        if let Some(i) = BUCKETS.iter().position(|&b| secs <= b) {
            self.latency_buckets[i].fetch_add(1, Relaxed);
        }
        self.latency_count.fetch_add(1, Relaxed);
        self.latency_sum_us
            .fetch_add(elapsed.as_micros() as u64, Relaxed);
        let class = (status / 100).clamp(1, 5) as usize - 1;
        self.status_classes[class].fetch_add(1, Relaxed);
    }

    /// The exposition text.
    pub fn render(
        &self,
        store: &StoreGauges,
        pools: &[PoolGauges],
        writer: &WriterStats,
    ) -> String {
        let mut out = String::with_capacity(4096);
        write_store_gauges(&mut out, store);
        write_writer_counters(&mut out, writer);
        write_pool_gauges(&mut out, pools);
        self.write_outcome_counters(&mut out);
        self.write_overage(&mut out, pools);
        let reclaims = writer
            .idle_reclaims
            .lock()
            .map(|r| r.clone())
            .unwrap_or_default();
        write_per_license(
            &mut out,
            (
                "leasehold_idle_reclaims_total",
                "Seats reclaimed because their user was idle for the license's idle_timeout.",
            ),
            reclaims,
            pools,
        );
        self.write_http(&mut out);
        out
    }

    fn write_outcome_counters(&self, out: &mut String) {
        let counters: [CounterFamily<'_>; 7] = [
            (
                "leasehold_checkouts_total",
                "Checkouts granted.",
                &[("new", &self.checkouts), ("reused", &self.checkouts_reused)],
            ),
            (
                "leasehold_denials_total",
                "Checkouts refused.",
                &[
                    ("full", &self.denials_full),
                    ("blocked", &self.denials_blocked),
                    ("limit", &self.denials_limit),
                    ("not_allowed", &self.denials_not_allowed),
                    ("entitlement", &self.denials_entitlement),
                ],
            ),
            (
                "leasehold_heartbeats_total",
                "Heartbeats.",
                &[
                    ("renewed", &self.heartbeats),
                    ("lost", &self.heartbeats_lost),
                ],
            ),
            (
                "leasehold_releases_total",
                "Seats released by their client.",
                &[("", &self.releases)],
            ),
            (
                "leasehold_reaps_total",
                "Lapsed leases reaped.",
                &[("", &self.reaps)],
            ),
            (
                "leasehold_revokes_total",
                "Seats revoked by an admin.",
                &[("", &self.revokes)],
            ),
            (
                "leasehold_store_errors_total",
                "Requests failed by the store (503).",
                &[("", &self.store_errors)],
            ),
        ];
        for (name, help, series) in counters {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} counter");
            for (outcome, value) in series {
                let labels = if outcome.is_empty() {
                    String::new()
                } else {
                    format!("{{outcome=\"{outcome}\"}}")
                };
                let _ = writeln!(out, "{name}{labels} {}", value.load(Relaxed));
            }
        }
    }

    fn write_overage(&self, out: &mut String, pools: &[PoolGauges]) {
        let grants = self
            .overage_grants
            .lock()
            .map(|g| g.clone())
            .unwrap_or_default();
        write_per_license(
            out,
            (
                "leasehold_overage_grants_total",
                "Seats granted beyond the license's seats (overage).",
            ),
            grants,
            pools,
        );
    }

    fn write_http(&self, out: &mut String) {
        let name = "leasehold_http_requests_total";
        let _ = writeln!(
            out,
            "# HELP {name} HTTP requests by status class.\n# TYPE {name} counter"
        );
        for (i, c) in self.status_classes.iter().enumerate() {
            let _ = writeln!(out, "{name}{{class=\"{}xx\"}} {}", i + 1, c.load(Relaxed));
        }

        let name = "leasehold_http_request_duration_seconds";
        let _ = writeln!(
            out,
            "# HELP {name} Request latency.\n# TYPE {name} histogram"
        );
        let mut cumulative = 0;
        for (bound, c) in BUCKETS.iter().zip(&self.latency_buckets) {
            cumulative += c.load(Relaxed);
            let _ = writeln!(out, "{name}_bucket{{le=\"{bound}\"}} {cumulative}");
        }
        let count = self.latency_count.load(Relaxed);
        let _ = writeln!(out, "{name}_bucket{{le=\"+Inf\"}} {count}");
        let _ = writeln!(
            out,
            "{name}_sum {}",
            micros_as_seconds(self.latency_sum_us.load(Relaxed))
        );
        let _ = writeln!(out, "{name}_count {count}");
    }
}

/// Which store a server runs on, and (PostgreSQL) its read pool.
#[derive(Debug, Clone, Copy)]
pub struct StoreGauges {
    pub kind: &'static str,
    pub read_pool_idle: Option<usize>,
}

/// A counter family by license: every configured license's series, 0
/// until its first count (a replica that never counted one still shows the
/// series), and any license since removed that had some.
fn write_per_license(
    out: &mut String,
    (name, help): (&str, &str),
    mut counts: std::collections::BTreeMap<String, u64>,
    pools: &[PoolGauges],
) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} counter");
    for p in pools {
        counts.entry(p.license.clone()).or_default();
    }
    for (license, n) in &counts {
        let _ = writeln!(out, "{name}{{license=\"{license}\"}} {n}");
    }
}

fn write_store_gauges(out: &mut String, store: &StoreGauges) {
    let _ = writeln!(
        out,
        "# HELP leasehold_store_info The store this server runs on.\n\
         # TYPE leasehold_store_info gauge\nleasehold_store_info{{kind=\"{}\"}} 1",
        store.kind
    );
    if let Some(idle) = store.read_pool_idle {
        let _ = writeln!(
            out,
            "# HELP leasehold_store_read_pool_idle Idle connections in the PostgreSQL read pool.\n\
             # TYPE leasehold_store_read_pool_idle gauge\nleasehold_store_read_pool_idle {idle}"
        );
    }
}

fn write_writer_counters(out: &mut String, writer: &WriterStats) {
    for (name, help, value) in [
        (
            "leasehold_store_batches_total",
            "Transactions committed by the writer (group commits).",
            writer.batches.load(Relaxed),
        ),
        (
            "leasehold_store_commands_total",
            "Commands applied by the writer.",
            writer.commands.load(Relaxed),
        ),
        (
            "leasehold_store_wal_catch_ups_total",
            "Checkpoints the writer finished between batches so the WAL could start over.",
            writer.wal_catch_ups.load(Relaxed),
        ),
        (
            "leasehold_store_refusals_repeated_total",
            "Refusals repeated beside the writer while nothing could change them (SQLite).",
            writer.denials_repeated.load(Relaxed),
        ),
    ] {
        let _ = writeln!(
            out,
            "# HELP {name} {help}\n# TYPE {name} counter\n{name} {value}"
        );
    }
    // The writer keeps whole microseconds; Prometheus wants seconds.
    for (name, help, micros) in [
        (
            "leasehold_store_apply_seconds_total",
            "Writer time applying commands.",
            writer.apply_us.load(Relaxed),
        ),
        (
            "leasehold_store_commit_seconds_total",
            "Writer time in COMMIT (fsync).",
            writer.commit_us.load(Relaxed),
        ),
        (
            "leasehold_store_lock_wait_seconds_total",
            "Writer time waiting for license locks held by other replicas (PostgreSQL).",
            writer.lock_wait_us.load(Relaxed),
        ),
        (
            "leasehold_store_wal_catch_up_seconds_total",
            "Writer time in WAL catch-up checkpoints.",
            writer.wal_catch_up_us.load(Relaxed),
        ),
    ] {
        let _ = writeln!(
            out,
            "# HELP {name} {help}\n# TYPE {name} counter\n{name} {}",
            micros_as_seconds(micros)
        );
    }
}

/// Whole microseconds as decimal seconds, digit for digit (no float
/// rounding, however large the total grows): 1500 -> "0.0015".
fn micros_as_seconds(micros: u64) -> String {
    let (secs, frac) = (micros / 1_000_000, micros % 1_000_000);
    if frac == 0 {
        return secs.to_string();
    }
    let digits = format!("{frac:06}");
    format!("{secs}.{}", digits.trim_end_matches('0'))
}

fn write_pool_gauges(out: &mut String, pools: &[PoolGauges]) {
    let families: [GaugeFamily; 3] = [
        ("leasehold_seats", "Seats sold per license.", |p| p.seats),
        ("leasehold_live_seats", "Live leases per license.", |p| {
            p.live
        }),
        (
            "leasehold_waiting",
            "Checkouts waiting in line (?wait=) per license.",
            |p| p.waiting,
        ),
    ];
    for (name, help, pick) in families {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} gauge");
        for p in pools {
            let _ = writeln!(out, "{name}{{license=\"{}\"}} {}", p.license, pick(p));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn idle_reclaims_are_counted_per_license_from_committed_events() {
        let writer = WriterStats::default();
        let reclaim = |license: &str| leasehold_common::api::Event {
            id: 1,
            at: leasehold_common::Timestamp::from_millis(0),
            kind: leasehold_common::api::EventKind::Reclaim,
            license_id: Some(license.into()),
            seat_id: None,
            holder: None,
            detail: None,
        };
        let pool = |license: &str| PoolGauges {
            license: license.into(),
            seats: 1,
            live: 0,
            waiting: 0,
        };
        writer.count_reclaims(&[reclaim("cad"), reclaim("cad")]);
        let store = StoreGauges {
            kind: "sqlite",
            read_pool_idle: None,
        };
        let text = Metrics::default().render(&store, &[pool("cad"), pool("ide")], &writer);
        assert!(
            text.contains("leasehold_idle_reclaims_total{license=\"cad\"} 2"),
            "{text}"
        );
        assert!(
            text.contains("leasehold_idle_reclaims_total{license=\"ide\"} 0"),
            "a license's series is there before its first reclaim: {text}"
        );
    }

    #[test]
    fn writer_times_are_exposed_in_exact_seconds() {
        assert_eq!(micros_as_seconds(0), "0");
        assert_eq!(micros_as_seconds(1), "0.000001");
        assert_eq!(micros_as_seconds(1_500), "0.0015");
        assert_eq!(micros_as_seconds(3_000_000), "3");
        // Beyond f64's 2^53, where a float division would round.
        assert_eq!(micros_as_seconds(u64::MAX), "18446744073709.551615");
        let writer = WriterStats::default();
        writer.apply_us.store(19_341, Relaxed);
        writer.commit_us.store(2_035_801, Relaxed);
        writer.wal_catch_up_us.store(7_000_000, Relaxed);
        let store = StoreGauges {
            kind: "sqlite",
            read_pool_idle: None,
        };
        let text = Metrics::default().render(&store, &[], &writer);
        for line in [
            "leasehold_store_apply_seconds_total 0.019341",
            "leasehold_store_commit_seconds_total 2.035801",
            "leasehold_store_lock_wait_seconds_total 0",
            "leasehold_store_wal_catch_up_seconds_total 7",
            "# TYPE leasehold_store_commit_seconds_total counter",
        ] {
            assert!(text.lines().any(|l| l == line), "no {line:?} in {text}");
        }
        assert!(!text.contains("microseconds"), "{text}");
    }

    #[test]
    fn renders_pools_counters_and_a_cumulative_histogram() {
        let m = Metrics::default();
        Metrics::inc(&m.checkouts);
        Metrics::inc(&m.denials_full);
        m.observe_request(201, Duration::from_micros(300));
        m.observe_request(409, Duration::from_millis(3));
        m.observe_request(500, Duration::from_secs(10));
        // The histogram's sum is in seconds too: 0.0003 + 0.003 + 10.
        let pool = PoolGauges {
            license: "demo".into(),
            seats: 10,
            live: 4,
            waiting: 2,
        };
        let store = StoreGauges {
            kind: "postgres",
            read_pool_idle: Some(3),
        };
        let text = m.render(&store, &[pool], &WriterStats::default());
        assert!(
            text.contains("leasehold_store_info{kind=\"postgres\"} 1"),
            "{text}"
        );
        assert!(text.contains("leasehold_store_read_pool_idle 3"), "{text}");
        assert!(
            text.contains("leasehold_store_lock_wait_seconds_total 0"),
            "{text}"
        );
        assert!(
            text.contains("leasehold_seats{license=\"demo\"} 10"),
            "{text}"
        );
        assert!(
            text.contains("leasehold_live_seats{license=\"demo\"} 4"),
            "{text}"
        );
        assert!(
            text.contains("leasehold_waiting{license=\"demo\"} 2"),
            "{text}"
        );
        assert!(
            text.contains("leasehold_overage_grants_total{license=\"demo\"} 0"),
            "a license's series is there before its first overage grant: {text}"
        );
        assert!(
            text.contains("leasehold_checkouts_total{outcome=\"new\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("leasehold_denials_total{outcome=\"full\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("leasehold_http_requests_total{class=\"4xx\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("leasehold_http_request_duration_seconds_bucket{le=\"0.0005\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("leasehold_http_request_duration_seconds_bucket{le=\"0.005\"} 2"),
            "{text}"
        );
        assert!(
            text.contains("leasehold_http_request_duration_seconds_bucket{le=\"+Inf\"} 3"),
            "{text}"
        );
        assert!(
            text.contains("leasehold_http_request_duration_seconds_count 3"),
            "{text}"
        );
        assert!(
            text.contains("leasehold_http_request_duration_seconds_sum 10.0033\n"),
            "{text}"
        );
    }
}
