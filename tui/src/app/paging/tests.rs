//! The holders window's loads, driven by hand against a fake server: which
//! pages are asked for and when (debounce, coalescing, retries, freeze), and
//! where the selection lands.

use crossterm::event::KeyCode;
use leasehold_common::api::EventKind;

use super::super::test_support::*;
use super::super::{AppEvent, Modal};
use super::*;

/// What a request asks of the server, without its id and delay.
fn ask(cmd: &Command) -> (String, &'static str, bool, Option<String>) {
    let Command::FetchPage(r) = cmd else {
        panic!("not a page request: {cmd:?}")
    };
    (r.q.clone(), r.sort, r.desc, r.after.clone())
}

fn only_fetch(cmds: &[Command]) -> &PageRequest {
    match cmds {
        [Command::FetchPage(r)] => r,
        other => panic!("one page request expected: {other:?}"),
    }
}

/// A server of `n` holders `h00000`…, sorted by holder: answers page
/// requests as `GET /v1/admin/seats` would (cursor = last holder).
struct FakeServer {
    seats: Vec<SeatView>,
    requests: usize,
}

impl FakeServer {
    fn new(n: usize) -> FakeServer {
        let seats = (0..n)
            .map(|i| {
                seat(
                    "p",
                    &format!("h{i:05}"),
                    &format!("{i:032x}"),
                    -(i as i64),
                    60,
                )
            })
            .collect();
        FakeServer { seats, requests: 0 }
    }

    fn answer(&mut self, r: &PageRequest) -> AppEvent {
        self.requests += 1;
        let q = r.q.trim().to_lowercase();
        let mut rows: Vec<&SeatView> = self
            .seats
            .iter()
            .filter(|s| s.holder.contains(&q))
            .collect();
        assert!(matches!(r.sort, "holder" | "license"), "{}", r.sort);
        if r.desc {
            rows.reverse();
        }
        let total = rows.len() as u64;
        let start = match &r.after {
            None => 0,
            Some(c) => rows.iter().position(|s| &s.holder == c).unwrap() + 1,
        };
        let page: Vec<SeatView> = rows[start..]
            .iter()
            .take(r.limit)
            .map(|s| (*s).clone())
            .collect();
        let next = (start + r.limit < rows.len()).then(|| page.last().unwrap().holder.clone());
        AppEvent::Page(Box::new(PageReply {
            id: r.id,
            page: SeatsPage {
                now: ts(0),
                seats: page,
                total,
                next,
            },
            received_at: ts(0),
            elapsed_ms: 0,
        }))
    }

    /// Answer `cmds` and every request they lead to.
    fn serve(&mut self, app: &mut App, mut cmds: Vec<Command>) {
        while let Some(cmd) = cmds.pop() {
            if let Command::FetchPage(r) = cmd {
                let ev = self.answer(&r);
                cmds.extend(app.update(ev, ts(0)));
            }
        }
    }
}

/// An app sorted by holder over `n` fake holders, first window loaded.
fn paged_app(n: usize) -> (App, FakeServer) {
    let mut app = App::new("s", false, false);
    app.set_page_rows(20, 5);
    let mut server = FakeServer::new(n);
    let cmds = app.update(ch('s'), ts(0));
    assert_eq!(app.sort, SortKey::Holder);
    server.serve(&mut app, cmds);
    (app, server)
}

fn selected(app: &App) -> &str {
    &app.selected_seat().unwrap().holder
}

