//! Concrete connections per database: the pools, transactions and rows the
//! store works with, one variant per driver (no `Any` driver in between, so
//! each database gets its own types: `DATETIME(3)`/`TIMESTAMPTZ`, `JSON`/`JSONB`).
//!
//! Statements ([`crate::sql::Sql`]) run [`On`] a pool, a pooled connection or
//! a transaction; every `match` over the three drivers lives here or in
//! `sql.rs`, nowhere else.

use crate::dialect::Dialect;
use crate::error::{corrupt, db_err};
use kairos_core::store::StoreResult;
use sqlx::mysql::{MySqlConnection, MySqlRow};
use sqlx::pool::PoolConnection;
use sqlx::postgres::{PgConnection, PgRow};
use sqlx::sqlite::{SqliteConnection, SqliteRow};
use sqlx::{MySql, MySqlPool, PgPool, Postgres, Sqlite, SqlitePool, Transaction};

/// A pool of one database's connections.
#[derive(Debug, Clone)]
pub(crate) enum Pool {
    MySql(MySqlPool),
    Postgres(PgPool),
    Sqlite(SqlitePool),
}

/// An open transaction; dropped without [`Tx::commit`] it rolls back.
pub(crate) enum Tx {
    MySql(Transaction<'static, MySql>),
    Postgres(Transaction<'static, Postgres>),
    Sqlite(Transaction<'static, Sqlite>),
}

/// A connection taken from a pool, outside any transaction.
pub(crate) enum Conn {
    MySql(PoolConnection<MySql>),
    Postgres(PoolConnection<Postgres>),
    Sqlite(PoolConnection<Sqlite>),
}

/// Where a statement runs: a pool (any free connection) or one connection,
/// which may be inside a transaction.
pub(crate) enum On<'c> {
    MySqlPool(&'c MySqlPool),
    PostgresPool(&'c PgPool),
    SqlitePool(&'c SqlitePool),
    MySql(&'c mut MySqlConnection),
    Postgres(&'c mut PgConnection),
    Sqlite(&'c mut SqliteConnection),
}

impl Pool {
    pub(crate) fn dialect(&self) -> Dialect {
        match self {
            Pool::MySql(_) => Dialect::MySql,
            Pool::Postgres(_) => Dialect::Postgres,
            Pool::Sqlite(_) => Dialect::Sqlite,
        }
    }

    /// Starts a transaction. On SQLite it is `BEGIN IMMEDIATE`: the write
    /// lock is taken up front, so a second process on the same file waits
    /// here instead of failing at its first write.
    pub(crate) async fn begin(&self) -> StoreResult<Tx> {
        Ok(match self {
            Pool::MySql(p) => Tx::MySql(p.begin().await.map_err(db_err)?),
            Pool::Postgres(p) => Tx::Postgres(p.begin().await.map_err(db_err)?),
            Pool::Sqlite(p) => Tx::Sqlite(p.begin_with("BEGIN IMMEDIATE").await.map_err(db_err)?),
        })
    }

    /// Takes a connection for several statements outside a transaction.
    pub(crate) async fn acquire(&self) -> StoreResult<Conn> {
        Ok(match self {
            Pool::MySql(p) => Conn::MySql(p.acquire().await.map_err(db_err)?),
            Pool::Postgres(p) => Conn::Postgres(p.acquire().await.map_err(db_err)?),
            Pool::Sqlite(p) => Conn::Sqlite(p.acquire().await.map_err(db_err)?),
        })
    }

    pub(crate) async fn close(&self) {
        match self {
            Pool::MySql(p) => p.close().await,
            Pool::Postgres(p) => p.close().await,
            Pool::Sqlite(p) => p.close().await,
        }
    }
}

impl On<'_> {
    pub(crate) fn dialect(&self) -> Dialect {
        match self {
            On::MySqlPool(_) | On::MySql(_) => Dialect::MySql,
            On::PostgresPool(_) | On::Postgres(_) => Dialect::Postgres,
            On::SqlitePool(_) | On::Sqlite(_) => Dialect::Sqlite,
        }
    }
}

impl Tx {
    pub(crate) fn dialect(&self) -> Dialect {
        match self {
            Tx::MySql(_) => Dialect::MySql,
            Tx::Postgres(_) => Dialect::Postgres,
            Tx::Sqlite(_) => Dialect::Sqlite,
        }
    }

    pub(crate) async fn commit(self) -> StoreResult<()> {
        match self {
            Tx::MySql(t) => t.commit().await,
            Tx::Postgres(t) => t.commit().await,
            Tx::Sqlite(t) => t.commit().await,
        }
        .map_err(db_err)
    }

    /// Ends the transaction without changes, now. A dropped transaction is
    /// rolled back too, but only once its connection is back in the pool
    /// (a task of the pool's): until then its row locks hold, and a claim
    /// right after a refused update may find the job still locked.
    pub(crate) async fn rollback(self) -> StoreResult<()> {
        match self {
            Tx::MySql(t) => t.rollback().await,
            Tx::Postgres(t) => t.rollback().await,
            Tx::Sqlite(t) => t.rollback().await,
        }
        .map_err(db_err)
    }

    /// Rolls back (see [`Tx::rollback`]) and answers `outcome`: the end
    /// of a transaction that locked rows and then decided to change none.
    pub(crate) async fn unchanged<T>(self, outcome: T) -> StoreResult<T> {
        self.rollback().await?;
        Ok(outcome)
    }
}

impl<'c> From<&'c Pool> for On<'c> {
    fn from(p: &'c Pool) -> Self {
        match p {
            Pool::MySql(p) => On::MySqlPool(p),
            Pool::Postgres(p) => On::PostgresPool(p),
            Pool::Sqlite(p) => On::SqlitePool(p),
        }
    }
}

impl<'c> From<&'c mut Tx> for On<'c> {
    fn from(t: &'c mut Tx) -> Self {
        match t {
            Tx::MySql(t) => On::MySql(t),
            Tx::Postgres(t) => On::Postgres(t),
            Tx::Sqlite(t) => On::Sqlite(t),
        }
    }
}

impl<'c> From<&'c mut Conn> for On<'c> {
    fn from(c: &'c mut Conn) -> Self {
        match c {
            Conn::MySql(c) => On::MySql(c),
            Conn::Postgres(c) => On::Postgres(c),
            Conn::Sqlite(c) => On::Sqlite(c),
        }
    }
}

impl<'c> From<&'c mut On<'_>> for On<'c> {
    /// Reborrows, so one `On` can run several statements.
    fn from(on: &'c mut On<'_>) -> Self {
        match on {
            On::MySqlPool(p) => On::MySqlPool(p),
            On::PostgresPool(p) => On::PostgresPool(p),
            On::SqlitePool(p) => On::SqlitePool(p),
            On::MySql(c) => On::MySql(c),
            On::Postgres(c) => On::Postgres(c),
            On::Sqlite(c) => On::Sqlite(c),
        }
    }
}

/// One result row of any of the three databases.
pub(crate) enum Row {
    MySql(MySqlRow),
    Postgres(PgRow),
    Sqlite(SqliteRow),
}

/// A Rust type every driver decodes (integers, floats, text, and their
/// `Option`s).
pub(crate) trait Decodable:
    for<'r> sqlx::Decode<'r, MySql>
    + sqlx::Type<MySql>
    + for<'r> sqlx::Decode<'r, Postgres>
    + sqlx::Type<Postgres>
    + for<'r> sqlx::Decode<'r, Sqlite>
    + sqlx::Type<Sqlite>
{
}

impl<T> Decodable for T where
    T: for<'r> sqlx::Decode<'r, MySql>
        + sqlx::Type<MySql>
        + for<'r> sqlx::Decode<'r, Postgres>
        + sqlx::Type<Postgres>
        + for<'r> sqlx::Decode<'r, Sqlite>
        + sqlx::Type<Sqlite>
{
}

impl Row {
    /// Column `col` as `T`; `table` names the row in a decode error.
    pub(crate) fn get<T: Decodable>(&self, table: &'static str, col: &str) -> StoreResult<T> {
        use sqlx::Row as _;
        match self {
            Row::MySql(r) => r.try_get::<T, _>(col),
            Row::Postgres(r) => r.try_get::<T, _>(col),
            Row::Sqlite(r) => r.try_get::<T, _>(col),
        }
        .map_err(|e| corrupt(table, format!("column {col}: {e}")))
    }

    /// Column `col`, a stored time, in milliseconds since the epoch:
    /// `DATETIME(3)` (UTC) on MySQL, `TIMESTAMPTZ` on PostgreSQL and integer
    /// milliseconds on SQLite, which has no time type of its own.
    pub(crate) fn time(
        &self,
        table: &'static str,
        col: &str,
    ) -> StoreResult<Option<kairos_core::time::Millis>> {
        use chrono::{DateTime, NaiveDateTime, Utc};
        use sqlx::Row as _;
        let err = |e: sqlx::Error| corrupt(table, format!("column {col}: {e}"));
        Ok(match self {
            Row::MySql(r) => r
                .try_get::<Option<NaiveDateTime>, _>(col)
                .map_err(err)?
                .map(|t| t.and_utc().timestamp_millis()),
            Row::Postgres(r) => r
                .try_get::<Option<DateTime<Utc>>, _>(col)
                .map_err(err)?
                .map(|t| t.timestamp_millis()),
            Row::Sqlite(r) => r.try_get::<Option<i64>, _>(col).map_err(err)?,
        })
    }

    /// Every column of the row as text (numbers formatted), by name: for
    /// rows whose shape the store does not know, such as `EXPLAIN`'s.
    pub(crate) fn cells(&self) -> Vec<(String, Option<String>)> {
        use sqlx::{Column as _, Row as _};
        fn cell<R: sqlx::Row>(r: &R, i: usize) -> Option<String>
        where
            usize: sqlx::ColumnIndex<R>,
            for<'r> Option<String>: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
            for<'r> Option<i64>: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
            for<'r> Option<f64>: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
        {
            if let Ok(v) = r.try_get::<Option<String>, _>(i) {
                return v;
            }
            if let Ok(v) = r.try_get::<Option<i64>, _>(i) {
                return v.map(|v| v.to_string());
            }
            r.try_get::<Option<f64>, _>(i)
                .ok()
                .flatten()
                .map(|v| v.to_string())
        }
        match self {
            Row::MySql(r) => (0..r.len())
                .map(|i| {
                    let v = cell(r, i).or_else(|| {
                        r.try_get::<Option<u64>, _>(i)
                            .ok()
                            .flatten()
                            .map(|v| v.to_string())
                    });
                    (r.column(i).name().to_string(), v)
                })
                .collect(),
            Row::Postgres(r) => (0..r.len())
                .map(|i| (r.column(i).name().to_string(), cell(r, i)))
                .collect(),
            Row::Sqlite(r) => (0..r.len())
                .map(|i| (r.column(i).name().to_string(), cell(r, i)))
                .collect(),
        }
    }

    /// Column `col`, a stored JSON document, as JSON text: `JSON` on MySQL
    /// (text on MariaDB), `JSONB` on PostgreSQL, `TEXT` on SQLite.
    pub(crate) fn json(&self, table: &'static str, col: &str) -> StoreResult<Option<String>> {
        use sqlx::Row as _;
        let err = |e: sqlx::Error| corrupt(table, format!("column {col}: {e}"));
        Ok(match self {
            Row::MySql(r) => r.try_get::<Option<String>, _>(col).map_err(err)?,
            Row::Postgres(r) => r
                .try_get::<Option<sqlx::types::Json<Box<serde_json::value::RawValue>>>, _>(col)
                .map_err(err)?
                .map(|j| j.0.get().to_string()),
            Row::Sqlite(r) => r.try_get::<Option<String>, _>(col).map_err(err)?,
        })
    }
}
