//! Styles with or without colour, and the bordered pane every table and
//! feed sits in.

use leasehold_common::api::EventKind;
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::Line;
use ratatui::widgets::{Block, BorderType};

use crate::app::{Level, RowState};

/// Styles, with or without colour.
#[derive(Debug, Clone, Copy)]
pub struct Theme {
    color: bool,
}

impl Theme {
    pub fn new(no_color: bool) -> Self {
        Theme { color: !no_color }
    }

    pub fn fg(self, c: Color) -> Style {
        if self.color {
            Style::new().fg(c)
        } else {
            Style::new()
        }
    }

    pub fn bg(self, fg: Color, bg: Color) -> Style {
        if self.color {
            Style::new().fg(fg).bg(bg)
        } else {
            Style::new().add_modifier(Modifier::REVERSED)
        }
    }

    pub fn dim(self) -> Style {
        if self.color {
            Style::new().fg(Color::DarkGray)
        } else {
            Style::new()
        }
    }

    pub fn state(self, s: RowState) -> Style {
        match s {
            RowState::Live => self.fg(Color::Green),
            RowState::Expiring => self.fg(Color::Yellow).add_modifier(Modifier::BOLD),
            RowState::Lapsed => self.fg(Color::Red).add_modifier(Modifier::BOLD),
            RowState::Lingering => self.fg(Color::Cyan),
            RowState::Borrowed => self.fg(Color::Magenta),
        }
    }

    pub fn level(self, l: Level) -> Style {
        match l {
            Level::Info => self.fg(Color::Cyan),
            Level::Success => self.fg(Color::Green).add_modifier(Modifier::BOLD),
            Level::Warn => self.fg(Color::Yellow).add_modifier(Modifier::BOLD),
            Level::Error => self.fg(Color::Red).add_modifier(Modifier::BOLD),
        }
    }

    pub fn kind(self, k: EventKind) -> Style {
        match k {
            EventKind::Checkout => self.fg(Color::Green),
            EventKind::Release => self.fg(Color::Blue),
            EventKind::Reap => self.fg(Color::Yellow),
            EventKind::Revoke => self.fg(Color::Magenta).add_modifier(Modifier::BOLD),
            EventKind::Denied | EventKind::Lost => self.fg(Color::Red),
            EventKind::Config => self.fg(Color::Cyan),
            EventKind::Reclaim => self.fg(Color::Yellow).add_modifier(Modifier::BOLD),
            EventKind::Alert => self.fg(Color::LightRed).add_modifier(Modifier::BOLD),
            EventKind::Entitlement => self.fg(Color::LightYellow),
        }
    }
}

/// The glyph shown before each event kind in the feed.
pub fn kind_glyph(k: EventKind) -> &'static str {
    match k {
        EventKind::Checkout => "+",
        EventKind::Release => "-",
        EventKind::Reap => "†",
        EventKind::Revoke => "✗",
        EventKind::Denied => "!",
        EventKind::Lost => "?",
        EventKind::Config => "⚙",
        EventKind::Reclaim => "z",
        EventKind::Alert => "▲",
        EventKind::Entitlement => "§",
    }
}

/// A pane's frame: thick and coloured when it has the focus.
pub fn pane_block(title: Line<'static>, focused: bool, theme: Theme) -> Block<'static> {
    let block = Block::bordered().title(title);
    if focused {
        block
            .border_type(BorderType::Thick)
            .border_style(theme.fg(Color::Cyan))
    } else {
        block.border_style(theme.dim())
    }
}
