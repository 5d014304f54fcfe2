//! Building blocks for dynamic SQL: placeholder lists, row chunks, status
//! bindings, and the fragments where MySQL, PostgreSQL and SQLite differ.
//!
//! Statements are written once, with `?` placeholders. Every statement is
//! turned into a query here ([`q`], [`scalar`]), and that is the one place
//! where PostgreSQL's `$1, $2, …` are numbered, in the order the `?` appear
//! (which is the order values are bound in).

use super::Dialect;
use sqlx::any::AnyArguments;
use sqlx::{Any, AnyConnection, AssertSqlSafe};

/// Rows per multi-row statement: large enough to amortise a round trip, small
/// enough to stay far below both databases' placeholder limits.
pub(crate) const CHUNK: usize = 500;

/// A query with its arguments, ready to bind.
pub(crate) type Q<'q> = sqlx::query::Query<'q, Any, AnyArguments>;

/// A scalar query with its arguments, ready to bind.
pub(crate) type Scalar<'q, O> = sqlx::query::QueryScalar<'q, Any, O, AnyArguments>;

/// A query in `dialect` from SQL written with `?` placeholders (built only
/// from constants and placeholders).
pub(crate) fn q<'q>(dialect: Dialect, sql: impl AsRef<str>) -> Q<'q> {
    sqlx::query(AssertSqlSafe(dialect.placeholders(sql.as_ref())))
}

/// Like [`q`], for a query that returns one column.
pub(crate) fn scalar<'q, O>(dialect: Dialect, sql: impl AsRef<str>) -> Scalar<'q, O>
where
    O: Send + Unpin,
    (O,): for<'r> sqlx::FromRow<'r, sqlx::any::AnyRow>,
{
    sqlx::query_scalar(AssertSqlSafe(dialect.placeholders(sql.as_ref())))
}

