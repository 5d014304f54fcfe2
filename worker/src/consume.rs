//! The delivery loop: consumes the worker's queue, applies backpressure, and
//! takes each accepted dispatch through pool slot → guard (and a stop posted
//! before it started) → `started` → ack → handler → result.
//!
//! An accepted dispatch waits for a pool slot *unacked*: `started` must mean
//! the handler starts now, so the dispatcher's view stays true. An attempt
//! still waiting in the buffer when the worker dies or stops was never started:
//! its message goes back to the queue (the channel closes) and the dispatcher
//! requeues it with the same attempt number instead of spending an attempt on
//! it, and the reaper's deadline (start + `timeoutMs`) is not eaten by time
//! spent waiting behind other handlers.

use crate::execute::{STOPPED_ERROR, run_attempt};
use crate::results::Report;
use crate::settle::{self, Part};
use crate::shared::{Shared, Slot};
use kairos_core::broker::{BrokerError, Delivery, DeliveryStream};
use kairos_core::protocol::{DispatchMsg, PROTOCOL_VERSION, ResultMsg};
use kairos_core::supervise::{self, Backoff, Subscription};
use kairos_core::trace::{CallerTrace, Stage, TraceContext};
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

/// Pause before handing a dispatch back when the guard service is down, so the
/// redelivery does not spin.
const GUARD_RETRY_DELAY: Duration = Duration::from_secs(1);
/// How long a full worker waits for a place before refusing a dispatch. A
/// busy worker running short handlers has one back within this; one running
/// long handlers refuses, and the dispatch goes to another worker. Refusing at
/// once made a backlog bounce between full workers through the reroute queue.
const FULL_WAIT: Duration = Duration::from_millis(100);
const RECONNECT_MIN: Duration = Duration::from_millis(100);
const RECONNECT_MAX: Duration = Duration::from_secs(5);

/// Consumes until `stop` is cancelled, then drops the consumer so deliveries
/// not yet taken go back to the queue. A consumer that ends or fails to start
/// is restarted with capped backoff.
pub(crate) async fn run(shared: Arc<Shared>, stop: CancellationToken) {
    // Running attempts are already acked, so unacked deliveries are only the
    // ones waiting for a slot. One more than the buffer lets a full worker see
    // (and refuse, for reroute) one surplus dispatch at a time, while the rest
    // wait in the broker's queue. With `capacity + buffer` a busy worker would
    // take twice its capacity and reject the surplus into a reroute loop.
    let prefetch = u16::try_from(shared.buffer.saturating_add(1)).unwrap_or(u16::MAX);
    let backoff = Backoff {
        min: RECONNECT_MIN,
        max: RECONNECT_MAX,
    };
    let queue = WorkerQueue {
        shared,
        prefetch,
        stop: stop.clone(),
        opened: false,
    };
    supervise::consume("dispatch consumer", queue, backoff, &stop).await
}

/// This worker's dispatch queue.
struct WorkerQueue {
    shared: Arc<Shared>,
    prefetch: u16,
    stop: CancellationToken,
    /// Whether the queue was opened before: every later open is a reconnect.
    opened: bool,
}

impl Subscription for WorkerQueue {
    type Item = Delivery;
    type Stream = DeliveryStream;
    type Error = BrokerError;

    /// The queue may be gone after a broker restart, so it is declared every time.
    async fn open(&mut self) -> Result<DeliveryStream, BrokerError> {
        if std::mem::replace(&mut self.opened, true) {
            crate::metrics::reconnected();
        }
        let shared = &self.shared;
        shared.broker.worker_queue_declare(&shared.id).await?;
        shared
            .broker
            .dispatch_consume(&shared.id, self.prefetch)
            .await
    }

    async fn handle(&mut self, d: Delivery) {
        accept(&self.shared, d, &self.stop).await
    }
}