#[test]
fn scrolling_down_fetches_the_next_page_and_up_comes_back() {
    let (mut app, mut server) = paged_app(1000);
    assert_eq!(app.seats.len(), 200, "two pages of 100");
    assert_eq!(app.holder_counts(), (1000, 1000));
    // Down to the second page's lower half: one shift, one page further.
    let mut shifts = 0;
    for _ in 0..150 {
        let cmds = app.update(ch('j'), ts(0));
        if !cmds.is_empty() {
            assert_eq!(ask(&cmds[0]).3, Some("h00099".into()), "after page 1");
            shifts += 1;
            server.serve(&mut app, cmds);
        }
    }
    assert_eq!(shifts, 1);
    assert_eq!(selected(&app), "h00150");
    assert_eq!(app.seats[0].holder, "h00100", "window moved a page on");
    assert!(app.selected - app.scroll < app.page_rows, "still on screen");
    // PgDn to the end of the list.
    for _ in 0..100 {
        let cmds = app.update(key(KeyCode::PageDown), ts(0));
        server.serve(&mut app, cmds);
    }
    assert_eq!(selected(&app), "h00999");
    // And back up, by the kept cursors, to the very first holder.
    for _ in 0..100 {
        let cmds = app.update(key(KeyCode::PageUp), ts(0));
        server.serve(&mut app, cmds);
    }
    assert_eq!(selected(&app), "h00000");
    assert_eq!(app.seats.len(), 200);
}

#[test]
fn end_fetches_the_last_page_in_reverse_and_home_the_first() {
    let (mut app, mut server) = paged_app(100_000);
    let before = server.requests;
    let cmds = app.update(key(KeyCode::End), ts(0));
    assert_eq!(
        ask(&cmds[0]),
        (String::new(), "holder", true, None),
        "the table's end is the reversed order's start"
    );
    server.serve(&mut app, cmds);
    assert_eq!(server.requests - before, 2, "two pages, not a walk");
    assert_eq!(selected(&app), "h99999");
    assert_eq!(app.seats.last().unwrap().holder, "h99999");
    // Up from the end pages backwards.
    for _ in 0..3 {
        let cmds = app.update(key(KeyCode::PageUp), ts(0));
        server.serve(&mut app, cmds);
    }
    assert_eq!(selected(&app), "h99939");
    for _ in 0..10 {
        let cmds = app.update(key(KeyCode::PageUp), ts(0));
        server.serve(&mut app, cmds);
    }
    assert_eq!(selected(&app), "h99739");
    let cmds = app.update(key(KeyCode::Home), ts(0));
    server.serve(&mut app, cmds);
    assert_eq!(selected(&app), "h00000");
}

#[test]
fn home_pressed_while_end_loads_lands_on_the_first_row() {
    let (mut app, mut server) = paged_app(1000);
    // End's pages are still on their way when Home is pressed: the window
    // is at the start, but End's load would move it to the end.
    let end = app.update(key(KeyCode::End), ts(0));
    let home = app.update(key(KeyCode::Home), ts(0));
    assert!(
        !only_fetch(&home).desc,
        "the first rows asked for: {home:?}"
    );
    server.serve(&mut app, end);
    server.serve(&mut app, home);
    assert_eq!(selected(&app), "h00000");
    assert_eq!(app.seats[0].holder, "h00000");
}

#[test]
fn home_while_a_new_filter_loads_lands_on_the_first_row() {
    let (mut app, mut server) = paged_app(1000);
    for _ in 0..5 {
        app.update(ch('j'), ts(0));
    }
    app.update(ch('/'), ts(0));
    let cmds = app.update(ch('h'), ts(0));
    app.update(key(KeyCode::Enter), ts(0));
    assert!(app.update(key(KeyCode::Home), ts(0)).is_empty());
    server.serve(&mut app, cmds);
    assert_eq!(selected(&app), "h00000", "not the seat selected before");
}

