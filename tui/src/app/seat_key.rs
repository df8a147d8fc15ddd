//! What filter, sort and column widths need of one seat, made once per
//! snapshot so a keystroke never lower-cases or counts every row again.

use leasehold_common::api::SeatView;

/// What filter, sort and column widths need of one seat, made once per
/// snapshot.
#[derive(Debug)]
pub(super) struct SeatKey {
    /// Lower-cased "license␟holder␟fingerprint␟seat", for the filter.
    pub search: String,
    /// Where the lower-cased holder sits in `search`, for the holder sort.
    holder: std::ops::Range<usize>,
    /// Characters in the license id, the holder and the fingerprint (`—`,
    /// shown for none, counts 1).
    pub widths: [usize; 3],
}

impl SeatKey {
    pub fn holder_lower(&self) -> &str {
        &self.search[self.holder.clone()]
    }
}

pub(super) fn search_key(s: &SeatView) -> SeatKey {
    let fingerprint = s.fingerprint.as_deref().unwrap_or("");
    let mut search = String::with_capacity(
        s.license_id.len() + s.holder.len() + fingerprint.len() + s.seat_id.len() + 3,
    );
    // Part by part is the same as lower-casing the joined string: the
    // separator is neither cased nor case-ignorable, so it ends the context
    // of a final sigma just as the end of the string does.
    let push_lower = |out: &mut String, part: &str| {
        if part.is_ascii() {
            let from = out.len();
            out.push_str(part);
            out[from..].make_ascii_lowercase();
        } else {
            out.push_str(&part.to_lowercase());
        }
    };
    push_lower(&mut search, &s.license_id);
    search.push('\u{1f}');
    let start = search.len();
    push_lower(&mut search, &s.holder);
    let holder = start..search.len();
    search.push('\u{1f}');
    push_lower(&mut search, fingerprint);
    search.push('\u{1f}');
    push_lower(&mut search, &s.seat_id);
    let widths = [
        s.license_id.chars().count(),
        s.holder.chars().count(),
        s.fingerprint.as_deref().map_or(1, |f| f.chars().count()),
    ];
    SeatKey {
        search,
        holder,
        widths,
    }
}
