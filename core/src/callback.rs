//! Callbacks owed to callers: the outbox row, its delivery attempts, and the
//! JSON body, frozen when the execution reaches its terminal state.

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

/// One outbox row.
#[derive(Debug, Clone, PartialEq)]
pub struct Callback {
    /// Delivery id (UUIDv7), sent as `Kairos-Delivery-Id` on every attempt.
    pub id: String,
    /// Execution it reports.
    pub execution_id: String,
    /// Job of the execution.
    pub job_id: String,
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
