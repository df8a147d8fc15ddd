//! The holders table's rows: the seats the filter lets through, in the
//! chosen order, with the widths their text columns need.

use leasehold_common::api::SeatView;

use super::seat_key::SeatKey;
use super::sort_key::{SortKey, seat_order, sort_prefix};

/// The rows on screen, as indices into the seats, and the longest license
/// id, holder and fingerprint among them (in characters).
#[derive(Debug, Default)]
pub(super) struct View {
    pub rows: Vec<usize>,
    pub widths: [usize; 3],
}

/// Filter by `filter` (case-insensitive substring of license, holder,
/// fingerprint or seat id) and sort by `sort`, reversed when `desc`.
pub(super) fn build_view(
    seats: &[SeatView],
    keys: &[SeatKey],
    filter: &str,
    sort: SortKey,
    desc: bool,
) -> View {
    let mut rows = matching(keys, filter);
    sort_rows(&mut rows, seats, keys, sort);
    if desc {
        rows.reverse();
    }
    let mut widths = [0; 3];
    for &i in &rows {
        for (w, k) in widths.iter_mut().zip(keys[i].widths) {
            *w = (*w).max(k);
        }
    }
    View { rows, widths }
}

fn matching(keys: &[SeatKey], filter: &str) -> Vec<usize> {
    let needle = filter.to_lowercase();
    if needle.is_empty() {
        return (0..keys.len()).collect();
    }
    keys.iter()
        .enumerate()
        .filter(|(_, k)| k.search.contains(&needle))
        .map(|(i, _)| i)
        .collect()
}

fn sort_rows(rows: &mut Vec<usize>, seats: &[SeatView], keys: &[SeatKey], sort: SortKey) {
    // Sort compact stand-ins that order like the start of the key, held
    // side by side, and compare the seats themselves only on a tie: with
    // 100,000 rows the comparisons would otherwise chase pointers into
    // every seat's strings (see tui/benches/render.rs).
    let mut decorated: Vec<([u128; 3], usize)> = rows
        .iter()
        .map(|&i| (sort_prefix(sort, &seats[i], &keys[i]), i))
        .collect();
    decorated.sort_unstable_by(|x, y| {
        x.0.cmp(&y.0)
            .then_with(|| seat_order(sort, seats, keys, x.1, y.1))
    });
    rows.clear();
    rows.extend(decorated.iter().map(|d| d.1));
}

#[cfg(test)]
mod tests {
    use std::cmp::Ordering;

    use crossterm::event::KeyCode;

    use super::super::App;
    use super::super::sort_key::{SortKey, seat_order};
    use super::super::test_support::*;

    #[test]
    fn filter_matches_holder_license_fingerprint_and_seat_id() {
        let mut app = loaded_app();
        app.update(ch('/'), ts(0));
        assert!(app.filter_editing);
        for c in "REN".chars() {
            app.update(ch(c), ts(0));
        }
        assert_eq!(holders(&app), ["dave"], "license, case-insensitive");
        app.update(key(KeyCode::Enter), ts(0));
        assert!(!app.filter_editing);
        assert_eq!(app.filter, "REN");

        app.update(key(KeyCode::Esc), ts(0));
        assert_eq!(app.filter, "", "Esc clears the filter first");
        assert_eq!(app.view.len(), 4);

        app.update(ch('/'), ts(0));
        for c in "fp-car".chars() {
            app.update(ch(c), ts(0));
        }
        assert_eq!(holders(&app), ["carol"], "fingerprint");
        app.update(key(KeyCode::Esc), ts(0));
        assert!(!app.filter_editing);
        assert_eq!(app.view.len(), 4, "Esc while typing clears and leaves");

        app.update(ch('/'), ts(0));
        for c in "b2b2".chars() {
            app.update(ch(c), ts(0));
        }
        assert_eq!(holders(&app), ["bob"], "seat id");
        app.update(key(KeyCode::Backspace), ts(0));
        assert_eq!(app.filter, "b2b");
        // q while typing is text, not quit.
        app.update(ch('q'), ts(0));
        assert!(!app.should_quit);
        assert!(app.view.is_empty());
        app.update(ch('r'), ts(0));
        assert!(app.modal.is_none(), "r while typing does not revoke");
    }

    #[test]
    fn sort_cycles_columns_and_reverses() {
        let mut app = loaded_app();
        app.update(ch('s'), ts(0));
        assert_eq!(app.sort, SortKey::Holder);
        assert_eq!(holders(&app), ["alice", "bob", "carol", "dave"]);
        app.update(ch('s'), ts(0));
        assert_eq!(app.sort, SortKey::HeldFor);
        assert_eq!(holders(&app), ["dave", "bob", "carol", "alice"]);
        app.update(ch('s'), ts(0));
        assert_eq!(app.sort, SortKey::ExpiresIn);
        assert_eq!(holders(&app), ["carol", "bob", "alice", "dave"]);
        app.update(ch('S'), ts(0));
        assert_eq!(holders(&app), ["dave", "alice", "bob", "carol"]);
        app.update(ch('s'), ts(0));
        assert_eq!(app.sort, SortKey::State);
        assert!(!app.sort_desc, "a new column starts ascending");
        app.update(ch('s'), ts(0));
        assert_eq!(app.sort, SortKey::License, "wraps around");
    }

    #[test]
    fn ten_thousand_holders_filter_and_sort() {
        let mut app = App::new("s", false, false);
        let seats: Vec<_> = (0..10_000)
            .map(|i| {
                seat(
                    &format!("pool-{}", i % 7),
                    &format!("user-{i:05}"),
                    &format!("{i:032x}"),
                    -(i as i64),
                    60 - (i as i64 % 50),
                )
            })
            .collect();
        app.update(snapshot(seats, vec![], ts(0), ts(0)), ts(0));
        app.update(ch('/'), ts(0));
        for c in "user-01234".chars() {
            app.update(ch(c), ts(0));
        }
        assert_eq!(holders(&app), ["user-01234"]);
        app.update(key(KeyCode::Esc), ts(0));
        // Every column, each in the order it stands for, every row kept.
        // (How fast this is: tui/benches/render.rs.)
        for _ in 0..5 {
            app.update(ch('s'), ts(0));
            assert_eq!(app.view.len(), 10_000, "{:?}", app.sort);
            let in_order = app.view.windows(2).all(|w| {
                seat_order(app.sort, &app.seats, &app.search_keys, w[0], w[1]) == Ordering::Less
            });
            assert!(in_order, "{:?}", app.sort);
        }
        assert_eq!(app.sort, SortKey::License);
    }
}
