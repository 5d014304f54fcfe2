//! Maps sqlx errors onto [`StoreError`], and retries transactions that lost a
//! deadlock or lock-wait race.

use kairos_core::store::{StoreError, StoreResult};
use std::future::Future;
use std::time::Duration;

/// Attempts in all for a transaction the database rolled back as a deadlock
/// victim.
const TX_ATTEMPTS: u32 = 4;

/// Connection and pool failures become [`StoreError::Unavailable`] (the API
/// answers 503); everything else is a database error.
pub(crate) fn db_err(e: sqlx::Error) -> StoreError {
    use sqlx::Error as E;
    match e {
        E::Io(_)
        | E::Tls(_)
        | E::Protocol(_)
        | E::PoolTimedOut
        | E::PoolClosed
        | E::WorkerCrashed
        | E::Configuration(_)
        | E::BeginFailed => StoreError::Unavailable(e.to_string()),
        E::Database(ref db) if is_busy(db.as_ref()) => StoreError::Unavailable(e.to_string()),
        E::Database(ref db) if is_contention(db.as_ref()) => StoreError::Contention(Box::new(e)),
        other => StoreError::Database(Box::new(other)),
    }
}

/// SQLite's "database is locked" after the busy timeout: another process held
/// the write lock too long. Transient, so it is reported as unavailability.
fn is_busy(db: &dyn sqlx::error::DatabaseError) -> bool {
    const SQLITE_BUSY: i64 = 5;
    const SQLITE_LOCKED: i64 = 6;
    use sqlx::error::DatabaseError;
    db.try_downcast_ref::<sqlx::sqlite::SqliteError>()
        .and_then(|e| e.code())
        .and_then(|c| c.parse::<i64>().ok())
        .is_some_and(|c| matches!(c & 0xff, SQLITE_BUSY | SQLITE_LOCKED))
}

/// Whether the whole transaction may simply be run again: InnoDB deadlock
/// (1213) or lock wait timeout (1205); PostgreSQL deadlock (SQLSTATE 40P01)
/// or serialization failure (40001).
fn is_contention(db: &dyn sqlx::error::DatabaseError) -> bool {
    if let Some(m) = db.try_downcast_ref::<sqlx::mysql::MySqlDatabaseError>() {
        return matches!(m.number(), 1213 | 1205);
    }
    db.try_downcast_ref::<sqlx::postgres::PgDatabaseError>()
        .is_some_and(|p| is_pg_contention(p.code()))
}

/// PostgreSQL's SQLSTATEs for a transaction that lost a lock race.
fn is_pg_contention(sqlstate: &str) -> bool {
    matches!(sqlstate, "40P01" | "40001")
}

/// Runs `tx` (a whole transaction) again when it lost a deadlock, after a
/// short exponential backoff with jitter, so two transactions that collided
/// do not collide again in lock step.
pub(crate) async fn retrying<T, F, Fut>(tx: F) -> StoreResult<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = StoreResult<T>>,
{
    use backon::{ExponentialBuilder, Retryable};
    let backoff = ExponentialBuilder::default()
        .with_min_delay(Duration::from_millis(2))
        .with_max_delay(Duration::from_millis(100))
        .with_max_times(TX_ATTEMPTS as usize - 1)
        .with_jitter();
    tx.retry(backoff)
        .when(|e| matches!(e, StoreError::Contention(_)))
        .notify(|e, after| {
            tracing::debug!(error = %e, retry_in = ?after, "transaction lost a lock race; running it again");
        })
        .await
}

/// Whether a statement failed on a unique key.
pub(crate) fn is_unique_violation(e: &StoreError) -> bool {
    match e {
        StoreError::Database(e) => matches!(
            e.downcast_ref::<sqlx::Error>(),
            Some(sqlx::Error::Database(db)) if db.is_unique_violation()
        ),
        _ => false,
    }
}

/// A row that does not decode.
pub(crate) fn corrupt(table: &'static str, reason: impl ToString) -> StoreError {
    StoreError::Corrupt {
        table,
        reason: reason.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::is_pg_contention;

    #[test]
    fn postgres_deadlocks_and_serialization_failures_are_contention() {
        assert!(is_pg_contention("40P01"));
        assert!(is_pg_contention("40001"));
        assert!(!is_pg_contention("23505"), "a unique violation is not");
    }
}
