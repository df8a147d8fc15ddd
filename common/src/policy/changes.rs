//! What a reload of the licenses file changed, one line per difference,
//! for the `config` event.

use super::{LicenseConfig, Licenses, alerts, format_duration, groups};

impl Licenses {
    /// One line per difference, for the `config` event of a reload.
    pub fn describe_changes(&self, new: &Licenses) -> Vec<String> {
        let mut out = Vec::new();
        for old in self.iter() {
            match new.get(&old.id) {
                None => out.push(format!("{}: removed", old.id)),
                Some(n) if n != old => {
                    let (a, b) = (&old.policy, &n.policy);
                    let mut parts = Vec::new();
                    if a.seats != b.seats {
                        let shown = |l: &LicenseConfig| {
                            l.seats_in_file()
                                .map_or_else(|| "entitled".to_string(), |s| s.to_string())
                        };
                        parts.push(format!("seats {}→{}", shown(old), shown(n)));
                    }
                    if old.vendor != n.vendor {
                        let shown = |v: &Option<String>| v.clone().unwrap_or_else(|| "none".into());
                        parts.push(format!(
                            "vendor {}→{}",
                            shown(&old.vendor),
                            shown(&n.vendor)
                        ));
                    }
                    for (name, x, y) in [
                        ("ttl", a.ttl, b.ttl),
                        ("skew", a.skew, b.skew),
                        ("reap_grace", a.reap_grace, b.reap_grace),
                    ] {
                        if x != y {
                            parts.push(format!(
                                "{name} {}→{}",
                                format_duration(x),
                                format_duration(y)
                            ));
                        }
                    }
                    groups::describe_seat_changes(old, n, &mut parts);
                    if old.key != n.key {
                        parts.push("key changed".to_string());
                    }
                    if old.alerts != n.alerts {
                        let names: Vec<&str> = n.alerts.iter().map(|a| a.name.as_str()).collect();
                        parts.push(format!("alerts [{}]", names.join(", ")));
                    }
                    out.push(format!("{}: {}", old.id, parts.join(", ")));
                }
                Some(_) => {}
            }
        }
        for n in new.iter().filter(|n| self.get(&n.id).is_none()) {
            match (&n.vendor, n.seats_in_file()) {
                (Some(vendor), _) => out.push(format!("{}: added, seats from {vendor}", n.id)),
                (None, seats) => out.push(format!(
                    "{}: added with {} seats",
                    n.id,
                    seats.unwrap_or_default()
                )),
            }
        }
        if self.vendors != new.vendors {
            let names: Vec<&str> = new.vendors.iter().map(|v| v.name.as_str()).collect();
            out.push(format!("vendors [{}]", names.join(", ")));
        }
        alerts::describe_webhook_changes(&self.webhooks, &new.webhooks, &mut out);
        out
    }
}
