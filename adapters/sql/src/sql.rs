//! The statement builder: SQL is written as `&'static str` fragments with the
//! values bound where they are used, and turned into a sqlx
//! [`QueryBuilder`] for the database it runs on.
//!
//! Nothing here takes a `String` of SQL, so no statement is assembled with
//! `format!` or edited as text. Values are typed ([`Value`]): a time binds as
//! `DATETIME(3)` on MySQL, `TIMESTAMPTZ` on PostgreSQL and integer
//! milliseconds on SQLite; JSON as text on MySQL and SQLite and `JSONB` on
//! PostgreSQL; a `NULL` keeps its type, which PostgreSQL insists on.
//! Fragments that differ between databases ([`Sql::dialect`] and the helpers
//! built on it) are picked when the statement runs, so a statement is built
//! without knowing where it will run.

use crate::db::{On, Row};
use crate::dialect::Dialect;
use crate::error::db_err;
use chrono::DateTime;
use kairos_core::store::StoreResult;
use kairos_core::time::Millis;
use sqlx::{Database, MySql, Postgres, QueryBuilder, Sqlite};

/// Rows per multi-row statement: large enough to amortise a round trip, small
/// enough to stay far below every database's placeholder limit.
pub(crate) const CHUNK: usize = 500;

/// A bound value.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Value {
    Int(Option<i64>),
    Float(Option<f64>),
    Text(Option<String>),
    /// Milliseconds since the epoch, stored as the database's time type.
    Time(Option<Millis>),
    /// A JSON document (its text), stored as the database's JSON type.
    Json(Option<String>),
}

/// A time value (milliseconds since the epoch, or `None` for `NULL`).
pub(crate) fn time(ms: impl Into<Option<Millis>>) -> Value {
    Value::Time(ms.into())
}

/// A JSON value, from its text (or `None` for `NULL`).
pub(crate) fn json(text: impl Into<JsonText>) -> Value {
    Value::Json(text.into().0)
}

/// JSON text for [`json`]: a `&str`, `String`, or an `Option` of either.
pub(crate) struct JsonText(Option<String>);

impl From<&str> for JsonText {
    fn from(s: &str) -> Self {
        JsonText(Some(s.to_string()))
    }
}
impl From<String> for JsonText {
    fn from(s: String) -> Self {
        JsonText(Some(s))
    }
}
impl From<Option<String>> for JsonText {
    fn from(s: Option<String>) -> Self {
        JsonText(s)
    }
}
impl From<Option<&str>> for JsonText {
    fn from(s: Option<&str>) -> Self {
        JsonText(s.map(str::to_string))
    }
}

macro_rules! value_from {
    ($variant:ident: $($t:ty => $conv:expr),* $(,)?) => {$(
        impl From<$t> for Value {
            fn from(v: $t) -> Self {
                Value::$variant($conv(v))
            }
        }
    )*};
}

value_from!(Int:
    i64 => Some,
    Option<i64> => |v| v,
    u32 => |v: u32| Some(i64::from(v)),
    Option<u32> => |v: Option<u32>| v.map(i64::from),
    i32 => |v: i32| Some(i64::from(v)),
);
value_from!(Float: f64 => Some, Option<f64> => |v| v);
value_from!(Text:
    &str => |v: &str| Some(v.to_string()),
    String => Some,
    &String => |v: &String| Some(v.clone()),
    Option<&str> => |v: Option<&str>| v.map(str::to_string),
    Option<String> => |v| v,
    Option<&String> => |v: Option<&String>| v.cloned(),
);

