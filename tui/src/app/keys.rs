//! Key dispatch: what each key does to the [`App`], by mode (a modal open,
//! the filter being typed, or the tables). Pure: state changes and the
//! [`Command`]s to carry out (a revoke, pages to fetch).

use std::time::Duration;

use crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use leasehold_common::policy::format_duration;
use leasehold_common::text::is_unsafe_char;

use super::paging::FILTER_DEBOUNCE_MS;
use super::revoke::{RevokeModal, RevokeStep};
use super::{App, Command, Level, Modal, Pane};
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
        self.modal = Some(Modal::Revoke(RevokeModal::for_seat(seat)));
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
                let block = match &command {
                    Command::Revoke {
                        block_s: Some(s), ..
                    } => format!(
                        ", blocking re-checkout for {}",
                        format_duration(Duration::from_secs(*s))
                    ),
                    _ => String::new(),
                };
                let text = format!(
                    "revoking {} (seat {}){block}…",
                    modal.holder,
                    short_id(&modal.seat_id)
                );
                self.modal = None;
                self.post(text, Level::Info);
                Some(command)
            }
        }
    }
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
