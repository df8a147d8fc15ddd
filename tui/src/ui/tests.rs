//! Snapshot tests of the console's frames, drawn with ratatui's `TestBackend`
//! from states built with `app::test_support`.

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
    let (rows, events) = page_rows(Rect::new(0, 0, w, h), app, now);
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
                over_s: 0.0,
                checkouts: 0,
                denials: 0,
                denials_by_reason: Default::default(),
                true_denials: 0,
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
    // Out of the reason; ← from none comes round to custom, which takes
    // the typing.
    app.update(key(KeyCode::Tab), ts(0));
    app.update(key(KeyCode::Left), ts(0));
    for c in "90m".chars() {
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
    // Table rows only (the detail bar under it names the selected seat).
    let shown: Vec<&str> = screen
        .lines()
        .filter(|l| l.starts_with("\"┃") && l.contains("user-"))
        .collect();
    assert_eq!(shown.len(), page, "{screen}");
    assert!(shown[0].contains(&format!("user-{first:05}")), "{screen}");
    assert!(!screen.contains(&format!("user-{:05}", first - 1)));
}

/// Seat policies: demo-cad (3 seats, overage 1) holds 4, one of them
/// lingering, its group "design" (reserve 2, max 6) using 2 of them;
/// render (5 seats) lends one out. A seat in each state, with usage
/// (so the pane also has to make room for DENIED and the sparkline).
fn policy_app() -> App {
    use crate::app::UsageUpdate;
    use leasehold_common::api::{BorrowSummary, GroupSummary, SeatState, SeatView};
    let mut app = App::new("http://127.0.0.1:7400", false, false);
    let mut cad = pool("demo-cad", 3, 4);
    cad.overage = 1;
    cad.linger_s = Some(120.0);
    cad.lingering = 1;
    cad.reserved = 0;
    cad.groups = vec![GroupSummary {
        name: "design".into(),
        reserve: 2,
        max: Some(6),
        live: 2,
    }];
    let mut render = pool("render", 5, 2);
    render.borrow = Some(BorrowSummary {
        max_s: 7.0 * 86_400.0,
        seats: 2,
    });
    render.borrowed = 1;
    let with = |mut s: SeatView, state: SeatState, group: Option<&str>| {
        s.state = state;
        s.group = group.map(String::from);
        s
    };
    let seats = vec![
        with(
            seat("demo-cad", "alice", &"a1".repeat(16), -3600, 50),
            SeatState::Live,
            Some("design"),
        ),
        with(
            seat("demo-cad", "bob", &"b2".repeat(16), -120, 12),
            SeatState::Live,
            None,
        ),
        with(
            seat("demo-cad", "carol", &"c3".repeat(16), -600, 100),
            SeatState::Lingering,
            Some("design"),
        ),
        with(
            seat("demo-cad", "dave", &"d4".repeat(16), -900, -8),
            SeatState::Lapsed,
            None,
        ),
        with(
            seat("render", "erin", &"e5".repeat(16), -86_400, 2 * 86_400),
            SeatState::Borrowed,
            None,
        ),
        with(
            seat("render", "frank", &"f6".repeat(16), -30, 58),
            SeatState::Live,
            None,
        ),
    ];
    load(&mut app, seats, vec![cad, render], ts(0), ts(0));
    for (id, denials) in [("demo-cad", 2), ("render", 0)] {
        app.update(
            AppEvent::Usage(Box::new(UsageUpdate {
                license_id: id.into(),
                last_hour: Some(vec![]),
                denials_today: Some(denials),
            })),
            ts(0),
        );
    }
    app.update(AppEvent::StreamUp, ts(0));
    // Select carol's lingering seat: the detail bar names its group.
    for _ in 0..2 {
        app.update(ch('j'), ts(0));
    }
    app
}

#[test]
fn policies_80_columns() {
    let mut app = policy_app();
    let term = render_at(&mut app, ts(2), 80, 24);
    insta::assert_snapshot!(term.backend());
}

#[test]
fn policies_160_columns() {
    let mut app = policy_app();
    let term = render_at(&mut app, ts(2), 160, 24);
    insta::assert_snapshot!(term.backend());
}

/// The policy screen with erin's borrowed seat selected: the BORR
/// column, its state, the countdown to its return, and under the table
/// when it is back.
fn borrowed_selected() -> App {
    let mut app = policy_app();
    for _ in 0..2 {
        app.update(ch('j'), ts(0));
    }
    assert_eq!(app.selected_seat().unwrap().holder, "erin");
    app
}

