//! Unmeasured set-up between windows: seats to heartbeat, pools filled to a
//! given level, seats given back.

use std::sync::Arc;

use anyhow::{anyhow, bail};
use http::StatusCode;

use crate::client::Conn;
use crate::fleet::on_all;
use crate::pools::{SMALL, SMALL_SEATS};
use crate::worker::{Ctx, Op, Worker};

/// Give each worker its share of `total` held seats.
pub async fn top_up_all(
    workers: Vec<Worker>,
    ctx: &Arc<Ctx>,
    total: usize,
) -> anyhow::Result<Vec<Worker>> {
    let n = workers.len();
    let (workers, results) = on_all(workers, |mut w| {
        let ctx = ctx.clone();
        let want = total / n + usize::from(w.id < total % n);
        async move {
            let r = w.top_up(&ctx, want).await;
            (w, r)
        }
    })
    .await;
    for r in results {
        r?;
    }
    Ok(workers)
}

/// Fill the small pool so that its checkouts are denied (409).
pub async fn fill_small(worker: &mut Worker, ctx: &Ctx) -> anyhow::Result<()> {
    for _ in 0..SMALL_SEATS {
        worker.conn.ensure_ready().await?;
        let (status, _) = worker.execute(ctx, Op::CheckoutSmall).await?;
        if status != StatusCode::CREATED && status != StatusCode::CONFLICT {
            bail!("filling {SMALL}: {status}");
        }
    }
    Ok(())
}

/// Release (unmeasured) every seat a worker holds beyond its first `keep[i]`.
pub async fn release_extra(
    workers: Vec<Worker>,
    ctx: &Arc<Ctx>,
    keep: &[usize],
) -> anyhow::Result<Vec<Worker>> {
    let (workers, results) = on_all(workers, |mut w| {
        let ctx = ctx.clone();
        let keep = keep[w.id];
        async move {
            w.keep_always = false;
            let mut result = Ok(());
            while w.held.len() > keep {
                let i = w.held.len() - 1;
                if let Err(e) = w.conn.ensure_ready().await {
                    result = Err(e);
                    break;
                }
                match w.execute(&ctx, Op::Release(i)).await {
                    Ok((s, _)) if s == StatusCode::NO_CONTENT => {}
                    Ok((s, _)) => {
                        result = Err(anyhow!("release: {s}"));
                        break;
                    }
                    Err(e) => {
                        result = Err(e);
                        break;
                    }
                }
            }
            (w, result)
        }
    })
    .await;
    for r in results {
        r?;
    }
    Ok(workers)
}

/// Many checkouts into the big pool without keeping their seat ids.
pub async fn preload_big(
    workers: &mut Vec<Worker>,
    ctx: &Arc<Ctx>,
    total: usize,
) -> anyhow::Result<()> {
    fill_pool(workers, ctx, Op::CheckoutBig, total).await
}

pub async fn fill_pool(
    workers: &mut Vec<Worker>,
    ctx: &Arc<Ctx>,
    op: Op,
    total: usize,
) -> anyhow::Result<()> {
    let n = workers.len();
    let taken = std::mem::take(workers);
    let (ws, results) = on_all(taken, |mut w| {
        let ctx = ctx.clone();
        let want = total / n + usize::from(w.id < total % n);
        async move {
            w.keep_checkouts = false;
            let mut done = 0;
            let mut failures = 0u32;
            let mut result = Ok(());
            while done < want {
                if let Err(e) = w.conn.ensure_ready().await {
                    result = Err(e);
                    break;
                }
                match w.execute(&ctx, op).await {
                    Ok((s, _)) if s == StatusCode::CREATED => done += 1,
                    Ok((s, _)) => {
                        failures += 1;
                        if failures > 100 {
                            result = Err(anyhow!("filling: {s}"));
                            break;
                        }
                    }
                    Err(e) => {
                        failures += 1;
                        if failures > 100 {
                            result = Err(e);
                            break;
                        }
                        if let Ok(c) = Conn::connect(w.conn.addr).await {
                            w.conn = c;
                        }
                    }
                }
            }
            (w, result)
        }
    })
    .await;
    *workers = ws;
    for r in results {
        r?;
    }
    Ok(())
}
