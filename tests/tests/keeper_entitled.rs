//! The vendor's application checks the chain (issue 42; the check is
//! `common::entitlement::chain`, the contract docs/src/entitlements.md) against the real `leaseholdd`: `LeaseKeeper` pinned to the
//! vendor's key, and the Python example with `--vendor-key`.
//!
//! Three servers:
//! - honest: its `cad` seats come from an entitlement bound to its own
//!   `kid`, with a version range; the keeper holds the seat, and keeps it
//!   past the end of that entitlement (on the keeper's clock) once the
//!   vendor's renewal is installed;
//! - ended: the same, but no renewal: the keeper's clock past the end, it
//!   releases the seat and stops with `NotEntitled` (the server, on its own
//!   clock, still grants the seat: the judgment is the application's);
//! - dishonest: a server whose `cad` is a plain license (no vendor: the
//!   customer's operator dropped the entitlement check). Served as it is,
//!   it has no entitlements to show. A real server refuses to load a file
//!   bound to another server's `kid`, so the one that shows the honest
//!   server's entitlement is this server behind a small fake
//!   ([`Fake`]): everything forwarded, except the license's entitlements,
//!   which it answers with the honest server's list (as an operator who
//!   copied them would). The lease it hands out is signed with its own key,
//!   so the chain breaks at the binding. The same fake answering an
//!   entitlement bound to the dishonest server itself but for other
//!   versions breaks it at the version.
//!
//! Entitlements are signed with [`Vendor`]. The keeper's clock is the test's
//! ([`TestClock`]), moved forward instead of waited for. Every wait is a
//! bounded poll for a positive condition.

use std::convert::Infallible;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use leasehold_common::Timestamp;
use leasehold_common::client::{
    ClientError, KeeperConfig, KeeperState, LeaseKeeper, LocalClock, SystemClock,
};
use leasehold_common::entitlement::{NotEntitled, VendorKey};
use leasehold_common::token::{Jwks, thumbprint};
use leasehold_tests::vendor::{Vendor, unix_now};
use leasehold_tests::{Server, ServerOptions, eventually, require_tool};
use serde_json::{Value, json};
use tempfile::TempDir;

const KEYRIGHT: &str = "keyright";
/// The version every application here runs.
const VERSION: &str = "2026.2";
/// Leases of 3 s: heartbeats about every second.
const TIMING: &str = "ttl = \"3s\"\nskew = \"500ms\"\nreap_grace = \"1s\"\n";
const SHOWS_WITHIN: Duration = Duration::from_secs(15);

/// A licenses file whose `cad` seats come from keyright's entitlements.
fn vendor_licenses(v: &Vendor) -> String {
    format!(
        "{}\n[[license]]\nid = \"cad\"\nkey = \"cad-key\"\nvendor = \"{KEYRIGHT}\"\n{TIMING}",
        v.toml()
    )
}

/// The dishonest server's: `cad` with seats of its own, no vendor.
fn plain_licenses() -> String {
    format!("\n[[license]]\nid = \"cad\"\nkey = \"cad-key\"\nseats = 5\n{TIMING}")
}

/// Keyright's entitlement `jti` for 2 seats of `cad`, versions 2026.x,
/// issued at `iat`, ending at `exp`, bound to `kid`.
fn claims(jti: &str, iat: i64, exp: i64, kid: &str) -> Value {
    json!({"iss": KEYRIGHT, "jti": jti, "iat": iat, "exp": exp, "aud": [kid],
           "licenses": [{"id": "cad", "seats": 2, "versions": ">=2026, <2027"}]})
}

/// A server and the entitlements directory it reads.
struct Entitled {
    s: Server,
    dir: TempDir,
    /// Its lease key's `kid` (the thumbprint of its JWKS key).
    kid: String,
}

impl Entitled {
    /// A server whose `cad` seats come from keyright's entitlements (none
    /// installed yet).
    async fn start(v: &Vendor) -> Entitled {
        let dir = tempfile::tempdir().expect("entitlements dir");
        let options = ServerOptions::new(&vendor_licenses(v))
            .arg("--entitlements")
            .arg(dir.path().to_str().expect("utf-8 path"));
        let s = Server::start_with(options).await;
        let kid = kid(&s.base).await;
        Entitled { s, dir, kid }
    }

