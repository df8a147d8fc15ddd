//! The alerts of the licenses file, evaluated by the writer on its clock
//! (the database's on PostgreSQL) each alive tick: an alert fires once
//! when its condition has held for its `for` (`denials`: at once), and
//! resolves once when it stops holding. Its state is stored, so a restart
//! neither repeats nor loses a transition, and on PostgreSQL the states are
//! locked while a replica evaluates, so each transition happens once in
//! the cluster. Each transition is an `alert` event and a delivery to each
//! of the alert's webhooks, in the same transaction.

use std::collections::HashMap;
use std::time::Duration;

use leasehold_common::Timestamp;
use leasehold_common::alerts::DeliveryType;
use leasehold_common::api::{DenialReason, EventKind};
use leasehold_common::live_threshold;
use leasehold_common::policy::{Alert, AlertCondition, LicenseConfig, format_duration};

use super::scope::Scope;
use super::webhooks::Transition;
use super::{LeaseTx, Result, Rules};
use crate::store::Waiter;
use crate::store::outbox::AlertState;

/// Whether an alert's condition holds now, and the words for it.
struct Reading {
    holds: bool,
    /// The sentence after "<name> firing: " or "<name> resolved: ".
    firing_text: String,
    resolved_text: String,
}

impl<T: LeaseTx> Rules<'_, T> {
    /// Evaluate every alert of the file at `now`, and forget the states of
    /// alerts no longer in it. A file without alerts reads nothing.
    /// `waiting`: waiters of the server's own lines by license; a license
    /// not in it has its line read from the store (PostgreSQL's shared
    /// line; none on SQLite).
    pub fn evaluate_alerts(&mut self, waiting: &HashMap<String, Vec<Waiter>>) -> Result<()> {
        let licenses = self.licenses;
        if licenses.alerts().next().is_none() {
            return Ok(());
        }
        let mut states: HashMap<String, AlertState> = self
            .tx
            .alert_states()?
            .into_iter()
            .map(|s| (s.alert.clone(), s))
            .collect();
        for (lic, alert) in licenses.alerts() {
            let state = states.remove(&alert.name);
            self.evaluate(lic, alert, state, waiting.get(&lic.id))?;
        }
        for gone in states.keys() {
            self.tx.delete_alert_state(gone)?;
        }
        Ok(())
    }

    fn evaluate(
        &mut self,
        lic: &LicenseConfig,
        alert: &Alert,
        stored: Option<AlertState>,
        waiting: Option<&Vec<Waiter>>,
    ) -> Result<()> {
        let reading = self.read(lic, alert, waiting)?;
        let before = stored.unwrap_or_else(|| AlertState {
            alert: alert.name.clone(),
            license_id: lic.id.clone(),
            holding_since: None,
            firing_since: None,
        });
        let mut after = AlertState {
            license_id: lic.id.clone(),
            ..before.clone()
        };
        let mut transition = None;
        if reading.holds {
            let since = *after.holding_since.get_or_insert(self.now);
            let held = self.now.millis_since(since);
            if after.firing_since.is_none() && held >= alert.condition.hold_for().as_millis() as i64
            {
                after.firing_since = Some(self.now);
                transition = Some((DeliveryType::AlertFiring, reading.firing_text));
            }
        } else {
            after.holding_since = None;
            if after.firing_since.take().is_some() {
                transition = Some((DeliveryType::AlertResolved, reading.resolved_text));
            }
        }
        if after != before {
            self.tx.set_alert_state(&after)?;
        }
        let Some((kind, text)) = transition else {
            return Ok(());
        };
        let state = if kind == DeliveryType::AlertFiring {
            "firing"
        } else {
            "resolved"
        };
        self.event(
            EventKind::Alert,
            Some(&lic.id),
            None,
            None,
            Some(&format!("{state} {}", alert.name)),
        )?;
        self.queue_transition(Transition {
            kind,
            license_id: &lic.id,
            alert: alert.settings(),
            webhooks: &alert.webhooks,
            text: format!("{} {state}: {text}", alert.name),
        })
    }

    /// The alert's condition at `now`, from the store.
    fn read(
        &mut self,
        lic: &LicenseConfig,
        alert: &Alert,
        waiting: Option<&Vec<Waiter>>,
    ) -> Result<Reading> {
        // A license with a vendor is judged by the seats it may grant now.
        let effective = super::effective(self.licenses, lic, self.now);
        let lic: &LicenseConfig = &effective.lic;
        let id = &lic.id;
        Ok(match alert.condition {
            AlertCondition::Full { for_ } => {
                let ahead = match waiting {
                    Some(line) => line.clone(),
                    None => self.tx.waiting_line(id, None)?,
                };
                Reading {
                    holds: self.pool_full(lic, &ahead)?,
                    firing_text: format!("no free seat on {id} for {}", format_duration(for_)),
                    resolved_text: format!("{id} has a free seat again"),
                }
            }
            AlertCondition::Usage { percent, for_ } => {
                let threshold = live_threshold(self.now, lic.policy.skew);
                let live = self.tx.live_count(Scope::License(id), threshold)?;
                let seats = lic.policy.seats;
                // live ≥ percent % of seats, in integers.
                let holds = u64::from(live) * 100 >= u64::from(percent) * u64::from(seats);
                Reading {
                    holds,
                    firing_text: format!(
                        "{live} of {seats} seats on {id} in use (at least {percent} %) for {}",
                        format_duration(for_)
                    ),
                    resolved_text: format!(
                        "{live} of {seats} seats on {id} in use (under {percent} %)"
                    ),
                }
            }
            AlertCondition::Expiry { before } => self.expiry(&effective, before),
            AlertCondition::Denials { count, within } => {
                // (now − within, now]: a denial exactly `within` ago has left.
                let since =
                    Timestamp::from_millis(self.now.as_millis() - within.as_millis() as i64 + 1);
                let n = self.tx.denials_since(id, DenialReason::Full, since)?;
                let within = format_duration(within);
                Reading {
                    holds: n >= u64::from(count),
                    firing_text: format!(
                        "{n} checkouts refused on {id} for want of a seat within {within}"
                    ),
                    resolved_text: format!("fewer than {count} refusals on {id} within {within}"),
                }
            }
        })
    }
}

impl<T: LeaseTx> Rules<'_, T> {
    /// `expiry`: the entitled seats drop within `before`, or the license is
    /// in grace. Once they have dropped to nothing it resolves: the pool's
    /// other alerts speak then.
    fn expiry(&self, effective: &super::Effective<'_>, before: Duration) -> Reading {
        let id = &effective.lic.id;
        let (Some(grant), Some(vendor)) = (&effective.grant, effective.lic.vendor.as_deref())
        else {
            return Reading {
                holds: false,
                firing_text: String::new(),
                resolved_text: String::new(),
            };
        };
        let drop = self
            .licenses
            .entitled()
            .ledger()
            .next_drop(vendor, id, self.now.as_millis())
            .map(Timestamp::from_millis);
        let soon = drop.is_some_and(|at| at.millis_since(self.now) <= before.as_millis() as i64);
        let firing_text = match (grant.in_grace, drop) {
            (true, Some(at)) => format!("{id}'s entitlement is in grace: its seats drop at {at}"),
            (_, Some(at)) => format!(
                "{id}'s entitled seats drop at {at}, within {}",
                format_duration(before)
            ),
            (_, None) => format!("{id}'s entitlement is in grace"),
        };
        Reading {
            holds: grant.is_entitled() && (grant.in_grace || soon),
            firing_text,
            resolved_text: format!(
                "{id}'s entitled seats do not drop within {}",
                format_duration(before)
            ),
        }
    }
}
