//! A connection of a test's own beside the store, for the suites that watch
//! row locks on MySQL and PostgreSQL, and the macro that runs each such case
//! on both.

use std::time::Duration;

/// A connection of the test's own, outside the store.
pub enum Raw {
    MySql(sqlx::MySqlConnection),
    Postgres(sqlx::PgConnection),
}

impl Raw {
    pub async fn run(&mut self, sql: &str) {
        let q = sqlx::raw_sql(sqlx::AssertSqlSafe(sql.to_string()));
        match self {
            Raw::MySql(c) => q.execute(c).await.map(|_| ()),
            Raw::Postgres(c) => q.execute(c).await.map(|_| ()),
        }
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
    }

    pub async fn count(&mut self, sql: &str) -> i64 {
        let q = sqlx::AssertSqlSafe(sql.to_string());
        match self {
            Raw::MySql(c) => sqlx::query_scalar::<_, i64>(q).fetch_one(c).await,
            Raw::Postgres(c) => sqlx::query_scalar::<_, i64>(q).fetch_one(c).await,
        }
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
    }

    /// ` LOCK IN SHARE MODE` or ` FOR SHARE`.
    pub fn share(&self) -> &'static str {
        match self {
            Raw::MySql(_) => " LOCK IN SHARE MODE",
            Raw::Postgres(_) => " FOR SHARE",
        }
    }

    /// Sessions of this database waiting for a row lock.
    pub async fn lock_waits(&mut self) -> i64 {
        let sql = match self {
            Raw::MySql(_) => {
                "SELECT COUNT(*) FROM information_schema.INNODB_TRX t \
                 JOIN information_schema.PROCESSLIST p ON p.ID = t.trx_mysql_thread_id \
                 WHERE t.trx_state = 'LOCK WAIT' AND p.DB = DATABASE()"
            }
            Raw::Postgres(_) => {
                "SELECT COUNT(*) FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid \
                 WHERE NOT l.granted AND a.datname = current_database()"
            }
        };
        self.count(sql).await
    }

    /// Waits until `task` is either done (`false`) or waiting for a row
    /// lock (`true`), failing after `stuck`.
    pub async fn blocked<T>(&mut self, task: &tokio::task::JoinHandle<T>, stuck: Duration) -> bool {
        let start = tokio::time::Instant::now();
        loop {
            if task.is_finished() {
                return false;
            }
            if self.lock_waits().await > 0 {
                return true;
            }
            assert!(start.elapsed() < stuck, "neither done nor waiting");
            // InnoDB refreshes what `INNODB_TRX` shows only when it was
            // last read over 100 ms ago: polled faster, it never changes.
            tokio::time::sleep(Duration::from_millis(150)).await;
        }
    }
}

/// Each case on MySQL and on PostgreSQL, with a raw connection to the same
/// database.
#[allow(unused_macros)]
macro_rules! raw_cases {
    ($($name:ident),* $(,)?) => {
        mod mysql {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    let Some(url) = super::testkit::mysql_fresh_database().await else {
                        return;
                    };
                    let store = super::SqlStore::connect(&url).await.expect("connect");
                    store.migrate().await.expect("migrate");
                    let raw = <sqlx::MySqlConnection as sqlx::Connection>::connect(&url).await.expect("raw");
                    super::$name(store, super::Raw::MySql(raw)).await;
                }
            )*
        }
        mod postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    let Some(db) = super::testkit::postgres_fresh_database().await else {
                        return;
                    };
                    let store = super::SqlStore::connect(db.url()).await.expect("connect");
                    store.migrate().await.expect("migrate");
                    let raw = <sqlx::PgConnection as sqlx::Connection>::connect(db.url()).await.expect("raw");
                    super::$name(store, super::Raw::Postgres(raw)).await;
                    drop(db);
                }
            )*
        }
    };
}