#[test]
fn borrowed_80_columns() {
    let mut app = borrowed_selected();
    let term = render_at(&mut app, ts(2), 80, 24);
    insta::assert_snapshot!(term.backend());
}

#[test]
fn borrowed_160_columns() {
    let mut app = borrowed_selected();
    let term = render_at(&mut app, ts(2), 160, 24);
    let screen = term.backend().to_string();
    assert!(
        screen.contains("borrowed, back at 2026-12-02 04:00:00 UTC"),
        "{screen}"
    );
    insta::assert_snapshot!(term.backend());
}

/// The revoke dialog of a borrowed seat: until when, why force is
/// needed, and the F key.
#[test]
fn borrowed_revoke_dialog() {
    let mut app = borrowed_selected();
    app.update(ch('r'), ts(2));
    let term = render_at(&mut app, ts(2), 80, 24);
    insta::assert_snapshot!(term.backend());
}

/// A plain revoke refused with 409 `borrowed` brings the dialog back
/// with the server's sentence (the seat looked live).
#[test]
fn refused_revoke_dialog_shows_the_servers_sentence() {
    let mut app = policy_app();
    app.update(ch('k'), ts(0));
    app.update(ch('k'), ts(0));
    assert_eq!(app.selected_seat().unwrap().holder, "alice");
    app.update(ch('r'), ts(0));
    app.update(ch('y'), ts(0));
    app.update(
        AppEvent::RevokeDone {
            seat_id: "a1".repeat(16),
            holder: "alice".into(),
            outcome: crate::app::RevokeOutcome::Borrowed(
                "seat is borrowed until 2026-12-02T04:00:00.000Z: its holder's token stays \
                 valid offline until then; send {\"force\": true} to free it anyway"
                    .into(),
            ),
        },
        ts(1),
    );
    let term = render_at(&mut app, ts(2), 160, 30);
    insta::assert_snapshot!(term.backend());
}

/// The help has each pool's policy figures and a line per group.
#[test]
fn policies_help() {
    let mut app = policy_app();
    app.update(ch('?'), ts(0));
    let term = render_at(&mut app, ts(2), 80, 40);
    insta::assert_snapshot!(term.backend());
}

#[test]
fn policy_states_have_their_colours() {
    let mut app = policy_app();
    let term = render_at(&mut app, ts(2), 160, 24);
    let buf = term.backend().buffer();
    let colour_of = |needle: &str| {
        for y in 0..24 {
            let row: String = (0..160).map(|x| buf[(x, y)].symbol()).collect();
            if let Some(byte) = row.find(needle) {
                let x = row[..byte].chars().count() as u16;
                return buf[(x, y)].fg;
            }
        }
        panic!("{needle} not on screen");
    };
    assert_eq!(colour_of("◌ lingering"), Color::Cyan);
    assert_eq!(colour_of("⇄ borrowed"), Color::Magenta);
    assert_eq!(colour_of("⇡ OVER"), Color::Magenta);
}

/// A pool id of 47 characters, a pool of 1,000,000 seats holding 97,449
/// and 12-digit denial counts, with long and wide holders.
fn big_app() -> App {
    use crate::app::UsageUpdate;
    let long_id = "eda-suite-enterprise-floating-seats-emea-region";
    assert_eq!(long_id.chars().count(), 47);
    let mut app = App::new("http://license-server.build.example.com:7400", false, false);
    let mut held = seat(
        long_id,
        "Émilie Dupont-Lefèvre (build agent 7, rack B)",
        "5f0c2a9e8b7d4c1fa3e6b2d9c8f7a1e0",
        -7200,
        40,
    );
    held.fingerprint = Some("ws-emea-0042.build.example.com/sha256:9f86d081884c7d65".into());
    let mut wide = seat(
        "render",
        "山田太郎のワークステーション",
        "7a7a7a7a7a7a7a7a7a7a7a7a7a7a7a7a",
        -60,
        50,
    );
    wide.fingerprint = Some("指紋-東京-第三ビル".into());
    let mut big = pool(long_id, 1_000_000, 97_449);
    big.ttl_s = 90.0;
    load(
        &mut app,
        vec![held, wide],
        vec![big, pool("render", 4_000_000_000, 3_999_999_999)],
        ts(0),
        ts(0),
    );
    for (id, denials) in [(long_id, 123_456_789_012), ("render", 999_999_999_999)] {
        app.update(
            AppEvent::Usage(Box::new(UsageUpdate {
                license_id: id.into(),
                last_hour: Some(vec![]),
                denials_today: Some(denials),
            })),
            ts(0),
        );
    }
    let denied = Event {
        id: 1,
        at: ts(-5),
        kind: EventKind::Denied,
        license_id: Some(long_id.into()),
        seat_id: None,
        holder: Some("Émilie Dupont-Lefèvre (build agent 7, rack B)".into()),
        detail: Some("no seats available (1000000 of 1000000 live)".into()),
    };
    app.update(AppEvent::StreamEvent(Box::new(denied)), ts(0));
    app.update(AppEvent::StreamUp, ts(0));
    app
}

