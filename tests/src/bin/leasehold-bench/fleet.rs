//! All connections together: open them, and run one step on each
//! concurrently.

use std::net::SocketAddr;

use anyhow::Context;

use crate::worker::Worker;

pub async fn connect_all(n: usize, addr: SocketAddr) -> anyhow::Result<Vec<Worker>> {
    let mut workers = Vec::with_capacity(n);
    for id in 0..n {
        workers.push(
            Worker::new(id, addr)
                .await
                .with_context(|| format!("connection {id} to {addr}"))?,
        );
    }
    Ok(workers)
}

/// Run `f` on every worker concurrently and hand the workers back.
pub async fn on_all<F, Fut, T>(workers: Vec<Worker>, f: F) -> (Vec<Worker>, Vec<T>)
where
    F: Fn(Worker) -> Fut,
    Fut: std::future::Future<Output = (Worker, T)> + Send + 'static,
    T: Send + 'static,
{
    let handles: Vec<_> = workers.into_iter().map(|w| tokio::spawn(f(w))).collect();
    let mut ws = Vec::with_capacity(handles.len());
    let mut outs = Vec::with_capacity(handles.len());
    for h in handles {
        let (w, o) = h.await.expect("worker task panicked");
        ws.push(w);
        outs.push(o);
    }
    (ws, outs)
}
