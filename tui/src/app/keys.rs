//! Key dispatch: what each key does to the [`App`], by mode (a modal open,
//! the filter being typed, or the tables). Pure: state changes and the
//! [`Command`]s to carry out (a revoke, pages to fetch).

use std::time::Duration;

use crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use leasehold_common::policy::format_duration;
use leasehold_common::text::is_unsafe_char;

use super::paging::FILTER_DEBOUNCE_MS;
use super::revoke::{RevokeModal, RevokeStep};
use super::{App, Command, Level, Modal, Pane, RowState};
use crate::format::short_id;

impl App {
    /// Handle one key. Pure: changes state, returns the commands.
    pub fn on_key(&mut self, key: KeyEvent) -> Vec<Command> {
        if key.kind == KeyEventKind::Release {
            return Vec::new();
        }
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        if ctrl && matches!(key.code, KeyCode::Char('c') | KeyCode::Char('q')) {
            self.should_quit = true;
            return Vec::new();
        }
        match self.modal {
            Some(Modal::Help) => {
                // Any key closes the help.
                self.modal = None;
                return Vec::new();
            }
            Some(Modal::Revoke(_)) => return self.on_revoke_key(key).into_iter().collect(),
            None => {}
        }
        if self.filter_editing {
            return self.on_filter_key(key);
        }
        self.on_table_key(key, ctrl)
    }

    /// A key while neither a modal nor the filter takes the input.
    fn on_table_key(&mut self, key: KeyEvent, ctrl: bool) -> Vec<Command> {
        match key.code {
            KeyCode::Char('q') => self.should_quit = true,
            KeyCode::Char('?') => self.modal = Some(Modal::Help),
            KeyCode::Down | KeyCode::Char('j') => return self.move_by(1),
            KeyCode::Up | KeyCode::Char('k') => return self.move_by(-1),
            KeyCode::PageDown => return self.move_by(self.page()),
            KeyCode::PageUp => return self.move_by(-self.page()),
            KeyCode::Char('d') if ctrl => return self.move_by(self.page()),
            KeyCode::Char('u') if ctrl => return self.move_by(-self.page()),
            KeyCode::Home | KeyCode::Char('g') => return self.move_to_end(false),
            KeyCode::End | KeyCode::Char('G') => return self.move_to_end(true),
            KeyCode::Tab | KeyCode::BackTab => {
                self.pane = match self.pane {
                    Pane::Holders => Pane::Events,
                    Pane::Events => Pane::Holders,
                }
            }
            KeyCode::Char('/') => {
                self.filter_editing = true;
                self.pane = Pane::Holders;
            }
            KeyCode::Esc => {
                if !self.filter.is_empty() {
                    self.filter.clear();
                    return self.reorder(0);
                }
                self.message = None;
            }
            KeyCode::Char('s') => {
                self.sort = self.sort.next();
                self.sort_desc = false;
                return self.reorder(0);
            }
            KeyCode::Char('S') => {
                self.sort_desc = !self.sort_desc;
                return self.reorder(0);
            }
            KeyCode::Char('f') => return self.toggle_freeze(),
            KeyCode::Char('R') => {
                let mut cmds = vec![Command::Refresh];
                cmds.extend(self.seats_changed());
                return cmds;
            }
            KeyCode::Char('r') => self.open_revoke(),
            _ => {}
        }
        Vec::new()
    }

    fn on_filter_key(&mut self, key: KeyEvent) -> Vec<Command> {
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        let before = self.filter.clone();
        match key.code {
            KeyCode::Esc => {
                self.filter_editing = false;
                self.filter.clear();
            }
            KeyCode::Enter => self.filter_editing = false,
            KeyCode::Backspace => {
                self.filter.pop();
            }
            KeyCode::Char('u') if ctrl => self.filter.clear(),
            KeyCode::Down => return self.move_by(1),
            KeyCode::Up => return self.move_by(-1),
            // The server takes at most 256 characters.
            KeyCode::Char(c)
                if !ctrl && !is_unsafe_char(c) && self.filter.chars().count() < 256 =>
            {
                self.filter.push(c)
            }
            _ => {}
        }
        if self.filter == before {
            return Vec::new();
        }
        // Wait for a pause in typing; clearing takes effect at once.
        let delay = if self.filter.is_empty() {
            0
        } else {
            FILTER_DEBOUNCE_MS
        };
        self.reorder(delay)
    }

