//! The holders table: only the rows on screen become widgets, so 100,000
//! holders cost what a screenful does.

use std::ops::Range;

use leasehold_common::Timestamp;
use leasehold_common::api::SeatView;
use ratatui::Frame;
use ratatui::layout::{Constraint, Margin, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Cell, Paragraph, Row, Table, TableState};

use super::theme::{Theme, pane_block};
use crate::app::{App, Pane, SortKey};
use crate::format::{fmt_duration_ms, short_id};

/// Rows of `area` that are not borders (2) or the header row (1).
pub fn body_rows(area: Rect) -> usize {
    area.height.saturating_sub(3) as usize
}

/// The rows of `app.view` a table of `visible` body rows shows: from the
/// scroll position, at most a screenful.
pub fn visible_window(app: &App, visible: usize) -> Range<usize> {
    let start = app.scroll.min(app.view.len());
    let end = (start + visible).min(app.view.len());
    start..end
}

pub fn draw_holders(frame: &mut Frame, area: Rect, app: &App, theme: Theme, server_now: Timestamp) {
    let window = visible_window(app, body_rows(area));
    let start = window.start;
    let rows = app.view[window]
        .iter()
        .map(|&i| seat_row(app, &app.seats[i], theme, server_now));
    let focused = app.pane == Pane::Holders;
    let table = Table::new(rows, column_widths(app))
        .header(header(app))
        .block(pane_block(title(app, theme), focused, theme))
        .column_spacing(2)
        .row_highlight_style(Style::new().add_modifier(Modifier::REVERSED))
        .highlight_symbol("▶ ");
    let mut state = TableState::new();
    if !app.view.is_empty() {
        state.select(Some(app.selected.saturating_sub(start)));
    }
    frame.render_stateful_widget(table, area, &mut state);
    if app.view.is_empty() {
        let inner = area.inner(Margin::new(2, 2));
        frame.render_widget(Paragraph::new(empty_text(app)).style(theme.dim()), inner);
    }
}

fn sort_arrow(app: &App) -> &'static str {
    if app.sort_desc { "▼" } else { "▲" }
}

/// Column titles; the sorted column is underlined and carries the arrow.
fn header(app: &App) -> Row<'static> {
    let arrow = sort_arrow(app);
    let head = |label: &'static str, key: Option<SortKey>| -> Cell<'static> {
        if key == Some(app.sort) {
            Cell::from(format!("{label} {arrow}"))
                .style(Style::new().add_modifier(Modifier::BOLD | Modifier::UNDERLINED))
        } else {
            Cell::from(label).style(Style::new().add_modifier(Modifier::BOLD))
        }
    };
    Row::new([
        head("LICENSE", Some(SortKey::License)),
        head("HOLDER", Some(SortKey::Holder)),
        head("FINGERPRINT", None),
        head("SEAT", None),
        head("HELD FOR", Some(SortKey::HeldFor)),
        head("EXPIRES IN", Some(SortKey::ExpiresIn)),
        head("STATE", None),
    ])
}

fn seat_row<'a>(app: &App, s: &'a SeatView, theme: Theme, server_now: Timestamp) -> Row<'a> {
    let state = app.row_state(s, server_now);
    let st = theme.state(state);
    Row::new([
        Cell::from(s.license_id.as_str()),
        Cell::from(s.holder.as_str()),
        Cell::from(s.fingerprint.as_deref().unwrap_or("—")),
        Cell::from(short_id(&s.seat_id)),
        Cell::from(fmt_duration_ms(server_now.millis_since(s.checked_out_at))),
        Cell::from(fmt_duration_ms(s.expires_at.millis_since(server_now))).style(st),
        Cell::from(format!("{} {}", state.glyph(), state.word())).style(st),
    ])
}

/// Counts, sort, and the filter and freeze when they are on.
fn title(app: &App, theme: Theme) -> Line<'static> {
    let (matching, all) = app.holder_counts();
    let mut title = vec![Span::raw(format!(
        " Holders {matching} of {all} · sort: {} {} ",
        app.sort.label(),
        sort_arrow(app)
    ))];
    if !app.filter.is_empty() || app.filter_editing {
        title.push(Span::styled(
            format!("· filter: {} ", app.filter),
            theme.fg(Color::Yellow).add_modifier(Modifier::BOLD),
        ));
    }
    if app.frozen {
        title.push(Span::styled(
            "· ❄ FROZEN ",
            theme.fg(Color::Cyan).add_modifier(Modifier::BOLD),
        ));
    }
    Line::from(title)
}

/// Text columns as wide as the filtered rows need (within bounds; the app
/// keeps the longest with the view, so a frame never walks all rows), the
/// spare width at the end: easier to read across than a stretched table.
fn column_widths(app: &App) -> [Constraint; 8] {
    let [license_w, holder_w, fingerprint_w] = app.column_widths();
    [
        Constraint::Length(license_w.clamp(9, 24) as u16),
        Constraint::Length(holder_w.clamp(8, 40) as u16),
        Constraint::Length(fingerprint_w.clamp(11, 32) as u16),
        Constraint::Length(8),
        Constraint::Length(10),
        Constraint::Length(12),
        Constraint::Length(11),
        Constraint::Fill(1),
    ]
}

/// Why the table is empty.
fn empty_text(app: &App) -> &'static str {
    if app.last_update.is_none() {
        "waiting for the server…"
    } else if app.filter.is_empty() {
        "no seats are held"
    } else {
        "no seat matches the filter (Esc clears it)"
    }
}
