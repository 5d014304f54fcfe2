//! One accepted dispatch, end to end, in the order it happens: wait for a
//! handler permit → take the attempt key (and look for a stop posted before
//! it started) → publish `started` → ack → run the handler (`execute`) →
//! publish the result.
//!
//! An accepted dispatch waits for a permit *unacked*: `started` must mean
//! the handler starts now, so the dispatcher's view stays true. An attempt
//! still waiting in the buffer when the worker dies or stops was never started:
//! its message goes back to the queue (the channel closes) and the dispatcher
//! requeues it with the same attempt number instead of spending an attempt on
//! it, and the reaper's deadline (start + `timeoutMs`) is not eaten by time
//! spent waiting behind other handlers.

use crate::connections::Connections;
use crate::execute::{Executor, STOPPED_ERROR};
use crate::pool::{Pool, Slot};
use crate::results::{Report, Reporter};
use crate::settle::Part;
use kairos_core::priority::delivery_rank;
use kairos_core::protocol::{DispatchMsg, ResultMsg};
use kairos_core::trace::{CallerTrace, Stage, TraceContext};
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

/// Pause before handing a dispatch back when the guard service is down, so the
/// redelivery does not spin.
const GUARD_RETRY_DELAY: Duration = Duration::from_secs(1);

/// What taking an attempt through takes: who this worker is and what it
/// talks to, where results go, how handlers run, and how long an attempt
/// key is kept.
pub(crate) struct Attempts {
    pub(crate) conn: Arc<Connections>,
    pub(crate) results: Reporter,
    pub(crate) executor: Executor,
    pub(crate) attempt_key_ttl: Duration,
}

impl Attempts {
    pub(crate) fn pool(&self) -> &Arc<Pool> {
        &self.executor.pool
    }

    /// One dispatch, end to end. `_slot` holds its place until the result is
    /// out. `stop` is the end of consuming: a dispatch still waiting for a
    /// permit then leaves its part unsettled, and closing the consumer hands
    /// the delivery back to the queue.
    pub(crate) async fn process(
        &self,
        msg: DispatchMsg,
        parent: Option<TraceContext>,
        part: Part,
        _slot: Slot,
        stop: CancellationToken,
    ) {
        let trace = run_trace(&msg, parent.as_ref());
        let span = attempt_span(&self.conn.id, &msg, trace, parent);
        self.run_traced(part, msg, trace, stop)
            .instrument(span)
            .await;
    }

    async fn run_traced(
        &self,
        part: Part,
        msg: DispatchMsg,
        trace: Option<TraceContext>,
        stop: CancellationToken,
    ) {
        let conn = &self.conn;
        // Results name this attempt's span, so the dispatcher applying them
        // stays in its trace.
        let traceparent = trace.map(|t| t.to_string());
        // Listed in `held` from here until its result is out (or it goes back).
        let _held = self.pool().hold(&msg.execution_id, msg.attempt);
        let permit = tokio::select! {
            biased;
            _ = stop.cancelled() => return,
            p = self.pool().permits.acquire(delivery_rank(msg.priority(), msg.immediate)) => p,
        };
        if stop.is_cancelled() {
            return;
        }
        let key = conn.names.attempt_key(&msg.execution_id, msg.attempt);
        // Asked concurrently with the attempt key: one more command, no added wait.
        let owner = conn.key_owner();
        let (taken, stopped) = tokio::join!(
            conn.coord.once(&key, &owner, self.attempt_key_ttl),
            self.stop_posted(&msg),
        );
        match taken {
            Ok(true) if stopped => {
                drop(permit);
                self.settle_stopped(&key, part, &msg, traceparent).await;
                return;
            }
            Ok(true) => {}
            Ok(false) => {
                tracing::info!(execution_id = %msg.execution_id, attempt = msg.attempt, "attempt already ran or is running; skipping the duplicate");
                if let Err(e) = part.ack().await {
                    tracing::warn!("acking a duplicate dispatch failed: {e}");
                }
                return;
            }
            Err(e) => {
                tracing::warn!(execution_id = %msg.execution_id, attempt = msg.attempt, "cannot take the attempt key: {e}; handing the dispatch back");
                tokio::time::sleep(GUARD_RETRY_DELAY).await;
                if let Err(e) = part.requeue().await {
                    tracing::warn!(
                        "requeueing a dispatch failed: {e}; the broker will redeliver it"
                    );
                }
                return;
            }
        }
        let (execution_id, attempt) = (msg.execution_id.clone(), msg.attempt);
        let started = ResultMsg {
            traceparent: traceparent.clone(),
            ..Report::started().into_msg(&conn.id, &conn.incarnation, &execution_id, attempt)
        };
        let started_at = started.at;
        if self.results.started(started).await.is_err() {
            // `started` is the point of no return: without it the dispatcher may
            // requeue the attempt (if this worker is declared dead) and another
            // worker would run it too. So it does not run here: the key is given
            // back and the dispatch returned to the queue.
            self.hand_back(&key, part, "`started`").await;
            return;
        }
        // Acked before the handler runs: a long job must not hold an unacked
        // dispatch (RabbitMQ closes the channel after its consumer ack timeout).
        if let Err(e) = part.ack().await {
            tracing::warn!(execution_id = %msg.execution_id, "acking a dispatch failed: {e}; a redelivery will be skipped by the attempt key");
        }
        tracing::debug!("attempt started");
        let stop_key = conn.names.stop_key(&msg.execution_id, msg.attempt);
        let Some(report) = self.executor.run(msg, stop_key, permit).await else {
            tracing::info!(execution_id = %execution_id, attempt, "the drain window ended before the handler did; handing the attempt back");
            return;
        };
        tracing::debug!(kind = ?report.kind, "attempt finished");
        let result = ResultMsg {
            traceparent,
            started_at: Some(started_at),
            ..report.into_msg(&conn.id, &conn.incarnation, &execution_id, attempt)
        };
        // A final failure is already logged loudly by the reporter.
        let _ = self.results.finished(result).await;
    }

