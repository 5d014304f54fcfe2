//! The storage port ([`kairos_core::store`]) for MySQL/MariaDB, PostgreSQL and
//! SQLite, with one set of statements run on each database's own sqlx driver.
//!
//! `KAIROS_DATABASE_URL` picks the database: `mysql://…` or `mariadb://…`,
//! `postgres://…` or `postgresql://…`, `sqlite://…`.
//!
//! # Statements and types
//!
//! Every statement is built with [`sql::Sql`] from `&'static str` fragments,
//! with each value bound where it is used (a row's values by column name,
//! through [`sql::Fields`]); it becomes a sqlx `QueryBuilder` for the
//! database it runs on, which numbers PostgreSQL's `$1, $2, …`. No SQL is
//! assembled with `format!`. The few fragments that differ (`INSERT IGNORE`
//! / `INSERT OR IGNORE` / `ON CONFLICT DO NOTHING`, upserts, `FOR UPDATE`,
//! which SQLite lacks, and `SKIP LOCKED` claims on PostgreSQL) are picked
//! when the statement runs. Multi-row updates, which give each row its own
//! values, take a different form per database (`rows_update`: a `CASE` per
//! column on MySQL, a joined `VALUES` list elsewhere). `IN` lists, `CASE`
//! arms and `VALUES` rows are padded to a few fixed lengths so the
//! prepared-statement cache stays small.
//!
//! Columns have the database's own types: times are `DATETIME(3)` (UTC) on
//! MySQL and `TIMESTAMPTZ` on PostgreSQL, documents `JSON` and `JSONB`; SQLite,
//! which has neither, keeps integer milliseconds and text. Ids are UUID text
//! and flags integers everywhere. Every bound value is typed (a `NULL` too),
//! so PostgreSQL's strict typing needs no casts; only a `SUM` is cast back to
//! an integer. Status names are never written into SQL: every conditional
//! update binds the `from_states()` of a [`kairos_core::job::JobTransition`]
//! or [`kairos_core::execution::ExecTransition`].
//!
//! # Connections
//!
//! PostgreSQL: one pool of 16 connections in `READ COMMITTED` (set on every
//! session, whatever the server's default). Deadlocks (SQLSTATE 40P01) and
//! serialization failures (40001) rerun the transaction like InnoDB's
//! deadlocks. Claims read their jobs, and the callback relay its due rows,
//! with `FOR UPDATE SKIP LOCKED`: a row another transaction holds is left
//! for the next round instead of waited for.
//!
//! MySQL: one pool of 16 connections in `READ COMMITTED`, so the hot path's
//! inserts take no gap locks (a server that binlogs in `STATEMENT` format
//! refuses writes at that level; `MIXED`, the MariaDB default, and `ROW` are
//! fine). Every multi-statement write transaction is run again, up to four
//! times in all, when InnoDB picks it as a deadlock victim. Claims all lock
//! the one `leader_fences` row first, so two claim batches never interleave.
//!
//! SQLite (WAL, `synchronous=NORMAL`, `busy_timeout` 5 s, foreign keys on):
//! a pool of 4 connections for reads, and a separate pool of exactly one
//! connection for every write. SQLite allows one writer at a time anyway;
//! queueing writers in the pool instead of inside SQLite means a
//! read-then-write transaction never meets `SQLITE_BUSY` half way (no lock
//! upgrade between two writers of this process), and waiting writers are
//! woken in order instead of polling SQLite's busy handler. Write
//! transactions still start with `BEGIN IMMEDIATE`, so a second process on
//! the same file (e.g. `kairos migrate`) waits up front instead of failing
//! at the first write. WAL lets readers run while the writer works.
//!
//! # Statements per call
//!
//! With `n` items per call (multi-row statements are chunked at 500 rows; the
//! counts assume one chunk):
//!
//! | call | statements |
//! |---|---|
//! | `jobs_find_due`, `jobs_count_due` | 1 (the count reads at most its cap of index entries) |
//! | `triggers_claim` | fence upsert returning the stored fence (+ a fence read on MySQL) + 1 locking read of the jobs' versions (the jobs come with the claims, as scanned) + 1 multi-row update per 64 claimed jobs on MySQL (`CASE id`) or per 256 on SQLite and PostgreSQL (joined `VALUES`), version-checked + 1 execution insert (rows `dispatched` to the worker the claim names, else `pending`) + 1 event insert (+1 read when a trigger already had an execution; +1 read of live executions when a job's overlap policy is not `allow` or its window closes; with `replace`, +1 cancel and +1 stop-request update; +1 callback insert for skipped or cancelled executions with a callback URL) |
//! | `executions_mark_dispatched` | 1 locking read + 1 update per (worker, attempt) group (usually one) + 1 event insert |
//! | `executions_requeue_unstarted` | 1 locking read + 1 update per attempt number + 1 event insert |
//! | `results_apply`, `executions_apply_verdict` | 1 locking read + 1 count of live executions (jobs that may end with a final outcome in the batch: one-shots and closed windows; none for a batch of `started` reports) + 1 read of retired incarnations (results that carry one) + 1 multi-row update per 64 changed executions and per 64 changed jobs on MySQL (`CASE id`), per 256 on SQLite and PostgreSQL (joined `VALUES`) + 1 event insert + 1 callback insert (if any) |
//! | `executions_find_unpublished`, `executions_find_overdue`, `executions_find_unbounded` | 1 |
//! | `callbacks_claim_due` | 1 read + 1 lease update + 1 read back (PostgreSQL: the read locks, in one transaction with the update) |
//! | `workers_record_heartbeats` | 1 locking read of the workers + 1 read of retired incarnations + 1 upsert (+1 insert and 1 update per worker whose incarnation changed) |
//! | `worker_ledger`, `executions_in_flight_on` | 2 reads, 1 read |
//! | `job_create` | 1 insert (+1 read when the idempotency key exists) |
//! | `job_pause`/`resume`/`cancel` | 1 update + 1 read (cancel: + 1 locking read, 1 update, 1 event insert, 1 callback insert for its pending executions, 1 stop-request update for its running ones) |
//! | `job_update` | 1 locking read + 1 update + 1 read (+1 read of live executions when the schedule changed) |
//! | `executions_stop_requested` | 1 |
//! | `job_trigger_now` | 1 locking read + 1 read of taken trigger times + 1 insert + 1 event insert |
//!
//! plus `BEGIN`/`COMMIT` for the transactional calls.
//!
//! Measured on the 2-core development box (release build, while other
//! builds ran; before execution updates were batched): 2 000 triggers claimed in batches of 500 in ~0.3 s on
//! MariaDB and ~0.06 s on SQLite; 2 000 `started` results in batches of 200
//! in ~0.3 s / ~0.1 s; 2 000 final results with outbox rows in ~0.55 s /
//! ~0.15 s.

