//! Multi-row inserts shared by the write paths: history events and callback
//! outbox rows, each written in the transaction of the change they record.

use crate::db::Tx;
use crate::sql::{CHUNK, Fields, Sql, json, time};
use kairos_core::callback::{Callback, CallbackState, CallbackSubject, payload};
use kairos_core::execution::{ExecStatus, Execution};
use kairos_core::store::StoreResult;
use kairos_core::time::Millis;

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

    /// The row's columns.
    fn fields(&self) -> Fields {
        Fields::new()
            .with("execution_id", &self.execution_id)
            .with("attempt", self.attempt)
            .with("status", self.status.as_str())
            .with("worker_id", self.worker_id.as_ref())
            .with("error", self.error.as_ref())
            .with("occurred_at", time(self.at))
    }
}

/// Inserts events, 500 rows per statement.
pub(crate) async fn events(tx: &mut Tx, rows: &[EventRow]) -> StoreResult<()> {
    for chunk in rows.chunks(CHUNK) {
        let fields: Vec<Fields> = chunk.iter().map(EventRow::fields).collect();
        Sql::new("INSERT INTO execution_events")
            .rows(&fields)
            .execute(&mut *tx)
            .await?;
    }
    Ok(())
}

/// A new outbox row reporting `exec`, which has just reached a terminal state.
pub(crate) fn new_callback(exec: &Execution, url: &str, now: Millis) -> Callback {
    Callback {
        id: uuid::Uuid::now_v7().to_string(),
        subject: CallbackSubject::Execution {
            execution_id: exec.id.clone(),
            job_id: exec.job_id.clone(),
        },
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

/// A new outbox row reporting `run`, which has just ended, with its nodes
/// as they are at its end.
pub(crate) fn new_run_callback(
    run: &kairos_core::workflow::WorkflowRun,
    nodes: &[kairos_core::workflow::RunNode],
    url: &str,
    now: Millis,
) -> Callback {
    Callback {
        id: uuid::Uuid::now_v7().to_string(),
        subject: CallbackSubject::WorkflowRun {
            run_id: run.id.clone(),
        },
        tenant: run.tenant.clone(),
        url: url.to_string(),
        payload: kairos_core::callback::run_payload(run, nodes).to_string(),
        state: CallbackState::Pending,
        attempts: 0,
        next_attempt_at: now,
        last_error: None,
        created_at: now,
        trace: None,
    }
}

/// An outbox row's columns (`updated_at` starts as `created_at`).
fn callback_fields(c: &Callback) -> Fields {
    Fields::new()
        .with("id", &c.id)
        .with("execution_id", c.subject.execution_id())
        .with("job_id", c.subject.job_id())
        .with("workflow_run_id", c.subject.run_id())
        .with("tenant", &c.tenant)
        .with("url", &c.url)
        .with("payload", json(c.payload.as_str()))
        .with("state", c.state.as_str())
        .with("attempts", c.attempts)
        .with("next_attempt_at", time(c.next_attempt_at))
        .with("last_error", c.last_error.as_ref())
        .with("created_at", time(c.created_at))
        .with("updated_at", time(c.created_at))
}

/// Inserts outbox rows, 500 rows per statement.
pub(crate) async fn callbacks(tx: &mut Tx, rows: &[Callback]) -> StoreResult<()> {
    for chunk in rows.chunks(CHUNK) {
        let fields: Vec<Fields> = chunk.iter().map(callback_fields).collect();
        Sql::new("INSERT INTO callbacks")
            .rows(&fields)
            .execute(&mut *tx)
            .await?;
    }
    Ok(())
}