    /// Whether a stop was posted for this attempt before it started: a job
    /// cancelled while its trigger waited (claimed ahead of its due time, or
    /// behind other work in this queue). A lookup that fails counts as no: the
    /// stop watcher still stops the attempt once it runs.
    async fn stop_posted(&self, msg: &DispatchMsg) -> bool {
        let key = self.conn.names.stop_key(&msg.execution_id, msg.attempt);
        matches!(
            self.conn.coord.stops_posted(&[key]).await.as_deref(),
            Ok([true])
        )
    }

    /// Ends an attempt stopped before it started: its handler never runs, and
    /// the dispatcher records it `cancelled`. The delivery is acked once the
    /// result is confirmed; if it cannot be, the attempt goes back to the queue
    /// (and is settled the same way when it comes back).
    async fn settle_stopped(
        &self,
        key: &str,
        part: Part,
        msg: &DispatchMsg,
        traceparent: Option<String>,
    ) {
        tracing::info!(execution_id = %msg.execution_id, attempt = msg.attempt, "a stop was requested before the attempt started; not running it");
        crate::metrics::stop_honoured();
        let result = ResultMsg {
            traceparent,
            ..Report::failed(STOPPED_ERROR).into_msg(
                &self.conn.id,
                &self.conn.incarnation,
                &msg.execution_id,
                msg.attempt,
            )
        };
        if self.results.finished(result).await.is_err() {
            self.hand_back(key, part, "the stopped attempt's result")
                .await;
            return;
        }
        if let Err(e) = part.ack().await {
            tracing::warn!(execution_id = %msg.execution_id, "acking a stopped dispatch failed: {e}; a redelivery will be skipped by the attempt key");
        }
    }

    /// Gives back an attempt this worker took but did not start, because
    /// `what` could not be confirmed.
    async fn hand_back(&self, key: &str, part: Part, what: &str) {
        match self.conn.coord.release(key, &self.conn.key_owner()).await {
            Ok(_) => tracing::warn!(
                key,
                "{what} could not be confirmed; handing the attempt back"
            ),
            // The reaper releases it if this worker is declared dead.
            Err(e) => tracing::error!(
                key,
                "{what} could not be confirmed and the attempt key could not be released: {e}"
            ),
        }
        if let Err(e) = part.requeue().await {
            tracing::warn!("requeueing a dispatch failed: {e}; the broker will redeliver it");
        }
    }
}

/// This attempt's span context: in the trace of the dispatcher's span (the
/// message header), which is the job creator's trace when it sent one, else
/// the execution's. Without a valid header, the message's own `trace` field
/// decides, as the dispatcher would.
fn run_trace(msg: &DispatchMsg, parent: Option<&TraceContext>) -> Option<TraceContext> {
    let caller = parent
        .copied()
        .or_else(|| msg.trace.as_ref().and_then(CallerTrace::context));
    TraceContext::for_stage(caller.as_ref(), &msg.execution_id, msg.attempt, Stage::Run)
}

/// The span of one attempt on this worker, with the execution's trace fields
/// named as in every other process.
fn attempt_span(
    worker_id: &str,
    msg: &DispatchMsg,
    trace: Option<TraceContext>,
    parent: Option<TraceContext>,
) -> tracing::Span {
    tracing::info_span!(
        "attempt",
        job_id = %msg.job_id,
        execution_id = %msg.execution_id,
        attempt = msg.attempt,
        worker_id = %worker_id,
        handler = %msg.handler,
        trace_id = trace.map(|t| t.trace_id_hex()).unwrap_or_default(),
        traceparent = trace.map(|t| t.to_string()).unwrap_or_default(),
        parent = parent.map(|t| t.to_string()).unwrap_or_default(),
    )
}
