//! One connection's closed loop: pick the next request of the scenario, send
//! it, classify the answer, count it if it fell inside the measured window.

use std::time::{Duration, Instant};

use anyhow::bail;
use bytes::Bytes;
use http::{Method, StatusCode};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::client::{Conn, seat_id};
use crate::pools::{
    BIG, BIG_KEY, FULLISH, FULLISH_KEY, POLICY, POLICY_GROUPS, POLICY_KEY, SMALL, SMALL_KEY,
};
use crate::scenario::Scenario;
use crate::server::Endpoint;
use crate::tally::Tally;

/// Shared, read-only request material.
pub struct Ctx {
    big_auth: String,
    small_auth: String,
    fullish_auth: String,
    policy_auth: String,
    checkout_big: String,
    checkout_policy: String,
    checkout_small: String,
    checkout_fullish: String,
}

impl Default for Ctx {
    fn default() -> Ctx {
        Ctx::new()
    }
}

impl Ctx {
    pub fn new() -> Ctx {
        Ctx {
            big_auth: format!("Bearer {BIG_KEY}"),
            small_auth: format!("Bearer {SMALL_KEY}"),
            fullish_auth: format!("Bearer {FULLISH_KEY}"),
            policy_auth: format!("Bearer {POLICY_KEY}"),
            checkout_big: format!("/v1/licenses/{BIG}/seats"),
            checkout_policy: format!("/v1/licenses/{POLICY}/seats"),
            checkout_small: format!("/v1/licenses/{SMALL}/seats"),
            checkout_fullish: format!("/v1/licenses/{FULLISH}/seats"),
        }
    }
}

/// One connection and the seats it holds, kept across scenarios.
pub struct Worker {
    pub id: usize,
    pub conn: Conn,
    /// The `Host` header of this connection's server.
    host: String,
    pub held: Vec<String>,
    next: usize,
    serial: u64,
    rng: StdRng,
    /// Every request is this op (scale measurements).
    pub fixed: Option<Op>,
    /// Keep the seats of big-pool checkouts in `held` (pre-checkout, mixed).
    pub keep_checkouts: bool,
    /// Keep them in every scenario (scale: released after the window).
    pub keep_always: bool,
    /// When the worker started: an idle-reporting heartbeat's `idle_s`.
    started: std::time::Instant,
}

#[derive(Debug, Clone, Copy)]
pub enum Op {
    Healthz,
    CheckoutBig,
    CheckoutSmall,
    CheckoutFullish,
    CheckoutPolicy,
    Heartbeat(usize),
    /// A heartbeat reporting the user idle since the worker started.
    HeartbeatIdle(usize),
    Release(usize),
}

pub enum Outcome {
    Ok,
    Denied,
    Error(&'static str),
}

const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

impl Worker {
    pub async fn new(id: usize, endpoint: &Endpoint) -> anyhow::Result<Worker> {
        Ok(Worker {
            id,
            conn: Conn::connect(endpoint.addr).await?,
            host: endpoint.host.clone(),
            held: Vec::new(),
            next: 0,
            serial: 0,
            rng: StdRng::seed_from_u64(0x5eed ^ id as u64),
            fixed: None,
            keep_checkouts: false,
            keep_always: false,
            started: std::time::Instant::now(),
        })
    }

    fn pick(&mut self, scenario: Scenario) -> Op {
        if let Some(op) = self.fixed {
            return op;
        }
        match scenario {
            Scenario::Healthz => Op::Healthz,
            Scenario::Checkout => Op::CheckoutBig,
            Scenario::CheckoutPolicy => Op::CheckoutPolicy,
            Scenario::Heartbeat => self.next_heartbeat(),
            Scenario::HeartbeatIdle => match self.next_heartbeat() {
                Op::Heartbeat(i) => Op::HeartbeatIdle(i),
                other => other,
            },
            Scenario::Mixed => {
                let r = self.rng.gen_range(0..100u32);
                if self.held.is_empty() || (90..95).contains(&r) {
                    Op::CheckoutBig
                } else if r < 90 {
                    self.next_heartbeat()
                } else if r < 99 {
                    Op::Release(self.rng.gen_range(0..self.held.len()))
                } else {
                    Op::CheckoutSmall
                }
            }
        }
    }

    fn next_heartbeat(&mut self) -> Op {
        if self.held.is_empty() {
            return Op::CheckoutBig;
        }
        self.next = (self.next + 1) % self.held.len();
        Op::Heartbeat(self.next)
    }