/// One piece of a statement.
#[derive(Debug, Clone)]
enum Part {
    Text(&'static str),
    /// Text that differs by database: MySQL, PostgreSQL, SQLite.
    ByDialect([&'static str; 3]),
    Value(Value),
}

/// A statement under construction; see the module documentation.
#[derive(Debug, Clone, Default)]
pub(crate) struct Sql {
    parts: Vec<Part>,
}

impl Sql {
    /// A statement starting with `sql`.
    pub(crate) fn new(sql: &'static str) -> Sql {
        let mut parts = Vec::with_capacity(16);
        parts.push(Part::Text(sql));
        Sql { parts }
    }

    /// Appends SQL text.
    pub(crate) fn push(&mut self, sql: &'static str) -> &mut Self {
        self.parts.push(Part::Text(sql));
        self
    }

    /// Appends a bound value (a placeholder in the SQL).
    pub(crate) fn bind(&mut self, v: impl Into<Value>) -> &mut Self {
        self.parts.push(Part::Value(v.into()));
        self
    }

    /// Appends text that differs between databases, chosen when it runs.
    pub(crate) fn dialect(
        &mut self,
        mysql: &'static str,
        postgres: &'static str,
        sqlite: &'static str,
    ) -> &mut Self {
        self.parts.push(Part::ByDialect([mysql, postgres, sqlite]));
        self
    }

    /// `(?, ?, …)` for an `IN` list. The list is padded to the next of a few
    /// fixed lengths by repeating its last value (harmless in `IN`), so the
    /// prepared-statement cache holds a handful of shapes instead of one per
    /// length. An empty list is `(NULL)`, which `IN` matches nothing with;
    /// never use it after `NOT IN`.
    pub(crate) fn list<V: Into<Value>>(&mut self, items: impl IntoIterator<Item = V>) -> &mut Self {
        let values = padded(items.into_iter().map(Into::into).collect());
        if values.is_empty() {
            return self.push("(NULL)");
        }
        self.push("(");
        for (i, v) in values.into_iter().enumerate() {
            if i > 0 {
                self.push(", ");
            }
            self.parts.push(Part::Value(v));
        }
        self.push(")")
    }

    /// `alias.c AS c, …` for every column.
    pub(crate) fn columns(&mut self, alias: &'static str, cols: &[&'static str]) -> &mut Self {
        for (i, c) in cols.iter().enumerate() {
            if i > 0 {
                self.push(", ");
            }
            self.push(alias).push(".").push(c).push(" AS ").push(c);
        }
        self
    }

    /// `c1, c2, …`.
    pub(crate) fn names(&mut self, cols: &[&'static str]) -> &mut Self {
        for (i, c) in cols.iter().enumerate() {
            if i > 0 {
                self.push(", ");
            }
            self.push(c);
        }
        self
    }

    /// `INSERT` that skips rows violating a unique key: this prefix before
    /// the table, and [`Sql::on_conflict_ignore`] after the values.
    pub(crate) fn insert_ignore_into(&mut self) -> &mut Self {
        self.dialect(
            "INSERT IGNORE INTO ",
            "INSERT INTO ",
            "INSERT OR IGNORE INTO ",
        )
    }

    /// The tail of [`Sql::insert_ignore_into`] (PostgreSQL's `ON CONFLICT`).
    pub(crate) fn on_conflict_ignore(&mut self) -> &mut Self {
        self.dialect("", " ON CONFLICT DO NOTHING", "")
    }

    /// Tail of an upsert keyed on `key` that overwrites `cols` with the new row.
    pub(crate) fn upsert(&mut self, key: &'static str, cols: &[&'static str]) -> &mut Self {
        self.dialect(
            " ON DUPLICATE KEY UPDATE ",
            " ON CONFLICT(",
            " ON CONFLICT(",
        );
        self.dialect("", key, key);
        self.dialect("", ") DO UPDATE SET ", ") DO UPDATE SET ");
        for (i, c) in cols.iter().enumerate() {
            if i > 0 {
                self.push(", ");
            }
            self.push(c).push(" = ");
            self.dialect("VALUES(", "excluded.", "excluded.").push(c);
            self.dialect(")", "", "");
        }
        self
    }

    /// Row locks for a read inside a write transaction. SQLite has none: its
    /// write transaction already excludes every other writer.
    pub(crate) fn for_update(&mut self) -> &mut Self {
        self.dialect(" FOR UPDATE", " FOR UPDATE", "")
    }

    /// Shared row locks for a read inside a write transaction: other
    /// readers sharing them go on, a writer of the rows waits for the
    /// commit. (`LOCK IN SHARE MODE` is what both MariaDB and MySQL accept.)
    pub(crate) fn for_share(&mut self) -> &mut Self {
        self.dialect(" LOCK IN SHARE MODE", " FOR SHARE", "")
    }

    /// Row locks for a read that claims rows: on PostgreSQL, rows another
    /// transaction holds are passed over (`SKIP LOCKED`) instead of waited
    /// for; a later round claims them. MySQL keeps its plain `FOR UPDATE`;
    /// SQLite has no row locks.
    pub(crate) fn for_claim(&mut self) -> &mut Self {
        self.dialect(" FOR UPDATE", " FOR UPDATE SKIP LOCKED", "")
    }

    /// The integer type a `CAST` names (a `SUM` is DECIMAL on MySQL and
    /// NUMERIC on PostgreSQL).
    pub(crate) fn int_type(&mut self) -> &mut Self {
        self.dialect("SIGNED", "BIGINT", "INTEGER")
    }

    /// Runs the statement; the number of rows it changed.
    pub(crate) async fn execute<'c>(&self, on: impl Into<On<'c>>) -> StoreResult<u64> {
        run!(self, on.into(), |q, e, _wrap| q
            .execute(e)
            .await
            .map(|r| r.rows_affected()))
    }

    /// Every row.
    pub(crate) async fn fetch_all<'c>(&self, on: impl Into<On<'c>>) -> StoreResult<Vec<Row>> {
        run!(self, on.into(), |q, e, wrap| q
            .fetch_all(e)
            .await
            .map(|rows| rows.into_iter().map(wrap).collect()))
    }

