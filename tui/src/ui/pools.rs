//! The pools pane: per pool a used/total gauge, the numbers, the status,
//! a vendor pool's entitled seats (with `⏳ 12d`, `grace 3d` or `expired`
//! in the warning style when they drop within 30 days), and, once the 30 s
//! usage fetch has delivered, today's denials and a sparkline of the last
//! hour.
//!
//! Column widths are computed here, not left to the layout solver (which
//! cuts cells when the columns add up to more than the width): the number
//! columns are as wide as their widest value and never cut. When the pane is
//! too narrow, the gauge shrinks first (to its least), then the pool id
//! (ending in `…`), then every number takes its compact form (`97.4k/1M`,
//! `compact_count`; the help lists the exact figures), then the gauge goes
//! and the id shrinks further. The room left goes to the gauge and the
//! sparkline (merging minutes, see `sparkline`).

use leasehold_common::Timestamp;
use leasehold_common::api::LicenseSummary;
use ratatui::Frame;
use ratatui::layout::{Constraint, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Cell, Row, Table};

use super::sparkline::{spark_line, spark_width};
use super::theme::pane_block;
use super::{Theme, bar, fit_line};
use crate::app::{App, Level, SPARK_MINUTES};
use crate::entitlements::term_mark;
use crate::format::{cells, compact_count, ellipsize, policy_secs};

/// The gauge's width with room to spare, and the least it shrinks to
/// before the pool id gives way.
const GAUGE_MAX: usize = 20;
const GAUGE_MIN: usize = 10;
/// The widest the pool id column gets, and the least it shrinks to before
/// the numbers go compact.
const ID_MAX: usize = 40;
const ID_MIN: usize = 8;
/// The widest the ALERTS column gets (longer lists end in `…`; the help
/// lists every firing alert).
const ALERTS_MAX: usize = 32;

/// Widths of the pane's columns, in cells; `spark` 0 means no sparkline,
/// `denied` 0 no usage columns at all (nothing fetched yet, or a server
/// without the usage endpoint: the pane then looks as it always did).
/// `compact`: the numbers are printed by [`compact_count`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Columns {
    id: usize,
    gauge: usize,
    live: usize,
    free: usize,
    /// The seat-policy counts, 0 when no pool has the policy: unused
    /// reservations (RSVD), lingering (LING) and borrowed (BORR) seats.
    reserved: usize,
    lingering: usize,
    borrowed: usize,
    ttl: usize,
    status: usize,
    /// 0 when no pool has a vendor.
    entitled: usize,
    /// 0 when no pool has an alert firing.
    alerts: usize,
    denied: usize,
    spark: usize,
    compact: bool,
}

fn count(n: u64, compact: bool) -> String {
    if compact {
        compact_count(n)
    } else {
        n.to_string()
    }
}

fn live_cell(l: &LicenseSummary, compact: bool) -> String {
    format!(
        "{:>4}/{}",
        count(l.live.into(), compact),
        count(l.seats.into(), compact)
    )
}

fn free_cell(l: &LicenseSummary, compact: bool) -> String {
    count(l.seats.saturating_sub(l.live).into(), compact)
}

/// The seat-policy columns: header, whether a pool has the policy (or seats
/// in that state), and the count.
type PolicyColumn = (
    &'static str,
    fn(&LicenseSummary) -> bool,
    fn(&LicenseSummary) -> u32,
);
const POLICY_COLUMNS: [PolicyColumn; 3] = [
    (
        "RSVD",
        |l| !l.groups.is_empty() || l.reserved > 0,
        |l| l.reserved,
    ),
    (
        "LING",
        |l| l.linger_s.is_some() || l.lingering > 0,
        |l| l.lingering,
    ),
    (
        "BORR",
        |l| l.borrow.is_some() || l.borrowed > 0,
        |l| l.borrowed,
    ),
];

/// Live beyond the pool's seats: granted from its overage.
pub(super) fn over(l: &LicenseSummary) -> u32 {
    l.live.saturating_sub(l.seats)
}

