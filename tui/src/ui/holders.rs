//! The holders table: only the rows on screen become widgets, so 100,000
//! holders cost what a screenful does. Column widths are computed here so
//! they always add up to the width (the layout solver would cut cells
//! silently): the times and the short seat id keep their width, and the
//! text columns (license, holder, fingerprint) give way, ending in `…`.
//! An IDLE column comes last when some seat of the window reports its user
//! idle, and only then. Under the table, the detail bar shows the selected
//! seat's holder, fingerprint and seat id whole, wrapped when long, for
//! copying.

use std::ops::Range;

use leasehold_common::Timestamp;
use leasehold_common::api::{SeatState, SeatView};
use ratatui::Frame;
use ratatui::layout::{Constraint, Margin, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Cell, Paragraph, Row, Table, TableState};

use super::fit_line;
use super::theme::{Theme, pane_block};
use crate::app::{App, Pane, RowState, SortKey};
use crate::format::{cells, ellipsize, fmt_duration_ms, short_id, wrap_cells};

/// The highlight symbol's cells, and the space between columns.
const MARK: usize = 2;
const GAP: usize = 2;
/// Columns, the last (IDLE) shown only when some seat reports idleness.
const COLS: usize = 8;
const IDLE: usize = 7;

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

/// One row's cells as text, before widths are known.
struct RowText<'a> {
    seat: &'a SeatView,
    held: String,
    expires: String,
    state: RowState,
    /// `—` when the seat is active.
    idle: String,
}

pub fn draw_holders(frame: &mut Frame, area: Rect, app: &App, theme: Theme, server_now: Timestamp) {
    let window = visible_window(app, body_rows(area));
    let start = window.start;
    let texts: Vec<RowText> = app.view[window]
        .iter()
        .map(|&i| {
            let seat = &app.seats[i];
            RowText {
                seat,
                held: fmt_duration_ms(server_now.millis_since(seat.checked_out_at)),
                expires: fmt_duration_ms(seat.expires_at.millis_since(server_now)),
                state: app.row_state(seat, server_now),
                idle: app
                    .idle_ms(seat, server_now)
                    .map_or_else(|| "—".to_string(), fmt_duration_ms),
            }
        })
        .collect();
    let inner = area.width.saturating_sub(2) as usize;
    let labels = labels(app);
    let n = if app.shows_idle() { COLS } else { IDLE };
    let widths = fit_columns(app, &labels[..n], &texts, inner);
    let widths = &widths[..n];
    let rows = texts.into_iter().map(|t| seat_row(t, widths, theme));
    let focused = app.pane == Pane::Holders;
    let constraints = widths.iter().map(|&w| Constraint::Length(w as u16));
    let table = Table::new(rows, constraints)
        .header(header(&labels[..n], widths))
        .block(pane_block(title(app, theme, inner), focused, theme))
        .column_spacing(GAP as u16)
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

/// Column titles, the sorted one with its arrow, and whether it is sorted.
fn labels(app: &App) -> [(String, bool); COLS] {
    let arrow = sort_arrow(app);
    let head = |label: &str, key: Option<SortKey>| {
        if key == Some(app.sort) {
            (format!("{label} {arrow}"), true)
        } else {
            (label.to_string(), false)
        }
    };
    [
        head("LICENSE", Some(SortKey::License)),
        head("HOLDER", Some(SortKey::Holder)),
        head("FINGERPRINT", None),
        head("SEAT", None),
        head("HELD FOR", Some(SortKey::HeldFor)),
        head("EXPIRES IN", Some(SortKey::ExpiresIn)),
        head("STATE", None),
        head("IDLE", None),
    ]
}

/// The sorted column is underlined.
fn header(labels: &[(String, bool)], widths: &[usize]) -> Row<'static> {
    Row::new(labels.iter().zip(widths).map(|((label, sorted), &w)| {
        let style = if *sorted {
            Style::new().add_modifier(Modifier::BOLD | Modifier::UNDERLINED)
        } else {
            Style::new().add_modifier(Modifier::BOLD)
        };
        Cell::from(ellipsize(label, w).into_owned()).style(style)
    }))
}

