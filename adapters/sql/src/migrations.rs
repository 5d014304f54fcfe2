//! The schema, embedded in the binary from `migrations/mysql`,
//! `migrations/postgres` and `migrations/sqlite`, applied through sqlx's
//! migrator.
//!
//! `sqlx::migrate!` needs sqlx's `macros` feature, which the workspace leaves
//! off (it would build both database drivers a second time for the proc
//! macro). The files are embedded with `include_str!` instead and handed to
//! the same [`Migrator`], with the same checksums, so the `sqlx` CLI and this
//! code agree on what is applied. A new migration is a new file in each of
//! the three folders plus one line in each list below. The PostgreSQL schema
//! must stay the MySQL one: `tests/store_postgres.rs`
//! (`the_postgres_schema_is_the_mysql_schema`) compares their tables,
//! columns, nullability, keys, indexes and foreign keys.

use super::Dialect;
use super::error::{corrupt, db_err};
use kairos_core::store::{StoreError, StoreResult};
use sqlx::AnyPool;
use sqlx::migrate::{MigrateError, Migration, MigrationType, Migrator};

/// `(version, description, sql)` of every MySQL migration, in order.
const MYSQL: &[(i64, &str, &str)] = &[
    (1, "init", include_str!("../migrations/mysql/0001_init.sql")),
    (
        2,
        "schedules",
        include_str!("../migrations/mysql/0002_schedules.sql"),
    ),
    (
        3,
        "incarnations",
        include_str!("../migrations/mysql/0003_incarnations.sql"),
    ),
    (
        4,
        "handlers logs",
        include_str!("../migrations/mysql/0004_handlers_logs.sql"),
    ),
    (
        5,
        "tenants",
        include_str!("../migrations/mysql/0005_tenants.sql"),
    ),
    (
        6,
        "trace context",
        include_str!("../migrations/mysql/0006_trace_context.sql"),
    ),
    (
        7,
        "pause reason",
        include_str!("../migrations/mysql/0007_pause_reason.sql"),
    ),
];

/// `(version, description, sql)` of every PostgreSQL migration, in order.
const POSTGRES: &[(i64, &str, &str)] = &[
    (
        1,
        "init",
        include_str!("../migrations/postgres/0001_init.sql"),
    ),
    (
        2,
        "schedules",
        include_str!("../migrations/postgres/0002_schedules.sql"),
    ),
    (
        3,
        "incarnations",
        include_str!("../migrations/postgres/0003_incarnations.sql"),
    ),
    (
        4,
        "handlers logs",
        include_str!("../migrations/postgres/0004_handlers_logs.sql"),
    ),
    (
        5,
        "tenants",
        include_str!("../migrations/postgres/0005_tenants.sql"),
    ),
    (
        6,
        "trace context",
        include_str!("../migrations/postgres/0006_trace_context.sql"),
    ),
    (
        7,
        "pause reason",
        include_str!("../migrations/postgres/0007_pause_reason.sql"),
    ),
];

/// `(version, description, sql)` of every SQLite migration, in order.
const SQLITE: &[(i64, &str, &str)] = &[
    (
        1,
        "init",
        include_str!("../migrations/sqlite/0001_init.sql"),
    ),
    (
        2,
        "schedules",
        include_str!("../migrations/sqlite/0002_schedules.sql"),
    ),
    (
        3,
        "incarnations",
        include_str!("../migrations/sqlite/0003_incarnations.sql"),
    ),
    (
        4,
        "handlers logs",
        include_str!("../migrations/sqlite/0004_handlers_logs.sql"),
    ),
    (
        5,
        "tenants",
        include_str!("../migrations/sqlite/0005_tenants.sql"),
    ),
    (
        6,
        "trace context",
        include_str!("../migrations/sqlite/0006_trace_context.sql"),
    ),
    (
        7,
        "pause reason",
        include_str!("../migrations/sqlite/0007_pause_reason.sql"),
    ),
];

