//! Hand-written histories, in milliseconds from an arbitrary start: each
//! operation is added with the instants it was sent and answered, and an
//! acknowledged checkout, release or revoke leaves its event, as the real
//! server's do (numbered by instant when the history is built).

use leasehold_robustness::check::{Broken, Verdict, check};
use leasehold_robustness::history::*;

pub const START: Micros = 1_800_000_000_000_000;
pub const TTL_MS: i64 = 3_000;
pub const SKEW_MS: i64 = 1_000;
pub const GRACE_MS: i64 = 2_000;

pub fn ms(t: i64) -> Micros {
    START + t * 1_000
}

pub struct Hist {
    pub h: History,
    /// Events, numbered when built.
    events: Vec<Event>,
}

impl Hist {
    /// One license, `lic`, of `capacity` seats; ttl 3 s, skew 1 s, reap
    /// grace 2 s.
    pub fn new(capacity: u32) -> Hist {
        let terms = Terms {
            license: "lic".into(),
            capacity,
            ttl: TTL_MS * 1_000,
            skew: SKEW_MS * 1_000,
            reap_grace: GRACE_MS * 1_000,
        };
        let h = History {
            scenario: "hand-written".into(),
            terms: vec![terms],
            ..History::default()
        };
        Hist {
            h,
            events: Vec::new(),
        }
    }

    fn push(
        &mut self,
        client: u32,
        kind: Kind,
        seat: Option<&str>,
        sent: i64,
        answered: i64,
        outcome: Outcome,
    ) -> usize {
        self.h.ops.push(Op {
            client,
            license: "lic".into(),
            kind,
            seat: seat.map(str::to_string),
            sent: Stamp::at(ms(sent)),
            answered: Stamp::at(ms(answered)),
            outcome,
        });
        self.h.ops.len() - 1
    }

    pub fn event(&mut self, kind: &str, seat: &str, at: i64) {
        self.events.push(Event {
            id: 0,
            at: ms(at),
            kind: kind.into(),
            license: Some("lic".into()),
            seat: Some(seat.into()),
            detail: None,
        });
    }

    /// A checkout granted at `issued` (between `sent` and `answered`).
    pub fn checkout(
        &mut self,
        client: u32,
        seat: &str,
        sent: i64,
        issued: i64,
        answered: i64,
    ) -> usize {
        self.event("checkout", seat, issued);
        let lease = Granted {
            seat: seat.into(),
            issued_at: ms(issued),
            expires_at: ms(issued + TTL_MS),
        };
        self.push(
            client,
            Kind::Checkout,
            None,
            sent,
            answered,
            Outcome::Ok { lease: Some(lease) },
        )
    }

    pub fn checkout_refused(&mut self, client: u32, sent: i64, answered: i64) -> usize {
        let outcome = Outcome::Fail {
            status: 409,
            error: "no_seats_available".into(),
            reason: None,
        };
        self.push(client, Kind::Checkout, None, sent, answered, outcome)
    }

    pub fn checkout_unknown(&mut self, client: u32, sent: i64) -> usize {
        self.push(client, Kind::Checkout, None, sent, sent + 2_000, unknown())
    }

    /// A heartbeat renewed at `renewed`.
    pub fn renewed(
        &mut self,
        client: u32,
        seat: &str,
        sent: i64,
        renewed: i64,
        answered: i64,
    ) -> usize {
        let lease = Granted {
            seat: seat.into(),
            issued_at: ms(0),
            expires_at: ms(renewed + TTL_MS),
        };
        self.push(
            client,
            Kind::Heartbeat,
            Some(seat),
            sent,
            answered,
            Outcome::Ok { lease: Some(lease) },
        )
    }

    pub fn lost(
        &mut self,
        client: u32,
        seat: &str,
        sent: i64,
        answered: i64,
        reason: &str,
    ) -> usize {
        let outcome = Outcome::Fail {
            status: 410,
            error: "seat_lost".into(),
            reason: Some(reason.into()),
        };
        self.push(client, Kind::Heartbeat, Some(seat), sent, answered, outcome)
    }

    pub fn heartbeat_unknown(&mut self, client: u32, seat: &str, sent: i64) -> usize {
        self.push(
            client,
            Kind::Heartbeat,
            Some(seat),
            sent,
            sent + 2_000,
            unknown(),
        )
    }

    /// A release acknowledged; it took the seat out at `effect`, or found
    /// it gone (`None`: no event).
    pub fn release(
        &mut self,
        client: u32,
        seat: &str,
        sent: i64,
        effect: Option<i64>,
        answered: i64,
    ) -> usize {
        if let Some(at) = effect {
            self.event("release", seat, at);
        }
        self.push(
            client,
            Kind::Release,
            Some(seat),
            sent,
            answered,
            Outcome::Ok { lease: None },
        )
    }

    pub fn release_unknown(&mut self, client: u32, seat: &str, sent: i64) -> usize {
        self.push(
            client,
            Kind::Release,
            Some(seat),
            sent,
            sent + 2_000,
            unknown(),
        )
    }

    pub fn revoke(
        &mut self,
        client: u32,
        seat: &str,
        sent: i64,
        effect: i64,
        answered: i64,
    ) -> usize {
        self.event("revoke", seat, effect);
        self.push(
            client,
            Kind::Revoke,
            Some(seat),
            sent,
            answered,
            Outcome::Ok { lease: None },
        )
    }

    pub fn revoke_unknown(&mut self, client: u32, seat: &str, sent: i64) -> usize {
        self.push(
            client,
            Kind::Revoke,
            Some(seat),
            sent,
            sent + 2_000,
            unknown(),
        )
    }

    /// A fault that stopped every writer from `began` to `ended`.
    pub fn outage(&mut self, began: i64, ended: i64) {
        self.h.faults.push(Fault {
            what: "kill -9 and restart".into(),
            began: Stamp::at(ms(began)),
            ended: Stamp::at(ms(ended)),
            stops_writes: true,
        });
    }

    /// The history, its events numbered 1.. by instant.
    pub fn build(mut self) -> History {
        self.events.sort_by_key(|e| e.at);
        for (i, e) in self.events.iter_mut().enumerate() {
            e.id = i as i64 + 1;
        }
        self.h.events = self.events;
        self.h
    }

    pub fn check(self) -> Verdict {
        check(&self.build())
    }
}

fn unknown() -> Outcome {
    Outcome::Unknown {
        why: "timed out".into(),
    }
}

/// The verdict holds, or the test fails naming the first violation.
pub fn holds(verdict: &Verdict) {
    assert!(
        verdict.holds(),
        "a legal history was flagged: {}",
        verdict.violations[0]
    );
}

/// The first violation is of kind `broken`, at `at_ms` (± 1 ms) when given.
pub fn flags(verdict: &Verdict, broken: Broken, at_ms: Option<i64>) {
    let Some(first) = verdict.first() else {
        panic!("an illegal history passed; expected {}", broken.as_str())
    };
    assert_eq!(
        first.broken,
        broken,
        "expected {} first, got: {first}",
        broken.as_str()
    );
    if let Some(at) = at_ms {
        assert!(
            (first.at - ms(at)).abs() <= 1_000,
            "expected it at {at} ms, got: {first}"
        );
    }
}
