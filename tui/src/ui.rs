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
//! Parts: `theme` (styles, pane frames), `pools` (the pools pane, its
//! column widths), `sparkline` (a pool's last hour as marks), `holders` (the
//! holders table), `modals` (help and revoke dialogs); the banner, event
//! feed and status bar are drawn here.

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
use crate::format::{fmt_duration_ms, short_id};
use holders::{body_rows, draw_holders};
use modals::{draw_help, draw_revoke};
use pools::draw_pools;
use theme::pane_block;
pub use theme::{Theme, kind_glyph};

/// Where each part of the screen goes.
struct Areas {
    banner: Rect,
    pools: Rect,
    holders: Rect,
    events: Rect,
    status: Rect,
}

fn areas(area: Rect, app: &App) -> Areas {
    let banner_h = if app.poll.is_down() { 2 } else { 0 };
    let pool_rows = app.licenses.len().clamp(1, 6) as u16;
    let events_h = (area.height / 4).clamp(5, 12);
    let [banner, pools, holders, events, status] = area.layout(&Layout::vertical([
        Constraint::Length(banner_h),
        Constraint::Length(pool_rows + 3),
        Constraint::Min(5),
        Constraint::Length(events_h),
        Constraint::Length(2),
    ]));
    Areas {
        banner,
        pools,
        holders,
        events,
        status,
    }
}

/// Rows visible in the holders table and in the event feed for a screen
/// of `area`: the event loop hands these to [`App::set_page_rows`].
pub fn page_rows(area: Rect, app: &App) -> (usize, usize) {
    let a = areas(area, app);
    (body_rows(a.holders), event_rows(a.events))
}

/// Draw the whole console at local time `now`.
pub fn draw(frame: &mut Frame, app: &App, now: Timestamp) {
    let theme = Theme::new(app.no_color);
    let server_now = app.server_now(now);
    let a = areas(frame.area(), app);
    if app.poll.is_down() {
        draw_banner(frame, a.banner, app, theme);
    }
    draw_pools(frame, a.pools, app, theme);
    draw_holders(frame, a.holders, app, theme, server_now);
    draw_events(frame, a.events, app, theme);
    draw_status(frame, a.status, app, theme, now);
    match &app.modal {
        Some(Modal::Help) => draw_help(frame, theme, app.read_only),
        Some(Modal::Revoke(m)) => draw_revoke(frame, theme, m),
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
    let text = vec![
        Line::from(format!(
            " ⚠ DISCONNECTED — retrying ({failures} failed {attempts} since {} local) — {kept}",
            hms(*since)
        )),
        Line::from(format!("   {error}")),
    ];
    let style = theme
        .bg(Color::White, Color::Red)
        .add_modifier(Modifier::BOLD);
    frame.render_widget(Paragraph::new(text).style(style), area);
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

fn event_line(e: &Event, theme: Theme) -> Line<'static> {
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
    Line::from(spans)
}

/// Lines of the event feed inside its borders.
fn event_rows(area: Rect) -> usize {
    area.height.saturating_sub(2) as usize
}

fn draw_events(frame: &mut Frame, area: Rect, app: &App, theme: Theme) {
    let visible = event_rows(area);
    let lines: Vec<Line> = app
        .events
        .iter()
        .skip(app.event_scroll)
        .take(visible)
        .map(|e| event_line(e, theme))
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
    let block = pane_block(Line::from(title), app.pane == Pane::Events, theme);
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
    let lines = vec![
        connection_line(app, theme, now),
        prompt_line(app, theme, now),
    ];
    frame.render_widget(Paragraph::new(lines), area);
}

/// The status bar's first line: server, connection, data age, modes.
fn connection_line(app: &App, theme: Theme, now: Timestamp) -> Line<'static> {
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
        Span::raw(app.server.clone()),
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
    Line::from(line1)
}

