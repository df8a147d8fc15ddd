//! What a checkout asks for ([`CheckoutRequest`]) and who stands in line
//! ahead of it ([`Ahead`], [`Waiter`]).

use std::time::Duration;

/// Who may check out what: the parts of a checkout request the store needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckoutRequest {
    pub license_id: String,
    pub holder: String,
    pub fingerprint: Option<String>,
    pub idempotency_key: Option<String>,
    /// Borrow the seat for this long (no heartbeats until then).
    pub borrow: Option<Duration>,
    /// The application's version, as sent (checked only against a range).
    pub version: Option<String>,
}

/// Who stands in line ahead of a checkout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ahead {
    /// Known when the command was queued (a server's own line).
    Waiters(Vec<Waiter>),
    /// The shared line (PostgreSQL), read by the writer inside the batch's
    /// transaction ([`LeaseTx::waiting_line`](super::rules::LeaseTx::waiting_line)): every waiter, or
    /// those before this checkout's own row.
    SharedLine { before: Option<i64> },
}

/// Who stands in a license's waiting line: what the rules need to tell
/// whether a freed seat would go to them (their holder cap, their group's
/// reservation and max).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Waiter {
    pub holder: String,
    pub fingerprint: Option<String>,
}

impl From<&CheckoutRequest> for Waiter {
    fn from(req: &CheckoutRequest) -> Self {
        Waiter {
            holder: req.holder.clone(),
            fingerprint: req.fingerprint.clone(),
        }
    }
}