#[test]
fn big_numbers_80_columns() {
    let mut app = big_app();
    let term = render_at(&mut app, ts(2), 80, 24);
    insta::assert_snapshot!(term.backend());
}

#[test]
fn big_numbers_160_columns() {
    let mut app = big_app();
    let term = render_at(&mut app, ts(2), 160, 24);
    insta::assert_snapshot!(term.backend());
}

/// The help lists each pool's exact figures, for when the pane is
/// compact.
#[test]
fn big_numbers_help_has_the_exact_figures() {
    let mut app = big_app();
    app.update(ch('?'), ts(0));
    let term = render_at(&mut app, ts(2), 80, 40);
    let screen = term.backend().to_string();
    for exact in [
        "97,449 of 1,000,000 live",
        "902,551 free",
        "123,456,789,012 denied today",
        "3,999,999,999 of 4,000,000,000 live",
    ] {
        assert!(screen.contains(exact), "{exact}:\n{screen}");
    }
}

/// The selected seat's holder, fingerprint and seat id, whole, under the
/// table, wrapped on a narrow screen.
#[test]
fn detail_bar_shows_the_selected_seat_whole() {
    let mut app = big_app();
    app.update(ch('j'), ts(0));
    let term = render_at(&mut app, ts(2), 60, 30);
    insta::assert_snapshot!(term.backend());
}

/// Details too long for a third of the screen say so on their last line
/// rather than vanish.
#[test]
fn detail_bar_says_when_it_is_cut() {
    let mut app = App::new("s", false, false);
    let mut s = seat("p", &"山".repeat(128), "ab".repeat(16).as_str(), 0, 60);
    s.fingerprint = Some("指".repeat(128));
    load(&mut app, vec![s], vec![pool("p", 1, 1)], ts(0), ts(0));
    let screen = render_at(&mut app, ts(1), 60, 24).backend().to_string();
    assert!(
        screen.contains("… more than fits: a wider terminal shows it all"),
        "{screen}"
    );
    // Tall enough, all of it shows, wrapped.
    let screen = render_at(&mut app, ts(1), 60, 60).backend().to_string();
    assert!(!screen.contains("more than fits"), "{screen}");
    assert!(screen.contains(&"ab".repeat(16)), "{screen}");
}

/// Seats whose clients report idleness: alice's (selected) idle 12
/// minutes on demo-cad, which reclaims after 30m; dave's an hour on
/// render, which never reclaims; and a reclaim in the feed.
fn idle_app() -> App {
    let mut app = App::new("http://127.0.0.1:7400", false, false);
    let mut cad = pool("demo-cad", 3, 3);
    cad.idle_timeout_s = Some(1800.0);
    let mut seats = sample_seats();
    seats[0].idle_s = Some(725);
    seats[3].idle_s = Some(3900);
    load(
        &mut app,
        seats,
        vec![cad, pool("render", 5, 1)],
        ts(0),
        ts(0),
    );
    let reclaim = Event {
        id: 1,
        at: ts(-30),
        kind: EventKind::Reclaim,
        license_id: Some("demo-cad".into()),
        seat_id: Some("e5".repeat(16)),
        holder: Some("erin".into()),
        detail: Some("idle since 2026-11-30T03:29:30.000Z: idle_timeout 30m".into()),
    };
    app.update(AppEvent::StreamEvent(Box::new(reclaim)), ts(0));
    app.update(AppEvent::StreamUp, ts(0));
    app
}

/// Two seconds after the fetch: the idle times have run on by two.
#[test]
fn idle_80_columns() {
    let mut app = idle_app();
    let term = render_at(&mut app, ts(2), 80, 24);
    let screen = term.backend().to_string();
    for whole in ["IDLE", "12m07s", "1h05m", "z reclaim"] {
        assert!(screen.contains(whole), "{whole}:\n{screen}");
    }
    insta::assert_snapshot!(term.backend());
}