fn migrations(dialect: Dialect) -> Vec<Migration> {
    let list = match dialect {
        Dialect::MySql => MYSQL,
        Dialect::Postgres => POSTGRES,
        Dialect::Sqlite => SQLITE,
    };
    list.iter()
        .map(|&(version, description, sql)| {
            Migration::new(
                version,
                description.into(),
                MigrationType::Simple,
                sqlx::SqlSafeStr::into_sql_str(sql),
                false,
            )
        })
        .collect()
}

fn migrator(dialect: Dialect) -> Migrator {
    Migrator::with_migrations(migrations(dialect))
}

/// Applies every migration not applied yet.
pub(crate) async fn run(dialect: Dialect, pool: &AnyPool) -> StoreResult<()> {
    migrator(dialect).run(pool).await.map_err(|e| match e {
        MigrateError::Execute(e) | MigrateError::ExecuteMigration(e, _) => db_err(e),
        e @ (MigrateError::VersionMissing(_)
        | MigrateError::VersionMismatch(_)
        | MigrateError::VersionNotPresent(_)
        | MigrateError::VersionTooOld(..)
        | MigrateError::VersionTooNew(..)
        | MigrateError::Dirty(_)) => corrupt("_sqlx_migrations", e),
        other => StoreError::Unavailable(format!("migration failed: {other}")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::SqlStore;
    use kairos_core::schedule::{MisfirePolicy, Schedule};
    use kairos_core::store::{JobStore, TenantStore};
    use kairos_testkit as testkit;

    /// A database at the first schema with a job in it takes the later
    /// migrations, and the job reads back with the defaults they add.
    async fn upgrade_keeps_existing_jobs(url: String) {
        let store = SqlStore::connect(&url).await.expect("connect");
        let first =
            Migrator::with_migrations(migrations(store.dialect()).into_iter().take(1).collect());
        first.run(store.write()).await.expect("schema 1");
        crate::stmt::q(
            store.dialect(),
            "INSERT INTO jobs (id, tenant, name, handler, params, schedule_kind, cron_expr, \
             timezone, once_at, next_trigger_at, status, version, callback_url, \
             client_request_id, request_hash, max_attempts, retry_backoff_ms, timeout_ms, \
             created_at, updated_at) VALUES ('j1', 't', 'n', 'noop', 'null', 'cron', \
             '0 * * * * *', 'UTC', NULL, 5, 'scheduled', 1, NULL, NULL, NULL, 1, 1000, NULL, 1, 1)",
        )
        .execute(store.write())
        .await
        .expect("a job at schema 1");
        store.migrate().await.expect("later schemas");
        let job = store.job_get("t", "j1").await.unwrap().expect("the job");
        assert_eq!(job.schedule, Schedule::cron("0 * * * * *", "UTC"));
        assert_eq!(job.worker_group, None);
        let r = job.schedule.recurrence().unwrap();
        assert_eq!(
            (r.misfire, r.start_at, r.end_at),
            (MisfirePolicy::FireOnce, None, None)
        );
        let tenants: Vec<String> = store
            .tenants_list()
            .await
            .expect("tenants")
            .into_iter()
            .map(|t| t.id)
            .collect();
        assert_eq!(
            tenants,
            ["default", "t"],
            "every job's tenant becomes a tenant"
        );
        store.migrate().await.expect("idempotent");
    }

    #[tokio::test]
    async fn sqlite_upgrade_keeps_existing_jobs() {
        upgrade_keeps_existing_jobs(testkit::sqlite_temp_url()).await;
    }

    #[tokio::test]
    async fn mysql_upgrade_keeps_existing_jobs() {
        if let Some(url) = testkit::mysql_fresh_database().await {
            upgrade_keeps_existing_jobs(url).await;
        }
    }

    #[tokio::test]
    async fn postgres_upgrade_keeps_existing_jobs() {
        if let Some(db) = testkit::postgres_fresh_database().await {
            upgrade_keeps_existing_jobs(db.url().to_string()).await;
        }
    }
}
