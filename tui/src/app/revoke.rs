//! The revoke confirmation: which seat, the reason being typed, how long to
//! block the holder from coming back, and what a key does to it. The modal
//! only answers; the app closes it and posts the message (see
//! `App::on_revoke_key`).

use std::time::Duration;

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use leasehold_common::Timestamp;
use leasehold_common::api::SeatView;
use leasehold_common::text::{REASON_MAX_CHARS, is_unsafe_char};

use super::event::Command;
use crate::duration::{block_secs, parse_block};

/// The longest custom block typed (`30d`, `43200m`: a few characters do).
const CUSTOM_MAX_CHARS: usize = 12;

/// How long the revoked holder (same holder and fingerprint) is refused a
/// new seat.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Block {
    None,
    TenMinutes,
    Hour,
    Day,
    /// Typed into the custom field, parsed as `leasehold revoke --block`.
    Custom,
}

impl Block {
    pub const ALL: [Block; 5] = [
        Block::None,
        Block::TenMinutes,
        Block::Hour,
        Block::Day,
        Block::Custom,
    ];

    pub fn label(self) -> &'static str {
        match self {
            Block::None => "none",
            Block::TenMinutes => "10m",
            Block::Hour => "1h",
            Block::Day => "1d",
            Block::Custom => "custom",
        }
    }

    /// The next (or, `back`, previous) choice, wrapping around.
    fn step(self, back: bool) -> Block {
        let i = Block::ALL.iter().position(|&b| b == self).unwrap_or(0);
        let n = Block::ALL.len();
        Block::ALL[if back { (i + n - 1) % n } else { (i + 1) % n }]
    }
}

/// Where typed keys go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Field {
    /// No text field: `y`/`n` answer, `b` and ←/→ choose the block.
    Answer,
    Reason,
    /// The custom block duration (only while [`Block::Custom`] is chosen).
    Custom,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RevokeModal {
    pub seat_id: String,
    pub holder: String,
    pub license_id: String,
    pub fingerprint: Option<String>,
    pub reason: String,
    pub block: Block,
    /// The custom block as typed (`90m`).
    pub custom: String,
    pub field: Field,
    /// Why the last confirm was refused (a custom block that is not a
    /// duration); cleared by the next key.
    pub error: Option<String>,
    /// The seat is borrowed and comes back then: a plain revoke is refused
    /// (its token works offline until then), so the dialog offers force.
    pub borrowed_until: Option<Timestamp>,
    /// The server's 409 `borrowed` sentence, when a plain revoke of this
    /// seat was just refused (the seat may have looked live).
    pub refusal: Option<String>,
}

/// What a key did to the modal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum RevokeStep {
    /// The modal stays open (perhaps edited).
    Stay,
    Cancel,
    /// Revoke: the command to run.
    Confirm(Command),
}

impl RevokeModal {
    /// Ask whether to revoke `seat`, with no reason and no block yet;
    /// `borrowed` when the table shows it borrowed.
    pub(super) fn for_seat(seat: &SeatView, borrowed: bool) -> Self {
        RevokeModal {
            seat_id: seat.seat_id.clone(),
            holder: seat.holder.clone(),
            license_id: seat.license_id.clone(),
            fingerprint: seat.fingerprint.clone(),
            reason: String::new(),
            block: Block::None,
            custom: String::new(),
            field: Field::Answer,
            error: None,
            borrowed_until: borrowed.then_some(seat.expires_at),
            refusal: None,
        }
    }

    /// Force is offered: the seat is borrowed, or the server said so.
    pub fn offers_force(&self) -> bool {
        self.borrowed_until.is_some() || self.refusal.is_some()
    }

    /// Handle one key in place.
    pub(super) fn on_key(&mut self, key: KeyEvent) -> RevokeStep {
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        self.error = None;
        match (key.code, self.field) {
            (KeyCode::Esc, _) => return RevokeStep::Cancel,
            (KeyCode::Enter, _) => return self.confirm(false),
            (KeyCode::Tab, _) => self.field = self.next_field(false),
            (KeyCode::BackTab, _) => self.field = self.next_field(true),
            (KeyCode::Left | KeyCode::Right, Field::Answer | Field::Custom) => {
                self.choose(self.block.step(key.code == KeyCode::Left));
            }
            (KeyCode::Char('b'), Field::Answer) => self.choose(self.block.step(false)),
            (KeyCode::Char('B'), Field::Answer) => self.choose(self.block.step(true)),
            (KeyCode::Char('y' | 'Y'), Field::Answer) => return self.confirm(false),
            // Force is a key of its own, never Enter: freeing a borrowed
            // seat can put one seat more in use than sold.
            (KeyCode::Char('F'), Field::Answer) if self.offers_force() => {
                return self.confirm(true);
            }
            (KeyCode::Char('n' | 'N'), Field::Answer) => return RevokeStep::Cancel,
            (KeyCode::Backspace, Field::Reason) => _ = self.reason.pop(),
            (KeyCode::Backspace, Field::Custom) => _ = self.custom.pop(),
            (KeyCode::Char('u'), Field::Reason) if ctrl => self.reason.clear(),
            (KeyCode::Char('u'), Field::Custom) if ctrl => self.custom.clear(),
            // Refused characters (terminal controls, past the limit) are
            // dropped by the catch-all below.
            (KeyCode::Char(c), Field::Reason)
                if !ctrl
                    && !is_unsafe_char(c)
                    && self.reason.chars().count() < REASON_MAX_CHARS =>
            {
                self.reason.push(c)
            }
            (KeyCode::Char(c), Field::Custom)
                if !ctrl && c.is_ascii_alphanumeric() && self.custom.len() < CUSTOM_MAX_CHARS =>
            {
                self.custom.push(c)
            }
            // Any other key leaves the modal open.
            _ => {}
        }
        RevokeStep::Stay
    }