/// Takes a delivery's dispatches into the pool, or refuses the delivery when
/// pool and buffer stay full for [`FULL_WAIT`], so the dead-letter route
/// sends it to another worker (a refused batch is split there). A batch is
/// taken whole or not at all: no part of a refused delivery has started.
async fn accept(shared: &Arc<Shared>, d: Delivery, stop: &CancellationToken) {
    let msgs = match decode(&d.payload) {
        Ok(msgs) => msgs,
        Err(why) => {
            tracing::error!(worker_id = %shared.id, body = %String::from_utf8_lossy(&d.payload), "dropping a malformed dispatch: {why}");
            if let Err(e) = d.acker.reject(false).await {
                tracing::warn!("rejecting a malformed dispatch failed: {e}");
            }
            return;
        }
    };
    let slots = tokio::select! {
        biased;
        // Unsettled: closing the consumer hands it back to the queue.
        _ = stop.cancelled() => return,
        slots = shared.reserve_within(msgs.len(), FULL_WAIT) => slots,
    };
    let Some(slots) = slots else {
        tracing::info!(worker_id = %shared.id, dispatches = msgs.len(), "pool and buffer full; rejecting a dispatch for reroute");
        crate::metrics::rejected();
        if let Err(e) = d.acker.reject(false).await {
            tracing::warn!("rejecting a dispatch failed: {e}; the broker will redeliver it");
        }
        return;
    };
    crate::metrics::pool(shared);
    // A single dispatch carries the dispatcher's span in its header; a batch
    // carries none, and each dispatch's is derived as the dispatcher did.
    let header = match msgs.len() {
        1 => d.traceparent,
        _ => None,
    };
    let parts = settle::split(d.acker, msgs.len());
    for ((msg, slot), part) in msgs.into_iter().zip(slots).zip(parts) {
        let parent = header
            .clone()
            .or_else(|| kairos_core::trace::dispatch_traceparent(&msg));
        let parent = parent.as_deref().and_then(TraceContext::parse);
        shared.tasks.spawn(process(
            Arc::clone(shared),
            msg,
            parent,
            part,
            slot,
            stop.clone(),
        ));
    }
}

/// A worker-queue body: one dispatch object, or a non-empty array of them.
fn decode(payload: &[u8]) -> Result<Vec<DispatchMsg>, String> {
    let value: serde_json::Value =
        serde_json::from_slice(payload).map_err(|e| format!("not JSON: {e}"))?;
    match value {
        serde_json::Value::Array(items) if items.is_empty() => Err("an empty batch".into()),
        serde_json::Value::Array(items) => items.into_iter().map(decode_one).collect(),
        one => decode_one(one).map(|msg| vec![msg]),
    }
}

fn decode_one(value: serde_json::Value) -> Result<DispatchMsg, String> {
    match value.get("v").and_then(serde_json::Value::as_u64) {
        Some(v) if v == u64::from(PROTOCOL_VERSION) => {}
        Some(v) => {
            return Err(format!(
                "unsupported protocol version {v} (this worker speaks {PROTOCOL_VERSION})"
            ));
        }
        None => return Err("no protocol version field \"v\"".into()),
    }
    serde_json::from_value(value).map_err(|e| format!("not a dispatch message: {e}"))
}

/// One dispatch, end to end. `_slot` holds its place until the result is
/// out. `stop` is the end of consuming: a dispatch still waiting for a pool
/// slot then leaves its part unsettled, and closing the consumer hands the
/// delivery back to the queue.
async fn process(
    shared: Arc<Shared>,
    msg: DispatchMsg,
    parent: Option<TraceContext>,
    part: Part,
    _slot: Slot,
    stop: CancellationToken,
) {
    let trace = run_trace(&msg, parent.as_ref());
    let span = attempt_span(&shared.id, &msg, trace, parent);
    run_traced(shared, part, msg, trace, stop)
        .instrument(span)
        .await;
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

async fn run_traced(
    shared: Arc<Shared>,
    part: Part,
    msg: DispatchMsg,
    trace: Option<TraceContext>,
    stop: CancellationToken,
) {
    // Results name this attempt's span, so the dispatcher applying them
    // stays in its trace.
    let traceparent = trace.map(|t| t.to_string());
    // Listed in `held` from here until its result is out (or it goes back).
    let _held = shared.hold(&msg.execution_id, msg.attempt);
    let permit = tokio::select! {
        biased;
        _ = stop.cancelled() => return,
        p = shared.permits.acquire() => match p {
            Ok(p) => p,
            // The semaphore is never closed; leave the dispatch to the queue.
            Err(_) => return,
        },
    };
    if stop.is_cancelled() {
        return;
    }
    let key = shared.names.attempt_key(&msg.execution_id, msg.attempt);
    // Asked concurrently with the attempt key: one more command, no added wait.
    let owner = shared.key_owner();
    let (taken, stopped) = tokio::join!(
        shared.coord.once(&key, &owner, shared.attempt_key_ttl),
        stop_posted(&shared, &msg),
    );
    match taken {
        Ok(true) if stopped => {
            drop(permit);
            settle_stopped(&shared, &key, part, &msg, traceparent).await;
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
                tracing::warn!("requeueing a dispatch failed: {e}; the broker will redeliver it");
            }
            return;
        }
    }
    let (execution_id, attempt) = (msg.execution_id.clone(), msg.attempt);
    let started = ResultMsg {
        traceparent: traceparent.clone(),
        ..Report::started().into_msg(&shared.id, &shared.incarnation, &execution_id, attempt)
    };
    let started_at = started.at;
    if shared.reporter.started(started).await.is_err() {
        // `started` is the point of no return: without it the dispatcher may
        // requeue the attempt (if this worker is declared dead) and another
        // worker would run it too. So it does not run here: the key is given
        // back and the dispatch returned to the queue.
        hand_back(&shared, &key, part, "`started`").await;
        return;
    }
    // Acked before the handler runs: a long job must not hold an unacked
    // dispatch (RabbitMQ closes the channel after its consumer ack timeout).
    if let Err(e) = part.ack().await {
        tracing::warn!(execution_id = %msg.execution_id, "acking a dispatch failed: {e}; a redelivery will be skipped by the attempt key");
    }
    tracing::debug!("attempt started");
    let report = run_attempt(&shared, msg, permit).await;
    tracing::debug!(kind = ?report.kind, "attempt finished");
    let result = ResultMsg {
        traceparent,
        started_at: Some(started_at),
        ..report.into_msg(&shared.id, &shared.incarnation, &execution_id, attempt)
    };
    // A final failure is already logged loudly by the reporter.
    let _ = shared.reporter.finished(result).await;
}

