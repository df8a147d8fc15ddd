//! The one-shot commands: `status`, `seats`, `events`, `revoke`, and the
//! dispatch to `report`, `webhooks` and `entitlements` (their own modules).
//!
//! Each fetches, formats and prints; the formatting functions are pure so
//! the tests check the tables without a server. Human output passes every
//! server string through [`sanitize_for_terminal`]; JSON output keeps the
//! data exact but escapes the characters a terminal would act on
//! ([`json_for_terminal`]), so `leasehold seats --json` is safe to run
//! interactively too.

use std::collections::VecDeque;
use std::io::Write;

use anyhow::Context;
use leasehold_common::Timestamp;
use leasehold_common::api::{
    Event, EventsResponse, LicensesResponse, RevokeRequest, SeatState, SeatsResponse,
};
use leasehold_common::text::sanitize_for_terminal;
use tokio::sync::mpsc;

use crate::api::{AdminClient, ApiError};
use crate::cli::Command;
use crate::entitlements::entitled_cell;
use crate::format::{fmt_duration_ms, json_for_terminal, policy_secs, table};
use crate::stream::{self, StreamMsg};

/// The server clamps `limit` to this.
const PAGE_MAX: u32 = 10_000;

pub async fn run(cmd: Command, client: &AdminClient, out: &mut dyn Write) -> anyhow::Result<()> {
    match cmd {
        Command::Status { json } => {
            let resp = client.licenses().await?;
            if json {
                writeln!(out, "{}", to_json(&resp)?)?;
            } else {
                write!(out, "{}", format_status(&resp, client.base()))?;
            }
        }
        Command::Seats { license, json } => {
            let resp = client.seats(license.as_deref()).await?;
            if json {
                writeln!(out, "{}", to_json(&resp)?)?;
            } else {
                write!(out, "{}", format_seats(&resp))?;
            }
        }
        Command::Events {
            follow,
            after,
            limit,
            json,
        } => events(client, out, follow, after, limit, json).await?,
        Command::Revoke {
            seat_id,
            reason,
            block,
            force,
            json,
        } => {
            let body = RevokeRequest {
                reason,
                block_s: block.map(crate::duration::block_secs),
                force,
            };
            client.revoke(&seat_id, &body).await.map_err(force_hint)?;
            tracing::info!(seat_id, ?body, "revoked");
            if json {
                let v = serde_json::json!({ "seat_id": seat_id, "revoked": true });
                writeln!(out, "{}", json_for_terminal(&v.to_string()))?;
            } else {
                writeln!(out, "revoked seat {}", sanitize_for_terminal(&seat_id))?;
            }
        }
        Command::Report(args) => crate::report::run(args, client, out).await?,
        Command::Webhooks(args) => crate::webhooks::run(args, client, out).await?,
        Command::Entitlements { json } => crate::entitlements::run(client, json, out).await?,
    }
    out.flush()?;
    Ok(())
}

/// A refused revoke of a borrowed seat says how to force it.
fn force_hint(e: ApiError) -> anyhow::Error {
    match e {
        ApiError::Borrowed { .. } => anyhow::anyhow!("{e}; `leasehold revoke --force` frees it"),
        other => other.into(),
    }
}