#[test]
fn the_filter_is_the_servers_q_sent_once_typing_pauses() {
    let (mut app, mut server) = paged_app(1000);
    app.update(ch('/'), ts(0));
    let mut last = None;
    for c in "h0042".chars() {
        let cmds = app.update(ch(c), ts(0));
        let r = only_fetch(&cmds);
        assert_eq!(r.delay_ms, FILTER_DEBOUNCE_MS, "debounced");
        last = Some(r.clone());
    }
    let last = last.unwrap();
    assert_eq!(last.q, "h0042");
    // Only the newest request counts: an older answer is dropped.
    let stale = PageRequest {
        id: last.id - 1,
        ..last.clone()
    };
    let shown = app.seats.len();
    app.update(server.answer(&stale), ts(0));
    assert_eq!(app.seats.len(), shown);
    server.serve(&mut app, vec![Command::FetchPage(last)]);
    let names: Vec<&str> = app.seats.iter().map(|s| s.holder.as_str()).collect();
    assert_eq!(
        names,
        [
            "h00420", "h00421", "h00422", "h00423", "h00424", "h00425", "h00426", "h00427",
            "h00428", "h00429"
        ]
    );
    assert_eq!(app.holder_counts(), (10, 1000), "matching of all");
    // Esc clears it at once.
    app.update(key(KeyCode::Enter), ts(0));
    let cmds = app.update(key(KeyCode::Esc), ts(0));
    assert_eq!(only_fetch(&cmds).delay_ms, 0);
    assert_eq!(only_fetch(&cmds).q, "");
}

#[test]
fn sort_columns_map_onto_the_servers_sorts() {
    let mut app = App::new("s", false, false);
    let mut seen = Vec::new();
    for _ in 0..SortKey::ALL.len() {
        for k in ['s', 'S'] {
            let cmds = app.update(ch(k), ts(0));
            let (_, sort, desc, after) = ask(&cmds[0]);
            assert_eq!(after, None, "a new order starts at the top");
            seen.push((app.sort.label(), sort, desc));
        }
    }
    assert_eq!(
        seen,
        [
            ("holder", "holder", false),
            ("holder", "holder", true),
            ("held for", "checked_out_at", true),
            ("held for", "checked_out_at", false),
            ("expires in", "expires_at", false),
            ("expires in", "expires_at", true),
            ("license", "license", false),
            ("license", "license", true),
        ]
    );
}

#[test]
fn a_burst_of_events_makes_one_coalesced_refetch() {
    let (mut app, mut server) = paged_app(300);
    let t = |ms: i64| Timestamp::from_millis(ts(10).as_millis() + ms);
    let mut cmds = Vec::new();
    for i in 0..50 {
        let mut ev = event(i + 1, EventKind::Checkout);
        ev.at = t(i);
        cmds.extend(app.update(AppEvent::StreamEvent(Box::new(ev)), t(i)));
    }
    let r = only_fetch(&cmds).clone();
    assert_eq!(r.delay_ms, 0, "the first load was long ago");
    assert_eq!(r.after, None, "the same window again");
    // Events that do not change seats cause nothing.
    assert!(
        app.update(
            AppEvent::StreamEvent(Box::new(event(99, EventKind::Denied))),
            t(60)
        )
        .is_empty()
    );
    // Events during the load make one more, EVENT_GAP_MS after the first.
    let first = server.answer(&r);
    let second = app.update(first, t(100));
    assert_eq!(second.len(), 1, "the second page");
    let Command::FetchPage(r2) = &second[0] else {
        panic!()
    };
    let done = server.answer(r2);
    let again = app.update(done, t(120));
    let r3 = only_fetch(&again);
    assert_eq!(r3.delay_ms, (EVENT_GAP_MS - 120) as u64);
    // Nothing more until that one is answered.
    assert!(
        app.update(
            AppEvent::StreamEvent(Box::new(event(100, EventKind::Release))),
            t(130)
        )
        .is_empty()
    );
}

#[test]
fn an_expensive_load_makes_the_next_wait_longer() {
    let (mut app, mut server) = paged_app(150);
    let t = |ms: i64| Timestamp::from_millis(ts(100).as_millis() + ms);
    let cmds = app.update(
        AppEvent::StreamEvent(Box::new(event(1, EventKind::Checkout))),
        t(0),
    );
    // Both pages took 300 ms (a filter scanning 100,000 seats).
    let mut cmds = cmds;
    while let [Command::FetchPage(r)] = cmds.as_slice() {
        let AppEvent::Page(mut reply) = server.answer(r) else {
            unreachable!()
        };
        reply.elapsed_ms = 150;
        cmds = app.update(AppEvent::Page(reply), t(300));
    }
    let cmds = app.update(
        AppEvent::StreamEvent(Box::new(event(2, EventKind::Release))),
        t(400),
    );
    assert_eq!(only_fetch(&cmds).delay_ms, 50 * 300 - 400);
}

