//! A store in plain Rust maps, for testing the rules without a database:
//! every [`LeaseTx`] query answered the way the SQL answers it, so a
//! property test runs thousands of rule sequences in a second. The real
//! stores are held to the same answers by the model test on SQLite and
//! PostgreSQL (`server/tests/model.rs`).

use std::collections::{BTreeMap, HashMap};

use leasehold_common::Timestamp;
use leasehold_common::alerts::DeliveryStatus;
use leasehold_common::api::{DenialReason, Event, SessionEnd};

use super::denials::second_of;
use super::outbox::{AlertState, AttemptRecord, Content, DueDelivery, NewDelivery};
use super::rules::{Denial, EndedSession, IdlePeriod, LeaseTx, NewEvent, Result};
use super::{LeaseRow, Scope, SeatMode, Waiter};

/// A lease and the Idempotency-Key it was checked out with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredLease {
    pub lease: LeaseRow,
    pub idempotency_key: Option<String>,
}

/// A recorded session: the seat, how it ended, when.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredSession {
    pub lease: LeaseRow,
    pub end: SessionEnd,
    pub at: Timestamp,
}

/// A counted denial, as the rules told the store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredDenial {
    pub license_id: String,
    pub holder: String,
    pub fingerprint: Option<String>,
    pub reason: DenialReason,
    pub at: Timestamp,
}

#[derive(Debug, Default, Clone)]
pub struct MemoryStore {
    /// By seat id.
    pub leases: BTreeMap<String, StoredLease>,
    /// By (license, holder, fingerprint): until when.
    pub blocks: HashMap<(String, String, String), Timestamp>,
    pub events: Vec<Event>,
    pub sessions: Vec<StoredSession>,
    /// Counted denials, in the order counted.
    pub denials: Vec<StoredDenial>,
    /// (license, from, seats), in the order recorded.
    pub pool_sizes: Vec<(String, Timestamp, u32)>,
    /// (license, seat, from, to), in the order recorded.
    pub idle_periods: Vec<(String, String, Timestamp, Timestamp)>,
    /// The outbox, in the order queued.
    pub deliveries: Vec<StoredDelivery>,
    /// By alert name.
    pub alert_states: BTreeMap<String, AlertState>,
    last_event_id: i64,
}

/// A queued delivery and where it stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredDelivery {
    pub delivery: NewDelivery,
    pub status: DeliveryStatus,
    pub attempts: u32,
    pub next_attempt_at: Timestamp,
    pub claimed_until: Timestamp,
    pub last_error: Option<String>,
}

impl MemoryStore {
    fn leases_of<'a>(&'a self, license_id: &'a str) -> impl Iterator<Item = &'a LeaseRow> + 'a {
        self.leases
            .values()
            .map(|s| &s.lease)
            .filter(move |l| l.license_id == license_id)
    }

    /// Live leases in `scope`, by the same threshold the SQL binds.
    fn live_in<'a>(
        &'a self,
        scope: Scope<'a>,
        threshold: Timestamp,
    ) -> impl Iterator<Item = &'a LeaseRow> + 'a {
        self.leases_of(scope.license_id())
            .filter(move |l| scope.counts(l, threshold))
    }
}

fn key(license_id: &str, holder: &str, fingerprint: &str) -> (String, String, String) {
    (license_id.into(), holder.into(), fingerprint.into())
}

impl LeaseTx for MemoryStore {
    fn block_until(
        &mut self,
        license_id: &str,
        holder: &str,
        fingerprint: &str,
        now: Timestamp,
    ) -> Result<Option<Timestamp>> {
        Ok(self
            .blocks
            .get(&key(license_id, holder, fingerprint))
            .copied()
            .filter(|until| *until > now))
    }

    fn set_block(
        &mut self,
        license_id: &str,
        holder: &str,
        fingerprint: &str,
        until: Timestamp,
    ) -> Result<()> {
        self.blocks
            .insert(key(license_id, holder, fingerprint), until);
        Ok(())
    }