async fn events(
    client: &AdminClient,
    out: &mut dyn Write,
    follow: bool,
    after: Option<i64>,
    limit: u32,
    json: bool,
) -> anyhow::Result<()> {
    let listed: Vec<Event> = match after {
        Some(after) => client.events(after, limit).await?.events,
        None => newest_events(client, limit as usize).await?,
    };
    if json && !follow {
        let resp = EventsResponse { events: listed };
        writeln!(out, "{}", to_json(&resp)?)?;
        return Ok(());
    }
    for ev in &listed {
        print_event(out, ev, json)?;
    }
    out.flush()?;
    if !follow {
        return Ok(());
    }
    let last_id = listed.last().map_or(after.unwrap_or(0), |e| e.id);
    let (tx, mut rx) = mpsc::unbounded_channel();
    let task = tokio::spawn(stream::run(client.clone(), Some(last_id), tx));
    let mut down = false;
    while let Some(msg) = rx.recv().await {
        match msg {
            StreamMsg::Up => {
                if down {
                    eprintln!("leasehold: event stream reconnected");
                }
                down = false;
            }
            StreamMsg::Event(ev) => {
                print_event(out, &ev, json)?;
                out.flush()?;
            }
            StreamMsg::Down(e @ ApiError::Unauthorized { .. }) => {
                task.abort();
                return Err(e.into());
            }
            StreamMsg::Down(e) => {
                if !down {
                    eprintln!("leasehold: {e}; reconnecting");
                }
                down = true;
            }
        }
    }
    Ok(())
}

/// The newest `n` events: page through the log (ascending ids) keeping the
/// tail. The API has no "latest" query, and pages are cheap.
async fn newest_events(client: &AdminClient, n: usize) -> Result<Vec<Event>, ApiError> {
    let mut tail: VecDeque<Event> = VecDeque::with_capacity(n.min(1024));
    let mut after = 0;
    loop {
        let page = client.events(after, PAGE_MAX).await?.events;
        let len = page.len();
        let Some(last) = page.last().map(|e| e.id) else {
            break;
        };
        for ev in page {
            tail.push_back(ev);
            if tail.len() > n {
                tail.pop_front();
            }
        }
        if len < PAGE_MAX as usize || last <= after {
            break;
        }
        after = last;
    }
    Ok(tail.into())
}

fn print_event(out: &mut dyn Write, ev: &Event, json: bool) -> anyhow::Result<()> {
    if json {
        writeln!(out, "{}", json_for_terminal(&serde_json::to_string(ev)?))?;
    } else {
        writeln!(out, "{}", format_event(ev))?;
    }
    Ok(())
}

fn to_json<T: serde::Serialize>(v: &T) -> anyhow::Result<String> {
    Ok(json_for_terminal(
        &serde_json::to_string_pretty(v).context("encoding JSON")?,
    ))
}

fn clean(s: &str) -> String {
    sanitize_for_terminal(s).into_owned()
}

pub fn format_status(resp: &LicensesResponse, server: &str) -> String {
    let mut rows: Vec<Vec<String>> = resp
        .licenses
        .iter()
        .map(|l| {
            let over = l.live.saturating_sub(l.seats);
            let status = if over > 0 {
                format!("OVER +{over}")
            } else if l.live >= l.seats {
                "FULL".to_string()
            } else {
                "ok".to_string()
            };
            // A count, or `-` when the pool has no such policy (and no
            // seat in that state).
            let policy = |has: bool, n: u32| {
                if has || n > 0 {
                    n.to_string()
                } else {
                    "-".into()
                }
            };
            vec![
                clean(&l.id),
                format!("{}/{}", l.live, l.seats),
                l.seats.saturating_sub(l.live).to_string(),
                policy(!l.groups.is_empty(), l.reserved),
                policy(l.linger_s.is_some(), l.lingering),
                policy(l.borrow.is_some(), l.borrowed),
                policy_secs(l.ttl_s),
                policy_secs(l.skew_s),
                policy_secs(l.reap_grace_s),
                status,
            ]
        })
        .collect();
    let mut out = format!("server {} · server time {}\n", clean(server), resp.now);
    let mut header = vec![
        "LICENSE",
        "LIVE/SEATS",
        "FREE",
        "RESERVED",
        "LINGERING",
        "BORROWED",
        "TTL",
        "SKEW",
        "REAP GRACE",
        "STATUS",
    ];
    // Entitled seats, when any pool's come from a vendor, with a warning
    // when they drop within 30 days (`leasehold entitlements` says more).
    if resp.licenses.iter().any(|l| l.vendor.is_some()) {
        header.push("ENTITLED");
        for (row, l) in rows.iter_mut().zip(&resp.licenses) {
            row.push(match entitled_cell(l, resp.now) {
                None => "-".into(),
                Some((seats, None)) => seats,
                Some((seats, Some(mark))) => format!("{seats} {mark}"),
            });
        }
    }
    // Firing alerts, when any pool has one (`leasehold webhooks` says more).
    if resp.licenses.iter().any(|l| !l.alerts_firing.is_empty()) {
        header.push("ALERTS");
        for (row, l) in rows.iter_mut().zip(&resp.licenses) {
            row.push(match l.alerts_firing.as_slice() {
                [] => "-".into(),
                names => format!("ALERT {}", clean(&names.join(","))),
            });
        }
    }
    if rows.is_empty() {
        out.push_str("no licenses configured\n");
    } else {
        out.push_str(&table(&header, &rows));
    }
    out.push_str(&groups_table(resp));
    out
}

