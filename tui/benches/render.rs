//! The admin console with many holders on the server: one frame, one
//! refresh of the holders, one key.
//!
//! The console holds two server pages of holders (`app/paging.rs`), never
//! the whole list, so what it does no longer grows with the number of
//! holders: the server filters, sorts and counts. Measured with the window
//! full (two pages of 100) and `total` 10,000 and 100,000, licenses sized to
//! match:
//!
//! - `frame`: one full frame into a 200×50 `TestBackend` (what the event
//!   loop does on every tick; the holders table shows only the visible rows).
//! - `window`: applying a refreshed window (what a stream event or the
//!   periodic refresh brings): both pages' answers, sanitize, widths,
//!   selection. Parse-free; the input's clone is made outside the timed part.
//! - `key_sort_render`: `s` (next sort column: the request for the new
//!   order is made, the rows change when it is answered) then a frame.
//! - `key_filter_render`: one filter keystroke (typing `7`, or erasing it:
//!   in turn) then a frame.
//!
//! `cargo bench -p leasehold-tui --bench render`

use std::hint::black_box;
use std::time::Duration;

use criterion::{BatchSize, BenchmarkId, Criterion, criterion_group, criterion_main};
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use leasehold_common::Timestamp;
use leasehold_common::api::{LicenseSummary, LicensesResponse, SeatState, SeatView, SeatsPage};
use leasehold_tui::app::{App, AppEvent, Command, PageReply, Snapshot};
use leasehold_tui::ui;
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::layout::Rect;

const W: u16 = 200;
const H: u16 = 50;
const SIZES: [usize; 2] = [10_000, 100_000];
/// Server time of the snapshots (2026-11-30T04:00:00Z).
const NOW_MS: i64 = 1_796_011_200_000;

const LICENSES: [(&str, u32); 5] = [
    ("demo-cad", 40_000),
    ("render-farm", 30_000),
    ("matlab-campus", 20_000),
    ("eda-synthesis", 8_000),
    ("pdf-pro", 2_000),
];
const FIRST: [&str; 16] = [
    "alice", "bob", "carol", "dave", "erin", "frank", "grace", "heidi", "ivan", "judy", "mallory",
    "niaj", "olivia", "peggy", "rupert", "sybil",
];
const LAST: [&str; 12] = [
    "nguyen",
    "smith",
    "garcia",
    "müller",
    "kowalski",
    "tanaka",
    "okafor",
    "rossi",
    "dubois",
    "johansson",
    "silva",
    "cohen",
];
const HOSTS: [&str; 4] = ["ws", "build-agent", "laptop", "ci-runner"];

/// Deterministic pseudo-random numbers (splitmix64).
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Seats `from..from + n` of the server's list.
fn seats(from: usize, n: usize, generation: u64) -> Vec<SeatView> {
    (from as u64..(from + n) as u64)
        .map(|i| {
            let r = mix(i);
            let (license, _) = LICENSES[(r % LICENSES.len() as u64) as usize];
            let first = FIRST[((r >> 8) % FIRST.len() as u64) as usize];
            let last = LAST[((r >> 16) % LAST.len() as u64) as usize];
            let host = HOSTS[((r >> 24) % HOSTS.len() as u64) as usize];
            // Every heartbeat moves the expiry on: a later poll differs.
            let expires_in = ((mix(r ^ generation) % 70_000) as i64) - 10_000;
            let held = (mix(r ^ 0x5eed) % (8 * 3_600_000)) as i64;
            SeatView {
                license_id: license.to_string(),
                seat_id: format!("{:016x}{:016x}", mix(r ^ 1), mix(r ^ 2)),
                holder: format!("{first}.{last}@{host}-{:04}", i % 10_000),
                fingerprint: (i % 10 != 0).then(|| format!("{:016x}", mix(r ^ 3))),
                checked_out_at: Timestamp::from_millis(NOW_MS - held),
                issued_at: Timestamp::from_millis(NOW_MS + expires_in - 60_000),
                expires_at: Timestamp::from_millis(NOW_MS + expires_in),
                state: if expires_in < -5_000 {
                    SeatState::Lapsed
                } else {
                    SeatState::Live
                },
                group: None,
                idle_s: None,
            }
        })
        .collect()
}

fn licenses(n: usize) -> Vec<LicenseSummary> {
    LICENSES
        .iter()
        .map(|&(id, share)| {
            let live = (n as u64 * share as u64 / 100_000) as u32;
            LicenseSummary {
                id: id.to_string(),
                seats: live + live / 10,
                live,
                waiting: 0,
                ttl_s: 60.0,
                skew_s: 5.0,
                reap_grace_s: 15.0,
                ..Default::default()
            }
        })
        .collect()
}

