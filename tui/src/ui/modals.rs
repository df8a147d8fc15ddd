//! The dialogs drawn over the console: the key help (with every pool's
//! exact figures, for when the pools pane shows them compact) and the
//! revoke confirmation.

use leasehold_common::Timestamp;
use leasehold_common::api::LicenseSummary;
use ratatui::Frame;
use ratatui::layout::{Constraint, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, BorderType, Clear, Paragraph, Wrap};

use super::theme::Theme;
use crate::app::{App, RevokeModal};
use crate::entitlements::term_mark;
use crate::format::{
    cells, ellipsize, fmt_duration_ms, grouped, policy_secs, wrap_cells, wrap_words,
};

/// A cleared box of `width` × `height` in the middle of the screen.
fn popup(frame: &mut Frame, width: u16, height: u16) -> Rect {
    let area = frame
        .area()
        .centered(Constraint::Length(width), Constraint::Length(height));
    frame.render_widget(Clear, area);
    area
}

/// At the server's time `now` (a vendor pool's time left).
pub fn draw_help(frame: &mut Frame, theme: Theme, app: &App, now: Timestamp) {
    let read_only = app.read_only;
    let keys: &[(&str, &str)] = &[
        ("↑ ↓  j k", "move the selection (or scroll the feed)"),
        ("PgUp PgDn", "move a page"),
        ("g G  Home End", "first / last row"),
        ("Tab", "switch between holders and events"),
        ("/", "filter by holder, fingerprint, license, seat id"),
        ("Esc", "clear the filter"),
        ("s  S", "next sort column / reverse the order"),
        ("f", "freeze updates (and resume)"),
        (
            "r",
            "revoke the selected seat; in it b or ← → block re-checkout",
        ),
        ("  F", "in the revoke of a borrowed seat: force it"),
        ("R", "refresh now"),
        ("?", "this help"),
        ("q  Ctrl-C", "quit"),
    ];
    let mut lines: Vec<Line> = keys
        .iter()
        .map(|(k, what)| {
            let what = if (*k == "r" || *k == "  F") && read_only {
                "revoke (disabled: --read-only)"
            } else {
                what
            };
            Line::from(vec![
                Span::styled(
                    format!("  {k:<15}"),
                    theme.fg(Color::Cyan).add_modifier(Modifier::BOLD),
                ),
                Span::raw(what.to_string()),
            ])
        })
        .collect();
    lines.push(Line::raw(""));
    lines.push(Line::from(Span::styled(
        "  State: ● live   ▲ expiring (< 1/3 TTL left)   ✗ lapsed",
        theme.dim(),
    )));
    // The seat policies' states and columns, when a pool has them.
    if app
        .licenses
        .iter()
        .any(|l| l.linger_s.is_some() || l.borrow.is_some() || l.lingering + l.borrowed > 0)
    {
        lines.push(Line::from(Span::styled(
            "         ◌ lingering (released, still counting)   ⇄ borrowed (offline)",
            theme.dim(),
        )));
    }
    if app.licenses.iter().any(|l| {
        !l.groups.is_empty() || l.linger_s.is_some() || l.borrow.is_some() || l.live > l.seats
    }) {
        lines.push(Line::from(Span::styled(
            "  Pools: RSVD reserved for groups, unused · LING lingering · BORR borrowed",
            theme.dim(),
        )));
        lines.push(Line::from(Span::styled(
            "         ⇡ OVER: more live than seats, granted from the overage",
            theme.dim(),
        )));
    }
    lines.push(Line::from(Span::styled(
        "  Times count down on the server's clock. Any key closes this help.",
        theme.dim(),
    )));
    lines.push(Line::from(Span::styled(
        "  Under the table: the selected seat's holder, fingerprint and seat id.",
        theme.dim(),
    )));
    let width = frame.area().width.min(80);
    let room = (frame.area().height as usize).saturating_sub(lines.len() + 2);
    lines.extend(pool_figures(
        app,
        theme,
        now,
        width.saturating_sub(2) as usize,
        room,
    ));
    let area = popup(frame, width, lines.len() as u16 + 2);
    let block = Block::bordered()
        .border_type(BorderType::Double)
        .title(" Help — keys ");
    frame.render_widget(Paragraph::new(lines).block(block), area);
}