/// One row, as many cells as `widths` has columns.
fn seat_row(t: RowText, widths: &[usize], theme: Theme) -> Row<'static> {
    let s = t.seat;
    let state = t.state;
    let st = theme.state(state);
    let text = |v: &str, w: usize| Cell::from(ellipsize(v, w).into_owned());
    let cells = [
        text(&s.license_id, widths[0]),
        text(&s.holder, widths[1]),
        text(s.fingerprint.as_deref().unwrap_or("—"), widths[2]),
        text(short_id(&s.seat_id), widths[3]),
        Cell::from(t.held),
        Cell::from(t.expires).style(st),
        Cell::from(state_text(state)).style(st),
        Cell::from(t.idle),
    ];
    Row::new(cells.into_iter().take(widths.len()))
}

/// A state as the STATE column shows it: glyph and word.
fn state_text(state: RowState) -> String {
    format!("{} {}", state.glyph(), state.word())
}

/// Counts, sort, and the filter and freeze when they are on, cut to the
/// pane's `width` (the filter gives way first: it comes after the counts).
fn title(app: &App, theme: Theme, width: usize) -> Line<'static> {
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
    fit_line(title, width)
}

/// Column widths adding up to at most `inner` cells. Text columns are as
/// wide as the filtered rows need (within bounds; the app keeps the longest
/// with the view, so a frame never walks all rows; wide characters are
/// measured on the rows shown); the times, seat and state as their widest
/// value or title (IDLE too, when `labels` has it). When that is too
/// wide, the widest text column gives a cell at a time; width to spare
/// first lets cut text columns grow whole, and the rest stays at the end
/// (easier to read across than a stretched table). Columns past those of
/// `labels` are 0.
fn fit_columns(
    app: &App,
    labels: &[(String, bool)],
    rows: &[RowText],
    inner: usize,
) -> [usize; COLS] {
    let label = |i: usize| cells(&labels[i].0);
    let shown = |f: &dyn Fn(&RowText) -> usize| rows.iter().map(f).max().unwrap_or(0);
    let [license_w, holder_w, fingerprint_w] = app.column_widths();
    // What each text column needs to show every value whole.
    let full = [
        license_w.max(shown(&|r| cells(&r.seat.license_id))),
        holder_w.max(shown(&|r| cells(&r.seat.holder))),
        fingerprint_w.max(shown(&|r| {
            cells(r.seat.fingerprint.as_deref().unwrap_or("—"))
        })),
    ];
    let mut w = [
        full[0].clamp(label(0), 24),
        full[1].clamp(label(1), 40),
        full[2].clamp(label(2), 32),
        label(3).max(8),
        label(4).max(shown(&|r| cells(&r.held))),
        label(5).max(shown(&|r| cells(&r.expires))),
        // As wide as `▲ expiring`, wider only when a row on screen
        // lingers (`◌ lingering`).
        label(6)
            .max("▲ expiring".chars().count())
            .max(shown(&|r| cells(&state_text(r.state)))),
        0,
    ];
    if labels.len() > IDLE {
        w[IDLE] = label(IDLE).max(shown(&|r| cells(&r.idle)));
    }
    let n = labels.len();
    let total = |w: &[usize; COLS]| MARK + w[..n].iter().sum::<usize>() + GAP * (n - 1);
    while total(&w) > inner {
        let Some(widest) = (0..3).filter(|&i| w[i] > 1).max_by_key(|&i| w[i]) else {
            break; // only on a screen narrower than the times and the seat
        };
        w[widest] -= 1;
    }
    // Width to spare: a text column cut by its bound grows back towards
    // whole, holder first (the column support staff read most).
    for i in [1, 0, 2] {
        let spare = inner.saturating_sub(total(&w));
        w[i] += full[i].saturating_sub(w[i]).min(spare);
    }
    w
}