    fn move_by(&mut self, delta: isize) -> Vec<Command> {
        match self.pane {
            Pane::Holders => {
                self.selected = self.selected.saturating_add_signed(delta);
                self.ensure_visible();
                return self.follow_selection();
            }
            Pane::Events => {
                self.event_scroll = self.event_scroll.saturating_add_signed(delta);
            }
        }
        self.ensure_visible();
        Vec::new()
    }

    fn move_to_end(&mut self, end: bool) -> Vec<Command> {
        match self.pane {
            Pane::Holders => return self.jump(end),
            Pane::Events => self.event_scroll = if end { usize::MAX } else { 0 },
        }
        self.ensure_visible();
        Vec::new()
    }

    fn page(&self) -> isize {
        match self.pane {
            Pane::Holders => self.page_rows.max(1) as isize,
            Pane::Events => self.event_page_rows.max(1) as isize,
        }
    }

    fn toggle_freeze(&mut self) -> Vec<Command> {
        self.frozen = !self.frozen;
        if self.frozen {
            self.post("frozen: updates are held back (f to resume)", Level::Info);
            Vec::new()
        } else {
            if let Some(snap) = self.pending_snapshot.take() {
                self.apply_snapshot(*snap);
            }
            for ev in std::mem::take(&mut self.pending_events) {
                self.push_event(ev);
            }
            for u in std::mem::take(&mut self.pending_usage) {
                self.apply_usage(u);
            }
            self.post("resumed live updates", Level::Info);
            // The holders held back: fetch them now if anything changed.
            self.load_if_due()
        }
    }

    fn open_revoke(&mut self) {
        if self.read_only {
            self.post("read-only console: revoke is disabled", Level::Warn);
            return;
        }
        if self.pane != Pane::Holders {
            self.post(
                "select a seat in the holders table to revoke it",
                Level::Info,
            );
            return;
        }
        let Some(seat) = self.selected_seat() else {
            self.post("no seat selected", Level::Info);
            return;
        };
        let borrowed = self.row_state(seat, self.server_now(self.last_now)) == RowState::Borrowed;
        self.modal = Some(Modal::Revoke(Box::new(RevokeModal::for_seat(
            seat, borrowed,
        ))));
    }

    /// A key while the revoke modal is open: the modal changes in place,
    /// and closes on an answer.
    fn on_revoke_key(&mut self, key: KeyEvent) -> Option<Command> {
        let Some(Modal::Revoke(modal)) = &mut self.modal else {
            return None;
        };
        match modal.on_key(key) {
            RevokeStep::Stay => None,
            RevokeStep::Cancel => {
                self.modal = None;
                self.post("revoke cancelled", Level::Info);
                None
            }
            RevokeStep::Confirm(command) => {
                let text = revoking_text(modal, &command);
                // Kept so a 409 `borrowed` can reopen it as it was.
                self.last_revoke = Some(RevokeModal::clone(modal));
                self.modal = None;
                self.post(text, Level::Info);
                Some(command)
            }
        }
    }
}

/// The status line while a revoke is under way.
fn revoking_text(modal: &RevokeModal, command: &Command) -> String {
    let (block, force) = match command {
        Command::Revoke { block_s, force, .. } => (
            block_s.map(|s| {
                format!(
                    ", blocking re-checkout for {}",
                    format_duration(Duration::from_secs(s))
                )
            }),
            *force,
        ),
        _ => (None, false),
    };
    format!(
        "{} {} (seat {}){}…",
        if force { "force-revoking" } else { "revoking" },
        modal.holder,
        short_id(&modal.seat_id),
        block.unwrap_or_default()
    )
}

#[cfg(test)]
mod tests {
    use super::super::test_support::*;
    use super::super::{AppEvent, Level, RevokeOutcome};
    use super::*;