#[test]
fn idle_160_columns() {
    let mut app = idle_app();
    let term = render_at(&mut app, ts(2), 160, 24);
    let screen = term.backend().to_string();
    for whole in [
        "idle 12m07s, reclaimed at 30m00s",
        "z reclaim  demo-cad  erin  seat e5e5e5e5  idle since 2026-11-30T03:29:30.000Z: idle_timeout 30m",
    ] {
        assert!(screen.contains(whole), "{whole}:\n{screen}");
    }
    insta::assert_snapshot!(term.backend());
}

/// No seat reports idleness: no IDLE column, nothing about idleness
/// under the table.
#[test]
fn no_idle_column_when_no_seat_is_idle() {
    let mut app = App::new("s", false, false);
    let mut seats = sample_seats();
    seats[0].idle_s = Some(61);
    load(&mut app, seats.clone(), vec![], ts(5), ts(5));
    let screen = render_at(&mut app, ts(6), 160, 24).backend().to_string();
    assert!(screen.contains("IDLE"), "{screen}");
    assert!(screen.contains("idle 1m02s"), "{screen}");
    // The next refresh: alice is back.
    seats[0].idle_s = None;
    load(&mut app, seats, vec![], ts(10), ts(10));
    let screen = render_at(&mut app, ts(11), 160, 24).backend().to_string();
    assert!(!screen.contains("IDLE"), "{screen}");
    assert!(!screen.contains("idle "), "{screen}");
}