/// Whether a stop was posted for this attempt before it started: a job
/// cancelled while its trigger waited (claimed ahead of its due time, or
/// behind other work in this queue). A lookup that fails counts as no: the
/// stop watcher still stops the attempt once it runs.
async fn stop_posted(shared: &Shared, msg: &DispatchMsg) -> bool {
    let key = shared.names.stop_key(&msg.execution_id, msg.attempt);
    matches!(
        shared.coord.stops_posted(&[key]).await.as_deref(),
        Ok([true])
    )
}

/// Ends an attempt stopped before it started: its handler never runs, and
/// the dispatcher records it `cancelled`. The delivery is acked once the
/// result is confirmed; if it cannot be, the attempt goes back to the queue
/// (and is settled the same way when it comes back).
async fn settle_stopped(
    shared: &Shared,
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
            &shared.id,
            &shared.incarnation,
            &msg.execution_id,
            msg.attempt,
        )
    };
    if shared.reporter.finished(result).await.is_err() {
        hand_back(shared, key, part, "the stopped attempt's result").await;
        return;
    }
    if let Err(e) = part.ack().await {
        tracing::warn!(execution_id = %msg.execution_id, "acking a stopped dispatch failed: {e}; a redelivery will be skipped by the attempt key");
    }
}

/// Gives back an attempt this worker took but did not start, because
/// `what` could not be confirmed.
async fn hand_back(shared: &Shared, key: &str, part: Part, what: &str) {
    match shared.coord.release(key, &shared.key_owner()).await {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dispatches_of_other_versions_or_shapes_are_refused() {
        let ok = br#"{"v":1,"execution_id":"e","job_id":"j","attempt":1,"handler":"noop","params":null,"scheduled_at":0,"timeout_ms":null}"#;
        assert_eq!(decode(ok).unwrap()[0].handler, "noop");
        let two = format!(
            "[{},{}]",
            String::from_utf8_lossy(ok),
            String::from_utf8_lossy(ok)
        );
        assert_eq!(decode(two.as_bytes()).unwrap().len(), 2);
        assert_eq!(decode(b"[]").unwrap_err(), "an empty batch");
        let mixed = format!(r#"[{},{{"v":2}}]"#, String::from_utf8_lossy(ok));
        assert!(
            decode(mixed.as_bytes())
                .unwrap_err()
                .contains("unsupported protocol version 2"),
            "one bad dispatch refuses the batch"
        );
        assert!(decode(b"{").unwrap_err().starts_with("not JSON"));
        let v2 = br#"{"v":2,"execution_id":"e"}"#;
        assert!(
            decode(v2)
                .unwrap_err()
                .contains("unsupported protocol version 2")
        );
        assert!(
            decode(br#"{"execution_id":"e"}"#)
                .unwrap_err()
                .contains("\"v\"")
        );
        assert!(
            decode(br#"{"v":1,"execution_id":"e"}"#)
                .unwrap_err()
                .starts_with("not a dispatch")
        );
    }
}
