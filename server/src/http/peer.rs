//! The connection's peer address, which the accept loop (`serve.rs`)
//! records in each request's extensions beside its body deadline.

use std::net::SocketAddr;

/// The login limiter counts by it, and forwarding headers are believed only
/// from a loopback peer.
#[derive(Debug, Clone, Copy)]
pub struct PeerAddr(pub SocketAddr);