/// The selected seat whole, for copying into a ticket: holder, fingerprint,
/// seat id, license, the group it counts for (when it has one), for a
/// borrowed seat when it comes back, and for an idle one how long it has
/// been idle at `server_now` (and when it is reclaimed, if its license
/// does); as many to a line as fit in `width`; a value too long for a line
/// of its own is wrapped, never cut. One line saying so when nothing is
/// selected.
pub fn detail_lines(
    app: &App,
    theme: Theme,
    width: usize,
    server_now: Timestamp,
) -> Vec<Line<'static>> {
    let Some(s) = app.selected_seat() else {
        return vec![Line::styled(" no seat selected", theme.dim())];
    };
    let fields = [
        ("holder", s.holder.as_str()),
        ("fingerprint", s.fingerprint.as_deref().unwrap_or("—")),
        ("seat", s.seat_id.as_str()),
        ("license", s.license_id.as_str()),
    ];
    let group = s.group.as_deref().map(|g| ("group", g));
    // When a borrowed seat comes back: its expiry, to the second.
    let back = (s.state == SeatState::Borrowed).then(|| {
        format!(
            "{} UTC",
            s.expires_at.to_datetime().format("%Y-%m-%d %H:%M:%S")
        )
    });
    let back = back.as_deref().map(|b| ("borrowed, back at", b));
    let idle = idle_text(app, s, server_now);
    let idle = idle.as_deref().map(|i| ("idle", i));
    let fields = fields.into_iter().chain(group).chain(back).chain(idle);
    let bold = Style::new().add_modifier(Modifier::BOLD);
    let mut lines: Vec<Vec<Span<'static>>> = Vec::new();
    let mut used = 0;
    for (label, value) in fields {
        let need = cells(label) + 1 + cells(value);
        if !lines.is_empty() && used + 3 + need <= width {
            let line = lines.last_mut().expect("not empty");
            line.push(Span::styled(" · ", theme.dim()));
            line.push(Span::styled(format!("{label} "), theme.dim()));
            line.push(Span::styled(value.to_string(), bold));
            used += 3 + need;
            continue;
        }
        // A line of its own, wrapped under itself when longer than that.
        let indent = cells(label) + 2;
        for (i, part) in wrap_cells(value, width.saturating_sub(indent))
            .into_iter()
            .enumerate()
        {
            let head = if i == 0 { label } else { "" };
            used = indent + cells(&part);
            lines.push(vec![
                Span::styled(format!(" {head:<w$} ", w = indent - 2), theme.dim()),
                Span::styled(part, bold),
            ]);
        }
    }
    lines.into_iter().map(Line::from).collect()
}

/// How long the seat's user has been idle, and when the seat is reclaimed
/// (`12m00s, reclaimed at 30m00s`); `None` when it is active.
fn idle_text(app: &App, s: &SeatView, server_now: Timestamp) -> Option<String> {
    let idle = fmt_duration_ms(app.idle_ms(s, server_now)?);
    let timeout = app.policy(&s.license_id).and_then(|p| p.idle_timeout);
    Some(match timeout {
        Some(t) => format!(
            "{idle}, reclaimed at {}",
            fmt_duration_ms(i64::try_from(t.as_millis()).unwrap_or(i64::MAX))
        ),
        None => idle,
    })
}

/// [`detail_lines`] in at most `max` lines: when they do not all fit, the
/// last line says so instead of the rest being cut unseen.
pub fn detail_fitted(
    app: &App,
    theme: Theme,
    width: usize,
    max: usize,
    server_now: Timestamp,
) -> Vec<Line<'static>> {
    let mut lines = detail_lines(app, theme, width, server_now);
    if lines.len() > max {
        lines.truncate(max.saturating_sub(1));
        lines.push(fit_line(
            vec![Span::styled(
                " … more than fits: a wider terminal shows it all",
                theme.dim(),
            )],
            width,
        ));
    }
    lines
}

pub fn draw_detail(frame: &mut Frame, area: Rect, app: &App, theme: Theme, server_now: Timestamp) {
    let lines = detail_fitted(
        app,
        theme,
        area.width as usize,
        area.height as usize,
        server_now,
    );
    frame.render_widget(Paragraph::new(lines), area);
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
