//! The workloads of the default mode, by name.

use anyhow::bail;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scenario {
    Healthz,
    Checkout,
    /// Checkouts of a pool with eight groups and a per-holder cap.
    CheckoutPolicy,
    Heartbeat,
    /// Heartbeats that report an idle user (`{"idle_s": N}`, N growing), on
    /// the same pool, which has no `idle_timeout`: the cost of the report.
    HeartbeatIdle,
    Mixed,
}

impl Scenario {
    pub fn name(self) -> &'static str {
        match self {
            Scenario::Healthz => "healthz",
            Scenario::Checkout => "checkout",
            Scenario::CheckoutPolicy => "checkout-policy",
            Scenario::Heartbeat => "heartbeat",
            Scenario::HeartbeatIdle => "heartbeat-idle",
            Scenario::Mixed => "mixed",
        }
    }

    pub fn parse_list(s: &str) -> anyhow::Result<Vec<Scenario>> {
        let mut out = Vec::new();
        for part in s.split(',').map(str::trim) {
            match part {
                "all" => out.extend([
                    Scenario::Healthz,
                    Scenario::Checkout,
                    Scenario::Heartbeat,
                    Scenario::Mixed,
                ]),
                "healthz" => out.push(Scenario::Healthz),
                "checkout" => out.push(Scenario::Checkout),
                "checkout-policy" => out.push(Scenario::CheckoutPolicy),
                "heartbeat" => out.push(Scenario::Heartbeat),
                "heartbeat-idle" => out.push(Scenario::HeartbeatIdle),
                "mixed" => out.push(Scenario::Mixed),
                other => {
                    bail!(
                        "unknown scenario {other:?} (healthz, checkout, checkout-policy, \
                         heartbeat, heartbeat-idle, mixed, all)"
                    )
                }
            }
        }
        out.dedup();
        Ok(out)
    }
}
