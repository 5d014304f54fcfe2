//! A fresh PostgreSQL database per test, dropped when the test is done, and
//! the clean-up of ones left behind by killed runs.

use crate::{postgres_url, service_missing, unique, with_database};
use sqlx::Connection;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Prefix of every database this kit creates; stale ones are dropped.
const DB_PREFIX: &str = "kairos_t";
/// Test databases older than this are left over from killed runs.
const STALE_AFTER_SECS: u64 = 3 * 3600;
/// How long a connection to the server may take before it counts as down.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// A database created for one test. Dropping it drops the database
/// (`WITH (FORCE)`: connections a store still holds are closed).
#[derive(Debug)]
pub struct PgDatabase {
    base: String,
    name: String,
    url: String,
}

impl PgDatabase {
    /// URL of the database.
    pub fn url(&self) -> &str {
        &self.url
    }
}

impl Drop for PgDatabase {
    fn drop(&mut self) {
        // Drop runs outside any runtime (or inside one that must not be
        // blocked): a thread of its own with a runtime of its own.
        let (base, name) = (self.base.clone(), self.name.clone());
        let dropped = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .ok()?;
            rt.block_on(async {
                let mut conn = connect(&base).await.ok()?;
                drop_database(&mut conn, &name).await;
                let _ = conn.close().await;
                Some(())
            })
        })
        .join();
        if !matches!(dropped, Ok(Some(()))) {
            use std::io::Write;
            let _ = writeln!(
                std::io::stderr(),
                "test database {} was not dropped (a later run drops it once stale)",
                self.name
            );
        }
    }
}

async fn connect(url: &str) -> Result<sqlx::PgConnection, String> {
    match tokio::time::timeout(CONNECT_TIMEOUT, sqlx::PgConnection::connect(url)).await {
        Ok(Ok(c)) => Ok(c),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err("connect timed out".to_string()),
    }
}

async fn drop_database(conn: &mut sqlx::PgConnection, name: &str) {
    let _ = sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
        "DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)"
    )))
    .execute(&mut *conn)
    .await;
}

/// Creates an empty PostgreSQL database for one test, or `None` (after the
/// policy) when `KAIROS_TEST_PG_URL` is not set or the server is not
/// reachable. Databases this kit created more than a few hours ago are
/// dropped on the way.
pub async fn postgres_fresh_database() -> Option<PgDatabase> {
    let Some(base) = postgres_url() else {
        return service_missing(
            "PostgreSQL",
            "KAIROS_TEST_PG_URL (unset)",
            "set KAIROS_TEST_PG_URL, e.g. postgres://postgres@127.0.0.1:5432/test",
        );
    };
    let mut conn = match connect(&base).await {
        Ok(c) => c,
        Err(why) => return service_missing("PostgreSQL", &base, &why),
    };
    drop_stale_databases(&mut conn).await;
    let name = unique(DB_PREFIX);
    if let Err(e) = sqlx::raw_sql(sqlx::AssertSqlSafe(format!("CREATE DATABASE \"{name}\"")))
        .execute(&mut conn)
        .await
    {
        panic!("cannot create test database {name} on {base}: {e}");
    }
    let _ = conn.close().await;
    let url = with_database(&base, &name);
    Some(PgDatabase { base, name, url })
}

async fn drop_stale_databases(conn: &mut sqlx::PgConnection) {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs();
    let names: Vec<(String,)> =
        sqlx::query_as("SELECT datname FROM pg_database WHERE datname LIKE 'kairos\\_t\\_%'")
            .fetch_all(&mut *conn)
            .await
            .unwrap_or_default();
    for (name,) in names {
        // kairos_t_<secs>_<pid>_<n>
        let created = name.split('_').nth(2).and_then(|s| s.parse::<u64>().ok());
        if created.is_some_and(|t| t + STALE_AFTER_SECS < now) {
            drop_database(conn, &name).await;
        }
    }
}
