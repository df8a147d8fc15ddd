//! A flaky network for one simulated client: a loopback TCP proxy to the
//! server that can be switched into an outage. The client's real
//! `LeaseKeeper` talks through it, so what is tested is the keeper riding out
//! failures, not a mock of it.
//!
//! During an outage new connections are accepted and then either closed at
//! once ([`Outage::Refuse`]: requests fail fast) or held silent until the
//! outage ends ([`Outage::Stall`]: requests hang until their timeout), and
//! connections already open (keep-alive) are cut the same way.

use std::net::SocketAddr;

use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// What the network does now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outage {
    Up,
    Refuse,
    Stall,
}

#[derive(Debug)]
pub struct FlakyProxy {
    pub addr: SocketAddr,
    state: watch::Sender<Outage>,
    task: JoinHandle<()>,
}

impl FlakyProxy {
    /// Listen on a free loopback port, forwarding to `upstream`.
    pub async fn start(upstream: SocketAddr) -> std::io::Result<FlakyProxy> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let (state, rx) = watch::channel(Outage::Up);
        let task = tokio::spawn(accept_loop(listener, upstream, rx));
        Ok(FlakyProxy { addr, state, task })
    }

    pub fn set(&self, outage: Outage) {
        self.state.send_replace(outage);
    }

    pub fn is_down(&self) -> bool {
        *self.state.borrow() != Outage::Up
    }
}

impl Drop for FlakyProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn accept_loop(listener: TcpListener, upstream: SocketAddr, state: watch::Receiver<Outage>) {
    loop {
        let Ok((inbound, _)) = listener.accept().await else {
            continue;
        };
        let state = state.clone();
        tokio::spawn(connection(inbound, upstream, state));
    }
}

async fn connection(
    mut inbound: TcpStream,
    upstream: SocketAddr,
    mut state: watch::Receiver<Outage>,
) {
    let current = *state.borrow_and_update();
    if current == Outage::Up
        && let Ok(mut outbound) = TcpStream::connect(upstream).await
    {
        tokio::select! {
            _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound) => return,
            _ = state.wait_for(|s| *s != Outage::Up) => {}
        }
    }
    // In an outage (or the server is unreachable): fail fast or hang.
    if *state.borrow() == Outage::Stall {
        let _ = state.wait_for(|s| *s != Outage::Stall).await;
    }
    let _ = inbound.shutdown().await;
}
