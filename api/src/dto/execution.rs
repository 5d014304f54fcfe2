//! Execution responses: one execution, its history, and pages of them.

use super::{opt_time, time};
use kairos_core::execution::{ExecEvent, Execution};
use kairos_core::store::Page;
use serde::Serialize;
use utoipa::ToSchema;

/// One trigger of a job.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ExecutionView {
    /// Execution id (UUIDv7); the `executionId` of callbacks.
    pub execution_id: String,
    /// Job it belongs to.
    pub job_id: String,
    /// Current status.
    #[schema(schema_with = super::exec_status_schema)]
    pub status: String,
    /// Current attempt, from 1.
    pub attempt: u32,
    /// Worker of the current attempt.
    pub worker_id: Option<String>,
    /// Due time of the trigger.
    #[schema(format = DateTime)]
    pub scheduled_at: String,
    /// When the current attempt was confirmed in a worker queue.
    #[schema(format = DateTime)]
    pub dispatched_at: Option<String>,
    /// When the current attempt started.
    #[schema(format = DateTime)]
    pub started_at: Option<String>,
    /// When the execution reached a terminal state.
    #[schema(format = DateTime)]
    pub finished_at: Option<String>,
    /// When a stop of the running attempt was requested (job cancelled, or
    /// replaced by a newer trigger under `overlapPolicy: replace`); `null` if
    /// none was. The attempt ends `cancelled` unless it succeeds first.
    #[schema(format = DateTime)]
    pub stop_requested_at: Option<String>,
    /// Handler output of a success.
    pub output: Option<serde_json::Value>,
    /// Error of a failure.
    pub error: Option<String>,
    /// Latest progress (0–100) the handler reported; `null` if it reported none.
    pub progress: Option<f64>,
    /// Set while the execution is `pending` and due but cannot go yet:
    /// `reason` `worker` when no live worker serves its handler (in its
    /// worker group, if the job names one), so it runs as soon as one
    /// appears; `concurrency` when a concurrency limit (`limit`) is reached,
    /// so it runs as soon as an execution under that limit ends; `rate` when
    /// the limit's rate is used up, so it runs when the rate allows.
    pub waiting_for: Option<WaitingFor>,
    /// Its part of a broadcast or sharded trigger, from 0 (0 for a single job).
    pub shard_index: u32,
    /// Executions its trigger made (1 for a single job).
    pub shard_count: u32,
}

/// What a waiting execution needs: a live worker serving `handler` (in
/// `group`), or a free slot under the concurrency limit `limit`.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct WaitingFor {
    /// `worker`, `concurrency` or `rate`.
    #[schema(example = "concurrency")]
    pub reason: String,
    /// The job's handler.
    pub handler: String,
    /// Worker group the job asked for; `null` for any.
    pub group: Option<String>,
    /// For `concurrency` and `rate`: the limit reached, `handler:<name>`,
    /// `tenant:<id>` or `job:<id>`; `null` otherwise.
    #[schema(example = "handler:export")]
    pub limit: Option<String>,
}

impl From<Execution> for ExecutionView {
    fn from(e: Execution) -> Self {
        ExecutionView {
            execution_id: e.id,
            job_id: e.job_id,
            status: e.status.as_str().to_string(),
            attempt: e.attempt,
            worker_id: e.worker_id,
            scheduled_at: time(e.scheduled_at),
            dispatched_at: opt_time(e.dispatched_at),
            started_at: opt_time(e.started_at),
            finished_at: opt_time(e.finished_at),
            stop_requested_at: opt_time(e.stop_requested_at),
            output: e.output,
            error: e.error,
            progress: e.progress,
            waiting_for: None,
            shard_index: e.shard.index,
            shard_count: e.shard.count,
        }
    }
}

/// One recorded transition of an execution.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ExecEventView {
    /// State entered.
    #[schema(schema_with = super::exec_status_schema)]
    pub status: String,
    /// Attempt it belongs to.
    pub attempt: u32,
    /// Worker involved.
    pub worker_id: Option<String>,
    /// Error text of a failure.
    pub error: Option<String>,
    /// When it happened.
    #[schema(format = DateTime)]
    pub at: String,
}

impl From<ExecEvent> for ExecEventView {
    fn from(e: ExecEvent) -> Self {
        ExecEventView {
            status: e.status.as_str().to_string(),
            attempt: e.attempt,
            worker_id: e.worker_id,
            error: e.error,
            at: time(e.at),
        }
    }
}

/// An execution with its history (`GET /openapi/executions/{id}`).
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ExecutionDetail {
    /// The execution.
    #[serde(flatten)]
    pub execution: ExecutionView,
    /// Every transition, oldest first.
    pub events: Vec<ExecEventView>,
}

/// A page of executions, newest trigger first.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ExecutionPage {
    /// Executions on this page.
    pub items: Vec<ExecutionView>,
    /// Cursor of the next page; `null` on the last.
    pub next_cursor: Option<String>,
}

impl From<Page<Execution>> for ExecutionPage {
    fn from(page: Page<Execution>) -> Self {
        ExecutionPage {
            items: page.items.into_iter().map(ExecutionView::from).collect(),
            next_cursor: page.next_cursor,
        }
    }
}
