//! A fresh MySQL database per test, and the clean-up of ones left behind by
//! killed runs.

use crate::{mysql_url, service_missing, unique, with_database};
use sqlx::Connection;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Prefix of every database this kit creates; stale ones are dropped.
const DB_PREFIX: &str = "kt_";
/// Test databases older than this are left over from killed runs.
const STALE_AFTER_SECS: u64 = 3 * 3600;

/// Creates an empty MySQL database for one test and returns its URL, or `None`
/// (after the policy) when MySQL is not reachable. Databases this kit created
/// more than a few hours ago are dropped on the way.
pub async fn mysql_fresh_database() -> Option<String> {
    let base = mysql_url();
    let mut conn = match tokio::time::timeout(
        Duration::from_secs(5),
        sqlx::MySqlConnection::connect(&base),
    )
    .await
    {
        Ok(Ok(c)) => c,
        Ok(Err(e)) => return service_missing("MySQL", &base, &e.to_string()),
        Err(_) => return service_missing("MySQL", &base, "connect timed out"),
    };
    drop_stale_databases(&mut conn).await;
    let name = unique(DB_PREFIX.trim_end_matches('_'));
    if let Err(e) = sqlx::raw_sql(sqlx::AssertSqlSafe(format!("CREATE DATABASE `{name}`")))
        .execute(&mut conn)
        .await
    {
        panic!("cannot create test database {name} on {base}: {e}");
    }
    Some(with_database(&base, &name))
}

async fn drop_stale_databases(conn: &mut sqlx::MySqlConnection) {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs();
    let names: Vec<(String,)> = sqlx::query_as("SHOW DATABASES LIKE 'kt\\_%'")
        .fetch_all(&mut *conn)
        .await
        .unwrap_or_default();
    for (name,) in names {
        let created = name.split('_').nth(1).and_then(|s| s.parse::<u64>().ok());
        if created.is_some_and(|t| t + STALE_AFTER_SECS < now) {
            let _ = sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
                "DROP DATABASE IF EXISTS `{name}`"
            )))
            .execute(&mut *conn)
            .await;
        }
    }
}
