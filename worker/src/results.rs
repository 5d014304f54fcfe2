//! Result messages: building them, and publishing them with retries so a
//! broker outage delays a result instead of losing it.

use backon::{ExponentialBuilder, Retryable};
use kairos_core::broker::{Broker, BrokerError};
use kairos_core::protocol::{PROTOCOL_VERSION, ResultKind, ResultMsg};
use kairos_core::time::now_ms;
use std::time::Duration;

/// What an attempt came to, before it is stamped into a [`ResultMsg`].
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Report {
    pub(crate) kind: ResultKind,
    pub(crate) output: Option<serde_json::Value>,
    pub(crate) error: Option<String>,
    /// `Some(false)` for a failure the handler said no retry can fix.
    pub(crate) retryable: Option<bool>,
}

impl Report {
    pub(crate) fn started() -> Self {
        Self {
            kind: ResultKind::Started,
            output: None,
            error: None,
            retryable: None,
        }
    }

    pub(crate) fn succeeded(output: serde_json::Value) -> Self {
        Self {
            kind: ResultKind::Succeeded,
            output: Some(output),
            error: None,
            retryable: None,
        }
    }

    pub(crate) fn failed(error: impl Into<String>) -> Self {
        Self {
            kind: ResultKind::Failed,
            output: None,
            error: Some(error.into()),
            retryable: None,
        }
    }

    /// A failure no retry can fix.
    pub(crate) fn failed_permanently(error: impl Into<String>) -> Self {
        Self {
            retryable: Some(false),
            ..Self::failed(error)
        }
    }

    pub(crate) fn timed_out(error: impl Into<String>) -> Self {
        Self {
            kind: ResultKind::TimedOut,
            output: None,
            error: Some(error.into()),
            retryable: None,
        }
    }

    /// The message for this attempt, stamped now.
    pub(crate) fn into_msg(
        self,
        worker_id: &str,
        incarnation: &str,
        execution_id: &str,
        attempt: u32,
    ) -> ResultMsg {
        ResultMsg {
            traceparent: None,
            v: PROTOCOL_VERSION,
            execution_id: execution_id.to_string(),
            attempt,
            worker_id: worker_id.to_string(),
            kind: self.kind,
            output: self.output,
            error: self.error,
            at: now_ms(),
            retryable: self.retryable,
            incarnation: Some(incarnation.to_string()),
        }
    }
}

/// Retries span a broker restart (a few minutes at most), then give up so a
/// shutdown cannot hang forever.
fn backoff() -> ExponentialBuilder {
    ExponentialBuilder::default()
        .with_min_delay(Duration::from_millis(50))
        .with_max_delay(Duration::from_secs(5))
        .with_max_times(40)
        .with_jitter()
}

/// `started` is retried only briefly: until it is confirmed the handler does
/// not run, and the attempt is better handed back to the queue than held
/// while the reaper may be declaring this worker dead.
fn started_backoff() -> ExponentialBuilder {
    ExponentialBuilder::default()
        .with_min_delay(Duration::from_millis(50))
        .with_max_delay(Duration::from_secs(1))
        .with_max_times(6)
        .with_jitter()
}

/// Publishes `msg` and waits for its confirm, retrying while the broker is
/// unavailable or refuses it. A final failure is logged as an error here.
pub(crate) async fn publish(broker: &dyn Broker, msg: &ResultMsg) -> Result<(), BrokerError> {
    publish_with(broker, msg, backoff()).await
}

/// Publishes a `started` report, retrying for a few seconds at most.
pub(crate) async fn publish_started(
    broker: &dyn Broker,
    msg: &ResultMsg,
) -> Result<(), BrokerError> {
    publish_with(broker, msg, started_backoff()).await
}

async fn publish_with(
    broker: &dyn Broker,
    msg: &ResultMsg,
    backoff: ExponentialBuilder,
) -> Result<(), BrokerError> {
    let outcome = (|| broker.result_publish(msg))
        .retry(backoff)
        .when(|e| !matches!(e, BrokerError::Encode(_)))
        .notify(|e, wait| {
            tracing::warn!(
                execution_id = %msg.execution_id,
                attempt = msg.attempt,
                kind = ?msg.kind,
                "publishing result failed, retrying in {wait:?}: {e}"
            );
        })
        .await;
    if let Err(e) = &outcome {
        tracing::error!(
            execution_id = %msg.execution_id,
            attempt = msg.attempt,
            kind = ?msg.kind,
            output = ?msg.output,
            error = ?msg.error,
            "RESULT NOT DELIVERED: gave up publishing after retries: {e}; the dispatcher's reaper must recover this attempt"
        );
    }
    outcome
}
