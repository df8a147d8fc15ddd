//! What the simulator prints: one line per notable event, counters per
//! behaviour, and the summary (text or JSON). Formatting is pure.

use std::collections::BTreeMap;
use std::io::Write;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use leasehold_common::text::sanitize_for_terminal;
use serde::Serialize;

use super::plan::{Behaviour, ClientPlan};

/// A notable event of one simulated client.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    /// Got a seat (first checkout or a re-checkout).
    Checkout,
    /// 409: the pool was full.
    Denied,
    /// Joined the line with `?wait=`.
    Queued,
    /// The line moved: a seat after waiting.
    Granted,
    /// The wait ran out (409 after `?wait=`).
    WaitTimeout,
    Release,
    /// Stopped heartbeating without releasing.
    Crash,
    /// Its network went down for a while.
    Outage,
    /// Its lease expired locally before it could renew (the keeper degrades).
    Lapsed,
    /// Renewed the same seat after a lapse.
    Recovered,
    /// 410: the server no longer held its seat (revoked or reaped).
    Lost,
    /// An admin revoked its seat.
    Revoked,
    /// The reaper deleted its (crashed or lapsed) seat.
    Reaped,
    /// Borrowed a seat for offline use (no heartbeats).
    Borrow,
    /// Returned a borrowed seat early.
    Return,
    /// Its user walked away with the application open (the keeper reports
    /// a growing `idle_s`).
    Away,
    /// Its user came back and used the application again.
    Back,
    /// 410 with reason `idle`: the server reclaimed its seat; no seat
    /// until the user is back.
    Reclaimed,
    Error,
}

impl Kind {
    pub const ALL: [Kind; 19] = [
        Kind::Checkout,
        Kind::Denied,
        Kind::Queued,
        Kind::Granted,
        Kind::WaitTimeout,
        Kind::Release,
        Kind::Crash,
        Kind::Outage,
        Kind::Lapsed,
        Kind::Recovered,
        Kind::Lost,
        Kind::Revoked,
        Kind::Reaped,
        Kind::Borrow,
        Kind::Return,
        Kind::Away,
        Kind::Back,
        Kind::Reclaimed,
        Kind::Error,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Checkout => "checkout",
            Kind::Denied => "denied",
            Kind::Queued => "queued",
            Kind::Granted => "granted",
            Kind::WaitTimeout => "wait_timeout",
            Kind::Release => "release",
            Kind::Crash => "crash",
            Kind::Outage => "outage",
            Kind::Lapsed => "lapsed",
            Kind::Recovered => "recovered",
            Kind::Lost => "lost",
            Kind::Revoked => "revoked",
            Kind::Reaped => "reaped",
            Kind::Borrow => "borrow",
            Kind::Return => "return",
            Kind::Away => "away",
            Kind::Back => "back",
            Kind::Reclaimed => "reclaimed",
            Kind::Error => "error",
        }
    }
}

/// Prints event lines (unless quiet) and counts them.
pub struct Reporter {
    start: Instant,
    quiet: bool,
    counts: Mutex<BTreeMap<(Behaviour, Kind), u64>>,
}

impl Reporter {
    pub fn new(start: Instant, quiet: bool) -> Self {
        Reporter {
            start,
            quiet,
            counts: Mutex::new(BTreeMap::new()),
        }
    }

    pub fn event(&self, client: &ClientPlan, kind: Kind, detail: &str) {
        if let Ok(mut c) = self.counts.lock() {
            *c.entry((client.behaviour, kind)).or_default() += 1;
        }
        if !self.quiet {
            let line = event_line(self.start.elapsed(), client, kind, detail);
            // A closed pipe (`| head`) must not stop the simulation.
            let _ = writeln!(std::io::stdout().lock(), "{line}");
        }
    }

    pub fn counts(&self) -> BTreeMap<(Behaviour, Kind), u64> {
        self.counts.lock().map(|c| c.clone()).unwrap_or_default()
    }
}

