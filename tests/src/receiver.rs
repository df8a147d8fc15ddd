//! A webhook receiver for the end-to-end tests: a real HTTP/1.1 server
//! (tokio + hyper) on a loopback port that records every request it gets
//! (path, headers, raw body, when) and checks its `Leasehold-Signature`
//! on its own, with a hand-written HMAC-SHA256 (not the server's code).
//!
//! It can be told how to answer: `200` (the default), any other status,
//! a redirect, or a stall (answer only after a long sleep); answers can
//! be scripted one request at a time (`500`, `500`, then the default). It
//! can also be down: its port stays reserved (bound, not listening, so
//! connections are refused at once) and it comes up on the same port.
//!
//! Not part of the library (its HMAC needs the `sha2` dev-dependency):
//! test files include it with `#[path = "../src/receiver.rs"] mod receiver;`.

#![allow(dead_code)] // each test file uses part of it

use std::collections::VecDeque;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use sha2::{Digest, Sha256};
use tokio::net::{TcpListener, TcpSocket};
use tokio::sync::Notify;
use tokio::task::{JoinHandle, JoinSet};

/// How the receiver answers one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// This status, with a short body.
    Status(u16),
    /// `302 Found` with this `Location`.
    Redirect(String),
    /// Sleep this long, then `200` (if the client is still there).
    Stall(Duration),
}

impl Answer {
    pub const OK: Answer = Answer::Status(200);

    /// Whether the answer is a success the client can see: a 2xx given
    /// without stalling.
    pub fn is_success(&self) -> bool {
        matches!(self, Answer::Status(s) if (200..300).contains(s))
    }
}

/// A verified `Leasehold-Signature`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Signature {
    /// The signing time, unix seconds.
    pub t: u64,
    /// Lowercase hex of HMAC-SHA256(secret, "<t>.<body>").
    pub v1: String,
}

/// One request the receiver got.
#[derive(Debug, Clone)]
pub struct Received {
    /// When it arrived (body read).
    pub at: Instant,
    /// When it arrived, unix seconds.
    pub unix: u64,
    pub peer: SocketAddr,
    pub method: String,
    pub path: String,
    /// Names lowercased, in arrival order.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// What the receiver answered (or was going to).
    pub answer: Answer,
    /// The signature checked against the receiver's secret and the raw body.
    pub signature: Result<Signature, String>,
}

impl Received {
    /// The first value of header `name` (any case).
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.as_str())
    }

    /// Every value of header `name`.
    pub fn headers_named(&self, name: &str) -> Vec<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .filter(|(n, _)| *n == name)
            .map(|(_, v)| v.as_str())
            .collect()
    }

    /// `Leasehold-Delivery`; panics without it.
    pub fn delivery_id(&self) -> &str {
        self.header("leasehold-delivery")
            .unwrap_or_else(|| panic!("no Leasehold-Delivery header: {self:?}"))
    }

    pub fn text(&self) -> &str {
        std::str::from_utf8(&self.body).expect("a UTF-8 body")
    }

    /// The body as JSON; panics unless it is.
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("body is not JSON ({e}): {}", self.text()))
    }

    /// The verified signature; panics (with why) unless it verified.
    pub fn valid_signature(&self) -> &Signature {
        match &self.signature {
            Ok(sig) => sig,
            Err(e) => panic!(
                "bad Leasehold-Signature ({e}) on delivery {:?}: {}",
                self.header("leasehold-delivery"),
                self.text()
            ),
        }
    }
}

struct Inner {
    secret: Mutex<String>,
    received: Mutex<Vec<Received>>,
    script: Mutex<VecDeque<Answer>>,
    default: Mutex<Answer>,
    arrived: Notify,
}

impl Inner {
    fn next_answer(&self) -> Answer {
        let scripted = self.script.lock().unwrap().pop_front();
        scripted.unwrap_or_else(|| self.default.lock().unwrap().clone())
    }
}

/// The receiver. Stops listening (and drops its connections) when dropped.
pub struct Receiver {
    inner: Arc<Inner>,
    addr: SocketAddr,
    /// Up: the accept loop (it owns the listener and every connection).
    serving: Mutex<Option<JoinHandle<()>>>,
    /// Down: the port, bound but not listening (connections refused).
    reserved: Mutex<Option<TcpSocket>>,
}

impl std::fmt::Debug for Receiver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Receiver")
            .field("addr", &self.addr)
            .finish()
    }
}

fn bound_socket(addr: SocketAddr) -> TcpSocket {
    let socket = TcpSocket::new_v4().expect("a TCP socket");
    socket.set_reuseaddr(true).expect("SO_REUSEADDR");
    socket
        .bind(addr)
        .unwrap_or_else(|e| panic!("receiver: cannot bind {addr}: {e}"));
    socket
}

