//! `GET /v1/admin/seats` with filters, sort and keyset paging, answered in
//! SQL by either store: a page of 100 seats out of 100,000 reads about 100
//! rows from an index (plus one `count(*)` for `total`), never the table
//! into memory.
//!
//! Keyset paging: rows are ordered by (sort key, `seat_id`) and a page
//! starts strictly after the cursor's (sort key, `seat_id`), so seats that
//! come or go between pages never shift the next page. The cursor is
//! opaque to clients (hex of a small JSON array).

use serde_json::json;

use super::{LeaseRow, lease_columns};

/// Most seats one page may hold.
pub const MAX_LIMIT: usize = 10_000;

/// What the seats may be sorted by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SeatSort {
    /// By license, then checkout time (the order without `sort`).
    License,
    Holder,
    ExpiresAt,
    CheckedOutAt,
}

impl SeatSort {
    pub fn parse(s: &str) -> Option<SeatSort> {
        Some(match s {
            "license" => SeatSort::License,
            "holder" => SeatSort::Holder,
            "expires_at" => SeatSort::ExpiresAt,
            "checked_out_at" => SeatSort::CheckedOutAt,
            _ => return None,
        })
    }

    pub fn as_str(self) -> &'static str {
        match self {
            SeatSort::License => "license",
            SeatSort::Holder => "holder",
            SeatSort::ExpiresAt => "expires_at",
            SeatSort::CheckedOutAt => "checked_out_at",
        }
    }

    /// The columns of the sort key, before the `seat_id` tie-break.
    fn columns(self) -> &'static [&'static str] {
        match self {
            SeatSort::License => &["license_id", "checked_out_at"],
            SeatSort::Holder => &["holder"],
            SeatSort::ExpiresAt => &["expires_at"],
            SeatSort::CheckedOutAt => &["checked_out_at"],
        }
    }

    /// The sort key of a row, as the cursor keeps it.
    fn key_of(self, row: &LeaseRow) -> Vec<Key> {
        match self {
            SeatSort::License => vec![
                Key::Text(row.license_id.clone()),
                Key::Int(row.checked_out_at.as_millis()),
            ],
            SeatSort::Holder => vec![Key::Text(row.holder.clone())],
            SeatSort::ExpiresAt => vec![Key::Int(row.expires_at.as_millis())],
            SeatSort::CheckedOutAt => vec![Key::Int(row.checked_out_at.as_millis())],
        }
    }

    /// Which kind of value each key column holds.
    fn key_is_text(self) -> &'static [bool] {
        match self {
            SeatSort::License => &[true, false],
            SeatSort::Holder => &[true],
            SeatSort::ExpiresAt | SeatSort::CheckedOutAt => &[false],
        }
    }
}

/// One value of a sort key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Key {
    Text(String),
    Int(i64),
}

/// Where a page starts: just after this row of this order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cursor {
    pub sort: SeatSort,
    pub desc: bool,
    pub key: Vec<Key>,
    pub seat_id: String,
}

impl Cursor {
    fn after(sort: SeatSort, desc: bool, row: &LeaseRow) -> Cursor {
        Cursor {
            sort,
            desc,
            key: sort.key_of(row),
            seat_id: row.seat_id.clone(),
        }
    }

    /// The opaque text handed to clients.
    pub fn encode(&self) -> String {
        let key: Vec<serde_json::Value> = self
            .key
            .iter()
            .map(|k| match k {
                Key::Text(s) => json!(s),
                Key::Int(n) => json!(n),
            })
            .collect();
        let order = if self.desc { "desc" } else { "asc" };
        hex::encode(json!([1, self.sort.as_str(), order, key, self.seat_id]).to_string())
    }

    /// The cursor `text` encodes, if it is one this server made.
    pub fn decode(text: &str) -> Option<Cursor> {
        let bytes = hex::decode(text).ok()?;
        let v: serde_json::Value = serde_json::from_slice(&bytes).ok()?;
        let [version, sort, order, key, seat_id] = v.as_array()?.as_slice() else {
            return None;
        };
        if version.as_i64() != Some(1) {
            return None;
        }
        let sort = SeatSort::parse(sort.as_str()?)?;
        let desc = match order.as_str()? {
            "asc" => false,
            "desc" => true,
            _ => return None,
        };
        let key = key.as_array()?;
        let kinds = sort.key_is_text();
        if key.len() != kinds.len() {
            return None;
        }
        let key = key
            .iter()
            .zip(kinds)
            .map(|(v, text)| match text {
                true => v.as_str().map(|s| Key::Text(s.to_string())),
                false => v.as_i64().map(Key::Int),
            })
            .collect::<Option<Vec<Key>>>()?;
        Some(Cursor {
            sort,
            desc,
            key,
            seat_id: seat_id.as_str()?.to_string(),
        })
    }
}

