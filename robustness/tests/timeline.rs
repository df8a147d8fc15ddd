//! A violation drawn from a small hand-written history: two seats of one
//! license (the second granted over capacity), a refused checkout, an
//! unknown heartbeat, a fault, events; and operations outside the window
//! or of another license, which the picture leaves out.

use leasehold_robustness::check::{Broken, Violation};
use leasehold_robustness::history::{
    Event, Fault, Granted, History, Kind, Micros, Op, Outcome, Stamp, Terms,
};
use leasehold_robustness::timeline;

const SECOND: Micros = 1_000_000;
const MS: Micros = 1_000;
/// The violation's instant: 2026-12-06T00:00:10Z.
const AT: Micros = 1_796_515_210_000_000;
const SEAT_A: &str = "aaaaaaaa000000000000000000000001";
const SEAT_B: &str = "bbbbbbbb000000000000000000000002";
const SEAT_C: &str = "cccccccc000000000000000000000003";

fn op(
    client: u32,
    license: &str,
    kind: Kind,
    seat: Option<&str>,
    sent: Micros,
    outcome: Outcome,
) -> Op {
    Op {
        client,
        license: license.to_string(),
        kind,
        seat: seat.map(str::to_string),
        sent: Stamp::at(sent),
        answered: Stamp::at(sent + 10 * MS),
        outcome,
    }
}

fn granted(seat: &str, issued_at: Micros) -> Outcome {
    let lease = Granted {
        seat: seat.to_string(),
        issued_at,
        expires_at: issued_at + 3 * SECOND,
    };
    Outcome::Ok { lease: Some(lease) }
}

fn event(id: i64, at: Micros, kind: &str, seat: &str, detail: Option<&str>) -> Event {
    Event {
        id,
        at,
        kind: kind.to_string(),
        license: Some("lic-a".to_string()),
        seat: Some(seat.to_string()),
        detail: detail.map(str::to_string),
    }
}

fn terms(license: &str, capacity: u32) -> Terms {
    Terms {
        license: license.to_string(),
        capacity,
        ttl: 3 * SECOND,
        skew: SECOND,
        reap_grace: 2 * SECOND,
    }
}

fn history() -> History {
    let no_seats = Outcome::Fail {
        status: 409,
        error: "no_seats_available".into(),
        reason: None,
    };
    let lost = Outcome::Unknown {
        why: "connection reset".into(),
    };
    History {
        scenario: "hand-written: one seat over capacity".to_string(),
        terms: vec![terms("lic-a", 1), terms("lic-b", 5)],
        ops: vec![
            // 0: long before the window.
            op(
                99,
                "lic-a",
                Kind::Checkout,
                None,
                AT - 10 * SECOND,
                granted(SEAT_C, AT - 10 * SECOND + 5 * MS),
            ),
            // 1, 2: the two grants the violation names.
            op(
                1,
                "lic-a",
                Kind::Checkout,
                None,
                AT - 1500 * MS,
                granted(SEAT_B, AT - 1495 * MS),
            ),
            op(
                2,
                "lic-a",
                Kind::Checkout,
                None,
                AT - 5 * MS,
                granted(SEAT_A, AT),
            ),
            // 3: refused; no seat.
            op(3, "lic-a", Kind::Checkout, None, AT - 300 * MS, no_seats),
            // 4: its answer lost; it may renew seat A at any later instant.
            op(
                2,
                "lic-a",
                Kind::Heartbeat,
                Some(SEAT_A),
                AT + 500 * MS,
                lost,
            ),
            // 5: another license, in the window.
            op(
                5,
                "lic-b",
                Kind::Checkout,
                None,
                AT + 100 * MS,
                granted(SEAT_C, AT + 105 * MS),
            ),
        ],
        faults: vec![Fault {
            what: "stall 1 s & resume".to_string(),
            began: Stamp::at(AT - 200 * MS),
            ended: Stamp::at(AT + 800 * MS),
            stops_writes: false,
        }],
        clock_steps: Vec::new(),
        events: vec![
            event(1, AT - 10 * SECOND + 5 * MS, "checkout", SEAT_C, None),
            event(2, AT - 1495 * MS, "checkout", SEAT_B, None),
            event(
                3,
                AT,
                "checkout",
                SEAT_A,
                Some("<script>alert('seat')</script>"),
            ),
        ],
    }
}

fn violation() -> Violation {
    Violation {
        broken: Broken::OverGrant,
        license: Some("lic-a".to_string()),
        at: AT,
        ops: vec![1, 2],
        seats: vec![SEAT_A.to_string(), SEAT_B.to_string()],
        message: "2 seats counted at once, capacity 1".to_string(),
    }
}

