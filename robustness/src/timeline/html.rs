//! The picture as one self-contained HTML page: an SVG with a lane per
//! seat, hovers as SVG `<title>`s, and the text form beneath it.

use std::fmt::Write;

use super::picture::{Bar, Lane, Picture, kind_name, license_words};
use super::text::{clock, rel};
use crate::history::Micros;

const WIDTH: f64 = 1200.0;
/// The lane labels' column.
const LEFT: f64 = 170.0;
const RIGHT: f64 = 30.0;
/// The time axis above the lanes.
const AXIS: f64 = 34.0;
const ROW: f64 = 18.0;
const LIFE: f64 = 10.0;
const TICKS: f64 = 24.0;
const GAP: f64 = 8.0;
/// Roughly one character of the bars' labels, in pixels.
const CHAR: f64 = 6.2;

const STYLE: &str = "
body { font: 14px system-ui, sans-serif; margin: 16px; color: #222; }
h1 { font-size: 20px; margin: 0 0 4px; color: #b00; }
p.message { font-size: 15px; margin: 0 0 4px; }
p.meta { color: #555; margin: 0 0 10px; }
svg { border: 1px solid #ccc; background: #fff; }
svg text { font: 11px ui-monospace, monospace; }
.stripe { fill: #f6f6f6; }
.label { font-weight: 600; }
.involved .label { fill: #b00; }
.ok { fill: #2e9d4a; }
.refused { fill: #e08a00; }
.lost { fill: #8e3cc7; }
.unknown { fill: #888; }
.named { stroke: #000; stroke-width: 2; }
.open { stroke: #888; stroke-width: 2; stroke-dasharray: 4 3; }
.life { fill: #8fd19e; }
.skew { fill: #d5efda; }
.tick { stroke: #1f5fbf; stroke-width: 2; }
.tick-label { fill: #1f5fbf; }
.fault { fill: #f2c94c; opacity: 0.25; }
.fault-label { fill: #8a6d00; }
.axis { stroke: #bbb; }
.violation { stroke: #e00; stroke-width: 2; }
.violation-label { fill: #e00; font-weight: 600; }
.legend span { display: inline-block; margin-right: 14px; }
.swatch { display: inline-block; width: 12px; height: 12px; vertical-align: middle; margin-right: 4px; }
pre { background: #f6f6f6; padding: 8px; overflow-x: auto; }
";

/// Escape text for HTML and SVG, element content or attribute.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

pub fn render(picture: &Picture, text: &str) -> String {
    let v = picture.violation;
    let mut out = String::new();
    let title = escape(&format!("{}: {}", v.broken.as_str(), v.message));
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <title>{title}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n"
    );
    let _ = writeln!(out, "<h1>{}</h1>", escape(v.broken.as_str()));
    let _ = writeln!(
        out,
        "<p class=\"message\" id=\"violation\">{}</p>",
        escape(&v.to_string())
    );
    let license = license_words(v);
    let _ = writeln!(
        out,
        "<p class=\"meta\">{} &middot; {} &middot; window {}..{} around {} (server clock)</p>",
        escape(&picture.history.scenario),
        escape(&license),
        rel(picture.from, v.at),
        rel(picture.to, v.at),
        clock(v.at),
    );
    Svg::new(picture).draw(&mut out);
    out.push_str(LEGEND);
    let _ = writeln!(
        out,
        "<details open><summary>As text</summary><pre>{}</pre></details>",
        escape(text)
    );
    out.push_str("</body>\n</html>\n");
    out
}

const LEGEND: &str = "<p class=\"legend\">\
<span><i class=\"swatch ok\" style=\"background:#2e9d4a\"></i>ok</span>\
<span><i class=\"swatch\" style=\"background:#e08a00\"></i>refused (409, 404, ...)</span>\
<span><i class=\"swatch\" style=\"background:#8e3cc7\"></i>410 seat lost</span>\
<span><i class=\"swatch\" style=\"background:#888\"></i>unknown (dashed: may take effect until ?)</span>\
<span><i class=\"swatch\" style=\"background:#8fd19e\"></i>lease: issued to expires</span>\
<span><i class=\"swatch\" style=\"background:#d5efda\"></i>skew: still counts</span>\
<span><i class=\"swatch\" style=\"background:#1f5fbf\"></i>event</span>\
<span><i class=\"swatch\" style=\"background:#f2c94c\"></i>fault</span>\
<span><i class=\"swatch\" style=\"background:#e00\"></i>the violation</span>\
</p>\n";

/// A lane's rows of bars, the leases' lives, and a row of ticks if it
/// has events.
fn lane_height(lane: &Lane, rows: usize) -> f64 {
    let ticks = if lane.ticks.is_empty() { 0.0 } else { TICKS };
    rows as f64 * ROW + LIFE + ticks + GAP
}

/// A bar placed in its lane's rows.
struct Placed<'p> {
    bar: &'p Bar,
    row: usize,
}

struct Svg<'p, 'h> {
    picture: &'p Picture<'h>,
    /// Per lane, its bars placed in rows so that no two labels overlap.
    placed: Vec<(Vec<Placed<'p>>, usize)>,
    height: f64,
}

impl<'p, 'h> Svg<'p, 'h> {
    fn new(picture: &'p Picture<'h>) -> Svg<'p, 'h> {
        let mut svg = Svg {
            picture,
            placed: Vec::new(),
            height: 0.0,
        };
        svg.placed = picture.lanes.iter().map(|lane| svg.rows(lane)).collect();
        let lanes: f64 = (picture.lanes.iter().zip(&svg.placed))
            .map(|(lane, (_, rows))| lane_height(lane, *rows))
            .sum();
        svg.height = AXIS + lanes + GAP;
        svg
    }

    /// Greedy packing: each bar in the first row free at its left edge.
    fn rows(&self, lane: &'p Lane) -> (Vec<Placed<'p>>, usize) {
        let mut ends: Vec<f64> = Vec::new();
        let mut placed = Vec::new();
        for bar in &lane.bars {
            let left = self.x(bar.sent);
            let label = (kind_name(bar.kind).len() + bar.outcome.len() + 2) as f64 * CHAR;
            let right = if bar.open {
                WIDTH
            } else {
                self.x(bar.answered).max(left + label + 4.0)
            };
            let row = match ends.iter().position(|&end| end < left) {
                Some(row) => row,
                None => {
                    ends.push(0.0);
                    ends.len() - 1
                }
            };
            ends[row] = right;
            placed.push(Placed { bar, row });
        }
        (placed, ends.len().max(1))
    }

    fn x(&self, t: Micros) -> f64 {
        let p = self.picture;
        let span = (p.to - p.from).max(1) as f64;
        let t = t.clamp(p.from, p.to);
        LEFT + (t - p.from) as f64 / span * (WIDTH - LEFT - RIGHT)
    }

    fn draw(&self, out: &mut String) {
        let _ = writeln!(
            out,
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{WIDTH}\" height=\"{h:.0}\" \
             viewBox=\"0 0 {WIDTH} {h:.0}\">",
            h = self.height
        );
        self.axis(out);
        let mut top = AXIS;
        for (i, (lane, (placed, rows))) in self.picture.lanes.iter().zip(&self.placed).enumerate() {
            self.lane(out, lane, placed, *rows, top, i % 2 == 0);
            top += lane_height(lane, *rows);
        }
        self.faults(out);
        let x = self.x(self.picture.violation.at);
        let _ = writeln!(
            out,
            "<line class=\"violation\" id=\"violation-line\" x1=\"{x:.1}\" y1=\"14\" x2=\"{x:.1}\" \
             y2=\"{:.0}\"><title>{}</title></line>\
             <text class=\"violation-label\" x=\"{x:.1}\" y=\"11\" text-anchor=\"middle\">violation</text>",
            self.height,
            escape(&self.picture.violation.to_string())
        );
        out.push_str("</svg>\n");
    }

    /// Ticks every round step, counted from the violation's instant.
    fn axis(&self, out: &mut String) {
        let p = self.picture;
        let span = (p.to - p.from) as f64 / 1e6;
        let steps = [
            0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 300.0, 600.0, 3600.0,
        ];
        let step = steps
            .iter()
            .copied()
            .find(|s| span / s <= 12.0)
            .unwrap_or(3600.0);
        let step_us = (step * 1e6) as Micros;
        let first = (p.from - p.violation.at).div_euclid(step_us) + 1;
        let mut k = first;
        while p.violation.at + k * step_us <= p.to {
            let t = p.violation.at + k * step_us;
            let x = self.x(t);
            let _ = writeln!(
                out,
                "<line class=\"axis\" x1=\"{x:.1}\" y1=\"{AXIS}\" x2=\"{x:.1}\" y2=\"{:.0}\"/>\
                 <text x=\"{x:.1}\" y=\"{}\" text-anchor=\"middle\">{}</text>",
                self.height,
                AXIS - 6.0,
                rel(t, p.violation.at)
            );
            k += 1;
        }
    }

    fn faults(&self, out: &mut String) {
        for band in &self.picture.faults {
            let (x1, x2) = (self.x(band.from), self.x(band.to));
            let what = escape(&band.what);
            let _ = writeln!(
                out,
                "<g><rect class=\"fault\" x=\"{x1:.1}\" y=\"{AXIS}\" width=\"{:.1}\" height=\"{:.0}\"/>\
                 <text class=\"fault-label\" x=\"{:.1}\" y=\"{}\">{what}</text>\
                 <title>fault: {what}, {}..{}</title></g>",
                (x2 - x1).max(2.0),
                self.height - AXIS,
                x1 + 3.0,
                AXIS + 11.0,
                rel(band.from, self.picture.violation.at),
                rel(band.to, self.picture.violation.at),
            );
        }
    }

    fn lane(
        &self,
        out: &mut String,
        lane: &Lane,
        placed: &[Placed],
        rows: usize,
        top: f64,
        stripe: bool,
    ) {
        let height = lane_height(lane, rows);
        let class = if lane.involved {
            "lane involved"
        } else {
            "lane"
        };
        let _ = writeln!(out, "<g class=\"{class}\">");
        if stripe {
            let _ = writeln!(
                out,
                "<rect class=\"stripe\" x=\"0\" y=\"{top:.0}\" width=\"{WIDTH}\" height=\"{height:.0}\"/>"
            );
        }
        let hover = escape(lane.seat().unwrap_or(&lane.label()));
        let _ = writeln!(
            out,
            "<text class=\"label\" x=\"8\" y=\"{:.0}\">{}<title>{hover}</title></text>",
            top + 14.0,
            escape(&lane.label())
        );
        let at = self.picture.violation.at;
        for p in placed {
            self.bar(out, p.bar, top + p.row as f64 * ROW + 3.0, at);
        }
        let life_top = top + rows as f64 * ROW + 2.0;
        for life in &lane.lives {
            let (x1, x2, x3) = (
                self.x(life.issued),
                self.x(life.expires),
                self.x(life.counts_until),
            );
            let _ = writeln!(
                out,
                "<g><rect class=\"life\" x=\"{x1:.1}\" y=\"{life_top:.1}\" width=\"{:.1}\" height=\"{LIFE}\"/>\
                 <rect class=\"skew\" x=\"{x2:.1}\" y=\"{life_top:.1}\" width=\"{:.1}\" height=\"{LIFE}\"/>\
                 <title>lease signed by op {}: issued {}, expires {}, counts until {}</title></g>",
                (x2 - x1).max(0.0),
                (x3 - x2).max(0.0),
                life.op,
                rel(life.issued, at),
                rel(life.expires, at),
                rel(life.counts_until, at),
            );
        }
        let tick_top = life_top + LIFE + 2.0;
        for tick in &lane.ticks {
            let x = self.x(tick.at);
            let detail = tick
                .detail
                .as_deref()
                .map(|d| format!(": {d}"))
                .unwrap_or_default();
            let _ = writeln!(
                out,
                "<g><line class=\"tick\" x1=\"{x:.1}\" y1=\"{tick_top:.1}\" x2=\"{x:.1}\" y2=\"{:.1}\"/>\
                 <text class=\"tick-label\" x=\"{:.1}\" y=\"{:.1}\">#{} {}</text>\
                 <title>event #{} {} at {}{}</title></g>",
                tick_top + 8.0,
                x + 3.0,
                tick_top + 18.0,
                tick.id,
                escape(&tick.kind),
                tick.id,
                escape(&tick.kind),
                rel(tick.at, at),
                escape(&detail),
            );
        }
        out.push_str("</g>\n");
    }

    fn bar(&self, out: &mut String, bar: &Bar, y: f64, at: Micros) {
        let (x1, x2) = (self.x(bar.sent), self.x(bar.answered));
        let named = if bar.named { " named" } else { "" };
        let mut hover = format!(
            "op {}: client {} {} {}, sent {}, answered {}",
            bar.op,
            bar.client,
            kind_name(bar.kind),
            bar.outcome,
            rel(bar.sent, at),
            rel(bar.answered, at)
        );
        if let Some(expires) = bar.expires {
            let _ = write!(hover, ", expires {}", rel(expires, at));
        }
        if let Some(why) = &bar.why {
            let _ = write!(
                hover,
                " ({why}); may take effect at any instant after its sending"
            );
        }
        let _ = write!(
            out,
            "<g class=\"op\"><title>{}</title><rect class=\"{}{named}\" x=\"{x1:.1}\" y=\"{y:.1}\" \
             width=\"{:.1}\" height=\"12\"/>",
            escape(&hover),
            bar.class.css(),
            (x2 - x1).max(2.0),
        );
        if bar.open {
            let edge = WIDTH - RIGHT;
            let _ = write!(
                out,
                "<line class=\"open\" x1=\"{:.1}\" y1=\"{:.1}\" x2=\"{edge:.1}\" y2=\"{:.1}\"/>\
                 <text x=\"{:.1}\" y=\"{:.1}\">?</text>",
                x2.max(x1 + 2.0),
                y + 6.0,
                y + 6.0,
                edge + 4.0,
                y + 10.0
            );
        }
        let _ = writeln!(
            out,
            "<text x=\"{:.1}\" y=\"{:.1}\">{} {}</text></g>",
            x1 + 3.0,
            y + 10.0,
            kind_name(bar.kind),
            escape(&bar.outcome)
        );
    }
}
