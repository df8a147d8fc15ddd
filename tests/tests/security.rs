//! Security II against the real `leaseholdd`: the admin API's reply
//! headers, the request-body timeout, the bearer-token limiter, sign-ins
//! that end everywhere (sign-in again, token rotation, open event streams),
//! secret checks at start-up, and trusted proxies. Where a store holds the
//! sign-ins it runs on the store `LEASEHOLD_TEST_STORE` names.

use std::time::Duration;

use leasehold_tests::{Server, ServerOptions, license_toml, read_sse};
use serde_json::json;

#[rustfmt::skip]
const LICENSES: &str = concat!(
    license_toml!("small", seats = 5, ttl = "60s", skew = "5s", reap_grace = "15s"),
);

/// A client that shows redirects and keeps no connection between requests.
fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .pool_max_idle_per_host(0)
        .timeout(Duration::from_secs(20))
        .build()
        .expect("client")
}

fn assert_admin_headers(resp: &reqwest::Response, what: &str) {
    let h = resp.headers();
    assert_eq!(
        h.get("x-content-type-options").map(|v| v.to_str().unwrap()),
        Some("nosniff"),
        "{what}"
    );
    assert_eq!(
        h.get("cache-control").map(|v| v.to_str().unwrap()),
        Some("no-store"),
        "{what}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn admin_replies_are_nosniff_and_never_stored() {
    let server = Server::start(LICENSES).await;
    server
        .take_seat("small", "small-key", json!({"holder": "ann"}))
        .await;
    let admin = |path: &str| {
        client()
            .get(server.url(path))
            .bearer_auth(&server.admin_token)
    };
    for (path, status, ctype) in [
        ("/v1/admin/licenses", 200, "application/json"),
        ("/v1/admin/seats?license=small", 200, "application/json"),
        ("/v1/admin/sessions?license=small", 200, "application/json"),
        (
            "/v1/admin/sessions?license=small&format=csv",
            200,
            "text/csv",
        ),
        ("/v1/admin/seats?limit=nope", 400, "application/json"),
        ("/v1/admin/usage?license=nope", 404, "application/json"),
        ("/v1/admin/no-such-thing", 404, "application/json"),
    ] {
        let resp = admin(path).send().await.unwrap();
        assert_eq!(resp.status().as_u16(), status, "GET {path}");
        let got = resp.headers()["content-type"].to_str().unwrap();
        assert!(got.starts_with(ctype), "GET {path}: {got}");
        assert_admin_headers(&resp, path);
    }
    // Errors before any handler: no token, and a wrong method.
    let resp = client()
        .get(server.url("/v1/admin/seats"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 401);
    assert_admin_headers(&resp, "401 /v1/admin/seats");
    let resp = client()
        .put(server.url("/v1/admin/seats"))
        .bearer_auth(&server.admin_token)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 405);
    assert_admin_headers(&resp, "405 /v1/admin/seats");
    // The event stream too (its headers come before any event).
    let resp = admin("/v1/admin/events/stream").send().await.unwrap();
    assert_eq!(resp.status(), 200);
    assert_admin_headers(&resp, "the event stream");
    drop(resp);
    // The client API is left as it was: a lease is the client's to keep.
    let resp = server
        .checkout("small", "small-key", json!({"holder": "bo"}))
        .await;
    assert_eq!(resp.status(), 201);
    assert!(resp.headers().get("cache-control").is_none());
}

/// Send `head` and the first `body_bytes` of a body on a new connection.
async fn stalled_request(addr: &str, head: &str, body_bytes: &[u8]) -> tokio::net::TcpStream {
    use tokio::io::AsyncWriteExt;
    let mut s = tokio::net::TcpStream::connect(addr).await.expect("connect");
    s.write_all(head.as_bytes()).await.expect("send headers");
    s.write_all(body_bytes).await.expect("send a byte");
    s
}

/// Everything the server sends until it closes the connection (or `limit`).
async fn read_to_close(s: &mut tokio::net::TcpStream, limit: Duration) -> String {
    use tokio::io::AsyncReadExt;
    let mut out = Vec::new();
    tokio::time::timeout(limit, s.read_to_end(&mut out))
        .await
        .expect("the server closes the connection in time")
        .expect("read");
    String::from_utf8_lossy(&out).into_owned()
}

#[tokio::test(flavor = "multi_thread")]
async fn stalled_bodies_are_cut_and_healthz_is_answered_meanwhile() {
    use tokio::io::AsyncWriteExt;
    let server = Server::start_with(
        ServerOptions::new(LICENSES)
            .arg("--max-connections")
            .arg("8")
            .arg("--body-timeout")
            .arg("1s"),
    )
    .await;
    let addr = server.replica_addrs()[0].clone();
    let head = format!(
        "POST /v1/licenses/small/seats HTTP/1.1\r\nHost: {addr}\r\n\
         Authorization: Bearer small-key\r\nContent-Type: application/json\r\n\
         Content-Length: 200\r\n\r\n"
    );
    let start = std::time::Instant::now();
    let mut stalled = Vec::new();
    for _ in 0..8 {
        stalled.push(stalled_request(&addr, &head, b"{").await);
    }
    // Every slot is held by a stalled body: /healthz waits in the backlog
    // until the body timeout frees one, and no longer.
    let mut probe = tokio::net::TcpStream::connect(&addr).await.unwrap();
    probe
        .write_all(
            format!("GET /healthz HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n")
                .as_bytes(),
        )
        .await
        .unwrap();
    let answer = read_to_close(&mut probe, Duration::from_secs(20)).await;
    let waited = start.elapsed();
    eprintln!("healthz answered {waited:?} after the stalled bodies began");
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(
        waited >= Duration::from_millis(700),
        "healthz answered after {waited:?}: the stalled bodies did not hold the slots"
    );
    // About the 1 s body timeout (1.01 s here): at most ten times that.
    assert!(waited < Duration::from_secs(15), "healthz after {waited:?}");
    for (i, s) in stalled.iter_mut().enumerate() {
        let reply = read_to_close(s, Duration::from_secs(5)).await;
        assert!(reply.starts_with("HTTP/1.1 408"), "stalled {i}: {reply}");
        assert!(reply.contains("request_timeout"), "stalled {i}: {reply}");
    }
    // Nothing was changed: no seat, no checkout event.
    assert_eq!(server.live("small").await, 0);
    assert!(server.events_of("checkout").await.is_empty());
    // A body that arrives in time is served as always.
    let resp = server
        .checkout("small", "small-key", json!({"holder": "ok"}))
        .await;
    assert_eq!(resp.status(), 201);
}

#[tokio::test]
async fn the_failure_limit_is_configurable() {
    let server = Server::start_with(ServerOptions::new(LICENSES).arg("--auth-failures=2")).await;
    let base = format!("http://{}", server.replica_addrs()[0]);
    let guesser = client_from([127, 0, 0, 4]);
    let mut statuses = Vec::new();
    for i in 1..=3 {
        let resp = guesser
            .get(format!("{base}/v1/admin/licenses"))
            .bearer_auth(format!("guess-{i:02}-0123456789abcdef"))
            .send()
            .await
            .unwrap();
        statuses.push(resp.status().as_u16());
    }
    assert_eq!(statuses, [401, 401, 429]);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_body_finished_before_the_timeout_is_served() {
    use tokio::io::AsyncWriteExt;
    let server =
        Server::start_with(ServerOptions::new(LICENSES).arg("--body-timeout").arg("2s")).await;
    let addr = server.replica_addrs()[0].clone();
    let body = br#"{"holder": "slow-but-in-time"}"#;
    let head = format!(
        "POST /v1/licenses/small/seats HTTP/1.1\r\nHost: {addr}\r\n\
         Authorization: Bearer small-key\r\nContent-Type: application/json\r\n\
         Connection: close\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    let mut s = stalled_request(&addr, &head, &body[..5]).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    s.write_all(&body[5..]).await.unwrap();
    let reply = read_to_close(&mut s, Duration::from_secs(5)).await;
    assert!(reply.starts_with("HTTP/1.1 201"), "{reply}");
    assert_eq!(server.live("small").await, 1);
}

/// A client whose connections come from `source` (any 127.x.y.z is
/// loopback on Linux, so each is another client address to the server).
fn client_from(source: [u8; 4]) -> reqwest::Client {
    reqwest::Client::builder()
        .local_address(std::net::IpAddr::from(source))
        .pool_max_idle_per_host(0)
        .timeout(Duration::from_secs(20))
        .build()
        .expect("client")
}

async fn error_code(resp: reqwest::Response) -> String {
    let v: serde_json::Value = resp.json().await.expect("json error");
    v["error"].as_str().expect("error code").to_string()
}

#[tokio::test(flavor = "multi_thread")]
async fn wrong_bearer_tokens_are_limited_per_address() {
    let server = Server::start(LICENSES).await;
    // One replica's own address: the limiter counts per server process.
    let base = format!("http://{}", server.replica_addrs()[0]);
    let guesser = client_from([127, 0, 0, 2]);
    let bystander = client_from([127, 0, 0, 3]);
    let get = |c: &reqwest::Client, path: &str, token: &str| {
        c.get(format!("{base}{path}")).bearer_auth(token).send()
    };
    for i in 1..=10 {
        let path = if i % 2 == 0 {
            "/v1/admin/seats"
        } else {
            "/v1/admin/licenses"
        };
        let resp = get(&guesser, path, &format!("guess-{i:02}-0123456789abcdef"))
            .await
            .unwrap();
        assert_eq!(resp.status(), 401, "wrong token {i}");
    }
    let resp = get(&guesser, "/v1/admin/licenses", "guess-11-0123456789abcdef")
        .await
        .unwrap();
    assert_eq!(resp.status(), 429, "the 11th wrong token");
    let wait: u64 = resp.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=60).contains(&wait), "Retry-After {wait}");
    assert_eq!(error_code(resp).await, "rate_limited");
    // Blocked means blocked: the right token gets no answer about itself,
    // nor does the viewer token.
    for token in [server.admin_token.clone(), server.viewer_token()] {
        let resp = get(&guesser, "/v1/admin/licenses", &token).await.unwrap();
        assert_eq!(resp.status(), 429);
    }
    // Another address is not affected: its right token works, its wrong
    // one is a plain 401.
    let resp = get(&bystander, "/v1/admin/licenses", &server.admin_token)
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let resp = get(
        &bystander,
        "/v1/admin/licenses",
        "also-wrong-0123456789abcdef",
    )
    .await
    .unwrap();
    assert_eq!(resp.status(), 401);
    // Nor are the client endpoints of the blocked address (license keys are
    // not the admin's secret).
    let resp = guesser
        .post(format!("{base}/v1/licenses/small/seats"))
        .bearer_auth("small-key")
        .json(&json!({"holder": "ann"}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 201);
}

async fn login_with(server: &Server, token: &str, cookie: Option<&str>) -> reqwest::Response {
    let mut req = client()
        .post(server.url("/ui/login"))
        .json(&json!({ "token": token }));
    if let Some(c) = cookie {
        req = req.header("cookie", c);
    }
    req.send().await.expect("login")
}

/// Sign in; the `name=value` of the sign-in cookie.
async fn sign_in(server: &Server, token: &str) -> String {
    let resp = login_with(server, token, None).await;
    assert_eq!(resp.status(), 204, "login");
    cookie_pair(&resp)
}

fn cookie_pair(resp: &reqwest::Response) -> String {
    let set = resp.headers()["set-cookie"].to_str().expect("ascii");
    set.split(';').next().expect("pair").to_string()
}

async fn status_with_cookie(server: &Server, path: &str, cookie: &str) -> u16 {
    client()
        .get(server.url(path))
        .header("cookie", cookie)
        .send()
        .await
        .expect("request")
        .status()
        .as_u16()
}

#[tokio::test(flavor = "multi_thread")]
async fn signing_in_again_ends_the_previous_sign_in() {
    let server = Server::start(LICENSES).await;
    let first = sign_in(&server, &server.admin_token).await;
    assert_eq!(
        status_with_cookie(&server, "/ui/session", &first).await,
        200
    );
    // The same browser signs in again (its cookie comes along), as a viewer.
    let resp = login_with(&server, &server.viewer_token(), Some(&first)).await;
    assert_eq!(resp.status(), 204);
    let second = cookie_pair(&resp);
    assert_ne!(first, second);
    assert_eq!(
        status_with_cookie(&server, "/ui/session", &first).await,
        401
    );
    assert_eq!(
        status_with_cookie(&server, "/v1/admin/seats", &first).await,
        401
    );
    assert_eq!(
        status_with_cookie(&server, "/ui/session", &second).await,
        200
    );
    // A failed sign-in ends nothing.
    let resp = login_with(&server, "wrong-token-0123456789", Some(&second)).await;
    assert_eq!(resp.status(), 401);
    assert_eq!(
        status_with_cookie(&server, "/ui/session", &second).await,
        200
    );
    // Made-up cookies of any shape are simply not signed in.
    for bad in [
        "leasehold_session=",
        "leasehold_session=abc",
        "leasehold_session=ZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZ",
        &format!("leasehold_session={}", "0".repeat(64)),
        &format!("leasehold_session={}", "A".repeat(64)),
        &format!("leasehold_session={}", "a".repeat(10_000)),
    ] {
        assert_eq!(
            status_with_cookie(&server, "/v1/admin/seats", bad).await,
            401,
            "{:.40}",
            bad
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn background_refreshes_do_not_keep_a_sign_in_alive() {
    let server = Server::start_with(
        ServerOptions::new(LICENSES)
            .arg("--ui-idle-timeout")
            .arg("4s"),
    )
    .await;
    let person = sign_in(&server, &server.admin_token).await;
    let tab = sign_in(&server, &server.admin_token).await;
    // The abandoned tab keeps its event stream open and refreshes by itself.
    let mut tab_stream = open_stream(&server, Some(&tab), None).await;
    let deadline = std::time::Instant::now() + Duration::from_millis(6000);
    while std::time::Instant::now() < deadline {
        for (cookie, background) in [(&person, false), (&tab, true)] {
            let mut req = client()
                .get(server.url("/v1/admin/licenses"))
                .header("cookie", cookie.as_str());
            if background {
                req = req.header("x-leasehold-background", "1");
            }
            let status = req.send().await.unwrap().status();
            // The tab may already be idle-expired near the end.
            assert!(status == 200 || (background && status == 401), "{status}");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(
        status_with_cookie(&server, "/v1/admin/licenses", &person).await,
        200,
        "used by a person"
    );
    assert_eq!(
        status_with_cookie(&server, "/v1/admin/licenses", &tab).await,
        401,
        "only background use for 6 s"
    );
    // And its stream, which never counted as use, has ended with it.
    ends_within(&mut tab_stream, Duration::from_secs(3)).await;
}

/// `leaseholdd` run to its exit with `env` and `args` on a fresh data dir;
/// (success, stderr).
fn start_expecting_exit(
    data_dir: &std::path::Path,
    env: &[(&str, &str)],
    args: &[&str],
) -> (bool, String) {
    let licenses = data_dir.with_extension("toml");
    std::fs::write(&licenses, LICENSES).unwrap();
    let out = std::process::Command::new(leasehold_tests::leaseholdd_bin())
        .arg("--listen")
        .arg("127.0.0.1:0")
        .arg("--data-dir")
        .arg(data_dir)
        .arg("--licenses")
        .arg(&licenses)
        .args(args)
        .env_remove("LEASEHOLD_ADMIN_TOKEN")
        .env_remove("LEASEHOLD_VIEWER_TOKEN")
        .envs(env.iter().copied())
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run leaseholdd");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn one_error_line(stderr: &str) -> String {
    let errors: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("leaseholdd: error:"))
        .collect();
    assert_eq!(errors.len(), 1, "one clear line: {stderr}");
    errors[0].to_string()
}

#[tokio::test(flavor = "multi_thread")]
async fn short_tokens_and_loose_secret_files_are_refused_at_start() {
    use std::os::unix::fs::PermissionsExt;
    let tmp = tempfile::tempdir().unwrap();
    for (var, token) in [
        ("LEASEHOLD_ADMIN_TOKEN", "x"),
        ("LEASEHOLD_ADMIN_TOKEN", "fifteen-chars-x"),
        ("LEASEHOLD_VIEWER_TOKEN", "short"),
    ] {
        let (ok, stderr) = start_expecting_exit(&tmp.path().join("short"), &[(var, token)], &[]);
        assert!(!ok, "{var}={token} accepted");
        let line = one_error_line(&stderr);
        assert!(line.contains(var) && line.contains("at least 16"), "{line}");
    }
    // Sixteen characters are enough.
    let dir = tmp.path().join("sixteen");
    let server = Server::start_with(ServerOptions {
        env: vec![("LEASEHOLD_ADMIN_TOKEN".into(), "sixteen-chars-ok".into())],
        data_dir: Some(dir),
        ..ServerOptions::new(LICENSES)
    })
    .await;
    let resp = client()
        .get(server.url("/v1/admin/licenses"))
        .bearer_auth("sixteen-chars-ok")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    drop(server);

    // A secret file others may read: refused, saying how to fix it.
    let dir = tmp.path().join("loose");
    std::fs::create_dir_all(&dir).unwrap();
    for (file, mode) in [
        ("admin.token", 0o644),
        ("signing.key", 0o640),
        ("viewer.token", 0o606),
    ] {
        let dir = dir.join(file);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(file);
        let body = if file == "signing.key" {
            "11".repeat(32)
        } else {
            "t".repeat(32)
        };
        std::fs::write(&path, body).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
        let (ok, stderr) = start_expecting_exit(&dir, &[], &[]);
        assert!(!ok, "{file} mode {mode:o} accepted");
        let line = one_error_line(&stderr);
        assert!(
            line.contains(&format!("chmod 600 {}", path.display())),
            "{line}"
        );
        assert!(line.contains("--allow-insecure-files"), "{line}");
    }
    // --allow-insecure-files starts anyway (with a warning).
    let lax = dir.join("admin.token");
    let server = Server::start_with(ServerOptions {
        data_dir: Some(lax),
        ..ServerOptions::new(LICENSES).arg("--allow-insecure-files")
    })
    .await;
    assert!(
        server.logs().contains("allowed by --allow-insecure-files"),
        "{}",
        server.logs()
    );
    assert_eq!(server.admin_token, "t".repeat(32));
}

/// Replace `data_dir/file` with `token`, kept 0600 as the server demands.
fn write_secret(data_dir: &std::path::Path, file: &str, token: &str) {
    use std::os::unix::fs::PermissionsExt;
    let path = data_dir.join(file);
    let tmp = data_dir.join(format!("{file}.new"));
    std::fs::write(&tmp, format!("{token}\n")).unwrap();
    std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o600)).unwrap();
    std::fs::rename(&tmp, &path).unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn rotating_a_token_ends_the_sign_ins_it_made() {
    const OLD_ADMIN: &str = "old-admin-token-0123456789abcdef";
    const NEW_ADMIN: &str = "new-admin-token-0123456789abcdef";
    let mut server = Server::start_with(ServerOptions {
        env: vec![
            ("LEASEHOLD_ADMIN_TOKEN".into(), OLD_ADMIN.into()),
            // On PostgreSQL a replica refuses tokens that differ from the
            // cluster's unless told this is a rotation.
            ("LEASEHOLD_ROTATE_TOKENS".into(), "true".into()),
        ],
        ..ServerOptions::new(LICENSES)
    })
    .await;
    let admin = sign_in(&server, OLD_ADMIN).await;
    let viewer = sign_in(&server, &server.viewer_token()).await;
    // A restart alone ends nothing.
    server.restart().await;
    for cookie in [&admin, &viewer] {
        assert_eq!(
            status_with_cookie(&server, "/ui/session", cookie).await,
            200
        );
    }

    // A new admin token (by environment): every admin sign-in ends, the
    // viewer's stays.
    server.set_env("LEASEHOLD_ADMIN_TOKEN", NEW_ADMIN);
    server.restart().await;
    for path in ["/ui/session", "/v1/admin/seats", "/v1/admin/licenses"] {
        assert_eq!(
            status_with_cookie(&server, path, &admin).await,
            401,
            "{path}"
        );
        assert_eq!(
            status_with_cookie(&server, path, &viewer).await,
            200,
            "{path}"
        );
    }
    let bearer = |token: &str| {
        client()
            .get(server.url("/v1/admin/licenses"))
            .bearer_auth(token)
            .send()
    };
    assert_eq!(bearer(OLD_ADMIN).await.unwrap().status(), 401);
    assert_eq!(bearer(NEW_ADMIN).await.unwrap().status(), 200);
    let admin2 = sign_in(&server, NEW_ADMIN).await;

    // A new viewer.token file: every viewer sign-in ends, the admin's stays.
    let new_viewer = "new-viewer-token-from-the-file-0123";
    write_secret(&server.data_dir(), "viewer.token", new_viewer);
    server.restart().await;
    assert_eq!(server.viewer_token(), new_viewer);
    for path in ["/ui/session", "/v1/admin/seats"] {
        assert_eq!(
            status_with_cookie(&server, path, &viewer).await,
            401,
            "{path}"
        );
        assert_eq!(
            status_with_cookie(&server, path, &admin2).await,
            200,
            "{path}"
        );
    }
    let viewer2 = sign_in(&server, new_viewer).await;
    assert_eq!(
        status_with_cookie(&server, "/ui/session", &viewer2).await,
        200
    );
    // Every replica agrees (on PostgreSQL with two, each on its own).
    for addr in server.replica_addrs() {
        for (cookie, status) in [
            (&admin, 401),
            (&viewer, 401),
            (&admin2, 200),
            (&viewer2, 200),
        ] {
            let got = client()
                .get(format!("http://{addr}/v1/admin/seats"))
                .header("cookie", cookie.as_str())
                .send()
                .await
                .unwrap()
                .status();
            assert_eq!(got.as_u16(), status, "replica {addr}");
        }
    }
}

/// Open the event stream with a sign-in cookie or a bearer token.
async fn open_stream(
    server: &Server,
    cookie: Option<&str>,
    bearer: Option<&str>,
) -> reqwest::Response {
    // No overall timeout: the stream is meant to stay open.
    let mut req = reqwest::Client::new().get(server.url("/v1/admin/events/stream"));
    if let Some(c) = cookie {
        req = req.header("cookie", c);
    }
    if let Some(b) = bearer {
        req = req.bearer_auth(b);
    }
    let resp = req.send().await.expect("open the stream");
    assert_eq!(resp.status(), 200, "stream opened");
    resp
}

/// Read `stream` until the server ends it; panics if it is still open
/// after `limit`. Returns how long that took.
async fn ends_within(stream: &mut reqwest::Response, limit: Duration) -> Duration {
    let start = std::time::Instant::now();
    loop {
        match tokio::time::timeout_at(
            tokio::time::Instant::from_std(start + limit),
            stream.chunk(),
        )
        .await
        {
            Err(_) => panic!("the stream is still open after {limit:?}"),
            Ok(Ok(Some(_))) => continue,
            Ok(Ok(None)) | Ok(Err(_)) => return start.elapsed(),
        }
    }
}

/// A checkout, so every open stream has an event to deliver.
async fn an_event(server: &Server, holder: &str) -> i64 {
    let lease = server
        .take_seat("small", "small-key", json!({"holder": holder}))
        .await;
    let events = server.events_of("checkout").await;
    events
        .iter()
        .rev()
        .find(|e| e["seat_id"] == lease.seat_id.as_str())
        .and_then(|e| e["id"].as_i64())
        .expect("the checkout's event")
}

#[tokio::test(flavor = "multi_thread")]
async fn a_sign_in_stream_ends_at_logout_and_a_bearer_stream_does_not() {
    let server = Server::start(LICENSES).await;
    let cookie = sign_in(&server, &server.admin_token).await;
    let mut by_sign_in = open_stream(&server, Some(&cookie), None).await;
    let mut by_bearer = open_stream(&server, None, Some(&server.admin_token)).await;
    let id = an_event(&server, "before-logout").await;
    assert_eq!(read_sse(&mut by_sign_in, 1).await[0].0, id);
    assert_eq!(read_sse(&mut by_bearer, 1).await[0].0, id);

    let csrf = client()
        .get(server.url("/ui/session"))
        .header("cookie", &cookie)
        .send()
        .await
        .unwrap()
        .json::<serde_json::Value>()
        .await
        .unwrap()["csrf_token"]
        .as_str()
        .unwrap()
        .to_string();
    let resp = client()
        .post(server.url("/ui/logout"))
        .header("cookie", &cookie)
        .header("x-csrf-token", csrf)
        .header("sec-fetch-site", "same-origin")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 204);
    let took = ends_within(&mut by_sign_in, Duration::from_secs(5)).await;
    eprintln!("the sign-in's stream ended {took:?} after logout");
    // The bearer stream goes on.
    let id = an_event(&server, "after-logout").await;
    assert_eq!(read_sse(&mut by_bearer, 1).await[0].0, id);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_sign_in_stream_ends_at_the_sign_in_lifetime() {
    let server = Server::start_with(
        ServerOptions::new(LICENSES)
            .arg("--ui-session-lifetime")
            .arg("3s"),
    )
    .await;
    let cookie = sign_in(&server, &server.viewer_token()).await;
    let signed_in = std::time::Instant::now();
    let mut by_sign_in = open_stream(&server, Some(&cookie), None).await;
    let mut by_bearer = open_stream(&server, None, Some(&server.viewer_token())).await;
    let id = an_event(&server, "while-valid").await;
    assert_eq!(read_sse(&mut by_sign_in, 1).await[0].0, id);
    assert_eq!(read_sse(&mut by_bearer, 1).await[0].0, id);
    ends_within(&mut by_sign_in, Duration::from_secs(8)).await;
    let lived = signed_in.elapsed();
    assert!(
        lived >= Duration::from_millis(2500),
        "ended after {lived:?}, before its lifetime"
    );
    assert_eq!(
        status_with_cookie(&server, "/ui/session", &cookie).await,
        401
    );
    let id = an_event(&server, "after-lifetime").await;
    assert_eq!(read_sse(&mut by_bearer, 1).await[0].0, id);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_sign_in_stream_ends_at_a_token_change_and_cannot_reopen() {
    const OLD: &str = "stream-old-admin-token-0123456789";
    let mut server = Server::start_with(ServerOptions {
        env: vec![
            ("LEASEHOLD_ADMIN_TOKEN".into(), OLD.into()),
            ("LEASEHOLD_ROTATE_TOKENS".into(), "true".into()),
        ],
        ..ServerOptions::new(LICENSES)
    })
    .await;
    let cookie = sign_in(&server, OLD).await;
    let mut by_sign_in = open_stream(&server, Some(&cookie), None).await;
    server.set_env("LEASEHOLD_ADMIN_TOKEN", "stream-new-admin-token-0123456789");
    server.restart().await;
    ends_within(&mut by_sign_in, Duration::from_secs(5)).await;
    // The browser's EventSource reconnects: refused.
    let resp = reqwest::Client::new()
        .get(server.url("/v1/admin/events/stream"))
        .header("cookie", &cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 401);
}

/// A sign-in from `c` to `base` with `token` and extra headers.
async fn login_from(
    c: &reqwest::Client,
    base: &str,
    token: &str,
    headers: &[(&str, &str)],
) -> reqwest::Response {
    let mut req = c
        .post(format!("{base}/ui/login"))
        .json(&json!({ "token": token }));
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    req.send().await.expect("login")
}

#[tokio::test(flavor = "multi_thread")]
async fn only_trusted_proxies_name_the_client_and_the_scheme() {
    let server = Server::start_with(
        ServerOptions::new(LICENSES)
            .arg("--trusted-proxies")
            .arg("127.0.0.2/32,10.0.0.0/8"),
    )
    .await;
    // One replica's own address: the limiter counts per server process.
    let base = format!("http://{}", server.replica_addrs()[0]);
    let proxy = client_from([127, 0, 0, 2]);
    let stranger = client_from([127, 0, 0, 3]);
    let wrong = "wrong-token-0123456789abcdef";

    // Behind the trusted proxy the client is the first untrusted hop from
    // the right (what the client itself wrote in front is not believed).
    for i in 0..10 {
        let xff = format!("198.51.100.{i}, 203.0.113.7, 10.1.2.3");
        let resp = login_from(&proxy, &base, wrong, &[("x-forwarded-for", &xff)]).await;
        assert_eq!(resp.status(), 401, "attempt {i}");
    }
    let resp = login_from(&proxy, &base, wrong, &[("x-forwarded-for", "203.0.113.7")]).await;
    assert_eq!(resp.status(), 429, "203.0.113.7 is limited");
    let resp = login_from(&proxy, &base, wrong, &[("x-forwarded-for", "203.0.113.8")]).await;
    assert_eq!(
        resp.status(),
        401,
        "another client behind the same proxy is not"
    );
    // Its X-Forwarded-Proto is believed: the cookie is Secure.
    let admin = server.admin_token.clone();
    let resp = login_from(
        &proxy,
        &base,
        &admin,
        &[
            ("x-forwarded-proto", "https"),
            ("x-forwarded-for", "203.0.113.9"),
        ],
    )
    .await;
    assert_eq!(resp.status(), 204);
    let set = resp.headers()["set-cookie"].to_str().unwrap().to_string();
    assert!(set.contains("; Secure"), "{set}");

    // An untrusted peer (loopback, but not in the list): its headers are
    // ignored, so a new X-Forwarded-For per attempt escapes nothing.
    for i in 0..10 {
        let xff = format!("192.0.2.{i}");
        let resp = login_from(&stranger, &base, wrong, &[("x-forwarded-for", &xff)]).await;
        assert_eq!(resp.status(), 401, "attempt {i}");
    }
    let resp = login_from(
        &stranger,
        &base,
        wrong,
        &[("x-forwarded-for", "192.0.2.200")],
    )
    .await;
    assert_eq!(
        resp.status(),
        429,
        "rotating X-Forwarded-For escaped the limiter"
    );
    let resp = client_from([127, 0, 0, 4])
        .post(format!("{base}/ui/login"))
        .header("x-forwarded-proto", "https")
        .json(&json!({ "token": admin }))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 204);
    let set = resp.headers()["set-cookie"].to_str().unwrap();
    assert!(
        !set.contains("Secure"),
        "an untrusted peer's X-Forwarded-Proto: {set}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_public_url_is_the_only_origin_and_makes_the_cookie_secure() {
    const PUBLIC: &str = "https://leasehold.example.com";
    let server = Server::start_with(
        ServerOptions::new(LICENSES)
            .arg("--public-url")
            .arg(&format!("{PUBLIC}/")),
    )
    .await;
    let own_host = format!("http://{}", server.addr);
    let resp = login_from(
        &client(),
        &server.base,
        &server.admin_token,
        &[("origin", &own_host)],
    )
    .await;
    assert_eq!(
        resp.status(),
        403,
        "the Host's origin is not the public one"
    );
    let resp = login_from(
        &client(),
        &server.base,
        &server.admin_token,
        &[("origin", PUBLIC)],
    )
    .await;
    assert_eq!(resp.status(), 204);
    let set = resp.headers()["set-cookie"].to_str().unwrap().to_string();
    assert!(set.starts_with("__Host-leasehold_session="), "{set}");
    for attr in ["; Secure", "; Path=/", "; HttpOnly", "; SameSite=Strict"] {
        assert!(set.contains(attr), "{set}");
    }
    assert!(!set.to_ascii_lowercase().contains("domain="), "{set}");
    let cookie = cookie_pair(&resp);
    let id = cookie.split_once('=').unwrap().1.to_string();
    assert_eq!(
        status_with_cookie(&server, "/ui/session", &cookie).await,
        200
    );
    // Without its prefix (as a plain-HTTP page could set it) it is no sign-in.
    let plain = format!("leasehold_session={id}");
    assert_eq!(
        status_with_cookie(&server, "/ui/session", &plain).await,
        401
    );

    // A revoke with the cookie: only the public origin passes the CSRF check.
    let lease = server
        .take_seat("small", "small-key", json!({"holder": "ann"}))
        .await;
    let sign_in: serde_json::Value = client()
        .get(server.url("/ui/session"))
        .header("cookie", &cookie)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let csrf = sign_in["csrf_token"].as_str().unwrap();
    let revoke = |origin: &str| {
        client()
            .delete(server.url(&format!("/v1/admin/seats/{}", lease.seat_id)))
            .header("cookie", &cookie)
            .header("x-csrf-token", csrf)
            .header("origin", origin)
            .send()
    };
    let resp = revoke(&own_host).await.unwrap();
    assert_eq!(resp.status(), 403);
    assert_eq!(error_code(resp).await, "csrf_failed");
    assert_eq!(server.live("small").await, 1, "nothing changed");
    assert_eq!(revoke(PUBLIC).await.unwrap().status(), 204);
    assert_eq!(server.live("small").await, 0);
}