/// Every pool's exact figures, at most `room` lines in `width` cells (a
/// pool's figures wrap between figures, never inside one; pools that do not
/// fit are counted, with where to see them).
fn pool_figures(
    app: &App,
    theme: Theme,
    now: Timestamp,
    width: usize,
    room: usize,
) -> Vec<Line<'static>> {
    if app.licenses.is_empty() || room < 3 {
        return Vec::new();
    }
    let mut out = vec![
        Line::raw(""),
        Line::from(Span::styled(
            "  Pools, exact (the pane shows 97.4k for 97,400 to 97,499 when narrow):",
            theme.dim(),
        )),
    ];
    let bold = Style::new().add_modifier(Modifier::BOLD);
    for (i, l) in app.licenses.iter().enumerate() {
        let mut figures = vec![
            format!(
                "{} of {} live",
                grouped(l.live.into()),
                grouped(l.seats.into())
            ),
            format!("{} free", grouped(l.seats.saturating_sub(l.live).into())),
            format!("TTL {}", policy_secs(l.ttl_s)),
        ];
        if let Some(d) = app.pool_usage(&l.id).and_then(|u| u.denials_today) {
            figures.push(format!("{} denied today", grouped(d)));
        }
        figures.extend(policy_figures(l));
        figures.extend(entitlement_figures(l, now));
        if !l.alerts_firing.is_empty() {
            figures.push(format!("▲ {}", super::pools::alerts_cell(l)));
        }
        let mut lines = vec![Line::from(Span::styled(
            format!("  {}", ellipsize(&l.id, width.saturating_sub(2))),
            bold,
        ))];
        lines.extend(wrap_figures(figures, width));
        for g in &l.groups {
            let mut figures = vec![
                format!("group {}:", ellipsize(&g.name, width.saturating_sub(12))),
                format!("{} in use", grouped(g.live.into())),
                format!("reserve {}", grouped(g.reserve.into())),
            ];
            figures.push(match g.max {
                Some(max) => format!("max {}", grouped(max.into())),
                None => "no max".to_string(),
            });
            lines.extend(wrap_figures(figures, width));
        }
        let left = app.licenses.len() - i;
        if out.len() + lines.len() + usize::from(left > 1) > room {
            out.push(Line::from(Span::styled(
                format!(
                    "  {left} more {}: `leasehold status` lists them all",
                    if left == 1 { "pool" } else { "pools" }
                ),
                theme.dim(),
            )));
            break;
        }
        out.extend(lines);
    }
    out
}

/// A pool's seat-policy figures, those it has: unused reservations,
/// lingering and borrowed seats, and how far over its seats it is.
fn policy_figures(l: &LicenseSummary) -> Vec<String> {
    let mut figures = Vec::new();
    if !l.groups.is_empty() || l.reserved > 0 {
        figures.push(format!("{} reserved", grouped(l.reserved.into())));
    }
    if l.linger_s.is_some() || l.lingering > 0 {
        let linger = l
            .linger_s
            .map(|s| format!(" (linger {})", policy_secs(s)))
            .unwrap_or_default();
        figures.push(format!("{} lingering{linger}", grouped(l.lingering.into())));
    }
    if l.borrow.is_some() || l.borrowed > 0 {
        figures.push(format!("{} borrowed", grouped(l.borrowed.into())));
    }
    let over = l.live.saturating_sub(l.seats);
    if over > 0 {
        figures.push(format!(
            "⇡ OVER by {} (overage {})",
            grouped(over.into()),
            grouped(l.overage.into())
        ));
    } else if l.overage > 0 {
        figures.push(format!("overage {}", grouped(l.overage.into())));
    }
    figures
}

/// A vendor pool's entitled seats, and its mark when they drop within 30
/// days (`⏳ 12d`, `grace 3d`, `expired`).
fn entitlement_figures(l: &LicenseSummary, now: Timestamp) -> Vec<String> {
    let Some(vendor) = &l.vendor else {
        return Vec::new();
    };
    let seats = grouped(l.entitled_seats.unwrap_or(0).into());
    let mut figures = vec![format!("{seats} entitled by {vendor}")];
    figures.extend(term_mark(l, now).map(|m| m.to_string()));
    figures
}