/// `ALERT cad-full, cad-busy`, or empty when none of the pool's alerts fires.
pub(super) fn alerts_cell(l: &LicenseSummary) -> String {
    if l.alerts_firing.is_empty() {
        String::new()
    } else {
        format!("ALERT {}", l.alerts_firing.join(", "))
    }
}

/// A vendor pool's entitled seats and its mark (`10`, `⏳ 12d`) at the
/// server's `now`; `None` for a license without a vendor.
fn entitled_parts(l: &LicenseSummary, now: Timestamp, compact: bool) -> Option<(String, String)> {
    l.vendor.as_ref()?;
    let seats = count(l.entitled_seats.unwrap_or(0).into(), compact);
    let mark = term_mark(l, now).map_or_else(String::new, |m| m.to_string());
    Some((seats, mark))
}

/// The ENTITLED cell's text: `10 ⏳ 12d`, `4`, or `—`.
fn entitled_text(l: &LicenseSummary, now: Timestamp, compact: bool) -> String {
    match entitled_parts(l, now, compact) {
        None => "—".into(),
        Some((seats, mark)) if mark.is_empty() => seats,
        Some((seats, mark)) => format!("{seats} {mark}"),
    }
}

fn denied_cell(app: &App, l: &LicenseSummary, compact: bool) -> String {
    match app.pool_usage(&l.id).and_then(|u| u.denials_today) {
        Some(d) => count(d, compact),
        None => "—".to_string(),
    }
}

/// Column widths for a pane `inner` cells wide inside its borders, at the
/// server's `now`.
fn columns(inner: usize, app: &App, now: Timestamp) -> Columns {
    let widest = |cell: &dyn Fn(&LicenseSummary) -> String, least: usize| {
        app.licenses
            .iter()
            .map(|l| cells(&cell(l)))
            .fold(least, usize::max)
    };
    let id_full = widest(&|l| l.id.clone(), 8).min(ID_MAX);
    let ttl = widest(&|l| policy_secs(l.ttl_s), 6);
    let status = 8;
    let alerts = if app.licenses.iter().any(|l| !l.alerts_firing.is_empty()) {
        widest(&alerts_cell, "ALERTS".len()).min(ALERTS_MAX)
    } else {
        0
    };
    let usage = app.has_usage();
    let vendor = app.licenses.iter().any(|l| l.vendor.is_some());
    let mut cols = Columns {
        id: id_full,
        gauge: GAUGE_MAX,
        live: 0,
        free: 0,
        reserved: 0,
        lingering: 0,
        borrowed: 0,
        ttl,
        status,
        entitled: 0,
        alerts,
        denied: 0,
        spark: 0,
        compact: false,
    };
    for compact in [false, true] {
        cols.compact = compact;
        cols.live = widest(&|l| live_cell(l, compact), "LIVE/SEATS".len());
        cols.free = widest(&|l| free_cell(l, compact), 5);
        let [reserved, lingering, borrowed] = POLICY_COLUMNS.map(|(head, has, n)| {
            if app.licenses.iter().any(has) {
                widest(&|l| count(n(l).into(), compact), head.len())
            } else {
                0
            }
        });
        (cols.reserved, cols.lingering, cols.borrowed) = (reserved, lingering, borrowed);
        // Each shown policy column and the space after it.
        let policy: usize = [reserved, lingering, borrowed]
            .iter()
            .filter(|&&w| w > 0)
            .map(|w| w + 1)
            .sum();
        if usage {
            cols.denied = widest(&|l| denied_cell(app, l, compact), "DENIED".len());
        }
        if vendor {
            // One cell more than the widest: the columns are one space
            // apart, and `3 grace 3d 0` would read as one figure.
            cols.entitled = widest(&|l| entitled_text(l, now, compact), "ENTITLED".len()) + 1;
        }
        // The columns and the filler after them, one space apart (one
        // more than needed without usage: the pane looked so before).
        let alerts = if alerts > 0 { alerts + 1 } else { 0 };
        let entitled = if vendor { cols.entitled + 1 } else { 0 };
        let fixed =
            cols.live + cols.free + policy + ttl + status + entitled + alerts + cols.denied + 8;
        let id_least = ID_MIN.min(id_full);
        cols.id = inner
            .saturating_sub(fixed + GAUGE_MIN)
            .clamp(id_least, id_full);
        if fixed + cols.id + GAUGE_MIN > inner && !compact {
            continue; // exact figures leave too little: go compact
        }
        // Last resort on a very narrow pane: the gauge goes, the id shrinks.
        cols.id = cols.id.min(inner.saturating_sub(fixed)).max(1);
        let room = inner.saturating_sub(fixed + cols.id);
        if !usage {
            cols.gauge = GAUGE_MAX.min(room);
            return cols;
        }
        // The gauge gives up width before the sparkline does, down to its least.
        cols.gauge = room
            .saturating_sub(SPARK_MINUTES)
            .clamp(GAUGE_MIN, GAUGE_MAX)
            .min(room);
        cols.spark = spark_width(room - cols.gauge);
        return cols;
    }
    cols
}