/// A line per group of every pool, after a blank line; empty without groups.
fn groups_table(resp: &LicensesResponse) -> String {
    let groups: Vec<Vec<String>> = resp
        .licenses
        .iter()
        .flat_map(|l| {
            l.groups.iter().map(|g| {
                vec![
                    clean(&l.id),
                    clean(&g.name),
                    g.live.to_string(),
                    g.reserve.to_string(),
                    g.max.map_or_else(|| "-".into(), |m| m.to_string()),
                ]
            })
        })
        .collect();
    if groups.is_empty() {
        return String::new();
    }
    let head = ["LICENSE", "GROUP", "IN USE", "RESERVE", "MAX"];
    format!("\n{}", table(&head, &groups))
}

/// The seats as a table. When any is borrowed, a BACK AT column says when
/// each borrowed seat comes back (its expiry; `-` for the others); when any
/// reports its user idle, an IDLE column says for how long (`-` for the
/// active ones).
pub fn format_seats(resp: &SeatsResponse) -> String {
    if resp.seats.is_empty() {
        return "no seats held\n".to_string();
    }
    let now: Timestamp = resp.now;
    let any_borrowed = resp.seats.iter().any(|s| s.state == SeatState::Borrowed);
    let any_idle = resp.seats.iter().any(|s| s.idle_s.is_some());
    let rows: Vec<Vec<String>> = resp
        .seats
        .iter()
        .map(|s| {
            let mut row = vec![
                clean(&s.license_id),
                clean(&s.seat_id),
                clean(&s.holder),
                s.fingerprint
                    .as_deref()
                    .map(clean)
                    .unwrap_or_else(|| "-".into()),
                fmt_duration_ms(now.millis_since(s.checked_out_at)),
                fmt_duration_ms(s.expires_at.millis_since(now)),
                match s.state {
                    SeatState::Live => "live",
                    SeatState::Lingering => "lingering",
                    SeatState::Borrowed => "borrowed",
                    SeatState::Lapsed => "lapsed",
                }
                .to_string(),
                s.group.as_deref().map(clean).unwrap_or_else(|| "-".into()),
            ];
            if any_borrowed {
                row.push(back_at(s));
            }
            if any_idle {
                row.push(s.idle_s.map_or_else(|| "-".into(), idle));
            }
            row
        })
        .collect();
    let mut header = vec![
        "LICENSE",
        "SEAT",
        "HOLDER",
        "FINGERPRINT",
        "HELD FOR",
        "EXPIRES IN",
        "STATE",
        "GROUP",
    ];
    if any_borrowed {
        header.push("BACK AT");
    }
    if any_idle {
        header.push("IDLE");
    }
    table(&header, &rows)
}

/// Seconds idle, as the other durations (`12m00s`).
fn idle(s: u64) -> String {
    fmt_duration_ms(i64::try_from(s.saturating_mul(1000)).unwrap_or(i64::MAX))
}

