//! The accept loop. warp's own `serve` sets no header-read timeout, so we
//! drive hyper directly: a slow or idle client is cut after
//! `header_read_timeout`, and at most `max_connections` are open at once
//! (beyond that, new connections wait in the kernel's backlog), so a
//! slowloris cannot pin the server. Each request also gets a
//! [`BodyDeadline`]: a body not received within `body_timeout` of its
//! headers is answered `408` and its connection closed.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::{Semaphore, watch};
use warp::filters::BoxedFilter;
use warp::reply::Response;

use crate::config::ServeOptions;
use crate::http::body::BodyDeadline;
use crate::http::peer::PeerAddr;

/// Records the connection's [`PeerAddr`] and the body's [`BodyDeadline`]
/// in each request.
struct WithPeer<S> {
    inner: S,
    peer: SocketAddr,
    body_timeout: Duration,
}

impl<S, B> hyper::service::Service<http::Request<B>> for WithPeer<S>
where
    S: hyper::service::Service<http::Request<B>>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn call(&self, mut req: http::Request<B>) -> Self::Future {
        req.extensions_mut().insert(PeerAddr(self.peer));
        req.extensions_mut()
            .insert(BodyDeadline::from_now(self.body_timeout));
        self.inner.call(req)
    }
}

pub async fn serve(
    listener: TcpListener,
    routes: BoxedFilter<(Response,)>,
    options: ServeOptions,
    mut shutdown: watch::Receiver<bool>,
) {
    let graceful = GracefulShutdown::new();
    let slots = Arc::new(Semaphore::new(options.max_connections));
    let service = warp::service(routes);
    loop {
        let permit = tokio::select! {
            p = slots.clone().acquire_owned() => match p {
                Ok(p) => p,
                Err(_) => break,
            },
            _ = shutdown.wait_for(|stop| *stop) => break,
        };
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    // Out of file descriptors and the like: back off briefly
                    // rather than spin.
                    tracing::warn!("accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
            _ = shutdown.wait_for(|stop| *stop) => break,
        };
        let _ = stream.set_nodelay(true);
        let conn = http1::Builder::new()
            .timer(TokioTimer::new())
            .header_read_timeout(options.header_read_timeout)
            .serve_connection(
                TokioIo::new(stream),
                WithPeer {
                    inner: TowerToHyperService::new(service.clone()),
                    peer,
                    body_timeout: options.body_timeout,
                },
            );
        let conn = graceful.watch(conn);
        tokio::spawn(async move {
            if let Err(e) = conn.await {
                tracing::debug!("connection ended: {e}");
            }
            drop(permit);
        });
    }
    drop(listener);
    if tokio::time::timeout(options.drain_timeout, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!(
            "shutdown: connections still open after {:?}, closing them",
            options.drain_timeout
        );
    }
}
