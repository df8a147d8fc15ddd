//! The dialogs drawn over the console: the key help and the revoke
//! confirmation.

use ratatui::Frame;
use ratatui::layout::{Constraint, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, BorderType, Clear, Paragraph, Wrap};

use super::theme::Theme;
use crate::app::RevokeModal;

/// A cleared box of `width` × `height` in the middle of the screen.
fn popup(frame: &mut Frame, width: u16, height: u16) -> Rect {
    let area = frame
        .area()
        .centered(Constraint::Length(width), Constraint::Length(height));
    frame.render_widget(Clear, area);
    area
}

pub fn draw_help(frame: &mut Frame, theme: Theme, read_only: bool) {
    let keys: &[(&str, &str)] = &[
        ("↑ ↓  j k", "move the selection (or scroll the feed)"),
        ("PgUp PgDn", "move a page"),
        ("g G  Home End", "first / last row"),
        ("Tab", "switch between holders and events"),
        ("/", "filter by holder, fingerprint, seat id"),
        ("Esc", "clear the filter"),
        ("s  S", "next sort column / reverse the order"),
        ("f", "freeze updates (and resume)"),
        ("r", "revoke the selected seat"),
        ("R", "refresh now"),
        ("?", "this help"),
        ("q  Ctrl-C", "quit"),
    ];
    let mut lines: Vec<Line> = keys
        .iter()
        .map(|(k, what)| {
            let what = if *k == "r" && read_only {
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
    lines.push(Line::from(Span::styled(
        "  Times count down on the server's clock. Any key closes this help.",
        theme.dim(),
    )));
    let area = popup(frame, 72, lines.len() as u16 + 2);
    let block = Block::bordered()
        .border_type(BorderType::Double)
        .title(" Help — keys ");
    frame.render_widget(Paragraph::new(lines).block(block), area);
}

pub fn draw_revoke(frame: &mut Frame, theme: Theme, m: &RevokeModal) {
    let bold = Style::new().add_modifier(Modifier::BOLD);
    let field = |label: &str, value: &str| {
        Line::from(vec![
            Span::raw(format!("  {label:<13}")),
            Span::styled(value.to_string(), bold),
        ])
    };
    let reason_style = if m.editing_reason {
        theme.fg(Color::Yellow).add_modifier(Modifier::UNDERLINED)
    } else {
        theme.dim()
    };
    let reason = if m.editing_reason {
        format!("{}▏", m.reason)
    } else if m.reason.is_empty() {
        "(none — Tab to type one)".to_string()
    } else {
        m.reason.clone()
    };
    let hints = if m.editing_reason {
        "  Enter revoke   Esc cancel   Tab done typing"
    } else {
        "  y/Enter revoke   n/Esc cancel   Tab type a reason"
    };
    let lines = vec![
        Line::from(Span::styled(
            "  Revoke this seat? Its holder loses it at the next heartbeat.",
            bold,
        )),
        Line::raw(""),
        field("holder", &m.holder),
        field("license", &m.license_id),
        field("seat", &m.seat_id),
        field("fingerprint", m.fingerprint.as_deref().unwrap_or("—")),
        Line::raw(""),
        Line::from(vec![
            Span::raw("  reason       "),
            Span::styled(reason, reason_style),
        ]),
        Line::raw(""),
        Line::from(Span::styled(hints, theme.fg(Color::Cyan))),
    ];
    let area = popup(frame, 72, lines.len() as u16 + 2);
    let block = Block::bordered()
        .border_type(BorderType::Double)
        .border_style(theme.fg(Color::Red))
        .title(Span::styled(
            " ✗ Revoke seat ",
            theme.fg(Color::Red).add_modifier(Modifier::BOLD),
        ));
    frame.render_widget(
        Paragraph::new(lines)
            .block(block)
            .wrap(Wrap { trim: false }),
        area,
    );
}
