//! The delivery loop: consumes the worker's two queues (main and immediate,
//! each with its own prefetch window), decodes each delivery (one dispatch
//! or a batch) into the intake as it arrives, takes them from there most
//! urgent first (see [`crate::intake`]), applies backpressure, and hands
//! each accepted dispatch, with its place in the pool and its share of the
//! delivery, to `attempt` in a task of its own.

use crate::attempt::Attempts;
use crate::connections::Connections;
use crate::intake::{Arrived, Intake};
use crate::pool::Pool;
use crate::settle;
use kairos_core::broker::{BrokerError, Delivery, DeliveryStream, DispatchQueue};
use kairos_core::protocol::{DispatchMsg, PROTOCOL_VERSION};
use kairos_core::supervise::{self, Backoff, CriticalTasks, Subscription};
use kairos_core::trace::TraceContext;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;
/// How long a full worker waits for a place before refusing a dispatch. A
/// busy worker running short handlers has one back within this; one running
/// long handlers refuses, and the dispatch goes to another worker. Refusing at
/// once made a backlog bounce between full workers through the reroute queue.
const FULL_WAIT: Duration = Duration::from_millis(100);
const RECONNECT_MIN: Duration = Duration::from_millis(100);
const RECONNECT_MAX: Duration = Duration::from_secs(5);

/// Consumes until `stop` is cancelled, then drops the consumers so
/// deliveries not yet taken go back to their queues. A consumer that ends or
/// fails to start is restarted with capped backoff. The immediate queue is
/// consumed if `immediate` (the heartbeats then offer it). The intake loop
/// runs as a task of its own, watched in `tasks`: if it panicked, the
/// consumers would fill the intake while nothing takes from it, and the
/// heartbeats would go on offering free places; the process stops instead
/// (see [`kairos_core::supervise::spawn_critical`]).
pub(crate) async fn run(
    attempts: Arc<Attempts>,
    immediate: bool,
    tasks: &CriticalTasks,
    stop: CancellationToken,
) {
    // Running attempts are already acked, so unacked deliveries are only the
    // ones waiting for a slot. One more than the buffer lets a full worker see
    // (and refuse, for reroute) one surplus dispatch at a time, while the rest
    // wait in the broker's queue. With `capacity + buffer` a busy worker would
    // take twice its capacity and reject the surplus into a reroute loop.
    let prefetch = u16::try_from(attempts.pool().buffer.saturating_add(1)).unwrap_or(u16::MAX);
    let backoff = Backoff {
        min: RECONNECT_MIN,
        max: RECONNECT_MAX,
    };
    let intake = Arc::new(Intake::default());
    let taking = tasks.spawn(
        "dispatch intake",
        take(attempts.clone(), intake.clone(), stop.clone()),
    );
    let queue = |from| WorkerQueue {
        attempts: attempts.clone(),
        intake: intake.clone(),
        from,
        prefetch,
        opened: false,
    };
    let main = supervise::consume(
        "dispatch consumer",
        queue(DispatchQueue::Main),
        backoff,
        &stop,
    );
    let now = async {
        if immediate {
            let queue = queue(DispatchQueue::Immediate);
            supervise::consume("immediate dispatch consumer", queue, backoff, &stop).await;
        }
    };
    tokio::join!(main, now);
    if let Err(e) = taking.await {
        tracing::error!("the delivery loop ended abnormally: {e}");
    }
}

/// Takes deliveries from `intake` into the pool, most urgent first, until
/// `stop`. What is left then stays unsettled: closing the consumer hands it
/// back to the queue.
async fn take(attempts: Arc<Attempts>, intake: Arc<Intake>, stop: CancellationToken) {
    loop {
        let next = tokio::select! {
            biased;
            _ = stop.cancelled() => return,
            next = intake.next() => next,
        };
        accept(&attempts, &intake, next, &stop).await;
    }
}

/// One of this worker's dispatch queues.
struct WorkerQueue {
    attempts: Arc<Attempts>,
    intake: Arc<Intake>,
    from: DispatchQueue,
    prefetch: u16,
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
            // The broker requeued what the lost channel held unsettled.
            let dropped = self.intake.clear(self.from);
            if dropped > 0 {
                tracing::debug!(dropped, "forgot deliveries of the lost channel");
            }
        }
        let conn: &Connections = &self.attempts.conn;
        conn.broker.worker_queue_declare(&conn.id).await?;
        conn.broker
            .dispatch_consume_from(&conn.id, self.from, self.prefetch)
            .await
    }

    /// Decodes the delivery into the intake (or drops a malformed one), so
    /// the consumer reads on and the intake sees every delivery sent.
    async fn handle(&mut self, d: Delivery) {
        match decode(&d.payload) {
            Ok(msgs) => self.intake.push(self.from, d, msgs),
            Err(why) => {
                let worker_id = &self.attempts.conn.id;
                tracing::error!(worker_id = %worker_id, body = %String::from_utf8_lossy(&d.payload), "dropping a malformed dispatch: {why}");
                if let Err(e) = d.acker.reject(false).await {
                    tracing::warn!("rejecting a malformed dispatch failed: {e}");
                }
            }
        }
    }
}

/// Takes a delivery's dispatches into the pool, or refuses the delivery when
/// pool and buffer stay full for [`FULL_WAIT`], so the dead-letter route
/// sends it to another worker (a refused batch is split there). A batch is
/// taken whole or not at all: no part of a refused delivery has started. A
/// delivery that outranks everything waiting here is taken at once, beyond
/// the buffer if need be (see [`Pool::reserve_ahead`]); while this one
/// waits for a place, one that outranks it arriving in the intake sends
/// it back there, so urgent work never waits for a place bulk work wants.
async fn accept(
    attempts: &Arc<Attempts>,
    intake: &Intake,
    arrived: Arrived,
    stop: &CancellationToken,
) {
    let worker_id = &attempts.conn.id;
    let pool: &Arc<Pool> = attempts.pool();
    let (n, rank) = (arrived.msgs.len(), arrived.rank());
    let slots = match pool.reserve_ahead(n, rank) {
        Some(slots) => Some(slots),
        None => tokio::select! {
            biased;
            // Unsettled: closing the consumer hands it back to the queue.
            _ = stop.cancelled() => return,
            _ = intake.outranked(rank) => return intake.put_back(arrived),
            slots = pool.reserve_within(n, FULL_WAIT) => slots,
        },
    };
    let Arrived {
        delivery: d, msgs, ..
    } = arrived;
    let Some(slots) = slots else {
        tracing::info!(worker_id = %worker_id, dispatches = msgs.len(), "pool and buffer full; rejecting a dispatch for reroute");
        crate::metrics::rejected();
        if let Err(e) = d.acker.reject(false).await {
            tracing::warn!("rejecting a dispatch failed: {e}; the broker will redeliver it");
        }
        return;
    };
    pool.report();
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
        let attempts = Arc::clone(attempts);
        let stop = stop.clone();
        pool.tasks
            .spawn(async move { attempts.process(msg, parent, part, slot, stop).await });
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
