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

use crate::db::Pool;
use crate::dialect::Dialect;
use crate::error::{corrupt, db_err};
use kairos_core::store::{StoreError, StoreResult};
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
    (
        8,
        "native types",
        include_str!("../migrations/mysql/0008_native_types.sql"),
    ),
    (
        9,
        "dispatch batch",
        include_str!("../migrations/mysql/0009_dispatch_batch.sql"),
    ),
    (
        10,
        "operator role",
        include_str!("../migrations/mysql/0010_operator_role.sql"),
    ),
    (
        11,
        "action limits",
        include_str!("../migrations/mysql/0011_action_limits.sql"),
    ),
    (
        12,
        "sensitive params and ui sessions",
        include_str!("../migrations/mysql/0012_sensitive_sessions.sql"),
    ),
    (
        13,
        "job revision health",
        include_str!("../migrations/mysql/0013_job_revision_health.sql"),
    ),
    (
        14,
        "priorities",
        include_str!("../migrations/mysql/0014_priorities.sql"),
    ),
    (
        15,
        "concurrency limits",
        include_str!("../migrations/mysql/0015_concurrency_limits.sql"),
    ),
    (
        16,
        "shards",
        include_str!("../migrations/mysql/0016_shards.sql"),
    ),
    (
        17,
        "workflows",
        include_str!("../migrations/mysql/0017_workflows.sql"),
    ),
    (
        18,
        "partitions",
        include_str!("../migrations/mysql/0018_partitions.sql"),
    ),
    (
        19,
        "workflow callbacks",
        include_str!("../migrations/mysql/0019_workflow_callbacks.sql"),
    ),
    (
        20,
        "immediate queue",
        include_str!("../migrations/mysql/0020_immediate_queue.sql"),
    ),
    (
        21,
        "bounded reads",
        include_str!("../migrations/mysql/0021_bounded_reads.sql"),
    ),
    (
        22,
        "followup chains",
        include_str!("../migrations/mysql/0022_followup_chains.sql"),
    ),
    (
        23,
        "retention",
        include_str!("../migrations/mysql/0023_retention.sql"),
    ),
    (
        24,
        "handbacks",
        include_str!("../migrations/mysql/0024_handbacks.sql"),
    ),
    (
        25,
        "claim indexes",
        include_str!("../migrations/mysql/0025_claim_indexes.sql"),
    ),
    (
        27,
        "cron dialect",
        include_str!("../migrations/mysql/0027_cron_dialect.sql"),
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
    (
        8,
        "native types",
        include_str!("../migrations/postgres/0008_native_types.sql"),
    ),
    (
        9,
        "dispatch batch",
        include_str!("../migrations/postgres/0009_dispatch_batch.sql"),
    ),
    (
        10,
        "operator role",
        include_str!("../migrations/postgres/0010_operator_role.sql"),
    ),
    (
        11,
        "action limits",
        include_str!("../migrations/postgres/0011_action_limits.sql"),
    ),
    (
        12,
        "sensitive params and ui sessions",
        include_str!("../migrations/postgres/0012_sensitive_sessions.sql"),
    ),
    (
        13,
        "job revision health",
        include_str!("../migrations/postgres/0013_job_revision_health.sql"),
    ),
    (
        14,
        "priorities",
        include_str!("../migrations/postgres/0014_priorities.sql"),
    ),
    (
        15,
        "concurrency limits",
        include_str!("../migrations/postgres/0015_concurrency_limits.sql"),
    ),
    (
        16,
        "shards",
        include_str!("../migrations/postgres/0016_shards.sql"),
    ),
    (
        17,
        "workflows",
        include_str!("../migrations/postgres/0017_workflows.sql"),
    ),
    (
        18,
        "partitions",
        include_str!("../migrations/postgres/0018_partitions.sql"),
    ),
    (
        19,
        "workflow callbacks",
        include_str!("../migrations/postgres/0019_workflow_callbacks.sql"),
    ),
    (
        20,
        "immediate queue",
        include_str!("../migrations/postgres/0020_immediate_queue.sql"),
    ),
    (
        21,
        "bounded reads",
        include_str!("../migrations/postgres/0021_bounded_reads.sql"),
    ),
    (
        22,
        "followup chains",
        include_str!("../migrations/postgres/0022_followup_chains.sql"),
    ),
    (
        23,
        "retention",
        include_str!("../migrations/postgres/0023_retention.sql"),
    ),
    (
        24,
        "handbacks",
        include_str!("../migrations/postgres/0024_handbacks.sql"),
    ),
    (
        25,
        "claim indexes",
        include_str!("../migrations/postgres/0025_claim_indexes.sql"),
    ),
    (
        27,
        "cron dialect",
        include_str!("../migrations/postgres/0027_cron_dialect.sql"),
    ),
];

