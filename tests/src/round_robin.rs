//! A loopback TCP proxy that hands each new connection to the next backend
//! in turn: two `leaseholdd` replicas behind one address, as a load
//! balancer without sticky sessions would put them.

use std::io::ErrorKind;
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

/// Stops accepting when dropped (open connections run to their end).
#[derive(Debug)]
pub struct RoundRobin {
    pub addr: String,
    stop: Arc<AtomicBool>,
}

impl RoundRobin {
    /// Listen on `listen` (`127.0.0.1:0` for a free port) and forward to
    /// `backends` in turn; a backend that refuses is skipped.
    pub fn start(listen: &str, backends: Vec<String>) -> std::io::Result<RoundRobin> {
        let listener = TcpListener::bind(listen)?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?.to_string();
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = stop.clone();
        let next = AtomicUsize::new(0);
        std::thread::spawn(move || {
            while !stopping.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((client, _)) => {
                        let first = next.fetch_add(1, Ordering::Relaxed);
                        forward(client, &backends, first);
                    }
                    Err(e) if e.kind() == ErrorKind::WouldBlock => {
                        std::thread::sleep(Duration::from_millis(2));
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(2)),
                }
            }
        });
        Ok(RoundRobin { addr, stop })
    }
}

impl Drop for RoundRobin {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// Connect `client` to the first backend from `first` on that answers, and
/// copy both ways until either side closes.
fn forward(client: TcpStream, backends: &[String], first: usize) {
    let _ = client.set_nonblocking(false);
    let upstream = (0..backends.len())
        .map(|i| &backends[(first + i) % backends.len()])
        .find_map(|b| TcpStream::connect(b).ok());
    let Some(upstream) = upstream else {
        let _ = client.shutdown(Shutdown::Both);
        return;
    };
    let _ = client.set_nodelay(true);
    let _ = upstream.set_nodelay(true);
    for (from, to) in [
        (client.try_clone(), upstream.try_clone()),
        (upstream.try_clone(), client.try_clone()),
    ] {
        if let (Ok(mut from), Ok(mut to)) = (from, to) {
            std::thread::spawn(move || {
                let _ = std::io::copy(&mut from, &mut to);
                let _ = to.shutdown(Shutdown::Write);
                let _ = from.shutdown(Shutdown::Read);
            });
        }
    }
}
