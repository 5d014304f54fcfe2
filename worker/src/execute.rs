//! Runs one attempt in the bounded pool: runs the handler in its own task (so
//! a panic is caught) while holding a pool slot, enforces the timeout, and
//! stops it when the scheduler asks (see `stops`) or at the end of a
//! shutdown's grace period (then reporting nothing: the attempt is handed
//! back).

use crate::handler::{HandlerOutcome, JobContext, Registry};
use crate::load::Load;
use crate::logs::LogSink;
use crate::permits::Permit;
use crate::pool::Pool;
use crate::results::Report;
use kairos_core::protocol::DispatchMsg;
use std::any::Any;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// Error reported for an attempt stopped at the scheduler's request (job
/// cancelled, execution replaced, or attempt already declared lost). The
/// dispatcher records it as `cancelled`, or ignores it for a lost attempt.
pub(crate) const STOPPED_ERROR: &str = "stopped at the scheduler's request";

/// Longest wait for a handler's last log lines to be sent before its result.
const LOG_FLUSH_WAIT: Duration = Duration::from_millis(500);

/// How long a cancelled handler gets to return on its own before it is aborted.
const ABORT_WAIT: Duration = Duration::from_secs(1);

fn panic_message(payload: &(dyn Any + Send)) -> String {
    let text = payload
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("non-text panic payload");
    format!("handler panicked: {text}")
}

async fn deadline(timeout_ms: Option<u64>) {
    match timeout_ms {
        Some(ms) => tokio::time::sleep(Duration::from_millis(ms)).await,
        None => std::future::pending().await,
    }
}

/// What running a handler takes: the handlers, the pool it runs in, where
/// its cost is recorded and where its log lines go.
#[derive(Clone)]
pub(crate) struct Executor {
    pub(crate) handlers: Arc<Registry>,
    pub(crate) pool: Arc<Pool>,
    pub(crate) load: Arc<Load>,
    pub(crate) logs: LogSink,
}

impl Executor {
    /// Runs `msg`'s handler in the pool slot `permit` and says how it ended;
    /// a stop request posted under `stop_key` stops it. `None` when the
    /// shutdown's grace period ended first: the handler is stopped and
    /// nothing is reported, so the attempt is not the job's failure. The
    /// dispatcher hands it back (retried once without counting against
    /// `maxAttempts`) once this worker says `offline`.
    pub(crate) async fn run(
        &self,
        msg: DispatchMsg,
        stop_key: String,
        permit: Permit,
    ) -> Option<Report> {
        let Some(handler) = self.handlers.get(&msg.handler) else {
            crate::metrics::handler_ran(&self.handlers, &msg.handler, "failed", Duration::ZERO);
            return Some(Report::failed(self.handlers.unknown(&msg.handler)));
        };
        let started_ms = kairos_core::time::now_ms();
        // Not a child of `hard_stop`: the handler must learn of a stop only after
        // the report is decided, or its own "cancelled" failure would win the race.
        let cancel = CancellationToken::new();
        // Cancelled by the stop watcher when a stop request is posted.
        let stop = CancellationToken::new();
        let _tracked = self.pool.track(stop_key, stop.clone());
        let (exec_id, attempt) = (msg.execution_id.clone(), msg.attempt);
        let ctx = JobContext {
            execution_id: msg.execution_id,
            job_id: msg.job_id,
            attempt: msg.attempt,
            scheduled_at: msg.scheduled_at,
            deadline: msg
                .timeout_ms
                .map(|t| started_ms.saturating_add(i64::try_from(t).unwrap_or(i64::MAX))),
            params: msg.params,
            cancel: cancel.clone(),
            logs: self.logs.clone(),
            shard: msg.shard.unwrap_or_default(),
            parent_outputs: msg.parent_outputs,
        };
        let started = Instant::now();
        self.pool.report();
        let mut task = tokio::spawn(async move { handler.run(ctx).await });
        let (report, outcome) = tokio::select! {
            biased;
            joined = &mut task => match joined {
                Ok(HandlerOutcome::Success(v)) => (Some(Report::succeeded(v)), "succeeded"),
                Ok(HandlerOutcome::Failure(e)) => (Some(Report::failed(e)), "failed"),
                Ok(HandlerOutcome::PermanentFailure(e)) => (Some(Report::failed_permanently(e)), "failed"),
                Err(e) if e.is_panic() => (Some(Report::failed(panic_message(&*e.into_panic()))), "failed"),
                Err(e) => (Some(Report::failed(format!("handler task ended abnormally: {e}"))), "failed"),
            },
            _ = deadline(msg.timeout_ms) => (Some(Report::timed_out(format!(
                "handler exceeded its timeout of {} ms",
                msg.timeout_ms.unwrap_or_default()
            ))), "timed_out"),
            _ = stop.cancelled() => (Some(Report::failed(STOPPED_ERROR)), "stopped"),
            _ = self.pool.hard_stop.cancelled() => (None, "stopped"),
        };
        crate::metrics::handler_ran(&self.handlers, &msg.handler, outcome, started.elapsed());
        if !task.is_finished() {
            // The result is decided. The handler gets a moment to clean up on
            // its own before it is dropped, and its slot is reused only then.
            cancel.cancel();
            if tokio::time::timeout(ABORT_WAIT, &mut task).await.is_err() {
                task.abort();
                tracing::warn!(
                    handler = %msg.handler,
                    "handler ignored cancellation for {ABORT_WAIT:?}; aborted it"
                );
            }
        }
        self.load
            .record_cost(started.elapsed().as_secs_f64() * 1000.0);
        drop(permit);
        self.pool.report();
        // The handler's last lines go out before its result, so a client that
        // sees the result finds them (best effort: a slow broker does not hold
        // the result back for long).
        self.logs.flush(&exec_id, attempt, LOG_FLUSH_WAIT).await;
        report
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn panic_payloads_become_messages() {
        let s: Box<dyn Any + Send> = Box::new("boom");
        assert_eq!(panic_message(&*s), "handler panicked: boom");
        let s: Box<dyn Any + Send> = Box::new(String::from("bang 7"));
        assert_eq!(panic_message(&*s), "handler panicked: bang 7");
        let s: Box<dyn Any + Send> = Box::new(7u8);
        assert_eq!(
            panic_message(&*s),
            "handler panicked: non-text panic payload"
        );
    }
}