/// When a borrowed seat comes back (its expiry, RFC 3339 UTC), else `-`.
fn back_at(s: &leasehold_common::api::SeatView) -> String {
    if s.state == SeatState::Borrowed {
        s.expires_at.to_string()
    } else {
        "-".into()
    }
}

/// `2026-11-30T04:00:01.000Z  #12  revoke  demo-cad  alice  seat <id>  detail`
pub fn format_event(e: &Event) -> String {
    let mut parts = vec![
        e.at.to_string(),
        format!("#{}", e.id),
        format!("{:<8}", e.kind.as_str()),
    ];
    if let Some(l) = &e.license_id {
        parts.push(clean(l));
    }
    if let Some(h) = &e.holder {
        parts.push(clean(h));
    }
    if let Some(s) = &e.seat_id {
        parts.push(format!("seat {}", clean(s)));
    }
    if let Some(d) = &e.detail {
        parts.push(clean(d));
    }
    parts.join("  ").trim_end().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use leasehold_common::api::{EventKind, LicenseSummary, SeatView};

    fn t(s: i64) -> Timestamp {
        Timestamp::from_millis(1_796_011_200_000 + s * 1000)
    }

    #[test]
    fn status_table() {
        let resp = LicensesResponse {
            now: t(0),
            licenses: vec![
                LicenseSummary {
                    id: "demo-cad".into(),
                    seats: 10,
                    live: 3,
                    waiting: 0,
                    ttl_s: 60.0,
                    skew_s: 5.0,
                    reap_grace_s: 15.0,
                    ..Default::default()
                },
                LicenseSummary {
                    id: "tiny".into(),
                    seats: 1,
                    live: 1,
                    waiting: 0,
                    ttl_s: 30.0,
                    skew_s: 2.0,
                    reap_grace_s: 10.0,
                    ..Default::default()
                },
            ],
        };
        insta::assert_snapshot!(format_status(&resp, "http://127.0.0.1:7400"), @r"
        server http://127.0.0.1:7400 · server time 2026-11-30T04:00:00.000Z
        LICENSE   LIVE/SEATS  FREE  RESERVED  LINGERING  BORROWED  TTL  SKEW  REAP GRACE  STATUS
        demo-cad  3/10        7     -         -          -         1m   5s    15s         ok
        tiny      1/1         0     -         -          -         30s  2s    10s         FULL
        ");
    }

    /// Vendor pools: the entitled seats, and within 30 days of the drop the
    /// time left, grace, or expired; `-` for a plain pool. The column
    /// is there only when some pool has a vendor.
    #[test]
    fn status_with_entitlements() {
        let vendor =
            |id: &str, entitled: u32, ends_in_s: Option<i64>, in_grace: bool| LicenseSummary {
                id: id.into(),
                seats: entitled,
                ttl_s: 60.0,
                skew_s: 5.0,
                reap_grace_s: 15.0,
                vendor: Some("keyright".into()),
                entitled_seats: Some(entitled),
                entitlement_ends_at: ends_in_s.map(t),
                in_grace,
                ..Default::default()
            };
        let day = 86_400;
        let mut plain = vendor("plain", 2, None, false);
        (plain.vendor, plain.entitled_seats) = (None, None);
        let resp = LicensesResponse {
            now: t(0),
            licenses: vec![
                vendor("cad", 10, Some(12 * day + 3600), false),
                vendor("ide", 3, Some(3 * day + 3600), true),
                vendor("cam", 0, None, false),
                vendor("far", 4, Some(31 * day), false),
                vendor("render", 4, None, false),
                plain,
            ],
        };
        insta::assert_snapshot!(format_status(&resp, "http://127.0.0.1:7400"), @r"
        server http://127.0.0.1:7400 · server time 2026-11-30T04:00:00.000Z
        LICENSE  LIVE/SEATS  FREE  RESERVED  LINGERING  BORROWED  TTL  SKEW  REAP GRACE  STATUS  ENTITLED
        cad      0/10        10    -         -          -         1m   5s    15s         ok      10 ⏳ 12d
        ide      0/3         3     -         -          -         1m   5s    15s         ok      3 grace 3d
        cam      0/0         0     -         -          -         1m   5s    15s         FULL    0 expired
        far      0/4         4     -         -          -         1m   5s    15s         ok      4
        render   0/4         4     -         -          -         1m   5s    15s         ok      4
        plain    0/2         2     -         -          -         1m   5s    15s         ok      -
        ");
        let only_plain = LicensesResponse {
            now: t(0),
            licenses: vec![resp.licenses[5].clone()],
        };
        assert!(!format_status(&only_plain, "s").contains("ENTITLED"));
    }

    #[test]
    fn seats_table_sanitizes_holder_names() {
        let resp = SeatsResponse {
            now: t(0),
            seats: vec![SeatView {
                license_id: "demo-cad".into(),
                seat_id: "0123456789abcdef0123456789abcdef".into(),
                holder: "eve\u{1b}[2J".into(),
                fingerprint: None,
                checked_out_at: t(-125),
                issued_at: t(-5),
                expires_at: t(55),
                state: SeatState::Live,
                group: None,
                idle_s: None,
            }],
        };
        insta::assert_snapshot!(format_seats(&resp), @r"
        LICENSE   SEAT                              HOLDER   FINGERPRINT  HELD FOR  EXPIRES IN  STATE  GROUP
        demo-cad  0123456789abcdef0123456789abcdef  eve�[2J  -            2m05s     55s         live   -
        ");
        assert_eq!(
            format_seats(&SeatsResponse {
                now: t(0),
                seats: vec![]
            }),
            "no seats held\n"
        );
    }

    /// Seat policies: reserved, lingering, borrowed and overage per pool,
    /// a line per group; in the seats, every state and the group.
    #[test]
    fn status_and_seats_with_policies() {
        use leasehold_common::api::{BorrowSummary, GroupSummary};
        let resp = LicensesResponse {
            now: t(0),
            licenses: vec![
                LicenseSummary {
                    id: "demo-cad".into(),
                    seats: 3,
                    live: 4,
                    ttl_s: 60.0,
                    skew_s: 5.0,
                    reap_grace_s: 15.0,
                    overage: 1,
                    linger_s: Some(120.0),
                    lingering: 1,
                    reserved: 1,
                    groups: vec![
                        GroupSummary {
                            name: "design".into(),
                            reserve: 2,
                            max: Some(6),
                            live: 1,
                        },
                        GroupSummary {
                            name: "qa".into(),
                            reserve: 0,
                            max: None,
                            live: 0,
                        },
                    ],
                    ..Default::default()
                },
                LicenseSummary {
                    id: "render".into(),
                    seats: 5,
                    live: 2,
                    ttl_s: 30.0,
                    skew_s: 2.0,
                    reap_grace_s: 10.0,
                    borrow: Some(BorrowSummary {
                        max_s: 604_800.0,
                        seats: 2,
                    }),
                    borrowed: 1,
                    ..Default::default()
                },
            ],
        };
        insta::assert_snapshot!(format_status(&resp, "http://127.0.0.1:7400"), @r"
        server http://127.0.0.1:7400 · server time 2026-11-30T04:00:00.000Z
        LICENSE   LIVE/SEATS  FREE  RESERVED  LINGERING  BORROWED  TTL  SKEW  REAP GRACE  STATUS
        demo-cad  4/3         0     1         1          -         1m   5s    15s         OVER +1
        render    2/5         3     -         -          1         30s  2s    10s         ok

        LICENSE   GROUP   IN USE  RESERVE  MAX
        demo-cad  design  1       2        6
        demo-cad  qa      0       0        -
        ");
        // --json passes the new fields through.
        let v: serde_json::Value = serde_json::from_str(&to_json(&resp).unwrap()).unwrap();
        let cad = &v["licenses"][0];
        assert_eq!(
            (
                &cad["reserved"],
                &cad["lingering"],
                &cad["overage"],
                &cad["linger_s"]
            ),
            (&1.into(), &1.into(), &1.into(), &120.0.into())
        );
        assert_eq!(
            cad["groups"][0],
            serde_json::json!({"name": "design", "reserve": 2, "max": 6, "live": 1})
        );
        assert_eq!(v["licenses"][1]["borrowed"], 1);
        assert_eq!(v["licenses"][1]["borrow"]["seats"], 2);

        let seat = |holder: &str, state: SeatState, group: Option<&str>, expires: i64| SeatView {
            license_id: "demo-cad".into(),
            seat_id: format!("{holder}-seat"),
            holder: holder.into(),
            fingerprint: Some(format!("fp-{holder}")),
            checked_out_at: t(-60),
            issued_at: t(-5),
            expires_at: t(expires),
            state,
            group: group.map(String::from),
            idle_s: None,
        };
        let seats = SeatsResponse {
            now: t(0),
            seats: vec![
                seat("alice", SeatState::Live, Some("design"), 55),
                seat("bob", SeatState::Lingering, Some("design"), 100),
                seat("carol", SeatState::Borrowed, None, 86_400),
                seat("dave", SeatState::Lapsed, None, -10),
            ],
        };
        insta::assert_snapshot!(format_seats(&seats), @r"
        LICENSE   SEAT        HOLDER  FINGERPRINT  HELD FOR  EXPIRES IN  STATE      GROUP   BACK AT
        demo-cad  alice-seat  alice   fp-alice     1m00s     55s         live       design  -
        demo-cad  bob-seat    bob     fp-bob       1m00s     1m40s       lingering  design  -
        demo-cad  carol-seat  carol   fp-carol     1m00s     1d00h       borrowed   -       2026-12-01T04:00:00.000Z
        demo-cad  dave-seat   dave    fp-dave      1m00s     -10s        lapsed     -       -
        ");
        let json = to_json(&seats).unwrap();
        assert!(json.contains(r#""state": "lingering""#), "{json}");
        assert!(json.contains(r#""group": "design""#), "{json}");
        // --json: a borrowed seat's state, and its expiry is when it is back.
        let v: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(
            (&v["seats"][2]["state"], &v["seats"][2]["expires_at"]),
            (&"borrowed".into(), &"2026-12-01T04:00:00.000Z".into())
        );
        assert_eq!(v["seats"][0]["idle_s"], serde_json::Value::Null);

        // IDLE only when some seat reports its user idle, as BACK AT.
        let mut alice = seat("alice", SeatState::Live, None, 55);
        alice.idle_s = Some(725);
        let idle = SeatsResponse {
            now: t(0),
            seats: vec![alice, seat("bob", SeatState::Live, None, 40)],
        };
        insta::assert_snapshot!(format_seats(&idle), @r"
        LICENSE   SEAT        HOLDER  FINGERPRINT  HELD FOR  EXPIRES IN  STATE  GROUP  IDLE
        demo-cad  alice-seat  alice   fp-alice     1m00s     55s         live   -      12m05s
        demo-cad  bob-seat    bob     fp-bob       1m00s     40s         live   -      -
        ");
        let v: serde_json::Value = serde_json::from_str(&to_json(&idle).unwrap()).unwrap();
        assert_eq!(
            (&v["seats"][0]["idle_s"], &v["seats"][1]["idle_s"]),
            (&725.into(), &serde_json::Value::Null)
        );
    }

    #[test]
    fn event_line() {
        let e = Event {
            id: 12,
            at: t(1),
            kind: EventKind::Revoke,
            license_id: Some("demo-cad".into()),
            seat_id: Some("ab".into()),
            holder: Some("alice".into()),
            detail: Some("reason: stuck\u{202e}".into()),
        };
        assert_eq!(
            format_event(&e),
            "2026-11-30T04:00:01.000Z  #12  revoke    demo-cad  alice  seat ab  reason: stuck\u{fffd}"
        );
    }
}