/// A request for seats.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeatQuery {
    pub license: Option<String>,
    /// Case-insensitive substring of holder, fingerprint, license id or
    /// seat id (already lowercased).
    pub q: Option<String>,
    pub sort: SeatSort,
    pub desc: bool,
    /// `None`: every matching seat in one answer.
    pub limit: Option<usize>,
    /// Of the same `sort` and `desc` (the handler checks).
    pub after: Option<Cursor>,
}

impl Default for SeatQuery {
    fn default() -> Self {
        SeatQuery {
            license: None,
            q: None,
            sort: SeatSort::License,
            desc: false,
            limit: None,
            after: None,
        }
    }
}

/// One page of seats.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeatsPage {
    pub rows: Vec<LeaseRow>,
    /// Seats matching the filters, on every page.
    pub total: u64,
    /// Where the next page starts, if there is one.
    pub next: Option<Cursor>,
}

/// A value bound to a statement, either store.
#[derive(Debug, Clone)]
pub(super) enum Param {
    Text(String),
    Int(i64),
}

/// The SQL of a query in the placeholders of one store.
pub(super) struct Sql {
    /// `WHERE …` of the count (filters only).
    pub count: String,
    pub count_params: Vec<Param>,
    /// The page (filters, cursor, order, limit).
    pub page: String,
    pub page_params: Vec<Param>,
}

/// Which dialect to write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Dialect {
    Sqlite,
    Postgres,
}

/// The license ids that have leases, one index probe each (a loose scan of
/// an index led by `license_id`), for the merged orders below: a page of
/// those reads at most `limit + 1` rows per license.
pub(super) const LICENSES_WITH_LEASES: &str = "WITH RECURSIVE l(id) AS (
         SELECT min(license_id) FROM leases
         UNION ALL
         SELECT (SELECT min(license_id) FROM leases WHERE license_id > l.id)
         FROM l WHERE l.id IS NOT NULL)
     SELECT id FROM l WHERE id IS NOT NULL";

/// Bind `p` and return its placeholder.
fn placeholder(dialect: Dialect, p: Param, params: &mut Vec<Param>) -> String {
    params.push(p);
    match dialect {
        Dialect::Sqlite => format!("?{}", params.len()),
        Dialect::Postgres => format!("${}", params.len()),
    }
}

fn where_of(f: &[String]) -> String {
    if f.is_empty() {
        String::new()
    } else {
        format!(" WHERE {}", f.join(" AND "))
    }
}

impl SeatQuery {
    /// Seats of every license by expiry or by checkout time: read as each
    /// license's first rows from its `(license_id, key)` index, merged, so
    /// no index of its own (a heartbeat moves its lease in every index
    /// holding `expires_at`) is needed. [`sql`](Self::sql) needs the
    /// licenses that have leases ([`LICENSES_WITH_LEASES`]) for these.
    pub(super) fn merges_licenses(&self) -> bool {
        self.license.is_none() && matches!(self.sort, SeatSort::ExpiresAt | SeatSort::CheckedOutAt)
    }

    /// The filters (license, q) and, `with_cursor`, where the page starts.
    fn filters(&self, dialect: Dialect, params: &mut Vec<Param>, with_cursor: bool) -> Vec<String> {
        let mut filters: Vec<String> = Vec::new();
        if let Some(l) = &self.license {
            let p = placeholder(dialect, Param::Text(l.clone()), params);
            filters.push(format!("license_id = {p}"));
        }
        if let Some(q) = &self.q {
            let p = placeholder(dialect, Param::Text(q.clone()), params);
            filters.push(match dialect {
                Dialect::Sqlite => format!(
                    "(instr(lh_lower(holder), {p}) > 0 \
                     OR instr(lh_lower(coalesce(fingerprint, '')), {p}) > 0 \
                     OR instr(lh_lower(license_id), {p}) > 0 \
                     OR instr(lh_lower(seat_id), {p}) > 0)"
                ),
                Dialect::Postgres => format!(
                    "(strpos(lower(holder), {p}) > 0 \
                     OR strpos(lower(coalesce(fingerprint, '')), {p}) > 0 \
                     OR strpos(lower(license_id), {p}) > 0 \
                     OR strpos(lower(seat_id), {p}) > 0)"
                ),
            });
        }
        if let Some(c) = self.after.as_ref().filter(|_| with_cursor) {
            let mut values: Vec<String> = Vec::new();
            for k in &c.key {
                let p = match k {
                    Key::Text(s) => Param::Text(s.clone()),
                    Key::Int(n) => Param::Int(*n),
                };
                values.push(placeholder(dialect, p, params));
            }
            values.push(placeholder(dialect, Param::Text(c.seat_id.clone()), params));
            let op = if self.desc { "<" } else { ">" };
            filters.push(format!(
                "({}) {op} ({})",
                self.key_columns().join(", "),
                values.join(", ")
            ));
        }
        filters
    }