/// `figures` on lines of at most `width` cells, indented, ` · ` apart,
/// wrapped between figures.
fn wrap_figures(figures: Vec<String>, width: usize) -> Vec<Line<'static>> {
    let mut lines = Vec::new();
    let mut line = String::from("    ");
    for f in figures {
        let sep = if line.trim().is_empty() {
            ""
        } else if line.ends_with(':') {
            " "
        } else {
            " · "
        };
        if cells(&line) + sep.len() + cells(&f) > width && !line.trim().is_empty() {
            lines.push(Line::raw(std::mem::replace(
                &mut line,
                String::from("    "),
            )));
            line.push_str(&f);
        } else {
            line.push_str(sep);
            line.push_str(&f);
        }
    }
    lines.push(Line::raw(line));
    lines
}

/// The revoke dialog's width, and where its values start.
const REVOKE_WIDTH: u16 = 72;
const REVOKE_INDENT: usize = 15;

/// At server time `now` (for the borrowed seat's countdown).
pub fn draw_revoke(frame: &mut Frame, theme: Theme, m: &RevokeModal, now: Timestamp) {
    let bold = Style::new().add_modifier(Modifier::BOLD);
    let question = if m.offers_force() {
        "  Revoke this borrowed seat? It is not renewed by heartbeats."
    } else {
        "  Revoke this seat? Its holder loses it at the next heartbeat."
    };
    let mut lines = vec![Line::from(Span::styled(question, bold))];
    lines.extend(borrowed_lines(theme, m, now));
    lines.push(Line::raw(""));
    lines.extend(revoke_field("holder", &m.holder, bold));
    lines.extend(revoke_field("license", &m.license_id, bold));
    lines.extend(revoke_field("seat", &m.seat_id, bold));
    lines.extend(revoke_field(
        "fingerprint",
        m.fingerprint.as_deref().unwrap_or("—"),
        bold,
    ));
    lines.push(Line::raw(""));
    lines.extend(reason_field(theme, m));
    lines.extend([
        block_choices_line(theme, m),
        custom_block_line(theme, m),
        block_outcome_line(theme, m),
        Line::raw(""),
        Line::from(Span::styled(revoke_hints(m), theme.fg(Color::Cyan))),
    ]);
    let area = popup(frame, REVOKE_WIDTH, lines.len() as u16 + 2);
    let title = if m.offers_force() {
        " ✗ Revoke borrowed seat "
    } else {
        " ✗ Revoke seat "
    };
    let block = Block::bordered()
        .border_type(BorderType::Double)
        .border_style(theme.fg(Color::Red))
        .title(Span::styled(
            title,
            theme.fg(Color::Red).add_modifier(Modifier::BOLD),
        ));
    frame.render_widget(
        Paragraph::new(lines)
            .block(block)
            .wrap(Wrap { trim: false }),
        area,
    );
}

/// Why a borrowed seat needs force, and the server's refusal of a plain
/// revoke when there was one; nothing for a seat that is not borrowed.
fn borrowed_lines(theme: Theme, m: &RevokeModal, now: Timestamp) -> Vec<Line<'static>> {
    let room = REVOKE_WIDTH as usize - 4;
    let prose = |text: &str, style: Style| -> Vec<Line<'static>> {
        wrap_words(text, room)
            .into_iter()
            .map(|l| Line::styled(format!("  {l}"), style))
            .collect()
    };
    let warn = theme.fg(Color::Yellow).add_modifier(Modifier::BOLD);
    let mut lines = Vec::new();
    if let Some(until) = m.borrowed_until {
        let back = format!(
            "⇄ Borrowed until {} UTC (back in {}): its holder's token stays valid \
             offline until then, so freeing the seat now can put one seat more in \
             use than sold until it expires.",
            until.to_datetime().format("%Y-%m-%d %H:%M:%S"),
            fmt_duration_ms(until.millis_since(now).max(0))
        );
        lines.extend(prose(&back, warn));
    }
    if let Some(why) = &m.refusal {
        lines.extend(prose(
            &format!("The server refused a plain revoke: {why}"),
            warn,
        ));
    }
    if m.offers_force() {
        lines.extend(prose(
            "A plain revoke (y/Enter) is refused; F frees it anyway (force).",
            theme.dim(),
        ));
    }
    lines
}