/// SplitMix64: a fixed-seed generator, so a failure replays.
fn next(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Any count of any size, at any width from 60 to 240 columns: every
/// figure in the pools pane reads back as its exact value or as a
/// compact form that contains it, and the holders title's counts are
/// exact. (Pool ids have no digits, so every digit on a pool row belongs
/// to a figure.)
#[test]
fn no_figure_is_ever_cut() {
    use crate::app::UsageUpdate;
    use crate::format::count_range;
    let mut rng = 0x1e45_e401_u64;
    let any = |rng: &mut u64| -> u64 {
        // Spread over every magnitude, not just huge values.
        let digits = next(rng) % 21;
        next(rng) % 10u64.saturating_pow(digits as u32).max(1)
    };
    for round in 0..200 {
        let width = 60 + (next(&mut rng) % 181) as u16;
        let n_pools = 1 + (next(&mut rng) % 4) as usize;
        let pools: Vec<_> = (0..n_pools)
            .map(|i| {
                let seats = any(&mut rng).min(u64::from(u32::MAX)) as u32;
                let live = any(&mut rng).min(u64::from(u32::MAX)) as u32;
                let name_len = 3 + (next(&mut rng) % 50) as usize;
                let id: String = std::iter::once((b'a' + i as u8) as char)
                    .chain("pool".chars().cycle().take(name_len))
                    .collect();
                pool(&id, seats, live)
            })
            .collect();
        let denials: Vec<u64> = pools.iter().map(|_| any(&mut rng)).collect();
        let mut app = App::new("s", false, false);
        load(&mut app, sample_seats(), pools.clone(), ts(0), ts(0));
        for (p, &d) in pools.iter().zip(&denials) {
            app.update(
                AppEvent::Usage(Box::new(UsageUpdate {
                    license_id: p.id.clone(),
                    last_hour: Some(vec![]),
                    denials_today: Some(d),
                })),
                ts(0),
            );
        }
        let term = render_at(&mut app, ts(1), width, 30);
        let screen = term.backend().to_string();
        let lines: Vec<&str> = screen.lines().collect();
        for (i, (p, &d)) in pools.iter().zip(&denials).enumerate() {
            let row = lines[2 + i];
            let figures: Vec<&str> = row
                .split(|c: char| !(c.is_ascii_alphanumeric() || c == '.'))
                .filter(|t| t.starts_with(|c: char| c.is_ascii_digit()))
                .collect();
            let want = [
                u64::from(p.live),
                u64::from(p.seats),
                u64::from(p.seats.saturating_sub(p.live)),
            ];
            let ctx = format!("round {round}, width {width}:\n{screen}");
            assert_eq!(figures.len(), 5, "live, seats, free, TTL, denied: {ctx}");
            assert_eq!(figures[3], "1m", "{ctx}");
            for (shown, exact) in [figures[0], figures[1], figures[2], figures[4]]
                .into_iter()
                .zip(want.into_iter().chain([d]))
            {
                let range = count_range(shown).unwrap_or_else(|| panic!("{shown}: {ctx}"));
                assert!(
                    range.contains(&u128::from(exact)),
                    "{shown} for {exact}: {ctx}"
                );
            }
        }
        assert!(
            screen.contains("Holders 4 of 4"),
            "round {round}:\n{screen}"
        );
    }
}

#[test]
fn gauge_is_text() {
    assert_eq!(bar(0, 4, 4), "░░░░");
    assert_eq!(bar(2, 4, 4), "██░░");
    assert_eq!(bar(5, 4, 4), "████");
    assert_eq!(bar(0, 0, 4), "████");
}

/// Vendor pools: `cad` dropping in 12 days, `ide` in grace, `cam` with
/// nothing entitled, `render` perpetual; `plain` has no vendor. An
/// `entitlement` event in the feed.
fn vendor_app() -> App {
    let mut app = App::new("http://127.0.0.1:7400", false, false);
    let day = 86_400;
    let vendor = |id: &str, entitled: u32, live: u32, ends_in: Option<i64>, in_grace: bool| {
        let mut p = pool(id, entitled, live);
        p.vendor = Some("keyright".into());
        p.customer = Some("Acme".into());
        p.entitled_seats = Some(entitled);
        p.entitlement_ends_at = ends_in.map(ts);
        p.in_grace = in_grace;
        p
    };
    let pools = vec![
        vendor("cad", 10, 4, Some(12 * day + 3600), false),
        vendor("ide", 3, 1, Some(3 * day + 3600), true),
        vendor("cam", 0, 0, None, false),
        vendor("render", 4, 1, None, false),
        pool("plain", 2, 1),
    ];
    load(&mut app, sample_seats(), pools, ts(0), ts(0));
    let mut ev = crate::app::test_support::event(3, EventKind::Entitlement);
    (ev.license_id, ev.seat_id, ev.holder) = (None, None, None);
    ev.detail = Some("acme.lic (keyright acme-2026) in grace until 2026-12-03".into());
    app.update(AppEvent::StreamEvent(Box::new(ev)), ts(0));
    app.update(AppEvent::StreamUp, ts(0));
    app
}

#[test]
fn vendor_pools_80_columns() {
    let mut app = vendor_app();
    let term = render_at(&mut app, ts(2), 80, 24);
    insta::assert_snapshot!(term.backend());
}

/// The marks in the warning style (yellow, bold), the seats without it,
/// a plain pool's dash dim; under NO_COLOR the marks stay bold.
#[test]
fn vendor_pools_160_columns() {
    let mut app = vendor_app();
    let term = render_at(&mut app, ts(2), 160, 24);
    insta::assert_snapshot!(term.backend());
    let buf = term.backend().buffer();
    let style_of = |needle: &str| {
        for y in 0..24 {
            // Cells by x, those a wide character covers skipped.
            let mut row: Vec<(u16, &str)> = Vec::new();
            let mut x = 0;
            while x < 160 {
                let symbol = buf[(x, y)].symbol();
                row.push((x, symbol));
                x += cells(symbol).max(1) as u16;
            }
            let text: String = row.iter().map(|(_, s)| *s).collect();
            if let Some(byte) = text.find(needle) {
                let x = row[text[..byte].chars().count()].0;
                return buf[(x, y)].style();
            }
        }
        panic!("{needle} not on screen");
    };
    for mark in ["⏳ 12d", "grace 3d", "expired"] {
        let s = style_of(mark);
        assert_eq!(s.fg, Some(Color::Yellow), "{mark}");
        assert!(s.add_modifier.contains(Modifier::BOLD), "{mark}");
    }
    assert_eq!(
        style_of("10 ⏳").fg,
        Some(Color::Reset),
        "the seats are plain"
    );
    let mut plain = vendor_app();
    plain.no_color = true;
    let term = render_at(&mut plain, ts(2), 160, 24);
    let screen = term.backend().to_string();
    assert!(screen.contains("10 ⏳ 12d"), "{screen}");
    let buf = term.backend().buffer();
    let bold = (0..24)
        .flat_map(|y| (0..160).map(move |x| (x, y)))
        .filter(|&p| buf[p].symbol() == "⏳")
        .all(|p| buf[p].modifier.contains(Modifier::BOLD));
    assert!(bold, "{screen}");
}

/// The help lists a vendor pool's entitled seats, its vendor and its mark.
#[test]
fn vendor_pools_help() {
    let mut app = vendor_app();
    app.update(ch('?'), ts(0));
    let term = render_at(&mut app, ts(2), 80, 44);
    let screen = term.backend().to_string();
    for figure in [
        "10 entitled by keyright · ⏳ 12d",
        "3 entitled by keyright · grace 3d",
        "0 entitled by keyright · expired",
    ] {
        assert!(screen.contains(figure), "{figure}:\n{screen}");
    }
}