    /// Choose a block; the custom choice takes the typing at once, and
    /// leaving it gives the keys back to the answer.
    fn choose(&mut self, block: Block) {
        self.block = block;
        self.field = if block == Block::Custom {
            Field::Custom
        } else {
            Field::Answer
        };
    }

    /// Tab order: answer, reason, then the custom block when chosen.
    fn next_field(&self, back: bool) -> Field {
        let mut order = vec![Field::Answer, Field::Reason];
        if self.block == Block::Custom {
            order.push(Field::Custom);
        }
        let i = order.iter().position(|&f| f == self.field).unwrap_or(0);
        let n = order.len();
        order[if back { (i + n - 1) % n } else { (i + 1) % n }]
    }

    /// Typing goes into the reason.
    pub fn editing_reason(&self) -> bool {
        self.field == Field::Reason
    }

    /// Typing goes into the custom block.
    pub fn editing_custom(&self) -> bool {
        self.field == Field::Custom
    }

    /// The block choices as shown, and which is chosen.
    pub fn block_choices(&self) -> impl Iterator<Item = (&'static str, bool)> + '_ {
        Block::ALL.iter().map(|&b| (b.label(), b == self.block))
    }

    /// Is the custom block chosen?
    pub fn custom_chosen(&self) -> bool {
        self.block == Block::Custom
    }

    /// The block in seconds, as the API takes it; an error for a custom
    /// block that is not a duration above zero.
    pub fn block_s(&self) -> Result<Option<u64>, String> {
        let d = match self.block {
            Block::None => return Ok(None),
            Block::TenMinutes => Duration::from_secs(600),
            Block::Hour => Duration::from_secs(3600),
            Block::Day => Duration::from_secs(86_400),
            Block::Custom => parse_block(&self.custom)?,
        };
        if d.is_zero() {
            return Err("a block of 0 blocks nothing: type a longer one, or choose none".into());
        }
        Ok(Some(block_secs(d)))
    }

    /// Revoke (with `force` or not): the reason trimmed (none if blank) and
    /// the block; a custom block that does not parse keeps the modal open
    /// with the error.
    fn confirm(&mut self, force: bool) -> RevokeStep {
        let block_s = match self.block_s() {
            Ok(b) => b,
            Err(e) => {
                self.error = Some(e);
                self.field = Field::Custom;
                return RevokeStep::Stay;
            }
        };
        let reason = self.reason.trim();
        RevokeStep::Confirm(Command::Revoke {
            seat_id: self.seat_id.clone(),
            holder: self.holder.clone(),
            reason: (!reason.is_empty()).then(|| reason.to_string()),
            block_s,
            force,
        })
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
            block: Block::None,
            custom: String::new(),
            field: Field::Answer,
            error: None,
            borrowed_until: None,
            refusal: None,
        }
    }

    fn press(m: &mut RevokeModal, code: KeyCode) -> RevokeStep {
        m.on_key(KeyEvent::new(code, KeyModifiers::NONE))
    }

    fn type_text(m: &mut RevokeModal, text: &str) {
        for c in text.chars() {
            assert_eq!(press(m, KeyCode::Char(c)), RevokeStep::Stay);
        }
    }

    fn revoke(reason: Option<&str>, block_s: Option<u64>) -> RevokeStep {
        RevokeStep::Confirm(Command::Revoke {
            seat_id: "s1".into(),
            holder: "alice".into(),
            reason: reason.map(String::from),
            block_s,
            force: false,
        })
    }

    #[test]
    fn y_and_n_answer_only_outside_the_reason_field() {
        let mut m = modal();
        assert_eq!(press(&mut m, KeyCode::Char('q')), RevokeStep::Stay);
        assert_eq!(press(&mut m, KeyCode::Char('n')), RevokeStep::Cancel);
        assert_eq!(press(&mut m, KeyCode::Tab), RevokeStep::Stay);
        assert_eq!(m.field, Field::Reason);
        type_text(&mut m, "nyb");
        assert_eq!(m.reason, "nyb");
        assert_eq!(m.block, Block::None, "b types in the reason");
        assert_eq!(press(&mut m, KeyCode::Backspace), RevokeStep::Stay);
        m.on_key(KeyEvent::new(KeyCode::Char('u'), KeyModifiers::CONTROL));
        assert_eq!(m.reason, "");
        assert_eq!(press(&mut m, KeyCode::Esc), RevokeStep::Cancel);
    }

