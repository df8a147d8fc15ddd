//! What the checkout's cap and count steps count: live seats by what they
//! count for ([`Key`]), with the seats waiters ahead in line are given
//! first ([`Tally`]).

use std::collections::HashMap;

use leasehold_common::policy::Group;

use crate::store::Scope;

/// Live seats as the cap and count steps see them: the store's counts
/// plus the seats that waiters ahead in line would be given first. With
/// waiters, each count is asked of the store once per checkout; without,
/// nothing is kept (the plain checkout asks each count once anyway).
#[derive(Default)]
pub(super) struct Tally<'k> {
    pub(super) stored: Option<HashMap<Key<'k>, u32>>,
    pub(super) spoken_for: HashMap<Key<'k>, u32>,
}

/// What a seat counts for.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum Key<'k> {
    License,
    Group(&'k str),
    Holder(&'k str),
}

impl<'k> Key<'k> {
    pub(super) fn scope<'a>(self, license_id: &'a str) -> Scope<'a>
    where
        'k: 'a,
    {
        match self {
            Key::License => Scope::License(license_id),
            Key::Group(group) => Scope::Group { license_id, group },
            Key::Holder(holder) => Scope::Holder { license_id, holder },
        }
    }
}

impl<'k> Tally<'k> {
    /// A waiter ahead is served: its seat counts from now on.
    pub(super) fn speak_for(&mut self, holder: &'k str, group: Option<&'k Group>) {
        let keys = [
            Some(Key::License),
            Some(Key::Holder(holder)),
            group.map(|g| Key::Group(&g.name)),
        ];
        for key in keys.into_iter().flatten() {
            *self.spoken_for.entry(key).or_default() += 1;
        }
    }
}