/// `(version, description, sql)` of every SQLite migration, in order. SQLite
/// has no time or JSON types, so it has no `native types` step: its times
/// stay integer milliseconds and its JSON text.
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
    (
        9,
        "dispatch batch",
        include_str!("../migrations/sqlite/0009_dispatch_batch.sql"),
    ),
    (
        10,
        "operator role",
        include_str!("../migrations/sqlite/0010_operator_role.sql"),
    ),
    (
        11,
        "action limits",
        include_str!("../migrations/sqlite/0011_action_limits.sql"),
    ),
    (
        12,
        "sensitive params and ui sessions",
        include_str!("../migrations/sqlite/0012_sensitive_sessions.sql"),
    ),
    (
        13,
        "job revision health",
        include_str!("../migrations/sqlite/0013_job_revision_health.sql"),
    ),
    (
        14,
        "priorities",
        include_str!("../migrations/sqlite/0014_priorities.sql"),
    ),
    (
        15,
        "concurrency limits",
        include_str!("../migrations/sqlite/0015_concurrency_limits.sql"),
    ),
    (
        16,
        "shards",
        include_str!("../migrations/sqlite/0016_shards.sql"),
    ),
    (
        17,
        "workflows",
        include_str!("../migrations/sqlite/0017_workflows.sql"),
    ),
    (
        18,
        "partitions",
        include_str!("../migrations/sqlite/0018_partitions.sql"),
    ),
    (
        19,
        "workflow callbacks",
        include_str!("../migrations/sqlite/0019_workflow_callbacks.sql"),
    ),
    (
        20,
        "immediate queue",
        include_str!("../migrations/sqlite/0020_immediate_queue.sql"),
    ),
    (
        21,
        "bounded reads",
        include_str!("../migrations/sqlite/0021_bounded_reads.sql"),
    ),
    (
        22,
        "followup chains",
        include_str!("../migrations/sqlite/0022_followup_chains.sql"),
    ),
    (
        23,
        "retention",
        include_str!("../migrations/sqlite/0023_retention.sql"),
    ),
    (
        24,
        "handbacks",
        include_str!("../migrations/sqlite/0024_handbacks.sql"),
    ),
    (
        25,
        "claim indexes",
        include_str!("../migrations/sqlite/0025_claim_indexes.sql"),
    ),
    (
        27,
        "cron dialect",
        include_str!("../migrations/sqlite/0027_cron_dialect.sql"),
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
pub(crate) async fn run(pool: &Pool) -> StoreResult<()> {
    apply(migrator(pool.dialect()), pool).await?;
    crate::partitions::fill_in(pool).await
}

async fn apply(migrator: Migrator, pool: &Pool) -> StoreResult<()> {
    match pool {
        Pool::MySql(p) => migrator.run(p).await,
        Pool::Postgres(p) => migrator.run(p).await,
        Pool::Sqlite(p) => migrator.run(p).await,
    }
    .map_err(|e| match e {
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
    use kairos_core::store::{DispatchScope, JobStore, TenantStore};
    use kairos_testkit as testkit;

    /// A database at the first schema with a job in it takes the later
    /// migrations, and the job reads back with the defaults they add.
    async fn upgrade_keeps_existing_jobs(url: String) {
        let store = SqlStore::connect(&url).await.expect("connect");
        let first =
            Migrator::with_migrations(migrations(store.dialect()).into_iter().take(1).collect());
        apply(first, store.write()).await.expect("schema 1");
        crate::sql::Sql::new(
            "INSERT INTO jobs (id, tenant, name, handler, params, schedule_kind, cron_expr, \
             timezone, once_at, next_trigger_at, status, version, callback_url, \
             client_request_id, request_hash, max_attempts, retry_backoff_ms, timeout_ms, \
             created_at, updated_at) VALUES ('j1', 't', 'n', 'noop', 'null', 'cron', \
             '0 * * * * *', 'UTC', NULL, 5, 'scheduled', 1, NULL, NULL, NULL, 1, 1000, NULL, 1, 1)",
        )
        .execute(store.write())
        .await
        .expect("a job at schema 1");
        // A delivered callback with its attempt: the outbox rebuilt by 0019
        // on SQLite (nullable execution) keeps both.
        for sql in [
            "INSERT INTO executions (id, job_id, tenant, scheduled_at, attempt, status, \
             not_before, finished_at, created_at, updated_at) VALUES \
             ('e1', 'j1', 't', 5, 1, 'succeeded', 5, 6, 5, 6)",
            "INSERT INTO callbacks (id, execution_id, job_id, tenant, url, payload, state, \
             attempts, next_attempt_at, created_at, updated_at) VALUES \
             ('cb1', 'e1', 'j1', 't', 'http://example.test/cb', '{\"a\": 1}', 'delivered', \
             1, 6, 6, 7)",
            "INSERT INTO callback_attempts (callback_id, attempt, attempted_at, status_code, \
             latency_ms) VALUES ('cb1', 1, 7, 200, 3)",
        ] {
            crate::sql::Sql::new(sql)
                .execute(store.write())
                .await
                .expect("an execution with its callback at schema 1");
        }
        store.migrate().await.expect("later schemas");
        let callbacks =
            kairos_core::store::CallbackStore::callbacks_for_execution(&store, "t", "e1")
                .await
                .expect("the execution's callbacks");
        assert_eq!(callbacks.len(), 1);
        let (cb, attempts) = &callbacks[0];
        assert_eq!(
            cb.subject,
            kairos_core::callback::CallbackSubject::Execution {
                execution_id: "e1".into(),
                job_id: "j1".into()
            }
        );
        assert_eq!(
            (cb.id.as_str(), cb.payload.replace(' ', "").as_str()),
            ("cb1", r#"{"a":1}"#)
        );
        assert_eq!(attempts.len(), 1);
        assert_eq!(attempts[0].status_code, Some(200));
        let job = store.job_get("t", "j1").await.unwrap().expect("the job");
        assert_eq!(job.schedule, Schedule::cron("0 * * * * *", "UTC"));
        let partition: i64 = crate::sql::Sql::new("SELECT partition_no FROM jobs WHERE id = 'j1'")
            .scalar(store.read(), "partition_no")
            .await
            .expect("partition");
        assert_eq!(
            partition,
            i64::from(kairos_core::partition::of("j1", 256)),
            "a job older than the partitions gets its partition"
        );
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

    /// A database of the previous release (schema 7: times as BIGINT
    /// milliseconds, JSON as text) takes the native-types step: every time
    /// and document reads back exactly, the tables hold the database's own
    /// types, and a job that was due is still found and claimed.
    async fn previous_release_converts_and_its_jobs_still_run(url: String) {
        use kairos_core::store::{Claim, Dispatch, History};
        let store = SqlStore::connect(&url).await.expect("connect");
        let seven =
            Migrator::with_migrations(migrations(store.dialect()).into_iter().take(7).collect());
        apply(seven, store.write()).await.expect("schema 7");
        // Rows as the previous release wrote them.
        crate::sql::Sql::new(
            "INSERT INTO jobs (id, tenant, name, handler, params, schedule_kind, cron_expr, \
             timezone, once_at, next_trigger_at, status, version, max_attempts, \
             retry_backoff_ms, created_at, updated_at) VALUES \
             ('due', 'default', 'n', 'noop', '{\"k\": [1, 2]}', 'once', NULL, NULL, \
              1767225600123, 1767225600123, 'scheduled', 1, 1, 1000, 1767225500000, 4102444800000), \
             ('cron', 'default', 'c', 'noop', '{}', 'cron', '0 * * * * *', 'UTC', \
              NULL, 1767225660000, 'scheduled', 3, 1, 1000, 1767225500000, 1767225500000)",
        )
        .execute(store.write())
        .await
        .expect("jobs at schema 7");
        crate::sql::Sql::new(
            "INSERT INTO executions (id, job_id, tenant, scheduled_at, attempt, status, \
             output, not_before, started_at, finished_at, created_at, updated_at) VALUES \
             ('e0', 'cron', 'default', 1767225600000, 1, 'succeeded', '{\"ok\": true}', \
              1767225600000, 1767225600250, 1767225600999, 1767225600000, 1767225600999)",
        )
        .execute(store.write())
        .await
        .expect("an execution at schema 7");

        store.migrate().await.expect("native types");

        let job = store.job_get("default", "due").await.unwrap().expect("job");
        assert_eq!(job.next_trigger_at, Some(1_767_225_600_123));
        assert_eq!(
            job.schedule,
            Schedule::Once {
                at: 1_767_225_600_123
            }
        );
        assert_eq!(
            (job.created_at, job.updated_at),
            (1_767_225_500_000, 4_102_444_800_000)
        );
        assert_eq!(job.params, serde_json::json!({"k": [1, 2]}));
        let exec = store
            .execution_get("default", "e0")
            .await
            .unwrap()
            .expect("execution");
        assert_eq!(
            (exec.started_at, exec.finished_at),
            (Some(1_767_225_600_250), Some(1_767_225_600_999))
        );
        assert_eq!(exec.output, Some(serde_json::json!({"ok": true})));

        // The tables now hold the database's own types.
        let (time_sql, json_sql): (&str, &str) = match store.dialect() {
            crate::Dialect::MySql => (
                "SELECT DATE_FORMAT(next_trigger_at, '%Y-%m-%d %H:%i:%s.%f') AS v FROM jobs WHERE id = 'due'",
                "SELECT JSON_EXTRACT(params, '$.k[1]') AS v FROM jobs WHERE id = 'due'",
            ),
            crate::Dialect::Postgres => (
                "SELECT to_char(next_trigger_at AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS.US') AS v FROM jobs WHERE id = 'due'",
                "SELECT (params -> 'k' -> 1)::text AS v FROM jobs WHERE id = 'due'",
            ),
            crate::Dialect::Sqlite => unreachable!("SQLite has no native-types step"),
        };
        let t: String = crate::sql::Sql::new(time_sql)
            .scalar(store.read(), "v")
            .await
            .expect("time as the database reads it");
        assert_eq!(t, "2026-01-01 00:00:00.123000");
        let j: String = crate::sql::Sql::new(json_sql)
            .scalar(store.read(), "v")
            .await
            .expect("JSON as the database reads it");
        assert_eq!(j, "2");

        // The due job is still found and claimed.
        let now = 1_767_225_601_000;
        let due = store
            .jobs_find_due(DispatchScope::All { fence: 1 }, now, 10, &[])
            .await
            .expect("due scan");
        let ids: Vec<&str> = due.iter().map(|j| j.id.as_str()).collect();
        assert_eq!(ids, ["due"]);
        assert_eq!(due[0].version, 1);
        let work = store
            .triggers_claim(
                DispatchScope::All { fence: 1 },
                &[Claim {
                    shard: Default::default(),
                    job: std::sync::Arc::new(due[0].clone()),
                    scheduled_at: 1_767_225_600_123,
                    next_trigger_at: None,
                    execution_id: "e1".into(),
                    worker_id: None,
                }],
                now,
            )
            .await
            .expect("claim")
            .work;
        assert_eq!(work.len(), 1, "the converted job is claimed");
        let exec = store
            .execution_get("default", "e1")
            .await
            .unwrap()
            .expect("new execution");
        assert_eq!(exec.scheduled_at, 1_767_225_600_123);
    }

    /// Admin keys made before 0010 governed every tenant: they become
    /// operators, and the other roles stay as they were.
    async fn admin_keys_become_operators(url: String) {
        use kairos_core::tenant::{DEFAULT_TENANT, Role};
        let store = SqlStore::connect(&url).await.expect("connect");
        let before: Vec<Migration> = migrations(store.dialect())
            .into_iter()
            .filter(|m| m.version < 10)
            .collect();
        apply(Migrator::with_migrations(before), store.write())
            .await
            .expect("schema 9");
        // Written as schema 9 had them: the store's own calls read columns
        // of later migrations.
        for (prefix, role) in [("a", Role::Admin), ("w", Role::Write), ("r", Role::Read)] {
            let created_at: kairos_core::time::Millis = 1_767_225_600_000;
            let f = crate::sql::Fields::new()
                .with("prefix", prefix)
                .with("tenant", DEFAULT_TENANT)
                .with("role", role.as_str())
                .with("secret_hash", "0".repeat(64))
                .with("created_at", crate::sql::time(created_at));
            crate::sql::Sql::new("INSERT INTO api_keys")
                .rows([&f])
                .execute(store.write())
                .await
                .expect("a schema-9 key");
        }
        store.migrate().await.expect("0010");
        for (prefix, role) in [("a", Role::Operator), ("w", Role::Write), ("r", Role::Read)] {
            let got = store.api_key_get(prefix).await.unwrap().expect("the key");
            assert_eq!(got.role, role, "key {prefix}");
        }
    }

    #[tokio::test]
    async fn sqlite_admin_keys_become_operators() {
        admin_keys_become_operators(testkit::sqlite_temp_url()).await;
    }

    #[tokio::test]
    async fn mysql_admin_keys_become_operators() {
        if let Some(url) = testkit::mysql_fresh_database().await {
            admin_keys_become_operators(url).await;
        }
    }

    #[tokio::test]
    async fn postgres_admin_keys_become_operators() {
        if let Some(db) = testkit::postgres_fresh_database().await {
            admin_keys_become_operators(db.url().to_string()).await;
        }
    }

    #[tokio::test]
    async fn mysql_previous_release_converts() {
        if let Some(url) = testkit::mysql_fresh_database().await {
            previous_release_converts_and_its_jobs_still_run(url).await;
        }
    }

    #[tokio::test]
    async fn postgres_previous_release_converts() {
        if let Some(db) = testkit::postgres_fresh_database().await {
            previous_release_converts_and_its_jobs_still_run(db.url().to_string()).await;
        }
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
