//! The holders table's sort columns and the order each one means, with the
//! packed prefix keys that make sorting 100,000 rows cheap.
//!
//! [`seat_order`] is the order; [`sort_prefix`] turns the start of it into
//! three `u128`s that sort the same way wherever they differ, so most
//! comparisons touch no seat at all (see tui/benches/render.rs).

use std::cmp::Ordering;

use leasehold_common::Timestamp;
use leasehold_common::api::{SeatState, SeatView};

use super::seat_key::SeatKey;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SortKey {
    License,
    Holder,
    HeldFor,
    ExpiresIn,
    State,
}

impl SortKey {
    pub const ALL: [SortKey; 5] = [
        SortKey::License,
        SortKey::Holder,
        SortKey::HeldFor,
        SortKey::ExpiresIn,
        SortKey::State,
    ];

    pub fn label(self) -> &'static str {
        match self {
            SortKey::License => "license",
            SortKey::Holder => "holder",
            SortKey::HeldFor => "held for",
            SortKey::ExpiresIn => "expires in",
            SortKey::State => "state",
        }
    }

    pub(super) fn next(self) -> SortKey {
        let i = SortKey::ALL.iter().position(|&k| k == self).unwrap_or(0);
        SortKey::ALL[(i + 1) % SortKey::ALL.len()]
    }
}

/// Lapsed sorts before live.
fn state_rank(s: SeatState) -> u8 {
    match s {
        SeatState::Lapsed => 0,
        SeatState::Live => 1,
    }
}

/// The ascending order of seats `a` and `b` under `sort`; the seat id breaks
/// every tie, so the order is total.
pub(super) fn seat_order(
    sort: SortKey,
    seats: &[SeatView],
    keys: &[SeatKey],
    a: usize,
    b: usize,
) -> Ordering {
    let (x, y) = (&seats[a], &seats[b]);
    let primary = match sort {
        SortKey::License => x
            .license_id
            .cmp(&y.license_id)
            .then_with(|| x.holder.cmp(&y.holder)),
        SortKey::Holder => keys[a]
            .holder_lower()
            .cmp(keys[b].holder_lower())
            .then_with(|| x.license_id.cmp(&y.license_id)),
        // Shortest-held first: the latest checkout.
        SortKey::HeldFor => y.checked_out_at.cmp(&x.checked_out_at),
        SortKey::ExpiresIn => x.expires_at.cmp(&y.expires_at),
        // Lapsed first, then the soonest to expire.
        SortKey::State => state_rank(x.state)
            .cmp(&state_rank(y.state))
            .then_with(|| x.expires_at.cmp(&y.expires_at)),
    };
    primary.then_with(|| x.seat_id.cmp(&y.seat_id))
}

/// Numbers that order seats like the start of the `sort` key does (a < b
/// here implies a < b there; ties say nothing). A string field is followed
/// by the next one only when its prefix holds all of it; otherwise by
/// `u128::MAX` (never a prefix of UTF-8: no 0xFF byte), which orders it
/// after every complete string with the same prefix, as its length does.
pub(super) fn sort_prefix(sort: SortKey, s: &SeatView, k: &SeatKey) -> [u128; 3] {
    let (seat, holder) = (s.seat_id.as_bytes(), s.holder.as_bytes());
    match sort {
        SortKey::License => {
            let license = s.license_id.as_bytes();
            if fits(license, 16) {
                [
                    str_prefix(license),
                    str_prefix(holder),
                    str_prefix(holder.get(16..).unwrap_or_default()),
                ]
            } else {
                [str_prefix(license), u128::MAX, u128::MAX]
            }
        }
        SortKey::Holder => {
            let lower = k.holder_lower().as_bytes();
            let license = if fits(lower, 32) {
                str_prefix(s.license_id.as_bytes())
            } else {
                u128::MAX
            };
            [
                str_prefix(lower),
                str_prefix(lower.get(16..).unwrap_or_default()),
                license,
            ]
        }
        SortKey::HeldFor => [
            u128::from(!time_order(s.checked_out_at)),
            str_prefix(seat),
            str_prefix(seat.get(16..).unwrap_or_default()),
        ],
        SortKey::ExpiresIn => [
            u128::from(time_order(s.expires_at)),
            str_prefix(seat),
            str_prefix(seat.get(16..).unwrap_or_default()),
        ],
        SortKey::State => [
            (u128::from(state_rank(s.state)) << 64) | u128::from(time_order(s.expires_at)),
            str_prefix(seat),
            str_prefix(seat.get(16..).unwrap_or_default()),
        ],
    }
}

