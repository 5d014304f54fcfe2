//! The store type: its connection pools (how each database is connected
//! and configured), where reads and writes run, and the one place write
//! transactions are begun and, when they lose a lock race, run again.

use crate::create::Committer;
use crate::db::{Pool, Tx};
use crate::dialect::Dialect;
use crate::migrations;
use crate::sql::Sql;
use async_trait::async_trait;
use backon::{BackoffBuilder, ExponentialBuilder};
use kairos_core::store::{Health, StoreError, StoreResult};
use kairos_core::workflow::budget::RunLimits;
use sqlx::mysql::MySqlConnectOptions;
use sqlx::postgres::PgConnectOptions;
use sqlx::sqlite::{SqliteConnectOptions, SqlitePoolOptions};
use sqlx::{ConnectOptions, Connection, Executor};
use std::future::Future;
use std::str::FromStr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// How long a PostgreSQL session may sit idle inside a transaction: far
/// above any pause between one transaction's statements.
const PG_IDLE_IN_TX: &str = "15s";

/// The same limit on MariaDB (10.3 and later: an executable comment, so
/// MySQL, which has no such setting, runs only the harmless assignment).
/// MariaDB's waiters give up after `innodb_lock_wait_timeout` (50 s), but
/// they would only retry into the same locks.
const MARIADB_IDLE_IN_TX: &str =
    "SET @kairos_session = 1 /*M!100300 , SESSION idle_transaction_timeout = 15 */";

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

/// Runs in all of a transaction the database rolled back as the loser of a
/// lock race.
const TX_RUNS: usize = 4;

/// The storage port on MySQL/MariaDB, PostgreSQL or SQLite. Cloning is cheap (shared pools).
#[derive(Clone, Debug)]
pub struct SqlStore {
    inner: Arc<Inner>,
    /// The budgets of follow-up chains and workflow runs, applied where
    /// their next executions are created.
    limits: RunLimits,
}

#[derive(Debug)]
struct Inner {
    dialect: Dialect,
    read: Pool,
    write: Pool,
    /// Writes concurrent `job_create`s together (group commit).
    creates: Committer,
    /// Transactions [`SqlStore::transaction`] ran again after a lock race.
    reruns: AtomicU64,
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
                    &[
                        "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED",
                        MARIADB_IDLE_IN_TX,
                    ],
                )
                .await
                .map_err(unavailable)?;
                (Pool::MySql(pool.clone()), Pool::MySql(pool))
            }
            Dialect::Postgres => {
                // A process frozen inside a transaction (SIGSTOP, a VM
                // paused) keeps its row locks, and PostgreSQL lets every
                // other transaction wait for them without end: a dispatcher
                // frozen mid-claim would stall every result applied to the
                // same jobs. The server ends such a session instead, so its
                // locks go and its late commit fails (and is retried).
                let options = PgConnectOptions::from_str(url)
                    .map_err(unavailable)?
                    .options([("idle_in_transaction_session_timeout", PG_IDLE_IN_TX)]);
                // `READ COMMITTED` is PostgreSQL's default; set anyway, so a
                // server configured otherwise does not change how claims and
                // results lock.
                let pool = server_pool::<sqlx::Postgres>(
                    options,
                    &["SET SESSION CHARACTERISTICS AS TRANSACTION ISOLATION LEVEL READ COMMITTED"],
                )
                .await
                .map_err(unavailable)?;
                (Pool::Postgres(pool.clone()), Pool::Postgres(pool))
            }
            Dialect::Sqlite => sqlite_pools(url).await.map_err(unavailable)?,
        };
        let inner = Arc::new(Inner {
            dialect,
            creates: Committer::start(write.clone()),
            read,
            write,
            reruns: AtomicU64::new(0),
        });
        Ok(SqlStore {
            inner,
            limits: RunLimits::default(),
        })
    }

    /// This store with `limits` as the budgets of follow-up chains and
    /// workflow runs (the defaults otherwise).
    pub fn with_run_limits(mut self, limits: RunLimits) -> SqlStore {
        self.limits = limits;
        self
    }

    /// The budgets of follow-up chains and workflow runs.
    pub fn run_limits(&self) -> RunLimits {
        self.limits
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
    pub(crate) fn read(&self) -> &Pool {
        &self.inner.read
    }

    /// Where writes outside a transaction run (on SQLite, the one writer).
    pub(crate) fn write(&self) -> &Pool {
        &self.inner.write
    }

    /// The group committer behind `job_create`.
    pub(crate) fn creates(&self) -> &Committer {
        &self.inner.creates
    }

    /// How many write transactions this store has run again so far because
    /// the database rolled them back as the loser of a deadlock or
    /// serialization race (see `transaction`): what such races cost, which
    /// the callers never see.
    pub fn contention_reruns(&self) -> u64 {
        self.inner.reruns.load(Ordering::Relaxed)
    }

    /// Starts a write transaction that is not run again if it loses a lock
    /// race (its caller has its own fallback, or nothing to gain); on SQLite
    /// it takes the write lock up front.
    pub(crate) async fn begin(&self) -> StoreResult<Tx> {
        self.inner.write.begin().await
    }

    /// Runs `body` on a new write transaction, and again on a fresh one while
    /// the database rolls it back as the loser of a deadlock or serialization
    /// race ([`StoreError::Contention`]): up to [`TX_RUNS`] runs in all,
    /// after a short exponential backoff with jitter, so two transactions that
    /// collided do not collide again in lock step. `body` commits the
    /// transaction; one it drops is rolled back. Every write transaction that
    /// may lose such a race runs through here.
    pub(crate) async fn transaction<T, F, Fut>(&self, mut body: F) -> StoreResult<T>
    where
        F: FnMut(Tx) -> Fut,
        Fut: Future<Output = StoreResult<T>>,
    {
        let mut backoff = ExponentialBuilder::default()
            .with_min_delay(Duration::from_millis(2))
            .with_max_delay(Duration::from_millis(100))
            .with_max_times(TX_RUNS - 1)
            .with_jitter()
            .build();
        loop {
            let ran = match self.begin().await {
                Ok(tx) => body(tx).await,
                Err(e) => Err(e),
            };
            match ran {
                Err(e @ StoreError::Contention(_)) => match backoff.next() {
                    Some(after) => {
                        self.inner.reruns.fetch_add(1, Ordering::Relaxed);
                        tracing::debug!(error = %e, retry_in = ?after, "transaction lost a lock race; running it again");
                        tokio::time::sleep(after).await;
                    }
                    None => return Err(e),
                },
                done => return done,
            }
        }
    }
}

/// The pool of a database server, every session running `isolation` first.
async fn server_pool<DB: sqlx::Database>(
    options: <DB::Connection as Connection>::Options,
    init: &'static [&'static str],
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
            Box::pin(async move {
                for statement in init {
                    conn.execute(*statement).await?;
                }
                Ok(())
            })
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
        Sql::new("SELECT 1").execute(self.read()).await.map(|_| ())
    }
}