    /// Installs `claims` signed by `v` as `name` (written whole, by
    /// rename), once the server gives it to the application: its JWS.
    async fn install(&self, v: &Vendor, name: &str, claims: &Value) -> String {
        let jws = v.sign(claims);
        let tmp = self.dir.path().join(format!("{name}.tmp"));
        std::fs::write(&tmp, &jws).expect("write entitlement");
        std::fs::rename(&tmp, self.dir.path().join(name)).expect("rename entitlement");
        let what = format!("{name} in the license's entitlements");
        eventually(SHOWS_WITHIN, &what, || async {
            entitlements(&self.s.base)
                .await
                .contains(&jws)
                .then_some(())
        })
        .await;
        jws
    }
}

/// The `kid` of a server's key, computed from the key in its JWKS.
async fn kid(base: &str) -> String {
    let jwks: Jwks = reqwest::get(format!("{base}/.well-known/jwks.json"))
        .await
        .expect("jwks")
        .json()
        .await
        .expect("jwks json");
    thumbprint(&jwks.keys[0]).expect("an Ed25519 key")
}

/// `GET /v1/licenses/cad/entitlements` as the application asks it.
async fn entitlements(base: &str) -> Vec<String> {
    let answer: Value = reqwest::Client::new()
        .get(format!("{base}/v1/licenses/cad/entitlements"))
        .bearer_auth("cad-key")
        .send()
        .await
        .expect("entitlements")
        .json()
        .await
        .expect("entitlements json");
    serde_json::from_value(answer["entitlements"].clone()).expect("a list of JWS")
}

/// The wall clock, moved forward by the test: the application's own clock.
#[derive(Debug, Default)]
struct TestClock {
    wall: SystemClock,
    ahead_ms: AtomicI64,
}

impl TestClock {
    fn jump(&self, d: Duration) {
        let ms = i64::try_from(d.as_millis()).expect("ms fit i64");
        self.ahead_ms.fetch_add(ms, Ordering::Relaxed);
    }
}

impl LocalClock for TestClock {
    fn now(&self) -> Timestamp {
        Timestamp::from_millis(self.wall.now().as_millis() + self.ahead_ms.load(Ordering::Relaxed))
    }
}

/// A keeper of `cad` at `base` pinned to `v`'s key, running [`VERSION`].
fn pinned(base: &str, v: &Vendor, clock: Arc<TestClock>) -> LeaseKeeper {
    let key = VendorKey::parse(&v.public_key()).expect("vendor key");
    let config = KeeperConfig::new(base, "cad", "cad-key", "ann", "ann-laptop")
        .request_timeout(Duration::from_secs(2))
        .vendor_key(key)
        .version(VERSION);
    LeaseKeeper::start_with_clock(config, clock).expect("keeper starts")
}

/// The seat the keeper holds, once it holds one.
async fn held(k: &LeaseKeeper) -> String {
    let lease = tokio::time::timeout(SHOWS_WITHIN, k.wait_for_lease())
        .await
        .expect("an answer in time")
        .unwrap_or_else(|s| panic!("the keeper stopped: {s:?} ({:?})", k.error()));
    lease.seat_id
}

/// Why the keeper stopped, once it stopped: its state's message and error.
async fn stopped(k: &LeaseKeeper) -> (String, ClientError) {
    let mut states = k.subscribe();
    let state = tokio::time::timeout(SHOWS_WITHIN, states.wait_for(KeeperState::is_terminal))
        .await
        .expect("an answer in time")
        .expect("the keeper's state")
        .clone();
    let KeeperState::Failed(message) = state else {
        panic!("expected the keeper to fail, got {state:?}");
    };
    (message, k.error().expect("the error that stopped it"))
}