    fn lease_by_idempotency_key(
        &mut self,
        license_id: &str,
        key: &str,
    ) -> Result<Option<LeaseRow>> {
        Ok(self
            .leases
            .values()
            .find(|s| s.lease.license_id == license_id && s.idempotency_key.as_deref() == Some(key))
            .map(|s| s.lease.clone()))
    }

    fn forget_idempotency_key(&mut self, seat_id: &str) -> Result<()> {
        if let Some(s) = self.leases.get_mut(seat_id) {
            s.idempotency_key = None;
        }
        Ok(())
    }

    fn live_lease_by_fingerprint(
        &mut self,
        license_id: &str,
        fingerprint: &str,
        holder: &str,
        threshold: Timestamp,
        others_last: SeatMode,
    ) -> Result<Option<LeaseRow>> {
        Ok(self
            .live_in(Scope::License(license_id), threshold)
            .filter(|l| l.fingerprint.as_deref() == Some(fingerprint))
            .max_by_key(|l| {
                let takeable = l.mode != others_last || l.holder == holder;
                (takeable, l.expires_at, &l.seat_id)
            })
            .cloned())
    }

    fn live_count(&mut self, scope: Scope<'_>, threshold: Timestamp) -> Result<u32> {
        Ok(self.live_in(scope, threshold).count() as u32)
    }

    fn live_newer_than(&mut self, lease: &LeaseRow, threshold: Timestamp) -> Result<u32> {
        let newer =
            |l: &LeaseRow| (l.checked_out_at, &l.seat_id) > (lease.checked_out_at, &lease.seat_id);
        Ok(self
            .live_in(Scope::License(&lease.license_id), threshold)
            .filter(|l| newer(l))
            .count() as u32)
    }

    fn earliest_live_expiry(
        &mut self,
        scope: Scope<'_>,
        threshold: Timestamp,
    ) -> Result<Option<Timestamp>> {
        Ok(self.live_in(scope, threshold).map(|l| l.expires_at).min())
    }

    fn lease(&mut self, license_id: Option<&str>, seat_id: &str) -> Result<Option<LeaseRow>> {
        Ok(self
            .leases
            .get(seat_id)
            .filter(|s| license_id.is_none_or(|id| s.lease.license_id == id))
            .map(|s| s.lease.clone()))
    }

    fn insert_lease(&mut self, lease: &LeaseRow, idempotency_key: Option<&str>) -> Result<()> {
        self.leases.insert(
            lease.seat_id.clone(),
            StoredLease {
                lease: lease.clone(),
                idempotency_key: idempotency_key.map(str::to_string),
            },
        );
        Ok(())
    }

    fn renew_lease(&mut self, old: &LeaseRow, renewed: &LeaseRow) -> Result<()> {
        if let Some(s) = self.leases.get_mut(&old.seat_id) {
            s.lease.issued_at = renewed.issued_at;
            s.lease.expires_at = renewed.expires_at;
            s.lease.mode = renewed.mode;
            s.lease.idle_since = renewed.idle_since;
        }
        Ok(())
    }

    fn delete_lease(
        &mut self,
        seat_id: &str,
        license_id: Option<&str>,
    ) -> Result<Option<LeaseRow>> {
        let matches = self
            .leases
            .get(seat_id)
            .is_some_and(|s| license_id.is_none_or(|id| s.lease.license_id == id));
        Ok(matches
            .then(|| self.leases.remove(seat_id))
            .flatten()
            .map(|s| s.lease))
    }

    fn reap_expired(
        &mut self,
        license_id: &str,
        cutoff: Timestamp,
        limit: usize,
    ) -> Result<Vec<LeaseRow>> {
        let mut gone: Vec<LeaseRow> = self
            .leases_of(license_id)
            .filter(|l| l.expires_at < cutoff)
            .cloned()
            .collect();
        gone.sort_by(|a, b| (a.expires_at, &a.seat_id).cmp(&(b.expires_at, &b.seat_id)));
        gone.truncate(limit);
        for lease in &gone {
            self.leases.remove(&lease.seat_id);
        }
        Ok(gone)
    }

    fn prune(&mut self, now: Timestamp, event_retention: i64) -> Result<()> {
        self.blocks.retain(|_, until| *until > now);
        let keep_from = self.last_event_id - event_retention;
        self.events.retain(|e| e.id > keep_from);
        Ok(())
    }