/// `  12.30s  checkout   Grace Hopper          wks-grace-4f1c     steady    seat 3fa9c1d2`
pub fn event_line(at: Duration, client: &ClientPlan, kind: Kind, detail: &str) -> String {
    let line = format!(
        "{:>7.2}s  {:<12} {:<22} {:<20} {:<8}  {}",
        at.as_secs_f64(),
        kind.as_str(),
        client.holder,
        client.fingerprint,
        client.behaviour.as_str(),
        sanitize_for_terminal(detail)
    );
    line.trim_end().to_string()
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct BehaviourSummary {
    pub clients: usize,
    /// Every [`Kind`], zeros included.
    pub events: BTreeMap<&'static str, u64>,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Summary {
    pub server: String,
    pub license: String,
    /// The pool size, when known (admin API or licenses file).
    pub seats: Option<u32>,
    pub clients: usize,
    pub seed: u64,
    pub duration_s: f64,
    pub elapsed_s: f64,
    /// Stopped early by Ctrl-C.
    pub interrupted: bool,
    /// An admin token was available: revokes were made and reaps observed.
    pub admin: bool,
    pub behaviours: BTreeMap<&'static str, BehaviourSummary>,
    /// Totals over all behaviours.
    pub events: BTreeMap<&'static str, u64>,
    /// Most simulated clients holding a valid lease at the same moment.
    pub max_held: u32,
    /// Most live seats the server reported for the license (with an admin
    /// token). Includes crashed clients' seats until they are reaped, and
    /// borrowed seats while they are out.
    pub max_live_server: Option<u32>,
    /// Most of those that were borrowed at once (with an admin token).
    pub max_borrowed_server: Option<u32>,
    /// `max_held` and `max_live_server` never exceeded `seats` (None when
    /// the pool size is unknown).
    pub within_seats: Option<bool>,
}

impl Summary {
    /// Fill the per-behaviour and total event tables from the counters.
    pub fn tables(
        clients: &[ClientPlan],
        counts: &BTreeMap<(Behaviour, Kind), u64>,
    ) -> (
        BTreeMap<&'static str, BehaviourSummary>,
        BTreeMap<&'static str, u64>,
    ) {
        let mut behaviours = BTreeMap::new();
        let mut totals: BTreeMap<&'static str, u64> =
            Kind::ALL.iter().map(|k| (k.as_str(), 0)).collect();
        for b in Behaviour::ALL {
            let n = clients.iter().filter(|c| c.behaviour == b).count();
            if n == 0 {
                continue;
            }
            let events = Kind::ALL
                .iter()
                .map(|k| {
                    let v = counts.get(&(b, *k)).copied().unwrap_or(0);
                    *totals.entry(k.as_str()).or_default() += v;
                    (k.as_str(), v)
                })
                .collect();
            behaviours.insert(b.as_str(), BehaviourSummary { clients: n, events });
        }
        (behaviours, totals)
    }
}

/// The summary for people: a table of events per behaviour (only the kinds
/// that happened) and the seat check.
pub fn format_summary(s: &Summary) -> String {
    let mut out = String::new();
    let seats = s
        .seats
        .map_or_else(|| "? seats".to_string(), |n| format!("{n} seats"));
    out.push_str(&format!(
        "summary: {} clients on {} ({seats}) at {}, {:.1}s{}, seed {}\n",
        s.clients,
        sanitize_for_terminal(&s.license),
        sanitize_for_terminal(&s.server),
        s.elapsed_s,
        if s.interrupted { " (interrupted)" } else { "" },
        s.seed
    ));
    let kinds: Vec<&str> = Kind::ALL
        .iter()
        .map(|k| k.as_str())
        .filter(|k| s.events.get(k).copied().unwrap_or(0) > 0)
        .collect();
    let mut header = vec!["behaviour", "clients"];
    header.extend(&kinds);
    let mut rows: Vec<Vec<String>> = s
        .behaviours
        .iter()
        .map(|(name, b)| {
            let mut row = vec![name.to_string(), b.clients.to_string()];
            row.extend(kinds.iter().map(|k| b.events[k].to_string()));
            row
        })
        .collect();
    let mut total = vec!["total".to_string(), s.clients.to_string()];
    total.extend(kinds.iter().map(|k| s.events[k].to_string()));
    rows.push(total);
    let widths: Vec<usize> = (0..header.len())
        .map(|i| {
            rows.iter()
                .map(|r| r[i].len())
                .chain([header[i].len()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut line = |cells: Vec<&str>| {
        let l: Vec<String> = cells
            .iter()
            .zip(&widths)
            .enumerate()
            .map(|(i, (c, w))| {
                if i == 0 {
                    format!("{c:<w$}")
                } else {
                    format!("{c:>w$}")
                }
            })
            .collect();
        out.push_str("  ");
        out.push_str(l.join("  ").trim_end());
        out.push('\n');
    };
    line(header.clone());
    for r in &rows {
        line(r.iter().map(String::as_str).collect());
    }
    let verdict = match s.within_seats {
        Some(true) => " (ok: never more than the pool)",
        Some(false) => " (OVER THE POOL SIZE)",
        None => "",
    };
    out.push_str(&format!(
        "max concurrent seats held by simulated clients: {} of {seats}{verdict}\n",
        s.max_held
    ));
    match s.max_live_server {
        Some(live) => out.push_str(&format!(
            "max live seats on the server: {live} of {seats} (crashed seats count until reaped, \
             borrowed ones while out: at most {} at once)\n",
            s.max_borrowed_server.unwrap_or(0)
        )),
        None => out.push_str(
            "no admin token: revokes skipped, reaps and server live count not observed\n",
        ),
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::simulate::plan::plan;

    #[test]
    fn event_lines_are_aligned_and_sanitized() {
        let p = plan(5, Duration::from_secs(10), 9);
        let c = &p.clients[0];
        let line = event_line(
            Duration::from_millis(12_345),
            c,
            Kind::Denied,
            "pool full\u{1b}[2J",
        );
        assert!(line.starts_with("  12.35s  denied       "), "{line}");
        assert!(line.contains(&c.holder) && line.contains(&c.fingerprint));
        assert!(!line.contains('\u{1b}'), "{line}");
    }

    #[test]
    fn summary_counts_per_behaviour_and_totals() {
        let p = plan(8, Duration::from_secs(4), 1);
        let mut counts = BTreeMap::new();
        counts.insert((Behaviour::Releaser, Kind::Checkout), 3);
        counts.insert((Behaviour::Steady, Kind::Checkout), 1);
        counts.insert((Behaviour::Crasher, Kind::Crash), 1);
        let (behaviours, events) = Summary::tables(&p.clients, &counts);
        assert_eq!(behaviours.len(), 6);
        assert_eq!(behaviours["releaser"].clients, 3);
        assert_eq!(behaviours["borrower"].clients, 1);
        assert_eq!(behaviours["releaser"].events["checkout"], 3);
        assert_eq!(events["checkout"], 4);
        assert_eq!(events["reaped"], 0);
        let s = Summary {
            server: "http://127.0.0.1:7400".into(),
            license: "demo-ide".into(),
            seats: Some(3),
            clients: 8,
            seed: 1,
            duration_s: 4.0,
            elapsed_s: 4.02,
            interrupted: false,
            admin: false,
            behaviours,
            events,
            max_held: 3,
            max_live_server: None,
            max_borrowed_server: None,
            within_seats: Some(true),
        };
        let text = format_summary(&s);
        assert!(
            text.starts_with("summary: 8 clients on demo-ide (3 seats)"),
            "{text}"
        );
        let head = text.lines().nth(1).unwrap();
        assert!(
            head.contains("checkout") && head.contains("crash"),
            "{text}"
        );
        assert!(!head.contains("reaped"), "only kinds that happened: {text}");
        assert!(text.contains("max concurrent seats held by simulated clients: 3 of 3 seats (ok"));
        let total = text
            .lines()
            .find(|l| l.trim_start().starts_with("total"))
            .unwrap();
        assert!(total.contains(" 4"), "{text}");
        let json = serde_json::to_value(&s).unwrap();
        assert_eq!(json["behaviours"]["crasher"]["events"]["crash"], 1);
        assert_eq!(json["max_live_server"], serde_json::Value::Null);
        let watched = Summary {
            max_live_server: Some(3),
            max_borrowed_server: Some(1),
            ..s
        };
        let text = format_summary(&watched);
        assert!(
            text.contains("max live seats on the server: 3 of 3 seats (crashed seats count until reaped, borrowed ones while out: at most 1 at once)"),
            "{text}"
        );
    }
}
