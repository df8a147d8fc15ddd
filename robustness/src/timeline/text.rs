//! The picture as text for a terminal: one block per lane, its lines in
//! time order, times in seconds relative to the violation's instant.

use std::fmt::Write;

use super::picture::{Bar, Lane, Picture, kind_name, license_words};
use crate::history::Micros;

/// Seconds from the violation's instant, signed: `+0.412s`.
pub fn rel(t: Micros, at: Micros) -> String {
    format!("{:+.3}s", (t - at) as f64 / 1e6)
}

/// The server's clock as people read it.
pub fn clock(t: Micros) -> String {
    chrono::DateTime::from_timestamp_micros(t)
        .map(|t| t.format("%Y-%m-%dT%H:%M:%S%.6fZ").to_string())
        .unwrap_or_else(|| t.to_string())
}

pub fn render(picture: &Picture) -> String {
    let v = picture.violation;
    let mut out = String::new();
    let _ = writeln!(out, "{v}");
    if !picture.history.scenario.is_empty() {
        let _ = writeln!(out, "scenario: {}", picture.history.scenario);
    }
    let license = license_words(v);
    let _ = writeln!(
        out,
        "window {}..{} around {} (server clock), {license}",
        rel(picture.from, v.at),
        rel(picture.to, v.at),
        clock(v.at),
    );
    let _ = writeln!(
        out,
        "times from the violation's instant; * an operation the violation names"
    );
    for lane in &picture.lanes {
        out.push('\n');
        block(&mut out, picture, lane);
    }
    out
}

/// One lane: its operations, events, faults, the leases it held from
/// before the window, and the violation's instant, in time order.
fn block(out: &mut String, picture: &Picture, lane: &Lane) {
    let at = picture.violation.at;
    let mut title = lane.label();
    if let Some(seat) = lane.seat().filter(|s| s.len() > 8) {
        let _ = write!(title, " ({seat})");
    }
    if lane.involved {
        title.push_str("  <- in the violation");
    }
    let _ = writeln!(out, "{title}");
    // (instant, rank among equal instants, line)
    let mut lines: Vec<(Micros, u8, String)> = Vec::new();
    for band in &picture.faults {
        let span = format!("{}..{}", rel(band.from, at), rel(band.to, at));
        lines.push((band.from, 0, format!("{span:<19} fault      {}", band.what)));
    }
    // Of the lives signed before the window, the latest says how long the
    // seat counted into it; the earlier ones it superseded.
    let shown: Vec<usize> = lane.bars.iter().map(|b| b.op).collect();
    let earlier = lane.lives.iter().filter(|l| !shown.contains(&l.op));
    if let Some(life) = earlier.max_by_key(|l| (l.issued, l.op)) {
        let span = format!("{}..{}", rel(life.issued, at), rel(life.expires, at));
        let rest = format!(
            "counts until {} (op {})",
            rel(life.counts_until, at),
            life.op
        );
        lines.push((life.issued, 1, format!("{span:<19} lease      {rest}")));
    }
    for tick in &lane.ticks {
        let detail = tick
            .detail
            .as_deref()
            .map(|d| format!("  {d}"))
            .unwrap_or_default();
        let what = format!("event #{} {}{detail}", tick.id, tick.kind);
        lines.push((tick.at, 2, format!("{:<19} {what}", rel(tick.at, at))));
    }
    lines.push((
        at,
        3,
        format!("{:<19} ---------- violation ----------", rel(at, at)),
    ));
    for bar in &lane.bars {
        lines.push((bar.sent, 4, op_line(bar, at, picture)));
    }
    lines.sort_by_key(|(t, rank, _)| (*t, *rank));
    for (_, _, line) in lines {
        let _ = writeln!(out, "  {line}");
    }
}

/// `+0.412s..+0.430s   heartbeat  ok  client 3  expires +3.430s`.
fn op_line(bar: &Bar, at: Micros, picture: &Picture) -> String {
    let end = if bar.open {
        "?".to_string()
    } else {
        rel(bar.answered, at)
    };
    let span = format!("{}..{end}", rel(bar.sent, at));
    let mark = if bar.named { '*' } else { ' ' };
    let mut line = format!(
        "{span:<19}{mark}{:<10} {:<24} client {} (op {})",
        kind_name(bar.kind),
        bar.outcome,
        bar.client,
        bar.op
    );
    if let Some(expires) = bar.expires {
        let skew = picture
            .history
            .terms_of(&picture.history.ops[bar.op].license)
            .map_or(0, |t| t.skew);
        let _ = write!(
            line,
            "  expires {}, counts until {}",
            rel(expires, at),
            rel(expires + skew, at)
        );
    }
    if let Some(why) = &bar.why {
        let _ = write!(line, "  gave up at {}: {why}", rel(bar.answered, at));
    }
    line
}
