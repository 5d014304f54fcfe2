//! Maps sqlx errors onto [`StoreError`]: which failures mean the database is
//! unavailable, which are a lost lock race worth running again (see
//! `SqlStore::transaction`), and which rows do not decode.

use kairos_core::store::StoreError;

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