#[test]
fn both_files_are_written_into_a_new_directory() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("violations").join("run-1");
    let (txt, html) = timeline::write(&history(), &violation(), &out, "over-grant").unwrap();
    assert_eq!(txt, out.join("over-grant.txt"));
    assert_eq!(html, out.join("over-grant.html"));
    let text = std::fs::read_to_string(&txt).unwrap();
    let page = std::fs::read_to_string(&html).unwrap();
    assert_eq!(text, timeline::text(&history(), &violation()));
    assert_eq!(page, timeline::html(&history(), &violation()));
}

#[test]
fn the_text_starts_with_the_violation_and_its_seats_lanes() {
    let text = timeline::text(&history(), &violation());
    let first = text.lines().next().unwrap();
    assert!(
        first.starts_with("over-grant at 00:00:10.000000 on lic-a: 2 seats counted"),
        "{text}"
    );
    let lane_a = text.find("\nseat aaaaaaaa").expect("a lane for seat A");
    let lane_b = text.find("\nseat bbbbbbbb").expect("a lane for seat B");
    assert!(
        lane_a < lane_b,
        "the violation's seats in its order:\n{text}"
    );
    let no_seat = text
        .find("\nclient 3, no seat")
        .expect("a lane for the refused checkout");
    assert!(
        lane_b < no_seat,
        "seats before clients without one:\n{text}"
    );
    // Times relative to the violation, the grant of B 1.5 s before it.
    assert!(text.contains("-1.500s..-1.490s   *checkout"), "{text}");
    assert!(text.contains("409 no_seats_available"), "{text}");
    assert!(text.contains("---------- violation ----------"), "{text}");
    assert!(text.contains("fault      stall 1 s & resume"), "{text}");
    assert!(text.contains("event #3 checkout"), "{text}");
}

#[test]
fn what_is_outside_the_window_or_of_another_license_is_left_out() {
    let text = timeline::text(&history(), &violation());
    let page = timeline::html(&history(), &violation());
    for shown in [&text, &page] {
        assert!(
            !shown.contains("client 99"),
            "an op 10 s before the violation"
        );
        assert!(!shown.contains("cccccccc"), "its seat, and lic-b's");
        assert!(!shown.contains("client 5"), "an op of lic-b");
        assert!(!shown.contains("#1 "), "an event 10 s before");
    }
}

#[test]
fn an_unknown_operation_is_drawn_open_ended() {
    let text = timeline::text(&history(), &violation());
    let line = text.lines().find(|l| l.contains("heartbeat")).unwrap();
    assert!(line.contains("+0.500s..?"), "{line}");
    assert!(line.contains("unknown"), "{line}");
    assert!(
        line.contains("gave up at +0.510s: connection reset"),
        "{line}"
    );
    let page = timeline::html(&history(), &violation());
    let bar = page.find(">heartbeat unknown</text>").unwrap();
    let group = &page[page[..bar].rfind("<g class=\"op\">").unwrap()..bar];
    assert!(group.contains("class=\"open\""), "{group}");
    assert!(group.contains(">?</text>"), "{group}");
}

#[test]
fn the_page_is_self_contained_with_lanes_lives_faults_and_the_red_line() {
    let page = timeline::html(&history(), &violation());
    assert!(page.starts_with("<!DOCTYPE html>"));
    for external in ["<link", "src=", "href=", "@import", "url("] {
        assert!(!page.contains(external), "no external assets: {external}");
    }
    assert!(page.contains("2 seats counted at once, capacity 1"));
    assert!(page.contains("class=\"violation\" id=\"violation-line\""));
    let lane_a = page.find(">seat aaaaaaaa<").expect("a lane for seat A");
    let lane_b = page.find(">seat bbbbbbbb<").expect("a lane for seat B");
    assert!(lane_a < lane_b);
    assert!(
        page.contains("<title>aaaaaaaa000000000000000000000001</title>"),
        "full id on hover"
    );
    assert!(page.contains("class=\"life\""), "the leases' lives");
    assert!(page.contains("class=\"skew\""));
    assert!(page.contains("class=\"fault\""));
    assert!(page.contains("stall 1 s &amp; resume"));
    assert!(
        page.contains("class=\"ok named\""),
        "the grants it names stand out"
    );
}

#[test]
fn text_from_the_server_is_escaped_in_the_page() {
    let page = timeline::html(&history(), &violation());
    assert!(!page.contains("<script"), "no script from an event detail");
    assert!(page.contains("&lt;script&gt;alert(&#39;seat&#39;)&lt;/script&gt;"));
    assert!(!page.contains("& resume"), "a bare ampersand");
}