    #[test]
    fn keys_move_the_selection_within_bounds() {
        let mut app = loaded_app();
        app.update(ch('j'), ts(0));
        app.update(key(KeyCode::Down), ts(0));
        assert_eq!(app.selected_seat().unwrap().holder, "carol");
        app.update(ch('G'), ts(0));
        assert_eq!(app.selected, 3);
        app.update(ch('j'), ts(0));
        assert_eq!(app.selected, 3, "stays on the last row");
        app.update(ch('g'), ts(0));
        app.update(ch('k'), ts(0));
        assert_eq!(app.selected, 0, "stays on the first row");
        app.update(key(KeyCode::PageDown), ts(0));
        assert_eq!(app.selected, 3);
    }

    #[test]
    fn scroll_keeps_the_selection_on_screen() {
        let mut app = App::new("s", false, false);
        let seats: Vec<_> = (0..100)
            .map(|i| seat("p", &format!("h{i:03}"), &format!("{i:032x}"), 0, 60))
            .collect();
        load(&mut app, seats, vec![], ts(0), ts(0));
        app.set_page_rows(10, 5);
        for _ in 0..15 {
            app.update(ch('j'), ts(0));
        }
        assert_eq!(app.selected, 15);
        assert_eq!(app.scroll, 6);
        app.update(key(KeyCode::PageUp), ts(0));
        assert_eq!((app.selected, app.scroll), (5, 5));
        app.update(ch('G'), ts(0));
        assert_eq!((app.selected, app.scroll), (99, 90));
    }

    #[test]
    fn revoke_flow_confirm_with_y_returns_a_command() {
        let mut app = loaded_app();
        app.update(ch('j'), ts(0)); // bob
        app.update(ch('r'), ts(0));
        let Some(Modal::Revoke(m)) = &app.modal else {
            panic!("revoke modal expected");
        };
        assert_eq!(m.holder, "bob");
        assert_eq!(m.license_id, "demo-cad");
        // j/k/q do nothing inside the modal.
        assert!(app.update(ch('q'), ts(0)).is_empty());
        assert!(!app.should_quit);
        let cmds = app.update(ch('y'), ts(0));
        assert_eq!(
            cmds,
            vec![Command::Revoke {
                seat_id: "b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2".into(),
                holder: "bob".into(),
                reason: None,
                block_s: None,
                force: false,
            }]
        );
        assert!(app.modal.is_none());
        // The outcome arrives: the row goes away and a refresh is asked for.
        let cmds = app.update(
            AppEvent::RevokeDone {
                seat_id: "b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2".into(),
                holder: "bob".into(),
                outcome: RevokeOutcome::Revoked,
            },
            ts(1),
        );
        assert_eq!(cmds[0], Command::Refresh, "{cmds:?}");
        assert_eq!(holders(&app), ["alice", "carol", "dave"]);
        let msg = app.message.as_ref().unwrap();
        assert_eq!(msg.level, Level::Success);
        assert_eq!(msg.text, "revoked bob (seat b2b2b2b2)");
    }

    #[test]
    fn revoke_with_a_typed_reason_and_enter() {
        let mut app = loaded_app();
        app.update(ch('r'), ts(0));
        app.update(key(KeyCode::Tab), ts(0));
        for c in "stuck yes".chars() {
            app.update(ch(c), ts(0));
        }
        let Some(Modal::Revoke(m)) = &app.modal else {
            panic!("modal closed by typing y/n in the reason");
        };
        assert_eq!(m.reason, "stuck yes");
        let cmds = app.update(key(KeyCode::Enter), ts(0));
        assert_eq!(
            cmds,
            vec![Command::Revoke {
                seat_id: "a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1".into(),
                holder: "alice".into(),
                reason: Some("stuck yes".into()),
                block_s: None,
                force: false,
            }]
        );
    }

