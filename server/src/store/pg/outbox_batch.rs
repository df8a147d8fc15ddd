//! A batch's deliveries, kept for its commit (see `pg/outbox/mod.rs`).

use postgres::Client;

use super::statements::Statements;
use crate::store::outbox::Content;

/// A batch's deliveries, kept for its commit, each with its event's place
/// among the batch's events (0: the first), if it forwards one.
#[derive(Default)]
pub struct Outbox {
    kept: Vec<(Content, Option<usize>)>,
}

impl Outbox {
    /// How many are kept: where the next command's begin.
    pub fn len(&self) -> usize {
        self.kept.len()
    }

    /// Forget the deliveries after the first `len` (a command rolled back).
    pub fn truncate(&mut self, len: usize) {
        self.kept.truncate(len);
    }

    /// Keep deliveries; `events`: how many events the batch kept so far
    /// (a delivery's event is among them, counted from the last).
    pub fn push(&mut self, deliveries: Vec<Content>, events: usize) {
        for content in deliveries {
            let place = content
                .event_from_last
                .and_then(|back| events.checked_sub(back + 1));
            debug_assert_eq!(place.is_some(), content.event_from_last.is_some());
            self.kept.push((content, place));
        }
    }

    /// Whether a kept delivery names an event: then they are written after
    /// the events are numbered.
    pub fn needs_event_ids(&self) -> bool {
        self.kept.iter().any(|(_, place)| place.is_some())
    }

    /// Render and insert every kept delivery in one statement (nothing if
    /// none) and forget them. `before`: the id before the batch's first
    /// event, once they are numbered.
    pub fn write(
        &mut self,
        client: &mut Client,
        statements: &Statements,
        before: Option<i64>,
    ) -> std::result::Result<(), postgres::Error> {
        if self.kept.is_empty() {
            return Ok(());
        }
        let rendered: Vec<_> = self
            .kept
            .drain(..)
            .map(|(content, place)| {
                let event_id = before
                    .zip(place)
                    .map(|(before, place)| before + place as i64 + 1);
                content.render(event_id)
            })
            .collect();
        let text = |f: fn(&crate::store::outbox::NewDelivery) -> &str| {
            rendered.iter().map(f).collect::<Vec<_>>()
        };
        let licenses: Vec<Option<&str>> =
            rendered.iter().map(|d| d.license_id.as_deref()).collect();
        let created: Vec<i64> = rendered.iter().map(|d| d.created_at.as_millis()).collect();
        client.execute(
            &statements.outbox.insert,
            &[
                &text(|d| &d.id),
                &text(|d| &d.webhook),
                &text(|d| d.kind.as_str()),
                &licenses,
                &created,
                &text(|d| &d.body),
            ],
        )?;
        Ok(())
    }
}
