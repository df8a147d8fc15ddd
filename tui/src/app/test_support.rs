//! Fixtures shared by the app's unit tests and the UI's snapshot tests: a
//! fixed clock, key presses, seats, pools and a loaded console.

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use leasehold_common::Timestamp;
use leasehold_common::api::{
    Event, EventKind, LicenseSummary, LicensesResponse, SeatState, SeatView, SeatsPage,
};

use super::{App, AppEvent, Command, PageReply, Snapshot};

pub const T0: i64 = 1_796_011_200_000; // 2026-11-30T04:00:00Z

pub fn ts(offset_s: i64) -> Timestamp {
    Timestamp::from_millis(T0 + offset_s * 1000)
}

pub fn key(code: KeyCode) -> AppEvent {
    AppEvent::Key(KeyEvent::new(code, KeyModifiers::NONE))
}

pub fn ch(c: char) -> AppEvent {
    key(KeyCode::Char(c))
}

pub fn seat(license: &str, holder: &str, id: &str, checked_out: i64, expires: i64) -> SeatView {
    SeatView {
        license_id: license.into(),
        seat_id: id.into(),
        holder: holder.into(),
        fingerprint: Some(format!("fp-{holder}")),
        checked_out_at: ts(checked_out),
        issued_at: ts(expires - 60),
        expires_at: ts(expires),
        state: SeatState::Live,
        group: None,
        idle_s: None,
    }
}

pub fn pool(id: &str, seats: u32, live: u32) -> LicenseSummary {
    LicenseSummary {
        id: id.into(),
        seats,
        live,
        ttl_s: 60.0,
        skew_s: 5.0,
        reap_grace_s: 15.0,
        waiting: 0,
        ..Default::default()
    }
}

/// The licenses as polled at server time `server_now`, received locally at
/// `local_now`.
pub fn snapshot(
    pools: Vec<LicenseSummary>,
    server_now: Timestamp,
    local_now: Timestamp,
) -> AppEvent {
    AppEvent::Snapshot(Box::new(Snapshot {
        licenses: LicensesResponse {
            now: server_now,
            licenses: pools,
        },
        received_at: local_now,
    }))
}

/// Answer the console's page request `cmd` as a server holding exactly
/// `seats` (in the order asked for) would: one page, nothing after it.
pub fn answer(
    app: &mut App,
    cmd: &Command,
    seats: Vec<SeatView>,
    server_now: Timestamp,
    local_now: Timestamp,
) -> Vec<Command> {
    let Command::FetchPage(req) = cmd else {
        panic!("not a page request: {cmd:?}");
    };
    let total = seats.len() as u64;
    let reply = PageReply {
        id: req.id,
        page: SeatsPage {
            now: server_now,
            seats,
            total,
            next: None,
        },
        received_at: local_now,
        elapsed_ms: 1,
    };
    app.update(AppEvent::Page(Box::new(reply)), local_now)
}

/// The licenses polled and the holders table loaded with `seats`, at server
/// time `server_now` and local time `local_now`. A filter's count of all
/// seats is answered with the same number.
pub fn load(
    app: &mut App,
    seats: Vec<SeatView>,
    pools: Vec<LicenseSummary>,
    server_now: Timestamp,
    local_now: Timestamp,
) {
    app.update(snapshot(pools, server_now, local_now), local_now);
    let n = seats.len();
    let cmds = app.reload_now();
    let more = answer(app, &cmds[0], seats, server_now, local_now);
    if let Some(count_all) = more.first() {
        let all = (0..n).map(|_| seat("x", "x", "x", 0, 0)).collect();
        answer(app, count_all, all, server_now, local_now);
    }
}

pub fn sample_seats() -> Vec<SeatView> {
    vec![
        seat(
            "demo-cad",
            "alice",
            "a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1",
            -3600,
            50,
        ),
        seat(
            "demo-cad",
            "bob",
            "b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2",
            -120,
            12,
        ),
        seat(
            "demo-cad",
            "carol",
            "c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3",
            -600,
            -8,
        ),
        seat(
            "render",
            "dave",
            "d4d4d4d4d4d4d4d4d4d4d4d4d4d4d4d4",
            -30,
            58,
        ),
    ]
}

pub fn loaded_app() -> App {
    let mut app = App::new("http://127.0.0.1:7400", false, false);
    load(
        &mut app,
        sample_seats(),
        vec![pool("demo-cad", 3, 2), pool("render", 5, 1)],
        ts(0),
        ts(0),
    );
    app
}

pub fn holders(app: &App) -> Vec<&str> {
    app.view
        .iter()
        .map(|&i| app.seats[i].holder.as_str())
        .collect()
}

pub fn event(id: i64, kind: EventKind) -> Event {
    Event {
        id,
        at: ts(id),
        kind,
        license_id: Some("demo-cad".into()),
        seat_id: Some("a1a1a1a1".into()),
        holder: Some("alice".into()),
        detail: None,
    }
}
