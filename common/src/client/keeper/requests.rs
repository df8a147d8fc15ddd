//! The application's requests to the keeper's task, answered between the
//! machine's actions: borrow the seat for offline use, give a borrow back.

use std::time::Duration;

use super::{Driver, KeeperError, Request};
use crate::api::{CheckoutRequest, Lease};
use crate::client::stats::bump;

impl Driver {
    pub(super) async fn answer(&mut self, request: Request) {
        match request {
            Request::Borrow(duration, reply) => {
                let result = self.borrow(duration).await;
                let _ = reply.send(result);
            }
            Request::GiveBack(reply) => {
                let result = self.give_back().await;
                let _ = reply.send(result);
            }
        }
    }

    async fn borrow(&mut self, duration: Duration) -> Result<Lease, KeeperError> {
        if self.machine.state().is_terminal() {
            return Err(KeeperError::Stopped);
        }
        let Some(fingerprint) = self.expected.fingerprint.clone() else {
            return Err(KeeperError::NoFingerprint);
        };
        let (sent, timeout) = self.start_request();
        // The checkout's own fields: the fingerprint, and the version.
        let request = CheckoutRequest {
            fingerprint: Some(fingerprint),
            ..self.request.clone()
        };
        let result = match self.client.borrow_with(&request, duration, timeout).await {
            Ok(lease) => self.verified(lease, None, timeout).await,
            Err(e) => Err(e),
        };
        let result = self.entitled_borrow(result, timeout).await;
        let change = self.machine.on_borrow(sent, &result);
        self.publish(change);
        match &result {
            Ok(lease) => {
                bump(&self.counters.borrows);
                tracing::info!(seat = %lease.seat_id, until = %lease.expires_at, "leasehold: seat borrowed");
            }
            Err(e) => self.note_failure("borrow", e),
        }
        result.map_err(KeeperError::from)
    }

    async fn give_back(&mut self) -> Result<(), KeeperError> {
        let seat = match self.machine.seat_id() {
            Some(seat) if self.machine.holds_borrow() => seat.to_string(),
            _ => return Err(KeeperError::NotBorrowed),
        };
        self.client
            .give_back(&seat, self.config.request_timeout)
            .await?;
        tracing::info!(seat = %seat, "leasehold: borrowed seat returned");
        let change = self.machine.on_given_back(self.clock.now());
        self.publish(change);
        Ok(())
    }
}