/// The style of the field being typed into.
fn editing_style(theme: Theme) -> Style {
    theme.fg(Color::Yellow).add_modifier(Modifier::UNDERLINED)
}

/// A labelled value, wrapped under itself: shown whole, never cut.
fn revoke_field(label: &str, value: &str, style: Style) -> Vec<Line<'static>> {
    let room = REVOKE_WIDTH as usize - 2 - REVOKE_INDENT;
    wrap_cells(value, room)
        .into_iter()
        .enumerate()
        .map(|(i, part)| {
            let head = if i == 0 { label } else { "" };
            Line::from(vec![
                Span::raw(format!("  {head:<w$}", w = REVOKE_INDENT - 2)),
                Span::styled(part, style),
            ])
        })
        .collect()
}

/// The reason: with a cursor while typed, else dim (or how to type one).
fn reason_field(theme: Theme, m: &RevokeModal) -> Vec<Line<'static>> {
    let (reason, style) = if m.editing_reason() {
        (format!("{}▏", m.reason), editing_style(theme))
    } else if m.reason.is_empty() {
        ("(none — Tab to type one)".to_string(), theme.dim())
    } else {
        (m.reason.clone(), theme.dim())
    };
    revoke_field("reason", &reason, style)
}

/// The block choices, the chosen one in brackets as well as bold: readable
/// without colour.
fn block_choices_line(theme: Theme, m: &RevokeModal) -> Line<'static> {
    let bold = Style::new().add_modifier(Modifier::BOLD);
    let mut spans = vec![Span::raw("  block        ")];
    for (label, chosen) in m.block_choices() {
        spans.push(if chosen {
            Span::styled(format!("[{label}]"), bold.add_modifier(Modifier::REVERSED))
        } else {
            Span::styled(format!(" {label} "), theme.dim())
        });
        spans.push(Span::raw(" "));
    }
    Line::from(spans)
}

/// The custom block duration: typed, shown, or how to get to it.
fn custom_block_line(theme: Theme, m: &RevokeModal) -> Line<'static> {
    let mut spans = vec![Span::raw("  custom       ")];
    if m.custom_chosen() {
        let (text, style) = if m.editing_custom() {
            (format!("{}▏", m.custom), editing_style(theme))
        } else {
            (m.custom.clone(), Style::new().add_modifier(Modifier::BOLD))
        };
        spans.push(Span::styled(text, style));
        spans.push(Span::styled("  e.g. 90m, 2h, 1d", theme.dim()));
    } else {
        spans.push(Span::styled(
            "(choose custom to type a duration)",
            theme.dim(),
        ));
    }
    Line::from(spans)
}

/// What the chosen block will do, or why it cannot be used.
fn block_outcome_line(theme: Theme, m: &RevokeModal) -> Line<'static> {
    match (&m.error, m.block_s()) {
        (Some(e), _) => Line::from(Span::styled(
            format!("  {e}"),
            theme.fg(Color::Red).add_modifier(Modifier::BOLD),
        )),
        (None, Ok(None)) => Line::styled("  the holder may check out again at once", theme.dim()),
        (None, Ok(Some(s))) => Line::styled(
            format!(
                "  the same holder and fingerprint are refused a seat for {}",
                leasehold_common::policy::format_duration(std::time::Duration::from_secs(s))
            ),
            theme.dim(),
        ),
        (None, Err(_)) => Line::styled("  type how long, e.g. 90m", theme.dim()),
    }
}

/// The keys that work in the field being edited (force only outside the
/// text fields, where F is a letter).
fn revoke_hints(m: &RevokeModal) -> &'static str {
    if m.editing_reason() {
        "  Enter revoke   Esc cancel   Tab next field"
    } else if m.editing_custom() {
        "  Enter revoke   Esc cancel   ← → block   Tab next field"
    } else if m.offers_force() {
        "  F force   y/Enter revoke   n/Esc cancel   b ← → block   Tab reason"
    } else {
        "  y/Enter revoke   n/Esc cancel   b ← → block   Tab type a reason"
    }
}