/// The status bar's second line: the filter being typed, else a fresh
/// message, else the key hints.
fn prompt_line(app: &App, theme: Theme, now: Timestamp) -> Line<'static> {
    if app.filter_editing {
        Line::from(vec![
            Span::styled(" / ", Style::new().add_modifier(Modifier::BOLD)),
            Span::styled(
                format!("{}▏", app.filter),
                theme.fg(Color::Yellow).add_modifier(Modifier::BOLD),
            ),
            Span::styled("   Enter keep · Esc clear", theme.dim()),
        ])
    } else if let Some(m) = app
        .message
        .as_ref()
        .filter(|m| now.millis_since(m.at) < MESSAGE_MS)
    {
        Line::from(Span::styled(format!(" {}", m.text), theme.level(m.level)))
    } else {
        let revoke = if app.read_only { "" } else { "  r revoke" };
        Line::from(Span::styled(
            format!(
                " ↑↓/jk move  / filter  s sort  S reverse  Tab pane  f freeze{revoke}  ? help  q quit"
            ),
            theme.dim(),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::app::AppEvent;
    use crate::app::test_support::*;
    use crossterm::event::KeyCode;
    use leasehold_common::api::EventKind;
    use ratatui::Terminal;
    use ratatui::backend::TestBackend;

    const W: u16 = 110;
    const H: u16 = 30;

    fn render(app: &mut App, now: Timestamp) -> Terminal<TestBackend> {
        render_at(app, now, W, H)
    }

    fn render_at(app: &mut App, now: Timestamp, w: u16, h: u16) -> Terminal<TestBackend> {
        let mut term = Terminal::new(TestBackend::new(w, h)).unwrap();
        let (rows, events) = page_rows(Rect::new(0, 0, w, h), app);
        app.set_page_rows(rows, events);
        term.draw(|f| draw(f, app, now)).unwrap();
        term
    }

    /// The main screen with an hour of usage: demo-cad (3 seats) idle, then
    /// busy, then full for ten minutes, 2 denials today; render (5 seats)
    /// lightly used, none denied.
    fn app_with_usage() -> App {
        use crate::app::UsageUpdate;
        use leasehold_common::api::UsagePoint;
        let hour = |seats: u32, peak: &dyn Fn(i64) -> u32| -> Vec<UsagePoint> {
            (0..60)
                .map(|i| UsagePoint {
                    t: ts(-3600 + i * 60),
                    seats,
                    peak: peak(i),
                    checkouts: 0,
                    denials: 0,
                })
                .collect()
        };
        let mut app = main_app();
        let cad = hour(3, &|i| match i {
            0..10 => 0,
            10..30 => 1 + (i % 2) as u32,
            30..40 => 3,
            _ => 2,
        });
        let render = hour(5, &|i| [0, 1, 1, 2, 1][(i % 5) as usize]);
        for (id, points, denials) in [("demo-cad", cad, 2), ("render", render, 0)] {
            app.update(
                AppEvent::Usage(Box::new(UsageUpdate {
                    license_id: id.into(),
                    last_hour: Some(points),
                    denials_today: Some(denials),
                })),
                ts(0),
            );
        }
        app
    }

    #[test]
    fn pools_usage_80_columns() {
        let mut app = app_with_usage();
        let term = render_at(&mut app, ts(2), 80, 24);
        insta::assert_snapshot!(term.backend());
    }

    #[test]
    fn pools_usage_160_columns() {
        let mut app = app_with_usage();
        let term = render_at(&mut app, ts(2), 160, 24);
        insta::assert_snapshot!(term.backend());
    }

    fn with_events(mut app: App) -> App {
        let evs = [
            (1, EventKind::Checkout, Some("alice"), None),
            (
                2,
                EventKind::Denied,
                None,
                Some("no seats available (3 of 3 live)"),
            ),
            (3, EventKind::Reap, Some("erin"), Some("lapsed 15s ago")),
            (
                4,
                EventKind::Revoke,
                Some("frank"),
                Some("reason: stuck build agent"),
            ),
        ];
        for (id, kind, holder, detail) in evs {
            let ev = Event {
                id,
                at: ts(-60 + id),
                kind,
                license_id: Some("demo-cad".into()),
                seat_id: holder.map(|_| format!("{id}e{id}f").repeat(8)),
                holder: holder.map(String::from),
                detail: detail.map(String::from),
            };
            app.update(AppEvent::StreamEvent(Box::new(ev)), ts(0));
        }
        app.update(AppEvent::StreamUp, ts(0));
        app
    }

    fn main_app() -> App {
        with_events(loaded_app())
    }

    #[test]
    fn main_screen() {
        let mut app = main_app();
        app.update(ch('j'), ts(0));
        let term = render(&mut app, ts(2));
        insta::assert_snapshot!(term.backend());
    }

    #[test]
    fn revoke_modal() {
        let mut app = main_app();
        app.update(ch('j'), ts(0));
        app.update(ch('r'), ts(0));
        app.update(key(KeyCode::Tab), ts(0));
        for c in "stuck since Friday".chars() {
            app.update(ch(c), ts(0));
        }
        let term = render(&mut app, ts(1));
        insta::assert_snapshot!(term.backend());
    }

    #[test]
    fn help() {
        let mut app = main_app();
        app.update(ch('?'), ts(0));
        let term = render(&mut app, ts(1));
        insta::assert_snapshot!(term.backend());
    }

    #[test]
    fn disconnected_banner() {
        let mut app = main_app();
        app.update(
            AppEvent::PollFailed {
                error: "cannot reach the server at http://127.0.0.1:7400: Connection refused (os error 111)".into(),
            },
            ts(3),
        );
        app.update(AppEvent::PollFailed { error: "cannot reach the server at http://127.0.0.1:7400: Connection refused (os error 111)".into() }, ts(5));
        app.update(
            AppEvent::StreamDown {
                error: "eof".into(),
            },
            ts(5),
        );
        let term = render(&mut app, ts(6));
        insta::assert_snapshot!(term.backend());
    }

    #[test]
    fn filtered_frozen_read_only() {
        let mut app = App::new("http://127.0.0.1:7400", true, false);
        load(
            &mut app,
            sample_seats(),
            vec![pool("demo-cad", 3, 3), pool("render", 5, 4)],
            ts(0),
            ts(0),
        );
        app.update(ch('/'), ts(0));
        app.update(ch('a'), ts(0));
        app.update(key(KeyCode::Enter), ts(0));
        app.update(ch('s'), ts(0));
        app.update(ch('s'), ts(0));
        let cmds = app.update(ch('s'), ts(0));
        // The server's answer: holders with an "a", soonest expiry first.
        let [alice, _, carol, dave] = sample_seats().try_into().unwrap();
        let count = answer(&mut app, &cmds[0], vec![carol, alice, dave], ts(0), ts(0));
        answer(&mut app, &count[0], sample_seats(), ts(0), ts(0));
        app.update(ch('f'), ts(0));
        let term = render(&mut app, ts(20));
        insta::assert_snapshot!(term.backend());
    }

    #[test]
    fn no_color() {
        let mut app = main_app();
        app.no_color = true;
        app.update(
            AppEvent::PollFailed {
                error: "connection refused".into(),
            },
            ts(1),
        );
        app.update(ch('r'), ts(1));
        let term = render(&mut app, ts(2));
        // Not one cell carries a colour; the words and glyphs carry the states.
        let buf = term.backend().buffer();
        for cell in buf.content() {
            assert_eq!(cell.fg, Color::Reset, "{cell:?}");
            assert_eq!(cell.bg, Color::Reset, "{cell:?}");
        }
        insta::assert_snapshot!(term.backend());
    }

    #[test]
    fn colour_marks_the_states() {
        let mut app = main_app();
        let term = render(&mut app, ts(2));
        let buf = term.backend().buffer();
        let colour_of = |needle: &str| {
            for y in 0..H {
                let row: String = (0..W).map(|x| buf[(x, y)].symbol()).collect();
                if let Some(byte) = row.find(needle) {
                    let x = row[..byte].chars().count() as u16;
                    return buf[(x, y)].fg;
                }
            }
            panic!("{needle} not on screen");
        };
        assert_eq!(colour_of("● live"), Color::Green);
        assert_eq!(colour_of("▲ expiring"), Color::Yellow);
        assert_eq!(colour_of("✗ lapsed"), Color::Red);
    }

    #[test]
    fn ten_thousand_rows_render_only_the_visible_ones() {
        let mut app = App::new("s", false, false);
        let seats: Vec<_> = (0..10_000)
            .map(|i| seat("pool", &format!("user-{i:05}"), &format!("{i:032x}"), 0, 60))
            .collect();
        load(
            &mut app,
            seats,
            vec![pool("pool", 10_000, 10_000)],
            ts(0),
            ts(0),
        );
        app.update(ch('G'), ts(0));
        let term = render(&mut app, ts(1));
        let screen = term.backend().to_string();
        assert!(screen.contains("user-09999"), "{screen}");
        assert!(screen.contains("Holders 10000 of 10000"));
        // Only a screenful of rows, ending at the selection, becomes widgets
        // and reaches the screen. (How fast a frame is: tui/benches/render.rs.)
        let page = app.page_rows;
        let first = 10_000 - page;
        assert_eq!(holders::visible_window(&app, page), first..10_000);
        let shown: Vec<&str> = screen.lines().filter(|l| l.contains("user-")).collect();
        assert_eq!(shown.len(), page, "{screen}");
        assert!(shown[0].contains(&format!("user-{first:05}")), "{screen}");
        assert!(!screen.contains(&format!("user-{:05}", first - 1)));
    }

    #[test]
    fn gauge_is_text() {
        assert_eq!(bar(0, 4, 4), "░░░░");
        assert_eq!(bar(2, 4, 4), "██░░");
        assert_eq!(bar(5, 4, 4), "████");
        assert_eq!(bar(0, 0, 4), "████");
    }
}