/// The pane's title: what the usage columns mean, when they are shown.
fn title(app: &App, cols: Columns, width: usize) -> Line<'static> {
    let mut t = format!(" Pools ({}) ", app.licenses.len());
    if cols.compact {
        t.push_str("· compact figures: exact in ? help ");
    }
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
    fit_line(vec![Span::raw(t)], width)
}

/// The ENTITLED cell: the seats, and the mark in the warning style.
fn entitled_column_cell(
    l: &LicenseSummary,
    now: Timestamp,
    compact: bool,
    theme: Theme,
) -> Cell<'static> {
    match entitled_parts(l, now, compact) {
        None => Cell::from("—").style(theme.dim()),
        Some((seats, mark)) if mark.is_empty() => Cell::from(seats),
        Some((seats, mark)) => Cell::from(Line::from(vec![
            Span::raw(format!("{seats} ")),
            Span::styled(mark, theme.level(Level::Warn)),
        ])),
    }
}

fn pool_row(
    l: &LicenseSummary,
    app: &App,
    cols: Columns,
    theme: Theme,
    now: Timestamp,
) -> Row<'static> {
    let full = l.live >= l.seats;
    let (status, style) = if over(l) > 0 {
        (
            "⇡ OVER",
            theme.fg(Color::Magenta).add_modifier(Modifier::BOLD),
        )
    } else if full {
        ("■ FULL", theme.fg(Color::Red).add_modifier(Modifier::BOLD))
    } else if u64::from(l.live) * 5 >= u64::from(l.seats) * 4 {
        ("▲ busy", theme.fg(Color::Yellow))
    } else {
        ("● ok", theme.fg(Color::Green))
    };
    let mut cells = vec![
        Cell::from(ellipsize(&l.id, cols.id).into_owned()),
        Cell::from(bar(l.live, l.seats, cols.gauge)).style(style),
        Cell::from(live_cell(l, cols.compact)),
        Cell::from(free_cell(l, cols.compact)),
    ];
    let policy_widths = [cols.reserved, cols.lingering, cols.borrowed];
    for ((_, has, n), w) in POLICY_COLUMNS.iter().zip(policy_widths) {
        if w == 0 {
            continue;
        }
        cells.push(if has(l) {
            Cell::from(count(n(l).into(), cols.compact))
        } else {
            Cell::from("—").style(theme.dim())
        });
    }
    cells.push(Cell::from(policy_secs(l.ttl_s)));
    cells.push(Cell::from(status).style(style));
    if cols.entitled > 0 {
        cells.push(entitled_column_cell(l, now, cols.compact, theme));
    }
    if cols.alerts > 0 {
        let alert = theme
            .fg(Color::Red)
            .add_modifier(Modifier::BOLD | Modifier::REVERSED);
        cells.push(match alerts_cell(l) {
            a if a.is_empty() => Cell::from(""),
            a => Cell::from(Line::from(Span::styled(
                ellipsize(&a, cols.alerts).into_owned(),
                alert,
            ))),
        });
    }
    if cols.denied > 0 {
        let usage = app.pool_usage(&l.id);
        let denied = usage.and_then(|u| u.denials_today);
        let denied_style = match denied {
            Some(d) if d > 0 => theme.fg(Color::Red).add_modifier(Modifier::BOLD),
            Some(_) => Style::new(),
            None => theme.dim(),
        };
        cells.push(Cell::from(denied_cell(app, l, cols.compact)).style(denied_style));
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

/// At the server's time `now` (a vendor pool's time left).
pub(super) fn draw_pools(frame: &mut Frame, area: Rect, app: &App, theme: Theme, now: Timestamp) {
    let inner = area.width.saturating_sub(2) as usize;
    let cols = columns(inner, app, now);
    let mut header = vec!["POOL", "USED", "LIVE/SEATS", "FREE"];
    let mut widths = vec![cols.id, cols.gauge, cols.live, cols.free];
    let policy_widths = [cols.reserved, cols.lingering, cols.borrowed];
    for ((head, _, _), w) in POLICY_COLUMNS.iter().zip(policy_widths) {
        if w > 0 {
            header.push(head);
            widths.push(w);
        }
    }
    header.extend(["TTL", "STATUS"]);
    widths.extend([cols.ttl, cols.status]);
    if cols.entitled > 0 {
        header.push("ENTITLED");
        widths.push(cols.entitled);
    }
    if cols.alerts > 0 {
        header.push("ALERTS");
        widths.push(cols.alerts);
    }
    if cols.denied > 0 {
        header.push("DENIED");
        widths.push(cols.denied);
    }
    if cols.spark > 0 {
        header.push(if cols.spark >= 9 { "LAST HOUR" } else { "1h" });
        widths.push(cols.spark);
    }
    let header = Row::new(header).style(Style::new().add_modifier(Modifier::BOLD));
    let rows = app
        .licenses
        .iter()
        .map(|l| pool_row(l, app, cols, theme, now));
    let constraints = widths
        .into_iter()
        .map(|w| Constraint::Length(w as u16))
        .chain([Constraint::Fill(1)]);
    let table = Table::new(rows, constraints)
        .header(header)
        .block(pane_block(title(app, cols, inner), false, theme));
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
        let c = columns(158, &app, ts(0));
        assert_eq!(
            (c.gauge, c.live, c.free, c.ttl, c.denied, c.spark),
            (20, 10, 5, 6, 0, 0)
        );
    }

    #[test]
    fn the_gauge_shrinks_before_the_sparkline() {
        let app = with_usage(loaded_app());
        // 8 + 10 + 5 + 6 + 8 + 7 ("1234567") + 8 spaces = 52 fixed.
        let wide = columns(158, &app, ts(0));
        assert_eq!((wide.denied, wide.gauge, wide.spark), (7, 20, 60));
        let mid = columns(108, &app, ts(0));
        assert_eq!((mid.gauge, mid.spark), (10, 30));
        let narrow = columns(78, &app, ts(0));
        assert_eq!((narrow.gauge, narrow.spark), (10, 15));
        // Too narrow for the exact figures with the least gauge: the
        // numbers go compact ("1.23M").
        let tiny = columns(60, &app, ts(0));
        assert_eq!(
            (tiny.compact, tiny.denied, tiny.gauge, tiny.spark),
            (true, 6, 9, 0)
        );
    }

    /// A pool with firing alerts gets an ALERTS column naming them (only
    /// while some pool has one), the help lists them, and an `alert`
    /// event has its glyph and word in the feed.
    #[test]
    fn firing_alerts_are_marked_on_their_pool() {
        use leasehold_common::api::EventKind;
        let mut app = App::new("s", false, false);
        let mut cad = pool("demo-cad", 3, 3);
        cad.alerts_firing = vec!["cad-full".into(), "cad-\u{1b}[2Jbusy".into()];
        app.update(
            snapshot(vec![cad, pool("render", 5, 1)], ts(0), ts(0)),
            ts(0),
        );
        let c = columns(98, &app, ts(0));
        assert_eq!(c.alerts, "ALERT cad-full, cad-�[2Jbusy".len() - 2);
        let mut term = ratatui::Terminal::new(ratatui::backend::TestBackend::new(100, 5)).unwrap();
        term.draw(|f| draw_pools(f, f.area(), &app, Theme::new(false), ts(0)))
            .unwrap();
        insta::assert_snapshot!(term.backend(), @r#"
        "┌ Pools (2) ───────────────────────────────────────────────────────────────────────────────────────┐"
        "│POOL     USED                 LIVE/SEATS FREE  TTL    STATUS   ALERTS                             │"
        "│demo-cad ████████████████████    3/3     0     1m     ■ FULL   ALERT cad-full, cad-�[2Jbusy       │"
        "│render   ████░░░░░░░░░░░░░░░░    1/5     4     1m     ● ok                                        │"
        "└──────────────────────────────────────────────────────────────────────────────────────────────────┘"
        "#);
        let mut ev = event(7, EventKind::Alert);
        (ev.seat_id, ev.holder, ev.detail) = (None, None, Some("firing cad-full".into()));
        app.update(AppEvent::StreamEvent(Box::new(ev)), ts(7));
        let mut term = ratatui::Terminal::new(ratatui::backend::TestBackend::new(100, 30)).unwrap();
        term.draw(|f| crate::ui::draw(f, &app, ts(8))).unwrap();
        let screen = format!("{}", term.backend());
        let feed = screen
            .lines()
            .find(|l| l.contains("firing cad-full"))
            .unwrap();
        assert!(feed.contains("▲ alert"), "{feed}");

        // None firing: no column, as before.
        app.update(snapshot(vec![pool("demo-cad", 3, 3)], ts(9), ts(9)), ts(9));
        assert_eq!(columns(98, &app, ts(0)).alerts, 0);
    }

    /// ENTITLED is as wide as its widest cell (`⏳` counts two cells) and
    /// a space, so a mark never runs into the next column's figure; it is
    /// never cut: on a narrow pane the gauge and the id give way.
    #[test]
    fn the_entitled_column_fits_its_widest_mark() {
        let mut app = App::new("s", false, false);
        let mut cad = pool("cad", 10, 4);
        (cad.vendor, cad.entitled_seats) = (Some("keyright".into()), Some(10));
        cad.entitlement_ends_at = Some(ts(12 * 86_400 + 60));
        let mut ide = cad.clone();
        (ide.id, ide.in_grace) = ("ide".into(), true);
        app.update(snapshot(vec![cad, ide], ts(0), ts(0)), ts(0));
        assert_eq!(entitled_text(&app.licenses[0], ts(0), false), "10 ⏳ 12d");
        let wide = columns(158, &app, ts(0));
        assert_eq!(wide.entitled, cells("10 grace 12d") + 1);
        assert_eq!(wide.gauge, GAUGE_MAX);
        let narrow = columns(60, &app, ts(0));
        assert_eq!(narrow.entitled, wide.entitled);
        assert!(narrow.gauge < GAUGE_MAX, "{narrow:?}");
        // With the usage columns after it, two spaces before DENIED.
        app.update(
            AppEvent::Usage(Box::new(UsageUpdate {
                license_id: "ide".into(),
                last_hour: Some(vec![]),
                denials_today: Some(7),
            })),
            ts(0),
        );
        let mut term = ratatui::Terminal::new(ratatui::backend::TestBackend::new(120, 6)).unwrap();
        term.draw(|f| draw_pools(f, f.area(), &app, Theme::new(false), ts(0)))
            .unwrap();
        let screen = term.backend().to_string();
        assert!(screen.contains("10 grace 12d  7 "), "{screen}");
        // Past 30 days: the seats alone; no vendor pool: no column.
        assert_eq!(
            entitled_text(&app.licenses[0], ts(-20 * 86_400), false),
            "10"
        );
        app.update(snapshot(vec![pool("plain", 2, 1)], ts(1), ts(1)), ts(1));
        assert_eq!(columns(158, &app, ts(1)).entitled, 0);
    }

    #[test]
    fn number_columns_fit_their_widest_value() {
        let mut app = App::new("s", false, false);
        app.update(
            snapshot(vec![pool("big", 4_000_000_000, 123_456_789)], ts(0), ts(0)),
            ts(0),
        );
        let c = columns(78, &app, ts(0));
        assert_eq!(c.live, "123456789/4000000000".len());
        assert_eq!(c.free, "3876543211".len());
    }
}