impl Receiver {
    /// Listening on a free loopback port, checking signatures with `secret`.
    pub async fn start(secret: &str) -> Receiver {
        let r = Receiver::down(secret);
        r.up();
        r
    }

    /// Down from the start: the port is reserved, connections are refused
    /// until [`Receiver::up`].
    pub fn down(secret: &str) -> Receiver {
        let socket = bound_socket("127.0.0.1:0".parse().unwrap());
        let addr = socket.local_addr().expect("bound address");
        Receiver {
            inner: Arc::new(Inner {
                secret: Mutex::new(secret.to_string()),
                received: Mutex::new(Vec::new()),
                script: Mutex::new(VecDeque::new()),
                default: Mutex::new(Answer::OK),
                arrived: Notify::new(),
            }),
            addr,
            serving: Mutex::new(None),
            reserved: Mutex::new(Some(socket)),
        }
    }

    /// Start listening on its port (no-op if up).
    pub fn up(&self) {
        let mut serving = self.serving.lock().unwrap();
        if serving.is_some() {
            return;
        }
        let socket = self
            .reserved
            .lock()
            .unwrap()
            .take()
            .unwrap_or_else(|| bound_socket(self.addr));
        let listener = socket.listen(1024).expect("listen");
        *serving = Some(tokio::spawn(accept_loop(listener, self.inner.clone())));
    }

