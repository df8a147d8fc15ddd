//! The console's holders table paged by the server, end to end: the real
//! `leasehold` in tmux against the real `leaseholdd` holding a few thousand
//! seats. The console holds two pages at a time, so End, PgDn, the filter
//! and a checkout made elsewhere all go through
//! `GET /v1/admin/seats?q=&sort=&order=&limit=&after=`. Fails, saying so,
//! without tmux.

use std::time::{Duration, Instant};

use leasehold_tests::Server;
use leasehold_tests::tmux::{Tmux, console_command, require_tmux};
use serde_json::json;

const N: usize = 3_000;

#[tokio::test]
async fn the_console_pages_thousands_of_holders_through_the_server() {
    require_tmux();
    let server = Server::start(concat!(
        "\n[[license]]\nid = \"big\"\nkey = \"big-key\"\nseats = 5000\n",
        "ttl = \"1h\"\nskew = \"5s\"\nreap_grace = \"15s\"\n"
    ))
    .await;
    server.preload("big", N).await;
    let logs = tempfile::tempdir().unwrap();
    let log = logs.path().join("c.log");
    let tmux = Tmux::start("paging", &console_command(&server, &log, "")).with_log(&log);

    // The first page, then sorted by holder (the selection stays on its
    // seat, so Home for the top): the first name.
    tmux.wait_for("the first page", Duration::from_secs(20), |s| {
        s.contains(&format!("Holders {N} of {N}"))
    })
    .await;
    tmux.keys(&["s"]);
    tmux.wait_for("sorted by holder", Duration::from_secs(10), |s| {
        s.contains("sort: holder")
    })
    .await;
    tmux.keys(&["Home"]);
    tmux.wait_for("the first holder", Duration::from_secs(10), |s| {
        s.contains(&selected("user-000000"))
    })
    .await;

    // End: the last holder, without walking the pages in between.
    tmux.keys(&["End"]);
    tmux.wait_for("the last holder after End", Duration::from_secs(10), |s| {
        s.contains(&selected(&last())) && !s.contains("user-000000")
    })
    .await;

    // Home, then PgDn page after page to the last holder.
    tmux.keys(&["Home"]);
    tmux.wait_for("the first holder again", Duration::from_secs(10), |s| {
        s.contains(&selected("user-000000"))
    })
    .await;
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let screen = tmux.screen();
        if screen.contains(&selected(&last())) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "PgDn never reached {}; screen:\n{screen}",
            last()
        );
        tmux.keys(&["PageDown"; 5]);
        tokio::time::sleep(Duration::from_millis(150)).await;
    }

    // The filter goes to the server and finds one holder among thousands.
    tmux.keys(&["/"]);
    tmux.type_text("user-001234");
    tmux.keys(&["Enter"]);
    let screen = tmux
        .wait_for("the filtered holder", Duration::from_secs(10), |s| {
            s.contains(&format!("Holders 1 of {N}")) && s.contains("user-001234")
        })
        .await;
    assert!(!screen.contains("user-001235"), "{screen}");
    tmux.keys(&["Escape"]);
    tmux.wait_for("the filter cleared", Duration::from_secs(10), |s| {
        s.contains("user-000000")
    })
    .await;

    // A checkout over HTTP shows without a key press (SSE, then a refetch);
    // sorted by holder it is the first row.
    server
        .take_seat("big", "big-key", json!({ "holder": "aaa-new-holder" }))
        .await;
    tmux.wait_for("the new holder", Duration::from_secs(10), |s| {
        s.contains("aaa-new-holder") && s.contains(&format!("Holders {} of {}", N + 1, N + 1))
    })
    .await;

    tmux.keys(&["q"]);
}

/// The line under the table names the selected holder. (The events pane
/// may show any recent holder's name, so a name alone proves nothing.)
fn selected(holder: &str) -> String {
    format!(" holder {holder} · ")
}

fn last() -> String {
    format!("user-{:06}", N - 1)
}