    #[test]
    fn revoke_with_a_block_chosen_by_key() {
        let mut app = loaded_app();
        app.update(ch('r'), ts(0));
        app.update(ch('b'), ts(0));
        app.update(key(KeyCode::Right), ts(0)); // 10m, then 1h
        let cmds = app.update(key(KeyCode::Enter), ts(0));
        assert_eq!(
            cmds,
            vec![Command::Revoke {
                seat_id: "a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1".into(),
                holder: "alice".into(),
                reason: None,
                block_s: Some(3600),
                force: false,
            }]
        );
        assert_eq!(
            app.message.as_ref().unwrap().text,
            "revoking alice (seat a1a1a1a1), blocking re-checkout for 1h…"
        );
    }

    #[test]
    fn revoke_cancelled_with_n_or_esc() {
        let mut app = loaded_app();
        app.update(ch('r'), ts(0));
        assert!(app.update(ch('n'), ts(0)).is_empty());
        assert!(app.modal.is_none());
        app.update(ch('r'), ts(0));
        app.update(key(KeyCode::Tab), ts(0));
        app.update(ch('x'), ts(0));
        assert!(app.update(key(KeyCode::Esc), ts(0)).is_empty());
        assert!(app.modal.is_none());
        assert_eq!(app.message.as_ref().unwrap().text, "revoke cancelled");
        assert_eq!(app.view.len(), 4);
    }

    /// bob's seat as the server sees it after he borrowed it.
    fn with_bob_borrowed(app: &mut App) {
        use leasehold_common::api::SeatState;
        let mut seats = sample_seats();
        seats[1].state = SeatState::Borrowed;
        seats[1].expires_at = ts(86_400);
        load(app, seats, vec![], ts(0), ts(0));
    }

    fn revoke_cmd(reason: Option<&str>, force: bool) -> Vec<Command> {
        vec![Command::Revoke {
            seat_id: "b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2".into(),
            holder: "bob".into(),
            reason: reason.map(String::from),
            block_s: None,
            force,
        }]
    }

    fn revoke_modal(app: &App) -> &RevokeModal {
        match &app.modal {
            Some(Modal::Revoke(m)) => m,
            other => panic!("revoke modal expected, got {other:?}"),
        }
    }

    /// A borrowed seat's dialog knows until when and offers force; Enter
    /// stays plain, F sends `force`, and the seat goes.
    #[test]
    fn a_borrowed_seat_is_force_revoked_with_f() {
        let mut app = loaded_app();
        with_bob_borrowed(&mut app);
        app.update(ch('j'), ts(0));
        app.update(ch('r'), ts(0));
        let m = revoke_modal(&app);
        assert_eq!(m.borrowed_until, Some(ts(86_400)));
        assert!(m.offers_force() && m.refusal.is_none());
        // A live seat's dialog offers nothing of the kind.
        let mut plain = loaded_app();
        plain.update(ch('r'), ts(0));
        assert!(!revoke_modal(&plain).offers_force());
        assert!(
            plain.update(ch('F'), ts(0)).is_empty(),
            "F is no answer there"
        );

        assert_eq!(app.update(ch('F'), ts(0)), revoke_cmd(None, true));
        assert_eq!(
            app.message.as_ref().unwrap().text,
            "force-revoking bob (seat b2b2b2b2)…"
        );
        let cmds = app.update(
            AppEvent::RevokeDone {
                seat_id: "b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2".into(),
                holder: "bob".into(),
                outcome: RevokeOutcome::Revoked,
            },
            ts(1),
        );
        assert_eq!(cmds[0], Command::Refresh);
        assert_eq!(holders(&app), ["alice", "carol", "dave"]);
    }

