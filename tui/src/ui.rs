//! Drawing: one function of the [`App`] state and the local time.
//!
//! `now` is passed in, never read here, so a frame is a pure function of its
//! inputs and the snapshot tests are deterministic. Only the rows on screen
//! are turned into widgets and nothing here walks every row, so 100,000
//! holders cost what a screenful does.
//!
//! Every state has a word or a glyph as well as a colour, so the screen reads
//! the same under `NO_COLOR` and for colour-blind admins; [`Theme`] drops the
//! colours (and keeps bold / reverse / underline) when `app.no_color` is set.

//!
//! Nothing is left for ratatui to cut silently: tables size their columns
//! to fit, and a line too long for its width is cut by [`fit_line`], which
//! ends it with `…` and never inside a number.
//!
//! Parts: `theme` (styles, pane frames), `pools` (the pools pane, its
//! column widths, compact figures when narrow), `sparkline` (a pool's last
//! hour as marks), `holders` (the holders table and the selected seat's
//! detail bar under it), `modals` (help, with the pools' exact figures, and
//! the revoke dialog); the banner, event feed and status bar are drawn here.

mod holders;
mod modals;
mod pools;
mod sparkline;
mod theme;

use leasehold_common::Timestamp;
use leasehold_common::api::Event;
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use crate::app::{App, Link, MESSAGE_MS, Modal, Pane};
use crate::format::{cells, ellipsize, fmt_duration_ms, short_id};
use holders::{body_rows, detail_lines, draw_detail, draw_holders};
use modals::{draw_help, draw_revoke};
use pools::draw_pools;
use theme::pane_block;
pub use theme::{Theme, kind_glyph};

/// Where each part of the screen goes.
struct Areas {
    banner: Rect,
    pools: Rect,
    holders: Rect,
    detail: Rect,
    events: Rect,
    status: Rect,
}

/// At server time `server_now` (the detail bar's idle time).
fn areas(area: Rect, app: &App, server_now: Timestamp) -> Areas {
    let banner_h = if app.poll.is_down() { 2 } else { 0 };
    let pool_rows = app.licenses.len().clamp(1, 6) as u16;
    let events_h = (area.height / 4).clamp(5, 12);
    // The selected seat's details: one line, more when they wrap, at most
    // a third of the screen.
    let theme = Theme::new(app.no_color);
    let detail_lines = detail_lines(app, theme, area.width as usize, server_now).len();
    let detail_h = (detail_lines as u16).clamp(1, (area.height / 3).max(1));
    let [banner, pools, holders, detail, events, status] = area.layout(&Layout::vertical([
        Constraint::Length(banner_h),
        Constraint::Length(pool_rows + 3),
        Constraint::Min(5),
        Constraint::Length(detail_h),
        Constraint::Length(events_h),
        Constraint::Length(2),
    ]));
    Areas {
        banner,
        pools,
        holders,
        detail,
        events,
        status,
    }
}

/// Rows visible in the holders table and in the event feed for a screen
/// of `area` at local time `now`: the event loop hands these to
/// [`App::set_page_rows`].
pub fn page_rows(area: Rect, app: &App, now: Timestamp) -> (usize, usize) {
    let a = areas(area, app, app.server_now(now));
    (body_rows(a.holders), event_rows(a.events))
}

/// Draw the whole console at local time `now`.
pub fn draw(frame: &mut Frame, app: &App, now: Timestamp) {
    let theme = Theme::new(app.no_color);
    let server_now = app.server_now(now);
    let a = areas(frame.area(), app, server_now);
    if app.poll.is_down() {
        draw_banner(frame, a.banner, app, theme);
    }
    draw_pools(frame, a.pools, app, theme, server_now);
    draw_holders(frame, a.holders, app, theme, server_now);
    draw_detail(frame, a.detail, app, theme, server_now);
    draw_events(frame, a.events, app, theme);
    draw_status(frame, a.status, app, theme, now);
    match &app.modal {
        Some(Modal::Help) => draw_help(frame, theme, app, server_now),
        Some(Modal::Revoke(m)) => draw_revoke(frame, theme, m, server_now),
        None => {}
    }
}

