//! The pools pane: per pool a used/total gauge, the numbers, the status,
//! and, once the 30 s usage fetch has delivered, today's denials and a
//! sparkline of the last hour.
//!
//! Column widths are computed here, not left to the layout solver: the
//! number columns are as wide as their widest value (never cut), and the
//! room that remains goes to the gauge and the sparkline, which shrink on a
//! narrow screen (the sparkline by merging minutes, see `sparkline`).

use leasehold_common::api::LicenseSummary;
use ratatui::Frame;
use ratatui::layout::{Constraint, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::Line;
use ratatui::widgets::{Cell, Row, Table};

use super::sparkline::{spark_line, spark_width};
use super::theme::pane_block;
use super::{Theme, bar};
use crate::app::{App, SPARK_MINUTES};
use crate::commands::policy_secs;

/// The gauge's width with room to spare, and the least it shrinks to.
const GAUGE_MAX: usize = 20;
const GAUGE_MIN: usize = 10;

/// Widths of the pane's columns, in cells; `spark` 0 means no sparkline,
/// `denied` 0 no usage columns at all (nothing fetched yet, or a server
/// without the usage endpoint: the pane then looks as it always did).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Columns {
    id: usize,
    gauge: usize,
    live: usize,
    free: usize,
    ttl: usize,
    status: usize,
    denied: usize,
    spark: usize,
}

fn live_cell(l: &LicenseSummary) -> String {
    format!("{:>4}/{}", l.live, l.seats)
}

fn denied_cell(app: &App, l: &LicenseSummary) -> String {
    match app.pool_usage(&l.id).and_then(|u| u.denials_today) {
        Some(d) => d.to_string(),
        None => "—".to_string(),
    }
}

/// Column widths for a pane `inner` cells wide inside its borders.
fn columns(inner: usize, app: &App) -> Columns {
    let widest = |cell: &dyn Fn(&LicenseSummary) -> String, least: usize| {
        app.licenses
            .iter()
            .map(|l| cell(l).chars().count())
            .fold(least, usize::max)
    };
    let id = widest(&|l| l.id.clone(), 8).min(40);
    let live = widest(&live_cell, "LIVE/SEATS".len());
    let free = widest(&|l| l.seats.saturating_sub(l.live).to_string(), 5);
    let ttl = widest(&|l| policy_secs(l.ttl_s), 6);
    let status = 8;
    let mut cols = Columns {
        id,
        gauge: GAUGE_MAX,
        live,
        free,
        ttl,
        status,
        denied: 0,
        spark: 0,
    };
    if !app.has_usage() {
        return cols;
    }
    cols.denied = widest(&|l| denied_cell(app, l), "DENIED".len());
    // Eight columns and the filler after them, one space apart.
    let fixed = id + live + free + ttl + status + cols.denied + 8;
    let room = inner.saturating_sub(fixed);
    // The gauge gives up width before the sparkline does, down to its least.
    cols.gauge = room
        .saturating_sub(SPARK_MINUTES)
        .clamp(GAUGE_MIN, GAUGE_MAX)
        .min(room);
    cols.spark = spark_width(room - cols.gauge);
    cols
}

/// The pane's title: what the usage columns mean, when they are shown.
fn title(app: &App, cols: Columns) -> Line<'static> {
    let mut t = format!(" Pools ({}) ", app.licenses.len());
    if cols.denied > 0 {
        t.push_str("· DENIED: since 00:00 UTC ");
    }
    if let Some(per) = SPARK_MINUTES.checked_div(cols.spark) {
        let unit = if per == 1 {
            "minute".to_string()
        } else {
            format!("{per} min")
        };
        t.push_str(&format!("· LAST HOUR: peak in use per {unit} "));
    }
    Line::from(t)
}

