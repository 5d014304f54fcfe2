//! The schema, embedded in the binary from `migrations/mysql` and
//! `migrations/sqlite`, applied through sqlx's migrator.
//!
//! `sqlx::migrate!` needs sqlx's `macros` feature, which the workspace leaves
//! off (it would build both database drivers a second time for the proc
//! macro). The files are embedded with `include_str!` instead and handed to
//! the same [`Migrator`], with the same checksums, so the `sqlx` CLI and this
//! code agree on what is applied. A new migration is a new file plus one line
//! in each list below.

use super::Dialect;
use super::error::{corrupt, db_err};
use crate::store::{StoreError, StoreResult};
use sqlx::AnyPool;
use sqlx::migrate::{MigrateError, Migration, MigrationType, Migrator};

/// `(version, description, sql)` of every MySQL migration, in order.
const MYSQL: &[(i64, &str, &str)] = &[(
    1,
    "init",
    include_str!("../../../migrations/mysql/0001_init.sql"),
)];

/// `(version, description, sql)` of every SQLite migration, in order.
const SQLITE: &[(i64, &str, &str)] = &[(
    1,
    "init",
    include_str!("../../../migrations/sqlite/0001_init.sql"),
)];

fn migrator(dialect: Dialect) -> Migrator {
    let list = match dialect {
        Dialect::MySql => MYSQL,
        Dialect::Sqlite => SQLITE,
    };
    Migrator::with_migrations(
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
            .collect(),
    )
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
