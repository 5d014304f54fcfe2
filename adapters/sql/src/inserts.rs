//! Multi-row inserts shared by the write paths: history events and callback
//! outbox rows, each written in the transaction of the change they record.

use super::Dialect;
use super::error::db_err;
use super::stmt::{CHUNK, q, row_marks};
use kairos_core::callback::{Callback, CallbackState, payload};
use kairos_core::execution::{ExecStatus, Execution};
use kairos_core::store::StoreResult;
use kairos_core::time::Millis;
use sqlx::AnyConnection;

/// One `execution_events` row.
#[derive(Debug, Clone)]
pub(crate) struct EventRow {
    pub(crate) execution_id: String,
    pub(crate) attempt: u32,
    pub(crate) status: ExecStatus,
    pub(crate) worker_id: Option<String>,
    pub(crate) error: Option<String>,
    pub(crate) at: Millis,
}

impl EventRow {
    /// An event without worker or error.
    pub(crate) fn plain(execution_id: &str, attempt: u32, status: ExecStatus, at: Millis) -> Self {
        Self {
            execution_id: execution_id.to_string(),
            attempt,
            status,
            worker_id: None,
            error: None,
            at,
        }
    }
}

/// Inserts events, 500 rows per statement.
pub(crate) async fn events(conn: &mut AnyConnection, rows: &[EventRow]) -> StoreResult<()> {
    for chunk in rows.chunks(CHUNK) {
        let sql = format!(
            "INSERT INTO execution_events \
             (execution_id, attempt, status, worker_id, error, occurred_at) VALUES {}",
            row_marks(chunk.len(), 6)
        );
        let mut query = q(Dialect::of(conn), sql);
        for e in chunk {
            query = query
                .bind(e.execution_id.as_str())
                .bind(i64::from(e.attempt))
                .bind(e.status.as_str())
                .bind(e.worker_id.as_deref())
                .bind(e.error.as_deref())
                .bind(e.at);
        }
        query.execute(&mut *conn).await.map_err(db_err)?;
    }
    Ok(())
}

/// A new outbox row reporting `exec`, which has just reached a terminal state.
pub(crate) fn new_callback(exec: &Execution, url: &str, now: Millis) -> Callback {
    Callback {
        id: uuid::Uuid::now_v7().to_string(),
        execution_id: exec.id.clone(),
        job_id: exec.job_id.clone(),
        tenant: exec.tenant.clone(),
        url: url.to_string(),
        payload: payload(exec).to_string(),
        state: CallbackState::Pending,
        attempts: 0,
        next_attempt_at: now,
        last_error: None,
        created_at: now,
        trace: None,
    }
}

/// Inserts outbox rows, 500 rows per statement.
pub(crate) async fn callbacks(conn: &mut AnyConnection, rows: &[Callback]) -> StoreResult<()> {
    for chunk in rows.chunks(CHUNK) {
        let sql = format!(
            "INSERT INTO callbacks (id, execution_id, job_id, tenant, url, payload, state, \
             attempts, next_attempt_at, last_error, created_at, updated_at) VALUES {}",
            row_marks(chunk.len(), 12)
        );
        let mut query = q(Dialect::of(conn), sql);
        for c in chunk {
            query = query
                .bind(c.id.as_str())
                .bind(c.execution_id.as_str())
                .bind(c.job_id.as_str())
                .bind(c.tenant.as_str())
                .bind(c.url.as_str())
                .bind(c.payload.as_str())
                .bind(c.state.as_str())
                .bind(i64::from(c.attempts))
                .bind(c.next_attempt_at)
                .bind(c.last_error.as_deref())
                .bind(c.created_at)
                .bind(c.created_at);
        }
        query.execute(&mut *conn).await.map_err(db_err)?;
    }
    Ok(())
}