mod apply;
mod apply_job;
mod apply_rows;
mod callbacks;
mod claim;
mod confirm;
mod create;
mod db;
mod dispatch;
mod error;
mod history;
mod inserts;
mod jobs;
mod logs;
mod migrations;
mod overview;
mod rows;
mod rows_update;
mod sched_cols;
mod sql;
mod stop;
mod tenants;
mod update;
mod workers;

use async_trait::async_trait;
use db::Pool;
use kairos_core::store::{Health, StoreError, StoreResult};
use sqlx::mysql::MySqlConnectOptions;
use sqlx::postgres::PgConnectOptions;
use sqlx::sqlite::{SqliteConnectOptions, SqlitePoolOptions};
use sqlx::{ConnectOptions, Connection, Executor};
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

pub use dispatch::due_scan_sql;
pub use stop::stop_requests_sql;

/// Which database a [`SqlStore`] talks to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    /// MySQL or MariaDB (InnoDB).
    MySql,
    /// PostgreSQL.
    Postgres,
    /// SQLite (WAL mode).
    Sqlite,
}

impl Dialect {
    /// The dialect of a `mysql://`, `mariadb://`, `postgres://`,
    /// `postgresql://` or `sqlite:` URL.
    pub fn from_url(url: &str) -> Option<Self> {
        if url.starts_with("mysql://") || url.starts_with("mariadb://") {
            Some(Dialect::MySql)
        } else if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            Some(Dialect::Postgres)
        } else if url.starts_with("sqlite:") {
            Some(Dialect::Sqlite)
        } else {
            None
        }
    }

    /// The database's name, for messages.
    pub fn service(self) -> &'static str {
        match self {
            Dialect::MySql => "MySQL",
            Dialect::Postgres => "PostgreSQL",
            Dialect::Sqlite => "SQLite",
        }
    }
}

