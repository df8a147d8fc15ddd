//! The holders table's sort columns. The server sorts (see
//! [`SortKey::server_sort`] in `paging.rs`); a row's state has no column
//! of its own there, and lapsed seats are the ones with the earliest
//! `expires_at` anyway, so "expires in" is the state order too.

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SortKey {
    License,
    Holder,
    HeldFor,
    ExpiresIn,
}

impl SortKey {
    pub const ALL: [SortKey; 4] = [
        SortKey::License,
        SortKey::Holder,
        SortKey::HeldFor,
        SortKey::ExpiresIn,
    ];

    pub fn label(self) -> &'static str {
        match self {
            SortKey::License => "license",
            SortKey::Holder => "holder",
            SortKey::HeldFor => "held for",
            SortKey::ExpiresIn => "expires in",
        }
    }

    pub(super) fn next(self) -> SortKey {
        let i = SortKey::ALL.iter().position(|&k| k == self).unwrap_or(0);
        SortKey::ALL[(i + 1) % SortKey::ALL.len()]
    }
}