    /// The table showed bob live; the server refuses the plain revoke with
    /// 409 `borrowed`. The dialog comes back as it was (reason kept) with
    /// the server's sentence, the table is fetched again, and F forces it.
    #[test]
    fn a_plain_revoke_refused_as_borrowed_reopens_the_dialog_with_force() {
        let mut app = loaded_app();
        app.update(ch('j'), ts(0));
        app.update(ch('r'), ts(0));
        app.update(key(KeyCode::Tab), ts(0));
        for c in "lost laptop".chars() {
            app.update(ch(c), ts(0));
        }
        let cmds = app.update(key(KeyCode::Enter), ts(0));
        assert_eq!(cmds, revoke_cmd(Some("lost laptop"), false));
        assert!(app.modal.is_none());
        let why = "seat is borrowed until 2026-12-01T04:00:00.000Z: its holder's token \
                   stays valid offline until then";
        let cmds = app.update(
            AppEvent::RevokeDone {
                seat_id: "b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2".into(),
                holder: "bob".into(),
                outcome: RevokeOutcome::Borrowed(format!("{why}\u{1b}[2J")),
            },
            ts(1),
        );
        assert!(
            matches!(&cmds[..], [Command::FetchPage(_)]),
            "its state fetched again: {cmds:?}"
        );
        assert_eq!(holders(&app).len(), 4, "still held");
        let m = revoke_modal(&app);
        assert_eq!(m.reason, "lost laptop");
        assert_eq!(
            m.refusal.as_deref(),
            Some(format!("{why}\u{fffd}[2J").as_str()),
            "the server's sentence, made safe for the terminal"
        );
        let msg = app.message.as_ref().unwrap();
        assert_eq!(
            (msg.level, msg.text.as_str()),
            (Level::Warn, "not revoked: the seat is borrowed")
        );
        // Back in the answer field, F forces it with the same reason.
        app.update(key(KeyCode::BackTab), ts(1));
        assert_eq!(
            app.update(ch('F'), ts(1)),
            revoke_cmd(Some("lost laptop"), true)
        );
    }

    /// A refusal while another dialog is open only says so in the status
    /// line, in full.
    #[test]
    fn a_refusal_never_replaces_an_open_dialog() {
        let mut app = loaded_app();
        app.update(ch('j'), ts(0));
        app.update(ch('r'), ts(0));
        app.update(ch('y'), ts(0));
        app.update(ch('?'), ts(0));
        app.update(
            AppEvent::RevokeDone {
                seat_id: "b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2".into(),
                holder: "bob".into(),
                outcome: RevokeOutcome::Borrowed("borrowed until tomorrow".into()),
            },
            ts(1),
        );
        assert_eq!(app.modal, Some(Modal::Help));
        assert_eq!(
            app.message.as_ref().unwrap().text,
            "not revoked: borrowed until tomorrow"
        );
    }

    #[test]
    fn read_only_disables_revoke() {
        let mut app = App::new("s", true, false);
        load(&mut app, sample_seats(), vec![], ts(0), ts(0));
        assert!(app.update(ch('r'), ts(0)).is_empty());
        assert!(app.modal.is_none());
        assert!(app.message.as_ref().unwrap().text.contains("read-only"));
    }

    #[test]
    fn help_opens_and_any_key_closes_it() {
        let mut app = loaded_app();
        app.update(ch('?'), ts(0));
        assert_eq!(app.modal, Some(Modal::Help));
        app.update(ch('q'), ts(0));
        assert!(app.modal.is_none());
        assert!(
            !app.should_quit,
            "the key that closes help does nothing else"
        );
        app.update(ch('q'), ts(0));
        assert!(app.should_quit);
    }

    #[test]
    fn ctrl_c_quits_even_from_a_modal() {
        let mut app = loaded_app();
        app.update(ch('r'), ts(0));
        app.update(
            AppEvent::Key(KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL)),
            ts(0),
        );
        assert!(app.should_quit);
    }

    #[test]
    fn freeze_holds_back_snapshots_and_events() {
        let mut app = loaded_app();
        app.update(ch('f'), ts(0));
        assert!(app.frozen);
        load(&mut app, vec![], vec![], ts(1), ts(1));
        let cmds = app.update(
            AppEvent::StreamEvent(Box::new(event(1, leasehold_common::api::EventKind::Reap))),
            ts(1),
        );
        assert!(cmds.is_empty(), "no fetch while frozen");
        assert_eq!(app.view.len(), 4, "frozen: old data stays");
        assert!(app.events.is_empty());
        let cmds = app.update(ch('f'), ts(2));
        assert_eq!(app.events.len(), 1);
        answer(&mut app, &cmds[0], vec![], ts(2), ts(2));
        assert!(app.view.is_empty());
    }
}