    fn record_sessions(&mut self, sessions: &[EndedSession<'_>]) -> Result<()> {
        self.sessions.extend(sessions.iter().map(|s| StoredSession {
            lease: s.lease.clone(),
            end: s.end,
            at: s.at,
        }));
        Ok(())
    }

    fn record_idle_periods(&mut self, periods: &[IdlePeriod<'_>]) -> Result<()> {
        self.idle_periods.extend(
            periods
                .iter()
                .map(|p| (p.license_id.into(), p.seat_id.into(), p.from, p.to)),
        );
        Ok(())
    }

    fn idle_seats(
        &mut self,
        license_id: &str,
        kept: SeatMode,
        idle_before: Timestamp,
        threshold: Timestamp,
        limit: usize,
    ) -> Result<Vec<LeaseRow>> {
        let mut idle: Vec<LeaseRow> = self
            .live_in(Scope::License(license_id), threshold)
            .filter(|l| l.mode == kept && l.idle_since.is_some_and(|s| s <= idle_before))
            .cloned()
            .collect();
        idle.sort_by(|a, b| (a.idle_since, &a.seat_id).cmp(&(b.idle_since, &b.seat_id)));
        idle.truncate(limit);
        Ok(idle)
    }

    fn ended_session(
        &mut self,
        license_id: &str,
        seat_id: &str,
        ended_since: Timestamp,
    ) -> Result<Option<SessionEnd>> {
        Ok(self
            .sessions
            .iter()
            .rev()
            .find(|s| {
                s.lease.license_id == license_id
                    && s.lease.seat_id == seat_id
                    && s.at >= ended_since
            })
            .map(|s| s.end))
    }

    fn count_denial(&mut self, denial: &Denial<'_>) -> Result<()> {
        self.denials.push(StoredDenial {
            license_id: denial.license_id.to_string(),
            holder: denial.holder.to_string(),
            fingerprint: denial.fingerprint.map(str::to_string),
            reason: denial.reason,
            at: denial.at,
        });
        Ok(())
    }

    fn current_pool_sizes(&mut self) -> Result<HashMap<String, u32>> {
        let mut latest: HashMap<String, (Timestamp, u32)> = HashMap::new();
        for (license_id, at, seats) in &self.pool_sizes {
            let entry = latest.entry(license_id.clone()).or_insert((*at, *seats));
            if *at >= entry.0 {
                *entry = (*at, *seats);
            }
        }
        Ok(latest.into_iter().map(|(id, (_, n))| (id, n)).collect())
    }

    fn record_pool_size(&mut self, license_id: &str, at: Timestamp, seats: u32) -> Result<()> {
        self.pool_sizes
            .retain(|(id, t, _)| !(id == license_id && *t == at));
        self.pool_sizes.push((license_id.to_string(), at, seats));
        Ok(())
    }

    fn prune_history(&mut self, cutoff: Timestamp, limit: usize) -> Result<usize> {
        let before = self.sessions.len() + self.denials.len() + self.idle_periods.len();
        let mut left = limit;
        self.sessions.retain(|s| {
            let prune = s.at < cutoff && left > 0;
            left -= usize::from(prune);
            !prune
        });
        let mut left = limit;
        // As the stores prune: by the second a denial is kept under.
        self.denials.retain(|d| {
            let prune = second_of(d.at) < cutoff && left > 0;
            left -= usize::from(prune);
            !prune
        });
        let mut left = limit;
        self.idle_periods.retain(|(_, _, _, to)| {
            let prune = *to < cutoff && left > 0;
            left -= usize::from(prune);
            !prune
        });
        Ok(before - self.sessions.len() - self.denials.len() - self.idle_periods.len())
    }

    fn extend_live(
        &mut self,
        license_id: &str,
        was_live: Timestamp,
        until: Timestamp,
        kept: SeatMode,
    ) -> Result<usize> {
        let mut extended = 0;
        for s in self.leases.values_mut() {
            let l = &mut s.lease;
            if l.license_id == license_id
                && l.mode == kept
                && l.expires_at >= was_live
                && l.expires_at < until
            {
                l.expires_at = until;
                extended += 1;
            }
        }
        Ok(extended)
    }

    /// The rules' tests pass the line with each checkout.
    fn waiting_line(&mut self, _license_id: &str, _before: Option<i64>) -> Result<Vec<Waiter>> {
        Ok(Vec::new())
    }

    fn append_events(&mut self, events: &[NewEvent<'_>]) -> Result<Vec<i64>> {
        let mut ids = Vec::with_capacity(events.len());
        for e in events {
            self.last_event_id += 1;
            ids.push(self.last_event_id);
            self.events.push(Event {
                id: self.last_event_id,
                at: e.at,
                kind: e.kind,
                license_id: e.license_id.map(str::to_string),
                seat_id: e.seat_id.map(str::to_string),
                holder: e.holder.map(str::to_string),
                detail: e.detail.map(str::to_string),
            });
        }
        Ok(ids)
    }

    fn queue_deliveries(&mut self, deliveries: Vec<Content>) -> Result<()> {
        for content in deliveries {
            let event_id = content.event.as_ref().map(|e| e.id);
            let delivery = content.render(event_id);
            self.deliveries.push(StoredDelivery {
                next_attempt_at: delivery.created_at,
                delivery,
                status: DeliveryStatus::Pending,
                attempts: 0,
                claimed_until: Timestamp::from_millis(0),
                last_error: None,
            });
        }
        Ok(())
    }

    fn claim_deliveries(
        &mut self,
        now: Timestamp,
        claim_until: Timestamp,
        limit: usize,
    ) -> Result<Vec<DueDelivery>> {
        let mut due: Vec<&mut StoredDelivery> = self
            .deliveries
            .iter_mut()
            .filter(|d| {
                d.status == DeliveryStatus::Pending
                    && d.next_attempt_at <= now
                    && d.claimed_until <= now
            })
            .collect();
        due.sort_by_key(|d| d.next_attempt_at);
        Ok(due
            .into_iter()
            .take(limit)
            .map(|d| {
                d.claimed_until = claim_until;
                DueDelivery {
                    id: d.delivery.id.clone(),
                    webhook: d.delivery.webhook.clone(),
                    body: d.delivery.body.clone(),
                    attempts: d.attempts,
                    created_at: d.delivery.created_at,
                }
            })
            .collect())
    }

    fn record_attempt(&mut self, attempt: &AttemptRecord) -> Result<bool> {
        let Some(d) = self
            .deliveries
            .iter_mut()
            .find(|d| d.delivery.id == attempt.id && d.status == DeliveryStatus::Pending)
        else {
            return Ok(false);
        };
        d.status = attempt.status;
        d.attempts = attempt.attempts;
        d.next_attempt_at = attempt.next_attempt_at;
        d.claimed_until = Timestamp::from_millis(0);
        d.last_error = attempt.error.clone();
        Ok(true)
    }

    fn prune_deliveries(&mut self, before: Timestamp, limit: usize) -> Result<usize> {
        let mut pruned = 0;
        self.deliveries.retain(|d| {
            let old = d.status != DeliveryStatus::Pending && d.delivery.created_at < before;
            let drop = old && pruned < limit;
            pruned += usize::from(drop);
            !drop
        });
        Ok(pruned)
    }

    fn alert_states(&mut self) -> Result<Vec<AlertState>> {
        Ok(self.alert_states.values().cloned().collect())
    }

    fn set_alert_state(&mut self, state: &AlertState) -> Result<()> {
        self.alert_states.insert(state.alert.clone(), state.clone());
        Ok(())
    }

    fn delete_alert_state(&mut self, alert: &str) -> Result<()> {
        self.alert_states.remove(alert);
        Ok(())
    }

    fn denials_since(
        &mut self,
        license_id: &str,
        reason: DenialReason,
        since: Timestamp,
    ) -> Result<u64> {
        Ok(self
            .denials
            .iter()
            .filter(|d| d.license_id == license_id && d.reason == reason && d.at >= since)
            .count() as u64)
    }
}