    /// The sort key's columns, then `seat_id`.
    fn key_columns(&self) -> Vec<&'static str> {
        let mut columns: Vec<&str> = self.sort.columns().to_vec();
        columns.push("seat_id");
        columns
    }

    /// Build both statements. Lowercasing in SQL: `lh_lower` on SQLite (Rust's
    /// `to_lowercase`, registered on every read connection), `lower` on
    /// PostgreSQL. `licenses`: those with leases, when
    /// [`merges_licenses`](Self::merges_licenses).
    pub(super) fn sql(&self, dialect: Dialect, licenses: &[String]) -> Sql {
        let mut count_params = Vec::new();
        let count = format!(
            "SELECT count(*) FROM leases{}",
            where_of(&self.filters(dialect, &mut count_params, false))
        );

        let dir = if self.desc { " DESC" } else { "" };
        let order: Vec<String> = self
            .key_columns()
            .iter()
            .map(|c| format!("{c}{dir}"))
            .collect();
        let order = order.join(", ");
        // One more than asked: whether it exists says if there is a next.
        let limit = |params: &mut Vec<Param>| match self.limit {
            Some(l) => format!(
                " LIMIT {}",
                placeholder(dialect, Param::Int(l as i64 + 1), params)
            ),
            None => String::new(),
        };
        let mut params = Vec::new();
        let page = if self.merges_licenses() && !licenses.is_empty() {
            let mut arms = Vec::new();
            for (i, license) in licenses.iter().enumerate() {
                let p = placeholder(dialect, Param::Text(license.clone()), &mut params);
                let mut filters = vec![format!("license_id = {p}")];
                filters.extend(self.filters(dialect, &mut params, true));
                arms.push(format!(
                    "SELECT * FROM (SELECT {} FROM leases{} ORDER BY {order}{}) AS a{i}",
                    lease_columns!(),
                    where_of(&filters),
                    limit(&mut params)
                ));
            }
            format!(
                "SELECT * FROM ({}) AS merged ORDER BY {order}{}",
                arms.join(" UNION ALL "),
                limit(&mut params)
            )
        } else {
            let filters = self.filters(dialect, &mut params, true);
            format!(
                "SELECT {} FROM leases{} ORDER BY {order}{}",
                lease_columns!(),
                where_of(&filters),
                limit(&mut params)
            )
        };
        Sql {
            count,
            count_params,
            page,
            page_params: params,
        }
    }

    /// Cut the extra row off and make the cursor.
    pub(super) fn finish(&self, mut rows: Vec<LeaseRow>, total: u64) -> SeatsPage {
        let next = match self.limit {
            Some(limit) if rows.len() > limit => {
                rows.truncate(limit);
                rows.last()
                    .map(|last| Cursor::after(self.sort, self.desc, last))
            }
            _ => None,
        };
        SeatsPage { rows, total, next }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_round_trip_and_refuse_garbage() {
        let c = Cursor {
            sort: SeatSort::License,
            desc: true,
            key: vec![Key::Text("cad".into()), Key::Int(42)],
            seat_id: "abc".into(),
        };
        assert_eq!(Cursor::decode(&c.encode()), Some(c));
        for bad in [
            "",
            "zz",
            "00",
            &hex::encode("[1,\"holder\",\"asc\",[5],\"x\"]"),
            &hex::encode("[1,\"nope\",\"asc\",[\"a\"],\"x\"]"),
            &hex::encode("[2,\"holder\",\"asc\",[\"a\"],\"x\"]"),
            &hex::encode("{}"),
        ] {
            assert_eq!(Cursor::decode(bad), None, "{bad}");
        }
    }
}