/// Waits for one more chain check than now, then for a heartbeat after
/// it: the keeper went on holding past that check.
async fn a_check_then_a_heartbeat(k: &LeaseKeeper) {
    let checks = k.stats().entitlement_checks;
    eventually(SHOWS_WITHIN, "one more chain check", || async {
        (k.stats().entitlement_checks > checks).then_some(())
    })
    .await;
    let beats = k.stats().heartbeats;
    eventually(SHOWS_WITHIN, "a heartbeat after it", || async {
        (k.stats().heartbeats > beats).then_some(())
    })
    .await;
}

async fn no_live_seat(s: &Server) {
    eventually(SHOWS_WITHIN, "the seat released", || async {
        (s.live("cad").await == 0).then_some(())
    })
    .await;
}

/// The honest server: the keeper holds its seat, checked after the
/// checkout; at the end of the entitlement on the keeper's clock it checks
/// again, finds the vendor's renewal and keeps the same seat. A keeper
/// that sends no version is refused by the server (so the one that holds
/// sends it).
#[tokio::test]
async fn an_honest_server_keeps_the_seat_through_a_renewal() {
    let v = Vendor::generate(KEYRIGHT);
    let a = Entitled::start(&v).await;
    let t0 = unix_now();
    a.install(&v, "acme.lic", &claims("acme", t0 - 60, t0 + 600, &a.kid))
        .await;

    let clock = Arc::new(TestClock::default());
    let k = pinned(&a.s.base, &v, clock.clone());
    let seat = held(&k).await;
    assert_eq!(k.stats().entitlement_checks, 1, "{:?}", k.stats());
    let versionless = KeeperConfig::new(&a.s.base, "cad", "cad-key", "bob", "bob-laptop");
    let bob = LeaseKeeper::start(versionless).expect("keeper starts");
    let (message, _) = stopped(&bob).await;
    assert!(message.contains("version_not_entitled"), "{message}");
    bob.shutdown().await;

    let renewal = claims("acme", t0 - 30, t0 + 7200, &a.kid);
    a.install(&v, "acme-renewed.lic", &renewal).await;
    // Past the first one's end on the keeper's clock, within the renewal.
    clock.jump(Duration::from_secs(700));
    a_check_then_a_heartbeat(&k).await;
    assert_eq!(k.error(), None);
    let lease = k.state().lease().cloned().expect("still held");
    assert_eq!(lease.seat_id, seat, "the same seat all along");
    assert_eq!(k.stats().checkouts, 1, "{:?}", k.stats());
    k.shutdown().await;
    no_live_seat(&a.s).await;
}

/// The entitlement ended on the keeper's clock (seconds after the
/// checkout): the keeper releases the seat and stops with `NotEntitled`,
/// though the server, on its own clock, still grants it.
#[tokio::test]
async fn a_seat_whose_entitlement_ended_on_the_apps_clock_is_released() {
    let v = Vendor::generate(KEYRIGHT);
    let a = Entitled::start(&v).await;
    let t0 = unix_now();
    a.install(&v, "acme.lic", &claims("acme", t0 - 60, t0 + 45, &a.kid))
        .await;
    let clock = Arc::new(TestClock::default());
    let k = pinned(&a.s.base, &v, clock.clone());
    held(&k).await;
    assert_eq!(a.s.live("cad").await, 1);

    clock.jump(Duration::from_secs(60));
    let (message, error) = stopped(&k).await;
    assert_eq!(error, ClientError::NotEntitled(NotEntitled::NotInForce));
    assert!(message.starts_with("not entitled: "), "{message}");
    no_live_seat(&a.s).await;
    assert_eq!(entitlements(&a.s.base).await.len(), 1, "the server grants");
    assert_eq!(k.stats().checkouts, 1, "no retry: {:?}", k.stats());
    assert!(matches!(k.shutdown().await, KeeperState::Stopped));
}