/// Do the first `n` bytes, zero-padded, tell `s` apart from every other
/// string (no longer than `n`, no NUL that padding could stand for)?
fn fits(s: &[u8], n: usize) -> bool {
    s.len() <= n && !s.contains(&0)
}

/// The first 16 bytes, big-endian, zero-padded: orders like the bytes.
fn str_prefix(s: &[u8]) -> u128 {
    let mut buf = [0u8; 16];
    let n = s.len().min(16);
    buf[..n].copy_from_slice(&s[..n]);
    u128::from_be_bytes(buf)
}

/// Milliseconds as an unsigned number in the same order.
fn time_order(t: Timestamp) -> u64 {
    (t.as_millis() as u64) ^ (1 << 63)
}

#[cfg(test)]
mod tests {
    use super::super::App;
    use super::super::test_support::{seat, snapshot, ts};
    use super::*;
    use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

    /// The plain comparison the prefix keys stand in for.
    fn reference_order(app: &App) -> Vec<usize> {
        let mut view: Vec<usize> = (0..app.seats.len()).collect();
        view.sort_by(|&a, &b| {
            let (x, y) = (&app.seats[a], &app.seats[b]);
            let primary = match app.sort {
                SortKey::License => x
                    .license_id
                    .cmp(&y.license_id)
                    .then_with(|| x.holder.cmp(&y.holder)),
                SortKey::Holder => x
                    .holder
                    .to_lowercase()
                    .cmp(&y.holder.to_lowercase())
                    .then_with(|| x.license_id.cmp(&y.license_id)),
                SortKey::HeldFor => y.checked_out_at.cmp(&x.checked_out_at),
                SortKey::ExpiresIn => x.expires_at.cmp(&y.expires_at),
                SortKey::State => state_rank(x.state)
                    .cmp(&state_rank(y.state))
                    .then_with(|| x.expires_at.cmp(&y.expires_at)),
            };
            primary.then_with(|| x.seat_id.cmp(&y.seat_id))
        });
        if app.sort_desc {
            view.reverse();
        }
        view
    }

    #[test]
    fn prefix_keys_sort_like_the_plain_comparison() {
        // Shared long prefixes, short and empty strings, non-ASCII and
        // final sigmas, equal times: where the prefixes tie.
        let licenses = [
            "a",
            "long-license-name-0001",
            "long-license-name-0002",
            "sixteen-bytes-id",
            "sixteen-bytes-idx",
            "Ω",
        ];
        let holders = [
            "build-agent-long-prefix-07",
            "build-agent-long-prefix-7",
            "Build-Agent-Long-Prefix-08",
            "ΣΟΦΙΑΣ",
            "σοφιας",
            "",
            "a",
            "A",
            "a-holder-name-longer-than-32-bytes-1",
            "A-HOLDER-NAME-LONGER-THAN-32-BYTES-2",
        ];
        let mut seats = Vec::new();
        for i in 0..600usize {
            let mut s = seat(
                licenses[i % 6],
                holders[(i / 6) % 10],
                &format!("{:032x}", (i * 7919) % 1000),
                -((i % 5) as i64),
                (i % 7) as i64 - 3,
            );
            if i % 11 == 0 {
                s.state = SeatState::Lapsed;
            }
            seats.push(s);
        }
        let mut app = App::new("s", false, false);
        app.update(snapshot(seats, vec![], ts(0), ts(0)), ts(0));
        for _ in 0..SortKey::ALL.len() {
            for _ in 0..2 {
                let expected = reference_order(&app);
                let key = |v: &[usize]| -> Vec<String> {
                    v.iter().map(|&i| format!("{:?}", app.seats[i])).collect()
                };
                assert_eq!(key(&app.view), key(&expected), "{:?}", app.sort);
                app.on_key(KeyEvent::new(KeyCode::Char('S'), KeyModifiers::NONE));
            }
            app.on_key(KeyEvent::new(KeyCode::Char('s'), KeyModifiers::NONE));
        }
    }
}
