//! Callback responses: each delivery of an execution's outcome to its
//! caller, with every attempt the relay made.

use super::{string_enum, time};
use kairos_core::callback::{Callback, CallbackAttempt, CallbackState};
use serde::Serialize;
use utoipa::ToSchema;
use utoipa::openapi::schema::Object;

pub(crate) fn callback_state_schema() -> Object {
    let all = [
        CallbackState::Pending,
        CallbackState::Delivered,
        CallbackState::Dead,
    ];
    string_enum("Callback state.", all.iter().map(|s| s.as_str()))
}

/// One delivery attempt.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CallbackAttemptView {
    /// Attempt number, from 1.
    pub attempt: u32,
    /// When it was made.
    #[schema(format = DateTime)]
    pub at: String,
    /// HTTP status of the answer; `null` when none arrived.
    pub status_code: Option<u16>,
    /// Round trip time in ms.
    pub latency_ms: u64,
    /// Transport error or refusal reason.
    pub error: Option<String>,
}

impl From<CallbackAttempt> for CallbackAttemptView {
    fn from(a: CallbackAttempt) -> Self {
        CallbackAttemptView {
            attempt: a.attempt,
            at: time(a.at),
            status_code: a.status_code,
            latency_ms: a.latency_ms,
            error: a.error,
        }
    }
}

/// One delivery of an execution's outcome to the job's callback URL.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CallbackView {
    /// Delivery id (UUIDv7), sent as `Kairos-Delivery-Id` on every attempt.
    pub delivery_id: String,
    /// Execution it reports.
    pub execution_id: String,
    /// Job of the execution.
    pub job_id: String,
    /// Receiver.
    pub url: String,
    /// `pending` until a 2xx answer (`delivered`) or until retries run out
    /// or the receiver answers 410 (`dead`).
    #[schema(schema_with = callback_state_schema)]
    pub state: String,
    /// Attempts made so far.
    pub attempts: u32,
    /// When the next attempt is due; `null` once delivered or dead.
    #[schema(format = DateTime)]
    pub next_attempt_at: Option<String>,
    /// Error of the last failed attempt.
    pub last_error: Option<String>,
    /// When the delivery was queued.
    #[schema(format = DateTime)]
    pub created_at: String,
    /// Every attempt, oldest first.
    pub attempts_log: Vec<CallbackAttemptView>,
}

impl From<(Callback, Vec<CallbackAttempt>)> for CallbackView {
    fn from((c, attempts): (Callback, Vec<CallbackAttempt>)) -> Self {
        // The stored due time of a finished delivery is stale, not a promise.
        let next_attempt_at = (c.state == CallbackState::Pending).then(|| time(c.next_attempt_at));
        CallbackView {
            delivery_id: c.id,
            // Only an execution's callbacks are listed here.
            execution_id: c.subject.execution_id().unwrap_or_default().to_string(),
            job_id: c.subject.job_id().unwrap_or_default().to_string(),
            url: c.url,
            state: c.state.as_str().to_string(),
            attempts: c.attempts,
            next_attempt_at,
            last_error: c.last_error,
            created_at: time(c.created_at),
            attempts_log: attempts.into_iter().map(Into::into).collect(),
        }
    }
}

/// The callbacks of one execution, oldest first
/// (`GET /openapi/executions/{id}/callbacks`).
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct CallbackList {
    /// Deliveries; a redelivery adds one.
    pub items: Vec<CallbackView>,
}
