//! The revoke confirmation: which seat, the reason being typed, and what a
//! key does to it. The modal only answers; the app closes it and posts the
//! message (see `App::on_revoke_key`).

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use leasehold_common::api::SeatView;
use leasehold_common::text::{REASON_MAX_CHARS, is_unsafe_char};

use super::event::Command;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RevokeModal {
    pub seat_id: String,
    pub holder: String,
    pub license_id: String,
    pub fingerprint: Option<String>,
    pub reason: String,
    /// Typing goes into the reason field (otherwise `y`/`n` answer).
    pub editing_reason: bool,
}

/// What a key did to the modal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum RevokeStep {
    /// The modal stays open (perhaps with an edited reason).
    Stay,
    Cancel,
    /// Revoke: the command to run.
    Confirm(Command),
}

impl RevokeModal {
    /// Ask whether to revoke `seat`, with no reason typed yet.
    pub(super) fn for_seat(seat: &SeatView) -> Self {
        RevokeModal {
            seat_id: seat.seat_id.clone(),
            holder: seat.holder.clone(),
            license_id: seat.license_id.clone(),
            fingerprint: seat.fingerprint.clone(),
            reason: String::new(),
            editing_reason: false,
        }
    }

    /// Handle one key in place.
    pub(super) fn on_key(&mut self, key: KeyEvent) -> RevokeStep {
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        match key.code {
            KeyCode::Esc => RevokeStep::Cancel,
            KeyCode::Enter => RevokeStep::Confirm(self.command()),
            KeyCode::Tab | KeyCode::BackTab => {
                self.editing_reason = !self.editing_reason;
                RevokeStep::Stay
            }
            KeyCode::Backspace if self.editing_reason => {
                self.reason.pop();
                RevokeStep::Stay
            }
            KeyCode::Char('u') if self.editing_reason && ctrl => {
                self.reason.clear();
                RevokeStep::Stay
            }
            KeyCode::Char(c) if self.editing_reason => {
                if !is_unsafe_char(c) && self.reason.chars().count() < REASON_MAX_CHARS {
                    self.reason.push(c);
                }
                RevokeStep::Stay
            }
            KeyCode::Char('y') | KeyCode::Char('Y') => RevokeStep::Confirm(self.command()),
            KeyCode::Char('n') | KeyCode::Char('N') => RevokeStep::Cancel,
            // Any other key leaves the modal open.
            _ => RevokeStep::Stay,
        }
    }

    /// The revoke as the event loop runs it: the reason trimmed, none if
    /// blank.
    fn command(&self) -> Command {
        let reason = self.reason.trim();
        Command::Revoke {
            seat_id: self.seat_id.clone(),
            holder: self.holder.clone(),
            reason: (!reason.is_empty()).then(|| reason.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn modal() -> RevokeModal {
        RevokeModal {
            seat_id: "s1".into(),
            holder: "alice".into(),
            license_id: "demo".into(),
            fingerprint: None,
            reason: String::new(),
            editing_reason: false,
        }
    }

    fn press(m: &mut RevokeModal, code: KeyCode) -> RevokeStep {
        m.on_key(KeyEvent::new(code, KeyModifiers::NONE))
    }

    #[test]
    fn y_and_n_answer_only_outside_the_reason_field() {
        let mut m = modal();
        assert_eq!(press(&mut m, KeyCode::Char('q')), RevokeStep::Stay);
        assert_eq!(press(&mut m, KeyCode::Char('n')), RevokeStep::Cancel);
        assert_eq!(press(&mut m, KeyCode::Tab), RevokeStep::Stay);
        assert_eq!(press(&mut m, KeyCode::Char('n')), RevokeStep::Stay);
        assert_eq!(press(&mut m, KeyCode::Char('y')), RevokeStep::Stay);
        assert_eq!(m.reason, "ny");
        assert_eq!(press(&mut m, KeyCode::Backspace), RevokeStep::Stay);
        m.on_key(KeyEvent::new(KeyCode::Char('u'), KeyModifiers::CONTROL));
        assert_eq!(m.reason, "");
        assert_eq!(press(&mut m, KeyCode::Esc), RevokeStep::Cancel);
    }

    #[test]
    fn confirm_carries_the_trimmed_reason_or_none() {
        let mut m = modal();
        let none = Command::Revoke {
            seat_id: "s1".into(),
            holder: "alice".into(),
            reason: None,
        };
        assert_eq!(
            press(&mut m, KeyCode::Char('Y')),
            RevokeStep::Confirm(none.clone())
        );
        press(&mut m, KeyCode::Tab);
        for c in "  stuck ".chars() {
            press(&mut m, KeyCode::Char(c));
        }
        assert_eq!(
            press(&mut m, KeyCode::Enter),
            RevokeStep::Confirm(Command::Revoke {
                seat_id: "s1".into(),
                holder: "alice".into(),
                reason: Some("stuck".into()),
            })
        );
        // The escape character is refused, not typed.
        press(&mut m, KeyCode::Char('\u{1b}'));
        assert_eq!(m.reason, "  stuck ");
    }
}