/// The dishonest server: with no entitlements to show, with the honest
/// server's (bound to its `kid`) or with one bound to it for other
/// versions, the keeper releases the seat and stops saying which link
/// failed.
#[tokio::test]
async fn a_dishonest_server_is_refused_at_the_link_it_breaks() {
    let v = Vendor::generate(KEYRIGHT);
    let a = Entitled::start(&v).await;
    let t0 = unix_now();
    let honest = a
        .install(&v, "acme.lic", &claims("acme", t0 - 60, t0 + 600, &a.kid))
        .await;
    let b = Server::start(&plain_licenses()).await;
    let b_kid = kid(&b.base).await;
    assert_ne!(a.kid, b_kid);
    let mut other_versions = claims("acme", t0 - 60, t0 + 600, &b_kid);
    other_versions["licenses"][0]["versions"] = json!(">=2027");

    let copied = Fake::start(&b.base, vec![honest]).await;
    let ranged = Fake::start(&b.base, vec![v.sign(&other_versions)]).await;
    let cases = [
        (b.base.as_str(), NotEntitled::NoneVerifies),
        (&copied.base, NotEntitled::BoundElsewhere(b_kid.clone())),
        (
            &ranged.base,
            NotEntitled::Version {
                version: VERSION.into(),
                range: ">=2027".into(),
            },
        ),
    ];
    for (base, why) in cases {
        let k = pinned(base, &v, Arc::new(TestClock::default()));
        let (message, error) = stopped(&k).await;
        assert_eq!(error, ClientError::NotEntitled(why.clone()), "{message}");
        assert_eq!(message, format!("not entitled: {why}"));
        assert_eq!(k.stats().checkouts, 0, "never held: {:?}", k.stats());
        no_live_seat(&b).await;
        k.shutdown().await;
    }
}

/// A server that forwards every request to `backend` except
/// `GET /v1/licenses/cad/entitlements`, which it answers with its own list:
/// what a dishonest operator's server would show. Stops when dropped.
struct Fake {
    base: String,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Fake {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Fake {
    async fn start(backend: &str, entitlements: Vec<String>) -> Fake {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let base = format!("http://{}", listener.local_addr().expect("addr"));
        let answer = Bytes::from(json!({ "entitlements": entitlements }).to_string());
        let backend = backend.to_string();
        let http = reqwest::Client::new();
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let (answer, backend, http) = (answer.clone(), backend.clone(), http.clone());
                let service = service_fn(move |req| {
                    let (answer, backend, http) = (answer.clone(), backend.clone(), http.clone());
                    async move { Ok::<_, Infallible>(fake_answer(req, answer, &backend, &http).await) }
                });
                tokio::spawn(http1::Builder::new().serve_connection(TokioIo::new(stream), service));
            }
        });
        Fake { base, task }
    }
}

async fn fake_answer(
    req: Request<Incoming>,
    answer: Bytes,
    backend: &str,
    http: &reqwest::Client,
) -> Response<Full<Bytes>> {
    if req.uri().path() == "/v1/licenses/cad/entitlements" {
        return Response::builder()
            .header("content-type", "application/json")
            .body(Full::new(answer))
            .expect("response");
    }
    let url = format!(
        "{backend}{}",
        req.uri().path_and_query().map_or("/", |p| p.as_str())
    );
    let method = req.method().clone();
    let mut headers = req.headers().clone();
    headers.remove(hyper::header::HOST);
    let body = req.into_body().collect().await.expect("body").to_bytes();
    let Ok(resp) = http
        .request(method, url)
        .headers(headers)
        .body(body)
        .send()
        .await
    else {
        let mut bad = Response::new(Full::new(Bytes::new()));
        *bad.status_mut() = StatusCode::BAD_GATEWAY;
        return bad;
    };
    let mut out = Response::builder().status(resp.status());
    for (name, value) in resp.headers() {
        if name != hyper::header::CONTENT_LENGTH && name != hyper::header::TRANSFER_ENCODING {
            out = out.header(name, value);
        }
    }
    let bytes = resp.bytes().await.expect("backend body");
    out.body(Full::new(bytes)).expect("response")
}

// --- The Python example ---------------------------------------------------

fn script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root")
        .join("assets/examples/leasehold_client.py")
}

