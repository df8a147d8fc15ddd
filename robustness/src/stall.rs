//! A loopback TCP proxy in front of one server that can hold every byte:
//! while held, connections are accepted and stay open but nothing is
//! forwarded either way, so a client's request may time out on its side
//! and still reach the server after [`Stall::release`]. That is exactly
//! an `unknown` operation: it may take effect at any instant after it was
//! sent.

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

/// Stops accepting when dropped, and lets whatever it holds go.
#[derive(Debug)]
pub struct Stall {
    /// `127.0.0.1:PORT`, to give the clients instead of the server's.
    pub addr: String,
    gate: Arc<Gate>,
    stop: Arc<AtomicBool>,
}

/// Whether bytes may pass, and a wake-up for the pumps when they may.
#[derive(Debug, Default)]
struct Gate {
    held: Mutex<bool>,
    opened: Condvar,
}

impl Gate {
    fn set(&self, held: bool) {
        *self.held.lock().unwrap_or_else(|p| p.into_inner()) = held;
        if !held {
            self.opened.notify_all();
        }
    }

    fn wait_open(&self) {
        let held = self.held.lock().unwrap_or_else(|p| p.into_inner());
        let _open = self
            .opened
            .wait_while(held, |held| *held)
            .unwrap_or_else(|p| p.into_inner());
    }
}

impl Stall {
    /// Listen on a free loopback port and forward to `upstream`.
    pub fn start(upstream: &str) -> std::io::Result<Stall> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?.to_string();
        let gate = Arc::new(Gate::default());
        let stop = Arc::new(AtomicBool::new(false));
        let (g, s, upstream) = (gate.clone(), stop.clone(), upstream.to_string());
        std::thread::spawn(move || accept(listener, &upstream, &g, &s));
        Ok(Stall { addr, gate, stop })
    }

    /// From now on no byte passes (those on their way wait).
    pub fn hold(&self) {
        self.gate.set(true);
    }

    /// Bytes pass again, the waiting ones first.
    pub fn release(&self) {
        self.gate.set(false);
    }
}

impl Drop for Stall {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        self.release();
    }
}

fn accept(listener: TcpListener, upstream: &str, gate: &Arc<Gate>, stop: &AtomicBool) {
    while !stop.load(Ordering::Relaxed) {
        match listener.accept() {
            Ok((client, _)) => connect(client, upstream, gate),
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(2));
            }
            Err(_) => std::thread::sleep(Duration::from_millis(2)),
        }
    }
}

/// Connect `client` to `upstream` and pump both ways through the gate.
/// An upstream that refuses closes the client's connection (as the server
/// being down would have).
fn connect(client: TcpStream, upstream: &str, gate: &Arc<Gate>) {
    let _ = client.set_nonblocking(false);
    let Ok(server) = TcpStream::connect(upstream) else {
        let _ = client.shutdown(Shutdown::Both);
        return;
    };
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    for (from, to, linger) in [
        (client.try_clone(), server.try_clone(), CLIENT_GONE_LINGER),
        (server.try_clone(), client.try_clone(), Duration::ZERO),
    ] {
        if let (Ok(from), Ok(to)) = (from, to) {
            let gate = gate.clone();
            std::thread::spawn(move || pump(from, to, &gate, linger));
        }
    }
}

/// How long a client's end of stream waits before it is passed on: a
/// client that gave up closes right after its request, and a server that
/// saw the close that soon could drop the request unanswered; the stall
/// is there to deliver it late.
const CLIENT_GONE_LINGER: Duration = Duration::from_millis(500);

/// Copy `from` to `to`, each chunk (and the end of the stream, `linger`
/// later) waiting for the gate to be open.
fn pump(mut from: TcpStream, mut to: TcpStream, gate: &Gate, linger: Duration) {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let n = match from.read(&mut buf) {
            Ok(n) => n,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(_) => 0,
        };
        gate.wait_open();
        if n == 0 {
            std::thread::sleep(linger);
            break;
        }
        if to.write_all(&buf[..n]).is_err() {
            break;
        }
    }
    let _ = to.shutdown(Shutdown::Write);
    let _ = from.shutdown(Shutdown::Read);
}