fn hms(t: Timestamp) -> String {
    t.to_datetime().format("%H:%M:%S").to_string()
}

fn draw_banner(frame: &mut Frame, area: Rect, app: &App, theme: Theme) {
    let Link::Down {
        since,
        failures,
        error,
    } = &app.poll
    else {
        return;
    };
    let kept = match app.last_update {
        Some((server_t, _)) => format!("showing data from {} UTC", hms(server_t)),
        None => "no data yet".to_string(),
    };
    let attempts = if *failures == 1 {
        "attempt"
    } else {
        "attempts"
    };
    let width = area.width as usize;
    let text = vec![
        fit_line(
            vec![Span::raw(format!(
                " ⚠ DISCONNECTED — retrying ({failures} failed {attempts} since {} local) — {kept}",
                hms(*since)
            ))],
            width,
        ),
        fit_line(vec![Span::raw(format!("   {error}"))], width),
    ];
    let style = theme
        .bg(Color::White, Color::Red)
        .add_modifier(Modifier::BOLD);
    frame.render_widget(Paragraph::new(text).style(style), area);
}

/// `spans` cut to `width` cells: when they do not all fit, the span at the
/// edge ends with `…` (never inside a number: `ellipsize`) and the rest go.
fn fit_line(spans: Vec<Span<'static>>, width: usize) -> Line<'static> {
    let total: usize = spans.iter().map(|s| cells(&s.content)).sum();
    if total <= width {
        return Line::from(spans);
    }
    let budget = width.saturating_sub(1); // one cell for `…`
    let mut out = Vec::with_capacity(spans.len());
    let mut used = 0;
    for (i, span) in spans.iter().enumerate() {
        let w = cells(&span.content);
        if used + w <= budget {
            out.push(span.clone());
            used += w;
            continue;
        }
        // Cut with what follows in view, so a number running on into the
        // next span counts as cut.
        let rest: String = spans[i..].iter().map(|s| s.content.as_ref()).collect();
        out.push(Span::styled(
            ellipsize(&rest, width - used).into_owned(),
            span.style,
        ));
        break;
    }
    Line::from(out)
}

/// A text gauge (`███████░░░`): readable without colour.
fn bar(used: u32, total: u32, width: usize) -> String {
    let filled = if total == 0 {
        width
    } else {
        ((used.min(total) as usize * width) + total as usize / 2) / total as usize
    };
    format!("{}{}", "█".repeat(filled), "░".repeat(width - filled))
}

fn event_line(e: &Event, theme: Theme, width: usize) -> Line<'static> {
    let style = theme.kind(e.kind);
    let mut spans = vec![
        Span::styled(hms(e.at), theme.dim()),
        Span::raw(" "),
        Span::styled(
            format!("{} {:<8}", kind_glyph(e.kind), e.kind.as_str()),
            style,
        ),
        Span::raw(" "),
    ];
    let mut push = |label: &str, v: &Option<String>| {
        if let Some(v) = v {
            spans.push(Span::raw(format!("{label}{v}  ")));
        }
    };
    push("", &e.license_id);
    push("", &e.holder);
    push(
        "seat ",
        &e.seat_id.as_deref().map(|s| short_id(s).to_string()),
    );
    if let Some(d) = &e.detail {
        spans.push(Span::styled(d.clone(), theme.dim()));
    }
    fit_line(spans, width)
}

/// Lines of the event feed inside its borders.
fn event_rows(area: Rect) -> usize {
    area.height.saturating_sub(2) as usize
}