#[test]
fn failed_loads_are_retried_less_and_less_often() {
    let (mut app, mut server) = paged_app(10);
    let at = |ms: i64| Timestamp::from_millis(ts(0).as_millis() + ms);
    let mut now = 10_000;
    let mut cmds = app.update(
        AppEvent::StreamEvent(Box::new(event(2, EventKind::Release))),
        at(now),
    );
    let mut waits = Vec::new();
    for _ in 0..6 {
        let req = only_fetch(&cmds);
        now += req.delay_ms as i64;
        let failed = AppEvent::PageFailed {
            id: req.id,
            error: "connection refused".into(),
        };
        app.update(failed, at(now));
        cmds = app.update(AppEvent::Tick, at(now));
        waits.push(only_fetch(&cmds).delay_ms);
    }
    assert_eq!(waits, [500, 1000, 2000, 4000, 8000, 10_000]);
    // Once pages arrive again, loads are as frequent as before.
    now += only_fetch(&cmds).delay_ms as i64;
    app.update(AppEvent::Tick, at(now));
    server.serve(&mut app, cmds);
    let cmds = app.update(
        AppEvent::StreamEvent(Box::new(event(3, EventKind::Release))),
        at(now + 600),
    );
    assert_eq!(only_fetch(&cmds).delay_ms, 0);
}

/// The page request `cmds` makes fails; the retry comes on a tick.
fn fail_then_tick(app: &mut App, cmds: &[Command], now: i64) -> Vec<Command> {
    let at = |ms: i64| Timestamp::from_millis(ts(0).as_millis() + ms);
    let failed = AppEvent::PageFailed {
        id: only_fetch(cmds).id,
        error: "timed out".into(),
    };
    assert!(app.update(failed, at(now)).is_empty());
    app.update(AppEvent::Tick, at(now + 10_000))
}

#[test]
fn a_failed_end_is_retried_as_end_not_as_the_window_it_left() {
    let (mut app, mut server) = paged_app(1000);
    let cmds = app.update(key(KeyCode::End), ts(0));
    let retry = fail_then_tick(&mut app, &cmds, 1_000);
    assert_eq!(
        ask(&retry[0]),
        (String::new(), "holder", true, None),
        "the reversed order again, not a refresh of the first rows"
    );
    server.serve(&mut app, retry);
    assert_eq!(selected(&app), "h00999");
    // A failed shift down is retried from the same cursor.
    let cmds = app.update(key(KeyCode::Home), ts(0));
    server.serve(&mut app, cmds);
    let shift = (0..200)
        .map(|_| app.update(ch('j'), ts(0)))
        .find(|c| !c.is_empty())
        .expect("a shift");
    let retry = fail_then_tick(&mut app, &shift, 20_000);
    assert_eq!(ask(&retry[0]), ask(&shift[0]));
}

#[test]
fn a_key_pressed_after_a_failed_load_wins_over_its_retry() {
    let (mut app, mut server) = paged_app(1000);
    let cmds = app.update(key(KeyCode::End), ts(0));
    server.serve(&mut app, cmds);
    let cmds = app.update(key(KeyCode::Home), ts(0));
    let at = |ms: i64| Timestamp::from_millis(ts(0).as_millis() + ms);
    let failed = AppEvent::PageFailed {
        id: only_fetch(&cmds).id,
        error: "timed out".into(),
    };
    app.update(failed, at(1_000));
    // End again: the window is at the end already, so nothing loads, and
    // the failed Home is not retried behind the user's back.
    assert!(app.update(key(KeyCode::End), at(1_000)).is_empty());
    let refresh = app.update(AppEvent::Tick, at(20_000));
    assert!(ask(&refresh[0]).2, "the end's window refreshed (reversed)");
    server.serve(&mut app, refresh);
    assert_eq!(selected(&app), "h00999");
}