    #[test]
    fn confirm_carries_the_trimmed_reason_or_none() {
        let mut m = modal();
        assert_eq!(press(&mut m, KeyCode::Char('Y')), revoke(None, None));
        press(&mut m, KeyCode::Tab);
        type_text(&mut m, "  stuck ");
        assert_eq!(press(&mut m, KeyCode::Enter), revoke(Some("stuck"), None));
        // The escape character is refused, not typed.
        press(&mut m, KeyCode::Char('\u{1b}'));
        assert_eq!(m.reason, "  stuck ");
    }

    #[test]
    fn b_and_the_arrows_cycle_the_block_outside_the_reason() {
        let mut m = modal();
        let mut seen = vec![m.block];
        for _ in 0..3 {
            press(&mut m, KeyCode::Char('b'));
            seen.push(m.block);
        }
        assert_eq!(
            seen,
            [Block::None, Block::TenMinutes, Block::Hour, Block::Day]
        );
        assert_eq!(
            press(&mut m, KeyCode::Char('y')),
            revoke(None, Some(86_400))
        );
        press(&mut m, KeyCode::Left);
        assert_eq!(m.block, Block::Hour);
        press(&mut m, KeyCode::Char('B'));
        assert_eq!(m.block, Block::TenMinutes);
        // In the reason field the arrows and b do nothing to the block.
        press(&mut m, KeyCode::Tab);
        press(&mut m, KeyCode::Right);
        type_text(&mut m, "b");
        assert_eq!((m.block, m.reason.as_str()), (Block::TenMinutes, "b"));
        assert_eq!(press(&mut m, KeyCode::Enter), revoke(Some("b"), Some(600)));
        // Around the end: none comes after custom.
        m.field = Field::Answer;
        press(&mut m, KeyCode::Left);
        press(&mut m, KeyCode::Left);
        assert_eq!(m.block, Block::Custom);
        press(&mut m, KeyCode::Right);
        assert_eq!((m.block, m.field), (Block::None, Field::Answer));
    }

    #[test]
    fn a_custom_block_is_typed_and_parsed_like_the_block_flag() {
        let mut m = modal();
        for _ in 0..4 {
            press(&mut m, KeyCode::Char('b'));
        }
        assert_eq!((m.block, m.field), (Block::Custom, Field::Custom));
        // Nothing typed yet: the confirm is refused with the parser's words.
        assert_eq!(press(&mut m, KeyCode::Enter), RevokeStep::Stay);
        assert!(
            m.error.as_deref().unwrap().contains("not a duration"),
            "{m:?}"
        );
        type_text(&mut m, "90m");
        assert_eq!(m.error, None, "a key clears the error");
        // y types here; it is not an answer.
        type_text(&mut m, "y");
        assert_eq!(press(&mut m, KeyCode::Enter), RevokeStep::Stay);
        press(&mut m, KeyCode::Backspace);
        assert_eq!(press(&mut m, KeyCode::Enter), revoke(None, Some(5400)));
        // Tab runs answer → reason → custom and around.
        press(&mut m, KeyCode::Tab);
        assert_eq!(m.field, Field::Answer);
        press(&mut m, KeyCode::Tab);
        press(&mut m, KeyCode::Tab);
        assert_eq!(m.field, Field::Custom);
        press(&mut m, KeyCode::BackTab);
        assert_eq!(m.field, Field::Reason);
        // A zero block is refused; ms round up to whole seconds.
        m.custom = "0s".into();
        assert_eq!(
            m.block_s(),
            Err("a block of 0 blocks nothing: type a longer one, or choose none".into())
        );
        m.custom = "1500ms".into();
        assert_eq!(m.block_s(), Ok(Some(2)));
        assert_eq!(
            (m.block_s(), parse_block("1500ms").map(block_secs)),
            (Ok(Some(2)), Ok(2)),
            "the same parser and rounding as `leasehold revoke --block`"
        );
    }

    #[test]
    fn f_forces_only_a_borrowed_seat_and_only_as_an_answer() {
        let mut m = modal();
        assert_eq!(press(&mut m, KeyCode::Char('F')), RevokeStep::Stay);
        m.borrowed_until = Some(Timestamp::from_millis(0));
        // Typed into the reason, F is a letter.
        press(&mut m, KeyCode::Tab);
        type_text(&mut m, "F");
        assert_eq!(m.reason, "F");
        press(&mut m, KeyCode::BackTab);
        let RevokeStep::Confirm(Command::Revoke { force, reason, .. }) =
            press(&mut m, KeyCode::Char('F'))
        else {
            panic!("F confirms a borrowed seat's revoke");
        };
        assert!(force);
        assert_eq!(reason.as_deref(), Some("F"));
        // Enter and y stay plain: force is never the default.
        assert_eq!(press(&mut m, KeyCode::Enter), revoke(Some("F"), None));
        // The server's refusal alone offers force too.
        let mut m = modal();
        m.refusal = Some("borrowed".into());
        assert!(matches!(
            press(&mut m, KeyCode::Char('F')),
            RevokeStep::Confirm(Command::Revoke { force: true, .. })
        ));
    }
}