fn pool_row(l: &LicenseSummary, app: &App, cols: Columns, theme: Theme) -> Row<'static> {
    let full = l.live >= l.seats;
    let (status, style) = if full {
        ("■ FULL", theme.fg(Color::Red).add_modifier(Modifier::BOLD))
    } else if u64::from(l.live) * 5 >= u64::from(l.seats) * 4 {
        ("▲ busy", theme.fg(Color::Yellow))
    } else {
        ("● ok", theme.fg(Color::Green))
    };
    let mut cells = vec![
        Cell::from(l.id.clone()),
        Cell::from(bar(l.live, l.seats, cols.gauge)).style(style),
        Cell::from(live_cell(l)),
        Cell::from(l.seats.saturating_sub(l.live).to_string()),
        Cell::from(policy_secs(l.ttl_s)),
        Cell::from(status).style(style),
    ];
    if cols.denied > 0 {
        let usage = app.pool_usage(&l.id);
        let denied = usage.and_then(|u| u.denials_today);
        let denied_style = match denied {
            Some(d) if d > 0 => theme.fg(Color::Red).add_modifier(Modifier::BOLD),
            Some(_) => Style::new(),
            None => theme.dim(),
        };
        cells.push(Cell::from(denied_cell(app, l)).style(denied_style));
        if cols.spark > 0 {
            let spark = match usage.and_then(|u| u.last_hour.as_deref()) {
                Some(minutes) => spark_line(minutes, cols.spark, theme),
                None => Line::styled("—", theme.dim()),
            };
            cells.push(Cell::from(spark));
        }
    }
    Row::new(cells)
}

pub(super) fn draw_pools(frame: &mut Frame, area: Rect, app: &App, theme: Theme) {
    let cols = columns(area.width.saturating_sub(2) as usize, app);
    let mut header = vec!["POOL", "USED", "LIVE/SEATS", "FREE", "TTL", "STATUS"];
    let mut widths = vec![
        cols.id,
        cols.gauge,
        cols.live,
        cols.free,
        cols.ttl,
        cols.status,
    ];
    if cols.denied > 0 {
        header.push("DENIED");
        widths.push(cols.denied);
    }
    if cols.spark > 0 {
        header.push(if cols.spark >= 9 { "LAST HOUR" } else { "1h" });
        widths.push(cols.spark);
    }
    let header = Row::new(header).style(Style::new().add_modifier(Modifier::BOLD));
    let rows = app.licenses.iter().map(|l| pool_row(l, app, cols, theme));
    let constraints = widths
        .into_iter()
        .map(|w| Constraint::Length(w as u16))
        .chain([Constraint::Fill(1)]);
    let table = Table::new(rows, constraints)
        .header(header)
        .block(pane_block(title(app, cols), false, theme));
    frame.render_widget(table, area);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::app::test_support::*;
    use crate::app::{AppEvent, UsageUpdate};

    fn with_usage(mut app: App) -> App {
        app.update(
            AppEvent::Usage(Box::new(UsageUpdate {
                license_id: "demo-cad".into(),
                last_hour: Some(vec![]),
                denials_today: Some(1_234_567),
            })),
            ts(0),
        );
        app
    }

    #[test]
    fn without_usage_the_columns_are_as_before() {
        let app = loaded_app();
        let c = columns(158, &app);
        assert_eq!(
            (c.gauge, c.live, c.free, c.ttl, c.denied, c.spark),
            (20, 10, 5, 6, 0, 0)
        );
    }

    #[test]
    fn the_gauge_shrinks_before_the_sparkline() {
        let app = with_usage(loaded_app());
        // 8 + 10 + 5 + 6 + 8 + 7 ("1234567") + 8 spaces = 52 fixed.
        let wide = columns(158, &app);
        assert_eq!((wide.denied, wide.gauge, wide.spark), (7, 20, 60));
        let mid = columns(108, &app);
        assert_eq!((mid.gauge, mid.spark), (10, 30));
        let narrow = columns(78, &app);
        assert_eq!((narrow.gauge, narrow.spark), (10, 15));
        let tiny = columns(60, &app);
        assert_eq!((tiny.gauge, tiny.spark), (8, 0));
    }

    #[test]
    fn number_columns_fit_their_widest_value() {
        let mut app = App::new("s", false, false);
        app.update(
            snapshot(vec![pool("big", 4_000_000_000, 123_456_789)], ts(0), ts(0)),
            ts(0),
        );
        let c = columns(78, &app);
        assert_eq!(c.live, "123456789/4000000000".len());
        assert_eq!(c.free, "3876543211".len());
    }
}