    pub async fn execute(&mut self, ctx: &Ctx, op: Op) -> anyhow::Result<(StatusCode, Outcome)> {
        let (method, path, auth, body) = match op {
            Op::Healthz => (Method::GET, "/healthz".to_string(), None, None),
            Op::CheckoutBig | Op::CheckoutSmall | Op::CheckoutFullish | Op::CheckoutPolicy => {
                self.serial += 1;
                // The policy pool's groups take holders by prefix.
                let group = match op {
                    Op::CheckoutPolicy => format!("g{}-", self.id % POLICY_GROUPS),
                    _ => String::new(),
                };
                let body = Bytes::from(format!(
                    r#"{{"holder":"{group}bench-{}-{}-{}"}}"#,
                    std::process::id(),
                    self.id,
                    self.serial
                ));
                let (path, auth) = match op {
                    Op::CheckoutBig => (&ctx.checkout_big, &ctx.big_auth),
                    Op::CheckoutSmall => (&ctx.checkout_small, &ctx.small_auth),
                    Op::CheckoutPolicy => (&ctx.checkout_policy, &ctx.policy_auth),
                    _ => (&ctx.checkout_fullish, &ctx.fullish_auth),
                };
                (Method::POST, path.clone(), Some(auth.as_str()), Some(body))
            }
            Op::Heartbeat(i) => (
                Method::POST,
                format!("/v1/licenses/{BIG}/seats/{}/heartbeat", self.held[i]),
                Some(ctx.big_auth.as_str()),
                None,
            ),
            Op::HeartbeatIdle(i) => (
                Method::POST,
                format!("/v1/licenses/{BIG}/seats/{}/heartbeat", self.held[i]),
                Some(ctx.big_auth.as_str()),
                Some(Bytes::from(format!(
                    r#"{{"idle_s":{}}}"#,
                    self.started.elapsed().as_secs()
                ))),
            ),
            Op::Release(i) => (
                Method::DELETE,
                format!("/v1/licenses/{BIG}/seats/{}", self.held[i]),
                Some(ctx.big_auth.as_str()),
                None,
            ),
        };
        let (status, body) = self
            .conn
            .send(&self.host, method, &path, auth, body)
            .await?;
        let outcome = match (op, status.as_u16()) {
            (Op::Healthz, 200) | (Op::Heartbeat(_) | Op::HeartbeatIdle(_), 200) => Outcome::Ok,
            (Op::CheckoutBig, 201) => {
                if self.keep_checkouts
                    && let Some(id) = seat_id(&body)
                {
                    self.held.push(id);
                }
                Outcome::Ok
            }
            (Op::CheckoutSmall | Op::CheckoutFullish | Op::CheckoutPolicy, 201) => Outcome::Ok,
            (Op::CheckoutSmall | Op::CheckoutFullish, 409) => Outcome::Denied,
            (Op::Release(i), 204) => {
                self.held.swap_remove(i);
                Outcome::Ok
            }
            (_, s) if (400..500).contains(&s) => Outcome::Error("4xx"),
            (_, s) if (500..600).contains(&s) => Outcome::Error("5xx"),
            _ => Outcome::Error("other_status"),
        };
        Ok((status, outcome))
    }

    /// Closed loop until `end`; counts what completed inside [`measure`, `end`].
    pub async fn run(
        &mut self,
        ctx: &Ctx,
        scenario: Scenario,
        measure: Instant,
        end: Instant,
    ) -> Tally {
        let mut tally = Tally::new();
        self.keep_checkouts = scenario == Scenario::Mixed || self.keep_always;
        loop {
            if self.conn.ensure_ready().await.is_err() {
                if Instant::now() >= end {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
            let t0 = Instant::now();
            if t0 >= end {
                break;
            }
            let op = self.pick(scenario);
            let result = tokio::time::timeout(REQUEST_TIMEOUT, self.execute(ctx, op)).await;
            let t1 = Instant::now();
            let counted = t0 >= measure && t1 <= end;
            let outcome = match result {
                Ok(Ok((status, outcome))) => {
                    if counted {
                        *tally.statuses.entry(status.as_u16()).or_insert(0) += 1;
                    }
                    outcome
                }
                Ok(Err(_)) => Outcome::Error("io"),
                Err(_) => Outcome::Error("timeout"),
            };
            if let Outcome::Error("io" | "timeout") = outcome {
                // The connection is in an unknown state: start a new one.
                if let Ok(c) = Conn::connect(self.conn.addr).await {
                    self.conn = c;
                }
            }
            if counted {
                tally.requests += 1;
                let us = (t1 - t0).as_micros().clamp(1, 60_000_000) as u64;
                tally.hist.saturating_record(us);
                match outcome {
                    Outcome::Ok => tally.ok += 1,
                    Outcome::Denied => tally.denied += 1,
                    Outcome::Error(class) => *tally.errors.entry(class.into()).or_insert(0) += 1,
                }
            }
        }
        tally
    }

    /// Check out (unmeasured) until this worker holds `want` big-pool seats.
    pub async fn top_up(&mut self, ctx: &Ctx, want: usize) -> anyhow::Result<()> {
        let mut failures = 0;
        self.keep_checkouts = true;
        while self.held.len() < want {
            self.conn.ensure_ready().await?;
            match self.execute(ctx, Op::CheckoutBig).await {
                Ok((s, _)) if s == StatusCode::CREATED => {}
                Ok((s, _)) => {
                    failures += 1;
                    if failures > 100 {
                        bail!("pre-checkout into {BIG} keeps failing: {s}");
                    }
                }
                Err(e) => {
                    failures += 1;
                    if failures > 100 {
                        return Err(e.context("pre-checkout"));
                    }
                    self.conn = Conn::connect(self.conn.addr).await?;
                }
            }
        }
        Ok(())
    }
}