/// Runs `select(n)` — a query whose only placeholders are an `IN` list of
/// `n` ids — over `ids` in chunks, and returns every row.
pub(crate) async fn fetch_by_ids(
    conn: &mut AnyConnection,
    ids: &[&str],
    select: impl Fn(usize) -> String,
) -> kairos_core::store::StoreResult<Vec<sqlx::any::AnyRow>> {
    let dialect = Dialect::of(conn);
    let mut rows = Vec::with_capacity(ids.len());
    for chunk in ids.chunks(CHUNK) {
        let mut query = q(dialect, select(chunk.len()));
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
    /// The dialect of an open connection (free functions that are handed a
    /// connection or transaction build their statements for it).
    pub(crate) fn of(conn: &AnyConnection) -> Dialect {
        match conn.backend_name() {
            "PostgreSQL" => Dialect::Postgres,
            "SQLite" => Dialect::Sqlite,
            _ => Dialect::MySql,
        }
    }

    /// `sql` with this dialect's placeholders: `?` as written for MySQL and
    /// SQLite, `$1, $2, …` in order for PostgreSQL. A `?` inside a quoted
    /// literal or identifier is left alone.
    pub(crate) fn placeholders(self, sql: &str) -> String {
        if self != Dialect::Postgres {
            return sql.to_string();
        }
        let mut out = String::with_capacity(sql.len() + sql.len() / 8);
        let mut quote: Option<char> = None;
        let mut n = 0u32;
        for c in sql.chars() {
            match quote {
                Some(open) => {
                    if c == open {
                        quote = None;
                    }
                    out.push(c);
                }
                None if c == '\'' || c == '"' || c == '`' => {
                    quote = Some(c);
                    out.push(c);
                }
                None if c == '?' => {
                    n += 1;
                    out.push('$');
                    out.push_str(&n.to_string());
                }
                None => out.push(c),
            }
        }
        out
    }

    /// `INSERT` of `rest` (`table (cols) VALUES …`) that skips rows violating
    /// a unique key.
    pub(crate) fn insert_ignore(self, rest: &str) -> String {
        match self {
            Dialect::MySql => format!("INSERT IGNORE INTO {rest}"),
            Dialect::Sqlite => format!("INSERT OR IGNORE INTO {rest}"),
            Dialect::Postgres => format!("INSERT INTO {rest} ON CONFLICT DO NOTHING"),
        }
    }

    /// Row locks for a read inside a write transaction. SQLite has none: its
    /// write transaction already excludes every other writer.
    pub(crate) fn for_update(self) -> &'static str {
        match self {
            Dialect::MySql | Dialect::Postgres => " FOR UPDATE",
            Dialect::Sqlite => "",
        }
    }

    /// Row locks for a read that claims rows: on PostgreSQL, rows another
    /// transaction holds are passed over (`SKIP LOCKED`) instead of waited
    /// for; they are claimed by a later round. MySQL keeps its plain
    /// `FOR UPDATE`; SQLite has no row locks.
    pub(crate) fn for_claim(self) -> &'static str {
        match self {
            Dialect::MySql => " FOR UPDATE",
            Dialect::Postgres => " FOR UPDATE SKIP LOCKED",
            Dialect::Sqlite => "",
        }
    }

    /// Tail of an upsert keyed on `key` that overwrites `cols` with the new row.
    pub(crate) fn upsert_tail(self, key: &str, cols: &[&str]) -> String {
        let sets: Vec<String> = match self {
            Dialect::MySql => cols.iter().map(|c| format!("{c} = VALUES({c})")).collect(),
            Dialect::Sqlite | Dialect::Postgres => {
                cols.iter().map(|c| format!("{c} = excluded.{c}")).collect()
            }
        };
        match self {
            Dialect::MySql => format!(" ON DUPLICATE KEY UPDATE {}", sets.join(", ")),
            Dialect::Sqlite | Dialect::Postgres => {
                format!(" ON CONFLICT({key}) DO UPDATE SET {}", sets.join(", "))
            }
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
            Dialect::Postgres => {
                "INSERT INTO leader_fences (name, fence) VALUES (?, ?) \
                 ON CONFLICT(name) DO UPDATE SET \
                 fence = GREATEST(leader_fences.fence, excluded.fence)"
            }
        }
    }

    /// The integer type a `CAST` names (a SUM is DECIMAL on MySQL and
    /// NUMERIC on PostgreSQL, which the `Any` driver cannot carry).
    pub(crate) fn cast_int(self) -> &'static str {
        match self {
            Dialect::MySql => "SIGNED",
            Dialect::Sqlite => "INTEGER",
            Dialect::Postgres => "BIGINT",
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
        assert_eq!(
            Dialect::Postgres.upsert_tail("id", &["a"]),
            " ON CONFLICT(id) DO UPDATE SET a = excluded.a"
        );
        assert_eq!(
            Dialect::Postgres.insert_ignore("t (a) VALUES (?)"),
            "INSERT INTO t (a) VALUES (?) ON CONFLICT DO NOTHING"
        );
        assert_eq!(
            Dialect::MySql.insert_ignore("t (a) VALUES (?)"),
            "INSERT IGNORE INTO t (a) VALUES (?)"
        );
    }

    #[test]
    fn postgres_placeholders_are_numbered_in_order() {
        let sql = "SELECT a FROM t WHERE b = ? AND c IN (?, ?) AND d = '?' AND \"e?\" = ?";
        assert_eq!(
            Dialect::Postgres.placeholders(sql),
            "SELECT a FROM t WHERE b = $1 AND c IN ($2, $3) AND d = '?' AND \"e?\" = $4"
        );
        assert_eq!(Dialect::MySql.placeholders(sql), sql);
        assert_eq!(Dialect::Sqlite.placeholders(sql), sql);
        assert_eq!(
            Dialect::Postgres.placeholders(&row_marks(2, 2)),
            "($1, $2), ($3, $4)"
        );
    }
}
