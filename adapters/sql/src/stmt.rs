//! Building blocks for dynamic SQL: placeholder lists, row chunks, status
//! bindings, and the fragments where MySQL and SQLite differ.

use super::Dialect;
use sqlx::any::AnyArguments;
use sqlx::{Any, AssertSqlSafe};

/// Rows per multi-row statement: large enough to amortise a round trip, small
/// enough to stay far below both databases' placeholder limits.
pub(crate) const CHUNK: usize = 500;

/// A query with its arguments, ready to bind.
pub(crate) type Q<'q> = sqlx::query::Query<'q, Any, AnyArguments>;

/// A query from SQL built at run time (only from constants and placeholders).
pub(crate) fn q<'q>(sql: String) -> Q<'q> {
    sqlx::query(AssertSqlSafe(sql))
}

/// Runs `select(n)` — a query whose only placeholders are an `IN` list of
/// `n` ids — over `ids` in chunks, and returns every row.
pub(crate) async fn fetch_by_ids(
    conn: &mut sqlx::AnyConnection,
    ids: &[&str],
    select: impl Fn(usize) -> String,
) -> kairos_core::store::StoreResult<Vec<sqlx::any::AnyRow>> {
    let mut rows = Vec::with_capacity(ids.len());
    for chunk in ids.chunks(CHUNK) {
        let mut query = q(select(chunk.len()));
        for id in chunk {
            query = query.bind(*id);
        }
        rows.extend(
            query
                .fetch_all(&mut *conn)
                .await
                .map_err(super::error::db_err)?,
        );
    }
    Ok(rows)
}

/// `?, ?, ?` for `n` values.
pub(crate) fn marks(n: usize) -> String {
    let mut s = String::with_capacity(n * 3);
    for i in 0..n {
        if i > 0 {
            s.push_str(", ");
        }
        s.push('?');
    }
    s
}

/// `(?, ?), (?, ?)` for `rows` rows of `cols` values.
pub(crate) fn row_marks(rows: usize, cols: usize) -> String {
    let one = format!("({})", marks(cols));
    let mut s = String::with_capacity(rows * (one.len() + 2));
    for i in 0..rows {
        if i > 0 {
            s.push_str(", ");
        }
        s.push_str(&one);
    }
    s
}

/// Binds state names (from a transition's `from_states()`).
pub(crate) fn bind_names<'q>(
    mut query: Q<'q>,
    names: impl IntoIterator<Item = &'static str>,
) -> Q<'q> {
    for n in names {
        query = query.bind(n);
    }
    query
}

impl Dialect {
    /// `INSERT` that skips rows violating a unique key.
    pub(crate) fn insert_ignore(self) -> &'static str {
        match self {
            Dialect::MySql => "INSERT IGNORE INTO",
            Dialect::Sqlite => "INSERT OR IGNORE INTO",
        }
    }

    /// Row locks for a read inside a write transaction. SQLite has none: its
    /// write transaction already excludes every other writer.
    pub(crate) fn for_update(self) -> &'static str {
        match self {
            Dialect::MySql => " FOR UPDATE",
            Dialect::Sqlite => "",
        }
    }

    /// Tail of an upsert keyed on `key` that overwrites `cols` with the new row.
    pub(crate) fn upsert_tail(self, key: &str, cols: &[&str]) -> String {
        let sets: Vec<String> = match self {
            Dialect::MySql => cols.iter().map(|c| format!("{c} = VALUES({c})")).collect(),
            Dialect::Sqlite => cols.iter().map(|c| format!("{c} = excluded.{c}")).collect(),
        };
        match self {
            Dialect::MySql => format!(" ON DUPLICATE KEY UPDATE {}", sets.join(", ")),
            Dialect::Sqlite => format!(" ON CONFLICT({key}) DO UPDATE SET {}", sets.join(", ")),
        }
    }

    /// Upsert of a lease's fencing token that never lowers the stored one.
    pub(crate) fn fence_upsert(self) -> &'static str {
        match self {
            Dialect::MySql => {
                "INSERT INTO leader_fences (name, fence) VALUES (?, ?) \
                 ON DUPLICATE KEY UPDATE fence = GREATEST(fence, VALUES(fence))"
            }
            Dialect::Sqlite => {
                "INSERT INTO leader_fences (name, fence) VALUES (?, ?) \
                 ON CONFLICT(name) DO UPDATE SET fence = MAX(fence, excluded.fence)"
            }
        }
    }
}

/// Converts a stored non-negative integer.
pub(crate) fn to_u32(v: i64) -> Option<u32> {
    u32::try_from(v).ok()
}

/// Converts an unsigned figure for storage, saturating (BIGINT is signed).
pub(crate) fn from_u64(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholder_lists() {
        assert_eq!(marks(0), "");
        assert_eq!(marks(3), "?, ?, ?");
        assert_eq!(row_marks(2, 2), "(?, ?), (?, ?)");
    }

    #[test]
    fn upserts_differ_by_dialect() {
        assert_eq!(
            Dialect::MySql.upsert_tail("id", &["a", "b"]),
            " ON DUPLICATE KEY UPDATE a = VALUES(a), b = VALUES(b)"
        );
        assert_eq!(
            Dialect::Sqlite.upsert_tail("id", &["a"]),
            " ON CONFLICT(id) DO UPDATE SET a = excluded.a"
        );
    }
}
