//! All connections together: open them, and run one step on each
//! concurrently.

use anyhow::Context;

use crate::server::Endpoint;
use crate::worker::Worker;

/// `n` connections, spread round-robin over the endpoints (replicas behind
/// a load balancer without sticky sessions): connection `i` goes to
/// endpoint `i % endpoints.len()`.
pub async fn connect_all(n: usize, endpoints: &[Endpoint]) -> anyhow::Result<Vec<Worker>> {
    let mut workers = Vec::with_capacity(n);
    for id in 0..n {
        let endpoint = &endpoints[id % endpoints.len()];
        workers.push(
            Worker::new(id, endpoint)
                .await
                .with_context(|| format!("connection {id} to {}", endpoint.addr))?,
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
