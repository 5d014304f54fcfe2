//! Callbacks owed to callers: the outbox row, its delivery attempts, and the
//! JSON body, frozen when the execution (or the workflow run) reaches its
//! terminal state.

use crate::execution::Execution;
use crate::time::{Millis, to_rfc3339};
use serde::{Deserialize, Serialize};

/// Where a callback is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CallbackState {
    /// Waiting for its next attempt. The relay moves it out.
    Pending,
    /// A 2xx answer was received. Terminal.
    Delivered,
    /// Retries were exhausted or the receiver said 410 Gone. Terminal.
    Dead,
}

impl CallbackState {
    /// Stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            CallbackState::Pending => "pending",
            CallbackState::Delivered => "delivered",
            CallbackState::Dead => "dead",
        }
    }

    /// Parses a stored name.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "pending" => Some(CallbackState::Pending),
            "delivered" => Some(CallbackState::Delivered),
            "dead" => Some(CallbackState::Dead),
            _ => None,
        }
    }
}

/// What a callback reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CallbackSubject {
    /// An execution's end (its job's `callbackUrl`).
    Execution {
        /// The execution.
        execution_id: String,
        /// Its job.
        job_id: String,
    },
    /// A workflow run's end (its workflow's `callbackUrl`).
    WorkflowRun {
        /// The run.
        run_id: String,
    },
}

impl CallbackSubject {
    /// The execution reported, if it is an execution's callback.
    pub fn execution_id(&self) -> Option<&str> {
        match self {
            CallbackSubject::Execution { execution_id, .. } => Some(execution_id),
            CallbackSubject::WorkflowRun { .. } => None,
        }
    }

    /// The job of the execution reported, if it is an execution's callback.
    pub fn job_id(&self) -> Option<&str> {
        match self {
            CallbackSubject::Execution { job_id, .. } => Some(job_id),
            CallbackSubject::WorkflowRun { .. } => None,
        }
    }

    /// The workflow run reported, if it is a run's callback.
    pub fn run_id(&self) -> Option<&str> {
        match self {
            CallbackSubject::Execution { .. } => None,
            CallbackSubject::WorkflowRun { run_id } => Some(run_id),
        }
    }

    /// The id of what is reported (execution or run id): the key its
    /// delivery's trace is derived from.
    pub fn key(&self) -> &str {
        match self {
            CallbackSubject::Execution { execution_id, .. } => execution_id,
            CallbackSubject::WorkflowRun { run_id } => run_id,
        }
    }
}

/// One outbox row.
#[derive(Debug, Clone, PartialEq)]
pub struct Callback {
    /// Delivery id (UUIDv7), sent as `Kairos-Delivery-Id` on every attempt.
    pub id: String,
    /// What it reports.
    pub subject: CallbackSubject,
    /// Owner.
    pub tenant: String,
    /// Receiver.
    pub url: String,
    /// Exact JSON body to send.
    pub payload: String,
    /// State.
    pub state: CallbackState,
    /// Attempts made so far.
    pub attempts: u32,
    /// When the next attempt is due.
    pub next_attempt_at: Millis,
    /// Error of the last failed attempt.
    pub last_error: Option<String>,
    /// When it was queued.
    pub created_at: Millis,
    /// The trace its job's creator sent, if any (read from the job): the
    /// delivery's `traceparent` continues it.
    pub trace: Option<crate::trace::CallerTrace>,
}

/// One delivery attempt.
#[derive(Debug, Clone, PartialEq)]
pub struct CallbackAttempt {
    /// 1-based attempt number.
    pub attempt: u32,
    /// When it was made.
    pub at: Millis,
    /// HTTP status, if an answer arrived.
    pub status_code: Option<u16>,
    /// Round trip time.
    pub latency_ms: u64,
    /// Transport error or refusal reason.
    pub error: Option<String>,
}

/// The JSON body of a callback for an execution in its terminal state.
pub fn payload(e: &Execution) -> serde_json::Value {
    let t = |ms: Option<Millis>| ms.map(to_rfc3339);
    serde_json::json!({
        "jobId": e.job_id,
        "executionId": e.id,
        "status": e.status.as_str(),
        "attempt": e.attempt,
        "output": e.output,
        "error": e.error,
        "scheduledAt": to_rfc3339(e.scheduled_at),
        "startedAt": t(e.started_at),
        "finishedAt": t(e.finished_at),
    })
}

/// The `event` of a workflow run's callback.
pub const RUN_ENDED_EVENT: &str = "workflow.run.ended";

/// The JSON body of a callback for a workflow run that has just ended, with
/// its nodes as they are at its end (in the workflow's node order).
pub fn run_payload(
    run: &crate::workflow::WorkflowRun,
    nodes: &[crate::workflow::RunNode],
) -> serde_json::Value {
    let t = |ms: Option<Millis>| ms.map(to_rfc3339);
    let nodes: Vec<serde_json::Value> = nodes
        .iter()
        .map(|n| {
            serde_json::json!({
                "nodeId": n.node_id,
                "state": n.status.as_str(),
                "executionId": n.execution_id,
                "executionStatus": n.execution_status.map(|s| s.as_str()),
                "attempt": n.attempt,
                "startedAt": t(n.started_at),
                "finishedAt": t(n.finished_at),
            })
        })
        .collect();
    serde_json::json!({
        "event": RUN_ENDED_EVENT,
        "workflowId": run.workflow_id,
        "runId": run.id,
        "status": run.status.as_str(),
        "scheduledAt": to_rfc3339(run.scheduled_at),
        "startedAt": to_rfc3339(run.created_at),
        "finishedAt": t(run.finished_at),
        "nodes": nodes,
    })
}