    /// Stop listening and drop every open connection; the port stays
    /// reserved, refusing connections.
    pub async fn go_down(&self) {
        let task = self.serving.lock().unwrap().take();
        if let Some(task) = task {
            task.abort();
            let _ = task.await;
        }
        let mut reserved = self.reserved.lock().unwrap();
        if reserved.is_none() {
            *reserved = Some(bound_socket(self.addr));
        }
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT<path>`
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    pub fn secret(&self) -> String {
        self.inner.secret.lock().unwrap().clone()
    }

    /// Check the signatures of later requests with `secret` (the webhook's
    /// secret changed in the licenses file).
    pub fn set_secret(&self, secret: &str) {
        *self.inner.secret.lock().unwrap() = secret.to_string();
    }

    /// Answer the next requests with these, in order, then the default.
    pub fn answer_next(&self, answers: impl IntoIterator<Item = Answer>) {
        self.inner.script.lock().unwrap().extend(answers);
    }

    /// Answer every request not scripted with `answer`.
    pub fn answer_always(&self, answer: Answer) {
        self.inner.script.lock().unwrap().clear();
        *self.inner.default.lock().unwrap() = answer;
    }

    /// Every request so far, in arrival order.
    pub fn received(&self) -> Vec<Received> {
        self.inner.received.lock().unwrap().clone()
    }

    /// The requests to `path`.
    pub fn received_on(&self, path: &str) -> Vec<Received> {
        let mut all = self.received();
        all.retain(|r| r.path == path);
        all
    }

    /// The requests carrying `Leasehold-Delivery: id`.
    pub fn attempts_of(&self, id: &str) -> Vec<Received> {
        let mut all = self.received();
        all.retain(|r| r.header("leasehold-delivery") == Some(id));
        all
    }

    /// Wait until `done` holds of the requests so far; panics after
    /// `timeout` with what it saw.
    pub async fn wait_until(
        &self,
        timeout: Duration,
        what: &str,
        done: impl Fn(&[Received]) -> bool,
    ) -> Vec<Received> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let arrived = self.inner.arrived.notified();
            let now = self.received();
            if done(&now) {
                return now;
            }
            if tokio::time::timeout_at(deadline, arrived).await.is_err() {
                let now = self.received();
                if done(&now) {
                    return now;
                }
                let seen: Vec<String> = now.iter().map(summary).collect();
                panic!(
                    "receiver: timed out after {timeout:?} waiting for {what}; got {} requests:\n{}",
                    now.len(),
                    seen.join("\n")
                );
            }
        }
    }

    /// Wait for at least `n` requests in all.
    pub async fn wait_for(&self, n: usize, timeout: Duration) -> Vec<Received> {
        self.wait_until(timeout, &format!("{n} requests"), |r| r.len() >= n)
            .await
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        if let Ok(mut serving) = self.serving.lock()
            && let Some(task) = serving.take()
        {
            task.abort();
        }
    }
}

/// One line about a request, for failure messages.
pub fn summary(r: &Received) -> String {
    let body = String::from_utf8_lossy(&r.body);
    let body: String = body.chars().take(300).collect();
    format!(
        "{} {} delivery={:?} answer={:?} signature={:?} body={body}",
        r.method,
        r.path,
        r.header("leasehold-delivery"),
        r.answer,
        r.signature.as_ref().map(|_| "ok"),
    )
}

async fn accept_loop(listener: TcpListener, inner: Arc<Inner>) {
    // Owned here: aborting this task drops every connection with it.
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let Ok((stream, peer)) = accepted else { continue };
                let inner = inner.clone();
                connections.spawn(async move {
                    let service = service_fn(move |req| handle(inner.clone(), peer, req));
                    let _ = http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("after 1970")
        .as_secs()
}

async fn handle(
    inner: Arc<Inner>,
    peer: SocketAddr,
    req: Request<Incoming>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let method = req.method().to_string();
    let path = req.uri().path().to_string();
    let headers: Vec<(String, String)> = req
        .headers()
        .iter()
        .map(|(n, v)| {
            let v = String::from_utf8_lossy(v.as_bytes()).into_owned();
            (n.as_str().to_ascii_lowercase(), v)
        })
        .collect();
    let body = match req.into_body().collect().await {
        Ok(b) => b.to_bytes().to_vec(),
        Err(_) => Vec::new(),
    };
    let unix = unix_now();
    let signature = match headers.iter().find(|(n, _)| n == "leasehold-signature") {
        Some((_, header)) => {
            let secret = inner.secret.lock().unwrap().clone();
            verify_signature(&secret, header, &body, unix)
        }
        None => Err("no Leasehold-Signature header".to_string()),
    };
    let answer = inner.next_answer();
    inner.received.lock().unwrap().push(Received {
        at: Instant::now(),
        unix,
        peer,
        method,
        path,
        headers,
        body,
        answer: answer.clone(),
        signature,
    });
    inner.arrived.notify_waiters();
    let response = match answer {
        Answer::Status(status) => Response::builder()
            .status(status)
            .body(Full::new(Bytes::from(format!("receiver says {status}\n")))),
        Answer::Redirect(location) => Response::builder()
            .status(302)
            .header("location", location)
            .body(Full::new(Bytes::from_static(b"moved\n"))),
        Answer::Stall(d) => {
            tokio::time::sleep(d).await;
            Response::builder()
                .status(200)
                .body(Full::new(Bytes::from_static(b"late\n")))
        }
    };
    Ok(response.expect("a valid response"))
}

/// HMAC-SHA256 (RFC 2104), written out so the check does not share code
/// with the server.
pub fn hmac_sha256(key: &[u8], message: &[u8]) -> [u8; 32] {
    const BLOCK: usize = 64;
    let mut k = [0u8; BLOCK];
    if key.len() > BLOCK {
        k[..32].copy_from_slice(&Sha256::digest(key));
    } else {
        k[..key.len()].copy_from_slice(key);
    }
    let mut inner = Sha256::new();
    inner.update(k.map(|b| b ^ 0x36));
    inner.update(message);
    let inner = inner.finalize();
    let mut outer = Sha256::new();
    outer.update(k.map(|b| b ^ 0x5c));
    outer.update(inner);
    outer.finalize().into()
}

fn lower_hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Check `Leasehold-Signature: t=<unix seconds>,v1=<lowercase hex>` as a
/// receiver would: exactly that shape, `t` within 5 minutes of `now`, and
/// `v1` = HMAC-SHA256(secret, "<t>.<raw body>").
pub fn verify_signature(
    secret: &str,
    header: &str,
    body: &[u8],
    now: u64,
) -> Result<Signature, String> {
    let (t_part, v1_part) = header
        .split_once(',')
        .ok_or_else(|| format!("not t=…,v1=…: {header:?}"))?;
    let t = t_part
        .strip_prefix("t=")
        .filter(|t| !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()))
        .and_then(|t| t.parse::<u64>().ok())
        .ok_or_else(|| format!("no t=<unix seconds> first: {header:?}"))?;
    let v1 = v1_part
        .strip_prefix("v1=")
        .ok_or_else(|| format!("no v1=<hex> second: {header:?}"))?;
    if v1.len() != 64 || !v1.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
        return Err(format!("v1 is not 64 lowercase hex digits: {v1:?}"));
    }
    if t.abs_diff(now) > 300 {
        return Err(format!("t={t} is more than 5 minutes from now ({now})"));
    }
    let mut message = format!("{t}.").into_bytes();
    message.extend_from_slice(body);
    let expected = lower_hex(&hmac_sha256(secret.as_bytes(), &message));
    if v1 != expected {
        return Err(format!(
            "v1 does not match HMAC-SHA256(secret, \"{t}.<body>\")"
        ));
    }
    Ok(Signature {
        t,
        v1: v1.to_string(),
    })
}