/// MySQL or PostgreSQL connections; the dispatcher, API and reaper share them.
const SERVER_POOL: u32 = 16;
/// SQLite reader connections (the writer has its own pool of one).
const SQLITE_READERS: u32 = 4;
/// How long a caller waits for a free connection before the store reports
/// itself unavailable.
const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(10);
/// A pooled connection idle for longer than this is pinged before it is
/// handed out. sqlx pings every connection it hands out by default, and
/// again as it takes it back: a round trip to the database server before
/// and after every statement run on the pool. One it took back less than
/// this ago answered that second ping then, so it is trusted as it is; a
/// connection that broke since fails its next statement, which the caller
/// sees as an unavailable store, as if it broke during the statement.
const TRUST_IDLE: Duration = Duration::from_secs(1);

/// The storage port on MySQL/MariaDB or SQLite. Cloning is cheap (shared pools).
#[derive(Clone, Debug)]
pub struct SqlStore {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    dialect: Dialect,
    read: Pool,
    write: Pool,
    /// Writes concurrent `job_create`s together (group commit).
    creates: create::Committer,
}

impl SqlStore {
    /// Connects to `mysql://…` (or `mariadb://…`), `postgres://…` (or
    /// `postgresql://…`) or `sqlite://…`. A SQLite file
    /// is created if missing. Every failure is [`StoreError::Unavailable`]
    /// naming the database and the URL (password masked).
    pub async fn connect(url: &str) -> StoreResult<SqlStore> {
        let dialect = Dialect::from_url(url).ok_or_else(|| {
            StoreError::Unavailable(format!(
                "unsupported database URL {}: expected mysql://, mariadb://, postgres:// or sqlite://",
                kairos_core::redact::redact_url(url)
            ))
        })?;
        let unavailable = |e: sqlx::Error| {
            StoreError::Unavailable(format!(
                "cannot connect to {} at {}: {e}",
                dialect.service(),
                kairos_core::redact::redact_url(url)
            ))
        };
        let (read, write) = match dialect {
            Dialect::MySql => {
                let url = url.replacen("mariadb://", "mysql://", 1);
                let options = MySqlConnectOptions::from_str(&url).map_err(unavailable)?;
                let pool = server_pool::<sqlx::MySql>(
                    options,
                    "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED",
                )
                .await
                .map_err(unavailable)?;
                (Pool::MySql(pool.clone()), Pool::MySql(pool))
            }
            Dialect::Postgres => {
                let options = PgConnectOptions::from_str(url).map_err(unavailable)?;
                // `READ COMMITTED` is PostgreSQL's default; set anyway, so a
                // server configured otherwise does not change how claims and
                // results lock.
                let pool = server_pool::<sqlx::Postgres>(
                    options,
                    "SET SESSION CHARACTERISTICS AS TRANSACTION ISOLATION LEVEL READ COMMITTED",
                )
                .await
                .map_err(unavailable)?;
                (Pool::Postgres(pool.clone()), Pool::Postgres(pool))
            }
            Dialect::Sqlite => sqlite_pools(url).await.map_err(unavailable)?,
        };
        let inner = Arc::new_cyclic(|me| Inner {
            dialect,
            read,
            write,
            creates: create::Committer::start(me.clone()),
        });
        Ok(SqlStore { inner })
    }

    /// Applies the embedded schema of this store's database (idempotent).
    pub async fn migrate(&self) -> StoreResult<()> {
        migrations::run(&self.inner.write).await
    }

    /// Which database this store talks to.
    pub fn dialect(&self) -> Dialect {
        self.inner.dialect
    }

    /// Closes every connection; later calls fail with [`StoreError::Unavailable`].
    pub async fn close(&self) {
        self.inner.write.close().await;
        self.inner.read.close().await;
    }