    /// The first row, if any.
    pub(crate) async fn fetch_optional<'c>(
        &self,
        on: impl Into<On<'c>>,
    ) -> StoreResult<Option<Row>> {
        run!(self, on.into(), |q, e, wrap| q
            .fetch_optional(e)
            .await
            .map(|row| row.map(wrap)))
    }

    /// The one row.
    pub(crate) async fn fetch_one<'c>(&self, on: impl Into<On<'c>>) -> StoreResult<Row> {
        run!(self, on.into(), |q, e, wrap| q.fetch_one(e).await.map(wrap))
    }

    /// The first column of the one row (`col` names it in errors).
    pub(crate) async fn scalar<'c, T: crate::db::Decodable>(
        &self,
        on: impl Into<On<'c>>,
        col: &'static str,
    ) -> StoreResult<T> {
        self.fetch_one(on).await?.get("scalar", col)
    }

    /// The statement as `DB` runs it.
    fn render<DB: Bind>(&self) -> QueryBuilder<DB>
    where
        DB::Arguments: Default,
    {
        let mut b = QueryBuilder::<DB>::new("");
        for part in &self.parts {
            match part {
                Part::Text(s) => {
                    b.push(s);
                }
                Part::ByDialect([mysql, postgres, sqlite]) => {
                    b.push(match DB::DIALECT {
                        Dialect::MySql => mysql,
                        Dialect::Postgres => postgres,
                        Dialect::Sqlite => sqlite,
                    });
                }
                Part::Value(v) => DB::bind(&mut b, v),
            }
        }
        b
    }

    /// This statement behind `prefix` (`EXPLAIN …`), with the same values.
    pub(crate) fn prefixed(&self, prefix: &'static str) -> Sql {
        let mut parts = Vec::with_capacity(self.parts.len() + 1);
        parts.push(Part::Text(prefix));
        parts.extend(self.parts.iter().cloned());
        Sql { parts }
    }

    /// The SQL as `dialect` runs it (for tests and `EXPLAIN`).
    pub(crate) fn text(&self, dialect: Dialect) -> String {
        match dialect {
            Dialect::MySql => self.render::<MySql>().into_string(),
            Dialect::Postgres => self.render::<Postgres>().into_string(),
            Dialect::Sqlite => self.render::<Sqlite>().into_string(),
        }
    }
}

/// Runs one statement on whichever database `on` is: `q` is the built query,
/// `e` the executor and `wrap` the [`Row`] variant for its rows.
macro_rules! run {
    ($sql:expr, $on:expr, |$q:ident, $e:ident, $wrap:ident| $body:expr) => {{
        let on: On<'_> = $on;
        crate::plans::observe(on.dialect(), $sql);
        let result = match on {
            On::MySqlPool(p) => {
                let mut b = $sql.render::<MySql>();
                let ($q, $e, $wrap) = (b.build(), p, Row::MySql);
                $body
            }
            On::MySql(c) => {
                let mut b = $sql.render::<MySql>();
                let ($q, $e, $wrap) = (b.build(), &mut *c, Row::MySql);
                $body
            }
            On::PostgresPool(p) => {
                let mut b = $sql.render::<Postgres>();
                let ($q, $e, $wrap) = (b.build(), p, Row::Postgres);
                $body
            }
            On::Postgres(c) => {
                let mut b = $sql.render::<Postgres>();
                let ($q, $e, $wrap) = (b.build(), &mut *c, Row::Postgres);
                $body
            }
            On::SqlitePool(p) => {
                let mut b = $sql.render::<Sqlite>();
                let ($q, $e, $wrap) = (b.build(), p, Row::Sqlite);
                $body
            }
            On::Sqlite(c) => {
                let mut b = $sql.render::<Sqlite>();
                let ($q, $e, $wrap) = (b.build(), &mut *c, Row::Sqlite);
                $body
            }
        };
        result.map_err(db_err)
    }};
}
use run;