#[test]
fn ticks_refresh_the_window_now_and_then() {
    let (mut app, _) = paged_app(10);
    let period = app.refresh_period_ms();
    assert_eq!(period, REFRESH_MAX_MS, "no licenses known: the longest");
    let at = |ms: i64| Timestamp::from_millis(ts(0).as_millis() + ms);
    assert!(app.update(AppEvent::Tick, at(1000)).is_empty());
    assert_eq!(app.update(AppEvent::Tick, at(period)).len(), 1);
    let mut fast = pool("fast", 3, 1);
    fast.ttl_s = 12.0;
    load(
        &mut app,
        vec![],
        vec![pool("slow", 3, 1), fast],
        ts(0),
        ts(0),
    );
    assert_eq!(
        app.refresh_period_ms(),
        3_000,
        "a quarter of the shortest TTL"
    );
}

#[test]
fn revoke_from_a_later_page() {
    let (mut app, mut server) = paged_app(1000);
    for _ in 0..8 {
        let cmds = app.update(key(KeyCode::PageDown), ts(0));
        server.serve(&mut app, cmds);
    }
    let target = app.selected_seat().unwrap().clone();
    assert!(target.holder.as_str() > "h00150", "{}", target.holder);
    app.update(ch('r'), ts(0));
    assert!(matches!(&app.modal, Some(Modal::Revoke(m)) if m.holder == target.holder));
    let cmds = app.update(ch('y'), ts(0));
    assert_eq!(
        cmds,
        vec![Command::Revoke {
            seat_id: target.seat_id.clone(),
            holder: target.holder.clone(),
            reason: None,
            block_s: None,
            force: false,
        }]
    );
    let cmds = app.update(
        AppEvent::RevokeDone {
            seat_id: target.seat_id.clone(),
            holder: target.holder.clone(),
            outcome: super::super::RevokeOutcome::Revoked,
        },
        ts(1),
    );
    assert!(app.seats.iter().all(|s| s.seat_id != target.seat_id));
    assert_eq!(cmds[0], Command::Refresh);
    let (_, _, _, after) = ask(&cmds[1]);
    assert!(after.is_some(), "the same (later) window again");
}

#[test]
fn freeze_holds_refreshes_but_not_navigation() {
    let (mut app, mut server) = paged_app(1000);
    app.update(ch('f'), ts(0));
    let ev = AppEvent::StreamEvent(Box::new(event(1, EventKind::Checkout)));
    assert!(app.update(ev, ts(5)).is_empty(), "no refresh while frozen");
    assert!(app.update(AppEvent::Tick, ts(60)).is_empty());
    let cmds = app.update(ch('f'), ts(61));
    assert_eq!(cmds.len(), 1, "resuming refreshes");
    server.serve(&mut app, cmds);
    app.update(ch('f'), ts(62));
    for _ in 0..8 {
        let cmds = app.update(key(KeyCode::PageDown), ts(62));
        server.serve(&mut app, cmds);
    }
    assert_eq!(selected(&app), "h00160", "scrolling still pages");
}

#[test]
fn selection_follows_the_seat_when_rows_arrive_above_it() {
    let (mut app, mut server) = paged_app(300);
    for _ in 0..5 {
        app.update(ch('j'), ts(0));
    }
    assert_eq!(selected(&app), "h00005");
    server.seats.insert(0, seat("p", "a-new", "ff", 0, 60));
    let cmds = app.start_load(Goal::Refresh, 0);
    server.serve(&mut app, cmds);
    assert_eq!(selected(&app), "h00005");
    assert_eq!(app.seats[0].holder, "a-new");
}