    /// Where reads run (on SQLite, the reader connections).
    fn read(&self) -> &Pool {
        &self.inner.read
    }

    /// Where writes outside a transaction run (on SQLite, the one writer).
    fn write(&self) -> &Pool {
        &self.inner.write
    }

    /// Starts a write transaction; on SQLite it takes the write lock up front.
    async fn begin(&self) -> StoreResult<db::Tx> {
        self.inner.write.begin().await
    }
}

/// The pool of a database server, every session running `isolation` first.
async fn server_pool<DB: sqlx::Database>(
    options: <DB::Connection as Connection>::Options,
    isolation: &'static str,
) -> Result<sqlx::Pool<DB>, sqlx::Error>
where
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
{
    // The pool retries a refused connection until its acquire timeout and
    // then reports only that; one direct connection first fails at once
    // with the real reason.
    options.connect().await?.close().await.ok();
    sqlx::pool::PoolOptions::<DB>::new()
        .max_connections(SERVER_POOL)
        .acquire_timeout(ACQUIRE_TIMEOUT)
        .test_before_acquire(false)
        .before_acquire(|conn, meta| Box::pin(ping_if_idle(conn, meta)))
        .after_connect(move |conn, _| {
            Box::pin(async move { conn.execute(isolation).await.map(|_| ()) })
        })
        .connect_with(options)
        .await
}

/// SQLite's options: WAL, `synchronous=NORMAL`, a 5 s busy timeout, foreign
/// keys on; the file is created if missing.
fn sqlite_options(url: &str) -> Result<SqliteConnectOptions, sqlx::Error> {
    Ok(SqliteConnectOptions::from_str(url)?
        .create_if_missing(true)
        .journal_mode(sqlx::sqlite::SqliteJournalMode::Wal)
        .synchronous(sqlx::sqlite::SqliteSynchronous::Normal)
        .busy_timeout(Duration::from_secs(5))
        .foreign_keys(true)
        // Rows travel from SQLite's thread one message each: a buffer that
        // holds a whole batch lets the thread run a read to its end instead
        // of waiting for the reader after every 50 rows.
        .row_buffer_size(1024))
}

fn sqlite_pool(max: u32) -> SqlitePoolOptions {
    SqlitePoolOptions::new()
        .max_connections(max)
        .acquire_timeout(ACQUIRE_TIMEOUT)
        .test_before_acquire(false)
        .before_acquire(|conn, meta| Box::pin(ping_if_idle(conn, meta)))
}

/// `before_acquire`: pings a connection only if it sat idle longer than
/// [`TRUST_IDLE`]; `Ok(true)` hands it out, an error makes the pool close
/// it and try another.
async fn ping_if_idle<C: Connection>(
    conn: &mut C,
    meta: sqlx::pool::PoolConnectionMetadata,
) -> Result<bool, sqlx::Error> {
    if meta.idle_for > TRUST_IDLE {
        conn.ping().await?;
    }
    Ok(true)
}

/// Read and write pools for a SQLite URL (one shared connection for `:memory:`).
async fn sqlite_pools(url: &str) -> Result<(Pool, Pool), sqlx::Error> {
    let options = sqlite_options(url)?;
    if url.contains(":memory:") || url.contains("mode=memory") {
        // An in-memory database lives as long as its one connection.
        let pool = sqlite_pool(1)
            .min_connections(1)
            .idle_timeout(None)
            .max_lifetime(None)
            .connect_with(options)
            .await?;
        return Ok((Pool::Sqlite(pool.clone()), Pool::Sqlite(pool)));
    }
    // The writer is created first and alone, so switching a new file to WAL
    // (which needs an exclusive lock) never races another connection.
    let write = sqlite_pool(1).connect_with(options.clone()).await?;
    let read = sqlite_pool(SQLITE_READERS).connect_with(options).await?;
    Ok((Pool::Sqlite(read), Pool::Sqlite(write)))
}

#[async_trait]
impl Health for SqlStore {
    async fn ping(&self) -> StoreResult<()> {
        sql::Sql::new("SELECT 1")
            .execute(self.read())
            .await
            .map(|_| ())
    }
}