fn require_python_deps() {
    require_tool(
        std::process::Command::new("python3").args(["-c", "import jwt, requests, cryptography"]),
        "python3 with the example's packages",
        "install Python 3, then `python3 -m pip install -r assets/examples/requirements.txt`",
    );
}

/// The example run against `base` pinned to `v`'s key, running
/// [`VERSION`], for 2 s: its exit code and output.
async fn run_example(base: &str, v: &Vendor) -> (Option<i32>, String) {
    let out = tokio::time::timeout(
        Duration::from_secs(60),
        tokio::process::Command::new("python3")
            .arg(script())
            .args(["--server", base, "--license", "cad", "--key", "cad-key"])
            .args(["--holder", "py-ann", "--fingerprint", "py-machine"])
            .args(["--vendor-key", &v.public_key(), "--version", VERSION])
            .args(["--seconds", "2"])
            .stdin(Stdio::null())
            .output(),
    )
    .await
    .expect("the example finished within 60 s")
    .expect("run python3");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    (out.status.code(), format!("{stdout}{stderr}"))
}

/// Against the honest server the example checks the chain after its
/// checkout (the version sent: the server's range needs it), heartbeats and
/// releases, exit 0.
#[tokio::test]
async fn the_python_example_holds_a_seat_of_an_honest_server() {
    require_python_deps();
    let v = Vendor::generate(KEYRIGHT);
    let a = Entitled::start(&v).await;
    let t0 = unix_now();
    a.install(&v, "acme.lic", &claims("acme", t0 - 60, t0 + 600, &a.kid))
        .await;
    let (code, out) = run_example(&a.s.base, &v).await;
    assert_eq!(code, Some(0), "{out}");
    let lines: Vec<&str> = out.lines().collect();
    let line = |prefix: &str| {
        lines
            .iter()
            .position(|l| l.starts_with(prefix))
            .unwrap_or_else(|| panic!("no line starting {prefix:?} in:\n{out}"))
    };
    let (checkout, entitled, heartbeat, release) = (
        line("checkout: seat "),
        line("entitled: seat "),
        line("heartbeat: seat "),
        line("release: seat "),
    );
    assert!(
        checkout < entitled && entitled < heartbeat && heartbeat < release,
        "{out}"
    );
    assert!(
        lines[entitled].contains("by keyright's entitlement acme"),
        "{out}"
    );
    assert_eq!(a.s.live("cad").await, 0, "released");
}

/// Against the dishonest server (no entitlements; the honest server's,
/// bound elsewhere) the example releases the seat and exits 3 saying why.
#[tokio::test]
async fn the_python_example_refuses_a_dishonest_server_saying_why() {
    require_python_deps();
    let v = Vendor::generate(KEYRIGHT);
    let a = Entitled::start(&v).await;
    let t0 = unix_now();
    let honest = a
        .install(&v, "acme.lic", &claims("acme", t0 - 60, t0 + 600, &a.kid))
        .await;
    let b = Server::start(&plain_licenses()).await;
    let b_kid = kid(&b.base).await;
    let mut other_versions = claims("acme", t0 - 60, t0 + 600, &b_kid);
    other_versions["licenses"][0]["versions"] = json!(">=2027");
    let copied = Fake::start(&b.base, vec![honest]).await;
    let ranged = Fake::start(&b.base, vec![v.sign(&other_versions)]).await;
    for (base, why) in [
        (b.base.clone(), NotEntitled::NoneVerifies.to_string()),
        (
            copied.base.clone(),
            format!("bound to another server (not kid {b_kid})"),
        ),
        (
            ranged.base.clone(),
            format!("version {VERSION} is not entitled (entitled: >=2027)"),
        ),
    ] {
        let (code, out) = run_example(&base, &v).await;
        assert_eq!(code, Some(3), "{out}");
        assert!(out.contains("error: not entitled: "), "{out}");
        assert!(out.contains(&why), "{why:?} in:\n{out}");
        assert!(!out.contains("heartbeat:"), "{out}");
        assert!(out.contains("release: seat "), "{out}");
        assert_eq!(b.live("cad").await, 0, "released");
    }
}