/// Rows per page, as the console asks on a 200×50 screen.
const PAGE: usize = 100;

/// The server's answers to a window's two page requests, `total` holders.
fn window(total: usize, generation: u64) -> [SeatsPage; 2] {
    let now = Timestamp::from_millis(NOW_MS);
    let page = |from: usize| SeatsPage {
        now,
        seats: seats(from, PAGE, generation),
        total: total as u64,
        next: Some(format!("cursor-{}", from + PAGE)),
    };
    [page(0), page(PAGE)]
}

fn key(code: KeyCode) -> AppEvent {
    AppEvent::Key(KeyEvent::new(code, KeyModifiers::NONE))
}

/// Answer the page requests among `cmds` with `pages`, in turn.
fn answer(app: &mut App, cmds: Vec<Command>, pages: [SeatsPage; 2], now: Timestamp) {
    let mut cmds = cmds;
    for page in pages {
        let Some(Command::FetchPage(req)) = cmds
            .into_iter()
            .find(|c| matches!(c, Command::FetchPage(_)))
        else {
            panic!("a page request expected");
        };
        let reply = PageReply {
            id: req.id,
            page,
            received_at: now,
            elapsed_ms: 2,
        };
        cmds = app.update(AppEvent::Page(Box::new(reply)), now);
    }
}

/// An app showing a window of `n` holders on a 200×50 screen, the cursor
/// mid-table.
fn loaded(n: usize) -> (App, Terminal<TestBackend>) {
    let now = Timestamp::from_millis(NOW_MS);
    let mut app = App::new("http://127.0.0.1:7400", false, false);
    let licenses = LicensesResponse {
        now,
        licenses: licenses(n),
    };
    app.update(
        AppEvent::Snapshot(Box::new(Snapshot {
            licenses,
            received_at: now,
        })),
        now,
    );
    let (h, e) = ui::page_rows(Rect::new(0, 0, W, H), &app, now);
    app.set_page_rows(h, e);
    let cmds = app.update(AppEvent::Tick, now);
    answer(&mut app, cmds, window(n, 0), now);
    app.update(key(KeyCode::PageDown), now);
    app.update(key(KeyCode::PageDown), now);
    let mut term = Terminal::new(TestBackend::new(W, H)).unwrap();
    term.draw(|f| ui::draw(f, &app, now)).unwrap();
    (app, term)
}

fn render(c: &mut Criterion) {
    let now = Timestamp::from_millis(NOW_MS + 1_500);
    let mut g = c.benchmark_group("console");
    for n in SIZES {
        let (app, mut term) = loaded(n);
        g.bench_with_input(BenchmarkId::new("frame", n), &n, |b, _| {
            b.iter(|| {
                term.draw(|f| ui::draw(f, black_box(&app), now)).unwrap();
            })
        });
    }
    g.finish();
}

fn windows(c: &mut Criterion) {
    let mut g = c.benchmark_group("console");
    for n in SIZES {
        let next = window(n, 1);
        let (mut app, _) = loaded(n);
        let mut t = NOW_MS + 10_000;
        g.bench_with_input(BenchmarkId::new("window", n), &n, |b, _| {
            b.iter_batched(
                || {
                    t += 60_000;
                    (next.clone(), Timestamp::from_millis(t))
                },
                |(pages, now)| {
                    // A tick long after the last load asks for the periodic
                    // refresh.
                    let cmds = app.update(AppEvent::Tick, now);
                    answer(&mut app, cmds, pages, now)
                },
                BatchSize::LargeInput,
            )
        });
    }
    g.finish();
}

fn keys(c: &mut Criterion) {
    let now = Timestamp::from_millis(NOW_MS + 1_000);
    let mut g = c.benchmark_group("console");
    for n in SIZES {
        let (mut app, mut term) = loaded(n);
        g.bench_with_input(BenchmarkId::new("key_sort_render", n), &n, |b, _| {
            b.iter(|| {
                app.update(key(KeyCode::Char('s')), now);
                term.draw(|f| ui::draw(f, &app, now)).unwrap();
            })
        });
        app.update(key(KeyCode::Char('/')), now);
        g.bench_with_input(BenchmarkId::new("key_filter_render", n), &n, |b, _| {
            b.iter(|| {
                let k = if app.filter.is_empty() {
                    KeyCode::Char('7')
                } else {
                    KeyCode::Backspace
                };
                app.update(key(k), now);
                term.draw(|f| ui::draw(f, &app, now)).unwrap();
            })
        });
    }
    g.finish();
}

fn config() -> Criterion {
    // Short runs: a shared 2-core machine.
    Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
}

criterion_group! {
    name = console;
    config = config();
    targets = render, windows, keys
}
criterion_main!(console);
