//! The positive marker for the webhook suites' checks that no alert
//! transition happened ([`Beacon`]).
//!
//! Test files include it with `#[path = "../src/beacon.rs"] mod beacon;`
//! (next to `receiver.rs` and `webhook_kit.rs`).

#![allow(dead_code)] // each test file uses part of it

use leasehold_tests::Server;

use crate::webhook_kit::{alert_toml, license_toml, webhook_toml};

/// The positive marker for "no alert transition happened": alerts of
/// their own on a license of their own (`beacon`, one seat), delivered to
/// a receiver of their own (webhook `beacon`). Every alert of the file is
/// evaluated together, at each alive tick, in one transaction that also
/// writes each transition's event and deliveries; so once a beacon
/// transition arrives, every other alert was evaluated at that tick (or
/// later) and any transition of theirs is already in the events and the
/// outbox. A test makes the beacon move after the moment it checks, waits
/// for it, then asserts what did not happen, instead of sleeping.
///
/// Two kinds (one per test): `usage` (`beacon-held`, 100 % for the tested
/// alert's `for`: taking the seat fires it no sooner than an alert whose
/// condition held from the same tick would have fired) and `denials`
/// (`beacon-1`..`beacon-n`, `count = i`: each refused checkout of the held
/// seat fires the next one at the next tick).
pub struct Beacon {
    pub receiver: crate::receiver::Receiver,
    seat: std::sync::Mutex<Option<String>>,
    refused: std::sync::atomic::AtomicUsize,
}

impl Beacon {
    pub const SECRET: &str = "beacon-secret-0123456789";

    pub async fn start() -> Beacon {
        Beacon {
            receiver: crate::receiver::Receiver::start(Self::SECRET).await,
            seat: std::sync::Mutex::new(None),
            refused: std::sync::atomic::AtomicUsize::new(0),
        }
    }

    fn base(&self) -> String {
        [
            webhook_toml(
                "beacon",
                &self.receiver.url("/beacon"),
                Self::SECRET,
                "json",
                &[],
            ),
            license_toml("beacon", 1),
        ]
        .concat()
    }

    /// The licenses-file tables for a `usage` beacon held for `for_`.
    pub fn usage_toml(&self, for_: &str) -> String {
        let for_ = format!("for = {for_:?}");
        [
            self.base(),
            alert_toml(
                "beacon-held",
                "usage",
                &["percent = 100", &for_, "webhooks = [\"beacon\"]"],
            ),
        ]
        .concat()
    }

    /// The licenses-file tables for `n` `denials` beacons.
    pub fn denials_toml(&self, n: usize) -> String {
        let mut out = self.base();
        for i in 1..=n {
            out.push_str(&alert_toml(
                &format!("beacon-{i}"),
                "denials",
                &[
                    &format!("count = {i}"),
                    "within = \"1h\"",
                    "webhooks = [\"beacon\"]",
                ],
            ));
        }
        out
    }

    /// Take the beacon's seat (a `usage` beacon starts holding; a
    /// `denials` beacon needs it held to be refused).
    pub async fn take(&self, s: &Server) {
        let lease = s
            .take_seat(
                "beacon",
                "beacon-key",
                serde_json::json!({"holder": "beacon"}),
            )
            .await;
        *self.seat.lock().unwrap() = Some(lease.seat_id);
    }

    /// Give the seat back (a firing `usage` beacon resolves).
    pub async fn release(&self, s: &Server) {
        let seat = self.seat.lock().unwrap().take().expect("the beacon's seat");
        assert_eq!(s.release("beacon", "beacon-key", &seat).await.status(), 204);
    }

    /// Wait for the `n`th delivery of `kind` (`alert.firing`,
    /// `alert.resolved`) of beacon alert `name`.
    pub async fn wait(&self, kind: &str, name: &str, n: usize) {
        let what = format!("{kind} #{n} of {name}");
        self.receiver
            .wait_until(std::time::Duration::from_secs(10), &what, |got| {
                got.iter()
                    .filter(|r| {
                        let body = r.json();
                        body["type"] == kind && body["alert"]["name"] == name
                    })
                    .count()
                    >= n
            })
            .await;
    }

    /// A `denials` beacon: refuse one checkout of the held seat and wait
    /// for the beacon it fires: every alert was evaluated after the call.
    pub async fn refuse_and_wait(&self, s: &Server) {
        let resp = s
            .checkout(
                "beacon",
                "beacon-key",
                serde_json::json!({"holder": "knock"}),
            )
            .await;
        assert_eq!(resp.status(), 409, "the beacon's seat is held");
        let n = self
            .refused
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst)
            + 1;
        self.wait("alert.firing", &format!("beacon-{n}"), 1).await;
    }
}

/// Whether an `alert` event's detail (`firing <name>`) is a beacon's.
pub fn is_beacon_detail(detail: &str) -> bool {
    detail
        .split_once(' ')
        .is_some_and(|(_, name)| name.starts_with("beacon-"))
}
