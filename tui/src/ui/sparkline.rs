//! A pool's last hour as one line of marks: the peak in use per minute,
//! scaled to the pool, oldest left. Text first (readable without colour):
//! `█` only when every seat was in use, `▁`…`▇` for partial use, `·` for a
//! minute with no seat in use, a blank where the server sent nothing.
//!
//! Narrow screens get fewer marks, each covering several minutes: the peak
//! of merged minutes is the largest of their peaks (the server's `peak` is
//! exact per bucket), so a short full spell never averages away.

use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};

use super::Theme;
use crate::app::{Minute, SPARK_MINUTES};

/// One mark, ordered from least to most use (merging keeps the largest).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Mark {
    NoData,
    Idle,
    /// `1..=7` eighths-ish of the pool (rounded up, so any use shows).
    Level(u8),
    Full,
}

const LEVELS: [char; 7] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇'];

impl Mark {
    fn of(m: Minute) -> Mark {
        if m.peak == 0 {
            Mark::Idle
        } else if m.peak >= m.seats {
            Mark::Full
        } else {
            let level = (u64::from(m.peak) * 7).div_ceil(u64::from(m.seats));
            Mark::Level(level.clamp(1, 7) as u8)
        }
    }

    pub fn glyph(self) -> char {
        match self {
            Mark::NoData => ' ',
            Mark::Idle => '·',
            Mark::Level(l) => LEVELS[usize::from(l.clamp(1, 7)) - 1],
            Mark::Full => '█',
        }
    }

    fn style(self, theme: Theme) -> Style {
        match self {
            Mark::NoData | Mark::Idle => theme.dim(),
            Mark::Level(_) => theme.fg(Color::Cyan),
            Mark::Full => theme.fg(Color::Red).add_modifier(Modifier::BOLD),
        }
    }
}

/// The widest sparkline that fits in `room` cells with every mark covering
/// the same whole number of minutes (0 when nothing fits).
pub fn spark_width(room: usize) -> usize {
    (1..=SPARK_MINUTES.min(room))
        .rev()
        .find(|w| SPARK_MINUTES.is_multiple_of(*w))
        .unwrap_or(0)
}

/// `width` marks for the last hour. Fewer than [`SPARK_MINUTES`] minutes
/// are the newest ones: the missing oldest minutes are blank.
pub fn marks(minutes: &[Minute], width: usize) -> Vec<Mark> {
    if width == 0 {
        return Vec::new();
    }
    let recent = &minutes[minutes.len().saturating_sub(SPARK_MINUTES)..];
    let mut hour = vec![Mark::NoData; SPARK_MINUTES - recent.len()];
    hour.extend(recent.iter().map(|&m| Mark::of(m)));
    (0..width)
        .map(|i| {
            let (a, b) = (i * SPARK_MINUTES / width, (i + 1) * SPARK_MINUTES / width);
            hour[a..b.max(a + 1)]
                .iter()
                .copied()
                .max()
                .unwrap_or(Mark::NoData)
        })
        .collect()
}

/// The marks as styled text, one span per run of the same mark kind.
pub fn spark_line(minutes: &[Minute], width: usize, theme: Theme) -> Line<'static> {
    let mut spans: Vec<Span<'static>> = Vec::new();
    let mut run = String::new();
    let mut run_style: Option<Style> = None;
    for mark in marks(minutes, width) {
        let style = mark.style(theme);
        if run_style.is_some_and(|s| s != style) {
            spans.push(Span::styled(
                std::mem::take(&mut run),
                run_style.unwrap_or_default(),
            ));
        }
        run_style = Some(style);
        run.push(mark.glyph());
    }
    if !run.is_empty() {
        spans.push(Span::styled(run, run_style.unwrap_or_default()));
    }
    Line::from(spans)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn minutes(peaks: &[u32], seats: u32) -> Vec<Minute> {
        peaks.iter().map(|&peak| Minute { peak, seats }).collect()
    }

    fn text(m: &[Minute], width: usize) -> String {
        marks(m, width).into_iter().map(Mark::glyph).collect()
    }

    #[test]
    fn widths_divide_the_hour() {
        assert_eq!(spark_width(200), 60);
        assert_eq!(spark_width(59), 30);
        assert_eq!(spark_width(17), 15);
        assert_eq!(spark_width(11), 10);
        assert_eq!(spark_width(7), 6);
        assert_eq!(spark_width(0), 0);
    }

    #[test]
    fn levels_scale_to_the_pool_and_full_is_its_own_mark() {
        let m = minutes(&[0, 1, 4, 7, 8, 9], 8);
        let glyphs: Vec<char> = m.iter().map(|&x| Mark::of(x).glyph()).collect();
        assert_eq!(glyphs, ['·', '▁', '▄', '▇', '█', '█']);
        // A pool shrunk to nothing with a holder left is full.
        assert_eq!(Mark::of(Minute { peak: 1, seats: 0 }), Mark::Full);
        assert_eq!(Mark::of(Minute { peak: 0, seats: 0 }), Mark::Idle);
        // Any use shows: 1 of 100,000 is the lowest level, not idle.
        assert_eq!(
            Mark::of(Minute {
                peak: 1,
                seats: 100_000
            }),
            Mark::Level(1)
        );
    }

    #[test]
    fn merged_minutes_keep_their_peak() {
        // One full minute in the hour stays visible at 4 marks (15 min each).
        let mut peaks = vec![1; 60];
        peaks[37] = 4;
        assert_eq!(text(&minutes(&peaks, 4), 4), "▂▂█▂");
        assert_eq!(text(&minutes(&peaks, 4), 60).chars().nth(37), Some('█'));
    }

    #[test]
    fn a_short_series_is_the_newest_minutes() {
        assert_eq!(text(&minutes(&[2, 2], 2), 6), "     █");
        assert_eq!(text(&[], 3), "   ");
        assert_eq!(text(&minutes(&[0; 90], 1), 2), "··");
    }

    #[test]
    fn runs_share_a_span() {
        let line = spark_line(&minutes(&[0, 0, 1, 1, 2], 2), 60, Theme::new(false));
        let texts: Vec<&str> = line.spans.iter().map(|s| s.content.as_ref()).collect();
        // Blank and idle are both dim: one span.
        let quiet = format!("{}··", " ".repeat(55));
        assert_eq!(texts, [quiet.as_str(), "▄▄", "█"]);
    }
}