fn draw_events(frame: &mut Frame, area: Rect, app: &App, theme: Theme) {
    let visible = event_rows(area);
    let inner = area.width.saturating_sub(2) as usize;
    let lines: Vec<Line> = app
        .events
        .iter()
        .skip(app.event_scroll)
        .take(visible)
        .map(|e| event_line(e, theme, inner))
        .collect();
    let mut title = vec![Span::raw(format!(
        " Events ({}) newest first ",
        app.events.len()
    ))];
    if app.event_scroll > 0 {
        title.push(Span::raw(format!("· scrolled back {} ", app.event_scroll)));
    }
    match &app.stream {
        Link::Up => {}
        Link::Connecting => title.push(Span::styled("· stream connecting… ", theme.dim())),
        Link::Down { failures, .. } => title.push(Span::styled(
            format!("· ⚠ stream down, reconnecting ({failures}) "),
            theme.fg(Color::Yellow).add_modifier(Modifier::BOLD),
        )),
    }
    let block = pane_block(fit_line(title, inner), app.pane == Pane::Events, theme);
    if lines.is_empty() {
        frame.render_widget(
            Paragraph::new("no events yet")
                .style(theme.dim())
                .block(block),
            area,
        );
    } else {
        frame.render_widget(Paragraph::new(lines).block(block), area);
    }
}

fn draw_status(frame: &mut Frame, area: Rect, app: &App, theme: Theme, now: Timestamp) {
    let width = area.width as usize;
    let lines = vec![
        connection_line(app, theme, now, width),
        prompt_line(app, theme, now, width),
    ];
    frame.render_widget(Paragraph::new(lines), area);
}

/// The status bar's first line: server, connection, data age, modes. The
/// server address gives way (ending in `…`) before the rest is cut.
fn connection_line(app: &App, theme: Theme, now: Timestamp, width: usize) -> Line<'static> {
    let sep = Span::styled(" │ ", theme.dim());
    let conn = match &app.poll {
        Link::Up => Span::styled("● connected", theme.fg(Color::Green)),
        Link::Connecting => Span::styled("… connecting", theme.fg(Color::Yellow)),
        Link::Down { .. } => Span::styled(
            "✗ disconnected",
            theme.fg(Color::Red).add_modifier(Modifier::BOLD),
        ),
    };
    let updated = match app.last_update {
        Some((server_t, local_t)) => format!(
            "updated {} UTC ({} ago)",
            hms(server_t),
            fmt_duration_ms(now.millis_since(local_t).max(0))
        ),
        None => "no data yet".to_string(),
    };
    let mut line1 = vec![
        Span::styled(" leasehold", Style::new().add_modifier(Modifier::BOLD)),
        sep.clone(),
        Span::raw(String::new()), // the server, sized below
        sep.clone(),
        conn,
        sep.clone(),
        Span::raw(updated),
    ];
    if app.frozen {
        line1.push(sep.clone());
        line1.push(Span::styled(
            "❄ FROZEN",
            theme.fg(Color::Cyan).add_modifier(Modifier::BOLD),
        ));
    }
    if app.read_only {
        line1.push(sep.clone());
        line1.push(Span::styled(
            "READ-ONLY",
            Style::new().add_modifier(Modifier::BOLD),
        ));
    }
    let others: usize = line1.iter().map(|s| cells(&s.content)).sum();
    let room = width.saturating_sub(others).max(12);
    line1[2] = Span::raw(ellipsize(&app.server, room).into_owned());
    fit_line(line1, width)
}

/// The status bar's second line: the filter being typed, else a fresh
/// message, else the key hints.
fn prompt_line(app: &App, theme: Theme, now: Timestamp, width: usize) -> Line<'static> {
    let spans = if app.filter_editing {
        vec![
            Span::styled(" / ", Style::new().add_modifier(Modifier::BOLD)),
            Span::styled(
                format!("{}▏", app.filter),
                theme.fg(Color::Yellow).add_modifier(Modifier::BOLD),
            ),
            Span::styled("   Enter keep · Esc clear", theme.dim()),
        ]
    } else if let Some(m) = app
        .message
        .as_ref()
        .filter(|m| now.millis_since(m.at) < MESSAGE_MS)
    {
        vec![Span::styled(format!(" {}", m.text), theme.level(m.level))]
    } else {
        let revoke = if app.read_only { "" } else { "  r revoke" };
        vec![Span::styled(
            format!(
                " ↑↓/jk move  / filter  s sort  S reverse  Tab pane  f freeze{revoke}  ? help  q quit"
            ),
            theme.dim(),
        )]
    };
    fit_line(spans, width)
}

#[cfg(test)]
mod tests;