/// One row's values by column name, for `INSERT` ([`Sql::rows`]) and
/// `UPDATE … SET` ([`Sql::set`]): a value is always written next to the
/// column it goes to, never matched to a column list by position.
#[derive(Debug, Clone, Default)]
pub(crate) struct Fields(Vec<(&'static str, Value)>);

impl Fields {
    pub(crate) fn new() -> Fields {
        Fields(Vec::with_capacity(32))
    }

    /// Adds column `col` with value `v`.
    pub(crate) fn with(mut self, col: &'static str, v: impl Into<Value>) -> Fields {
        self.0.push((col, v.into()));
        self
    }

    /// Adds column `col` with value `v`.
    pub(crate) fn set(&mut self, col: &'static str, v: impl Into<Value>) -> &mut Fields {
        self.0.push((col, v.into()));
        self
    }
}

impl Sql {
    /// ` (c1, c2) VALUES (?, ?), (?, ?)` for `rows`, which all name the same
    /// columns in the same order (the first row's names are the list).
    pub(crate) fn rows<'f>(&mut self, rows: impl IntoIterator<Item = &'f Fields>) -> &mut Self {
        let mut rows = rows.into_iter().peekable();
        let Some(first) = rows.peek() else {
            return self;
        };
        self.push(" (");
        for (i, (col, _)) in first.0.iter().enumerate() {
            if i > 0 {
                self.push(", ");
            }
            self.push(col);
        }
        self.push(") VALUES ");
        for (r, row) in rows.enumerate() {
            self.push(if r == 0 { "(" } else { ", (" });
            for (i, (_, v)) in row.0.iter().enumerate() {
                if i > 0 {
                    self.push(", ");
                }
                self.parts.push(Part::Value(v.clone()));
            }
            self.push(")");
        }
        self
    }

    /// `c1 = ?, c2 = ?` for an `UPDATE … SET`.
    pub(crate) fn set(&mut self, fields: &Fields) -> &mut Self {
        for (i, (col, v)) in fields.0.iter().enumerate() {
            if i > 0 {
                self.push(", ");
            }
            self.push(col).push(" = ");
            self.parts.push(Part::Value(v.clone()));
        }
        self
    }
}

/// Lengths an `IN` list is padded to.
const BUCKETS: [usize; 10] = [1, 2, 4, 8, 16, 32, 64, 128, 256, CHUNK];

/// The smallest bucket that holds `n` values (or `n` itself past the last).
fn bucket(n: usize) -> usize {
    BUCKETS.iter().copied().find(|&b| b >= n).unwrap_or(n)
}

/// `items` filled up to its bucket by repeating the last one (empty stays
/// empty): the repeats of an `IN` value or a `CASE` arm change nothing.
pub(crate) fn padded<T: Clone>(mut items: Vec<T>) -> Vec<T> {
    if let Some(last) = items.last().cloned() {
        items.resize(bucket(items.len()), last);
    }
    items
}

/// How each database binds a [`Value`].
trait Bind: Database {
    /// Which of a [`Part::ByDialect`]'s texts it runs.
    const DIALECT: Dialect;
    fn bind(b: &mut QueryBuilder<Self>, v: &Value);
}

fn to_datetime(ms: Millis) -> Option<DateTime<chrono::Utc>> {
    DateTime::from_timestamp_millis(ms)
}

impl Bind for MySql {
    const DIALECT: Dialect = Dialect::MySql;
    fn bind(b: &mut QueryBuilder<Self>, v: &Value) {
        match v {
            Value::Int(v) => b.push_bind(*v),
            Value::Float(v) => b.push_bind(*v),
            Value::Text(v) | Value::Json(v) => b.push_bind(v.as_deref()),
            // DATETIME carries no zone: the UTC wall-clock time.
            Value::Time(v) => b.push_bind(v.and_then(to_datetime).map(|t| t.naive_utc())),
        };
    }
}

impl Bind for Postgres {
    const DIALECT: Dialect = Dialect::Postgres;
    fn bind(b: &mut QueryBuilder<Self>, v: &Value) {
        match v {
            Value::Int(v) => b.push_bind(*v),
            Value::Float(v) => b.push_bind(*v),
            Value::Text(v) => b.push_bind(v.as_deref()),
            Value::Time(v) => b.push_bind(v.and_then(to_datetime)),
            // Sent as text and parsed by the server, into `JSONB`.
            Value::Json(v) => b.push_bind(v.as_deref()).push("::jsonb"),
        };
    }
}

impl Bind for Sqlite {
    const DIALECT: Dialect = Dialect::Sqlite;
    fn bind(b: &mut QueryBuilder<Self>, v: &Value) {
        match v {
            Value::Int(v) | Value::Time(v) => b.push_bind(*v),
            Value::Float(v) => b.push_bind(*v),
            Value::Text(v) | Value::Json(v) => b.push_bind(v.clone()),
        };
    }
}

/// Runs `select(chunk)` over `items` in chunks of at most [`CHUNK`] and
/// returns every row (for reads by a long list of ids).
pub(crate) async fn fetch_chunked<'c, T>(
    on: impl Into<On<'c>>,
    items: &[T],
    select: impl Fn(&[T]) -> Sql,
) -> StoreResult<Vec<Row>> {
    let mut on = on.into();
    let mut rows = Vec::with_capacity(items.len());
    for chunk in items.chunks(CHUNK) {
        rows.extend(select(chunk).fetch_all(&mut on).await?);
    }
    Ok(rows)
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
    fn placeholders_are_numbered_for_postgres_only() {
        let mut s = Sql::new("SELECT a FROM t WHERE b = ");
        s.bind(1i64).push(" AND c IN ").list(["x", "y", "z"]);
        assert_eq!(
            s.text(Dialect::Postgres),
            "SELECT a FROM t WHERE b = $1 AND c IN ($2, $3, $4, $5)"
        );
        assert_eq!(
            s.text(Dialect::MySql),
            "SELECT a FROM t WHERE b = ? AND c IN (?, ?, ?, ?)"
        );
    }

    #[test]
    fn in_lists_come_in_a_few_lengths() {
        assert_eq!(bucket(1), 1);
        assert_eq!(bucket(3), 4);
        assert_eq!(bucket(200), 256);
        assert_eq!(bucket(500), 500);
        let mut s = Sql::new("x IN ");
        s.list(Vec::<String>::new());
        assert_eq!(s.text(Dialect::Sqlite), "x IN (NULL)");
    }

    #[test]
    fn fields_name_their_columns() {
        let a = Fields::new().with("id", "x").with("at", time(5));
        let b = Fields::new().with("id", "y").with("at", time(None));
        let mut s = Sql::new("INSERT INTO t");
        s.rows([&a, &b]);
        assert_eq!(
            s.text(Dialect::Postgres),
            "INSERT INTO t (id, at) VALUES ($1, $2), ($3, $4)"
        );
        let mut s = Sql::new("UPDATE t SET ");
        s.set(&a).push(" WHERE k = ").bind(1i64);
        assert_eq!(
            s.text(Dialect::MySql),
            "UPDATE t SET id = ?, at = ? WHERE k = ?"
        );
    }

    #[test]
    fn dialect_fragments_are_picked_when_rendered() {
        let mut s = Sql::new("");
        s.insert_ignore_into()
            .push("t (a) VALUES (")
            .bind(1i64)
            .push(")")
            .on_conflict_ignore();
        assert_eq!(
            s.text(Dialect::MySql),
            "INSERT IGNORE INTO t (a) VALUES (?)"
        );
        assert_eq!(
            s.text(Dialect::Postgres),
            "INSERT INTO t (a) VALUES ($1) ON CONFLICT DO NOTHING"
        );
        let mut s = Sql::new("");
        s.upsert("id", &["a", "b"]);
        assert_eq!(
            s.text(Dialect::MySql),
            " ON DUPLICATE KEY UPDATE a = VALUES(a), b = VALUES(b)"
        );
        assert_eq!(
            s.text(Dialect::Sqlite),
            " ON CONFLICT(id) DO UPDATE SET a = excluded.a, b = excluded.b"
        );
    }
}
