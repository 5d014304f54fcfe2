//! Consumers that every dispatcher instance runs: worker results, worker
//! heartbeats and execution log lines, each applied to the database in batches.
//!
//! Deliveries are batched with `ready_chunks`: whatever has arrived is applied
//! in one transaction, so a busy queue gets large batches and a quiet one gets
//! no added latency. A batch is acked only after it is committed; if the
//! database is down the batch is held (unacked) and retried, so nothing is
//! lost, and the broker redelivers it elsewhere if this instance dies.

use crate::attempts::Attempts;
use crate::recover;
use futures::StreamExt;
use kairos_core::broker::{Broker, BrokerResult, Delivery, DeliveryStream};
use kairos_core::concurrency::OCCUPYING;
use kairos_core::due::{Due, DueSignal};
use kairos_core::protocol::{HeartbeatMsg, LogMsg, PROTOCOL_VERSION, ResultMsg};
use kairos_core::store::{Dispatch, LogLimits, LogStore, Maintenance, StoreResult, WorkerStore};
use kairos_core::supervise::{self, Backoff, Subscription};
use kairos_core::time::now_ms;
use kairos_core::trace::{Stage, TraceContext};
use serde::de::DeserializeOwned;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

/// Largest batch applied in one transaction.
const MAX_BATCH: usize = 256;
/// Unacked deliveries per consumer: a few batches' worth.
const PREFETCH: u16 = 1024;
/// Pause before re-trying a failed write.
const RETRY_PAUSE: Duration = Duration::from_millis(500);

/// Which queue a consumer reads, and how to apply what it reads.
#[async_trait::async_trait]
trait Sink: Send + Sync {
    type Msg: DeserializeOwned + Send;
    const NAME: &'static str;
    async fn consume(&self, broker: &dyn Broker) -> BrokerResult<DeliveryStream>;
    fn version(msg: &Self::Msg) -> u32;
    /// The messages in one delivery: one, unless the sink's queue carries batches.
    fn decode(payload: &[u8]) -> serde_json::Result<Vec<Self::Msg>> {
        serde_json::from_slice(payload).map(|m| vec![m])
    }
    async fn apply(&self, msgs: &[Self::Msg]) -> StoreResult<()>;
}

struct Results {
    store: Arc<dyn Dispatch>,
    on_applied: Option<Arc<Notify>>,
    slots_freed: Arc<Notify>,
    /// Where "sweep now" is announced to the leader, which may be another
    /// dispatcher.
    due: Option<Arc<dyn DueSignal>>,
}

#[async_trait::async_trait]
impl Sink for Results {
    type Msg = ResultMsg;
    const NAME: &'static str = "results";
    async fn consume(&self, broker: &dyn Broker) -> BrokerResult<DeliveryStream> {
        broker.results_consume(PREFETCH).await
    }
    fn version(msg: &ResultMsg) -> u32 {
        msg.v
    }
    fn decode(payload: &[u8]) -> serde_json::Result<Vec<ResultMsg>> {
        kairos_core::protocol::decode_results(payload)
    }
    async fn apply(&self, msgs: &[ResultMsg]) -> StoreResult<()> {
        let applied = self.store.results_apply(msgs, now_ms()).await?;
        crate::metrics::results_applied(&applied);
        trace_applied(msgs, &applied);
        // Only a queued callback gives the relay something to do: waking it
        // for every batch of a burst of jobs without callbacks cost two
        // outbox reads a batch.
        let queued = applied.iter().any(|a| a.callback_queued);
        if queued && let Some(n) = &self.on_applied {
            n.notify_waiters();
        }
        // An execution that left `dispatched`/`running` gave its
        // concurrency slot back: work waiting for one may go now.
        let freed = applied
            .iter()
            .any(|a| a.new_status.is_some_and(|s| !OCCUPYING.contains(&s)));
        if freed {
            self.slots_freed.notify_one();
        }
        // A workflow node or a job with follow-ups ended: its next nodes or
        // child jobs may be pending now. The leader sweeps them up at once
        // instead of on its timer, so a child starts within milliseconds of
        // its last parent.
        if applied.iter().any(|a| a.next_work)
            && let Some(due) = &self.due
        {
            due.announce(Due::Pending).await;
        }
        Ok(())
    }
}

/// Heartbeats are recorded ([`WorkerStore`]), and a replaced process's
/// work recovered ([`Maintenance`] too).
struct Heartbeats<S: ?Sized> {
    store: Arc<S>,
    attempts: Attempts,
}

#[async_trait::async_trait]
impl<S: Maintenance + WorkerStore + ?Sized + 'static> Sink for Heartbeats<S> {
    type Msg = HeartbeatMsg;
    const NAME: &'static str = "heartbeats";
    async fn consume(&self, broker: &dyn Broker) -> BrokerResult<DeliveryStream> {
        broker.heartbeats_consume(PREFETCH).await
    }
    fn version(msg: &HeartbeatMsg) -> u32 {
        msg.v
    }
    async fn apply(&self, msgs: &[HeartbeatMsg]) -> StoreResult<()> {
        let changed = self.store.workers_record_heartbeats(msgs, now_ms()).await?;
        for c in changed {
            info!(worker = %c.worker_id, previous = %c.previous, current = %c.current, "worker restarted as a new process; recovering what the old one held");
            // Recorded already: if this fails, the reaper's next round
            // recovers the same attempts.
            if let Err(e) =
                recover::recover_replaced(self.store.as_ref(), &self.attempts, &c.worker_id).await
            {
                warn!(worker = %c.worker_id, error = %e, "cannot recover the replaced process's work now; the reaper will");
            }
        }
        Ok(())
    }
}

/// One debug event per applied result, in the execution's trace.
fn trace_applied(msgs: &[ResultMsg], applied: &[kairos_core::store::Applied]) {
    if !tracing::enabled!(tracing::Level::DEBUG) {
        return;
    }
    for (m, a) in msgs.iter().zip(applied) {
        // The worker's span names the attempt's trace (the job creator's
        // or the execution's); results from workers that do not trace get
        // the execution's.
        let parent = m.traceparent.as_deref().and_then(TraceContext::parse);
        let trace =
            TraceContext::for_stage(parent.as_ref(), &m.execution_id, m.attempt, Stage::Apply);
        let span = tracing::debug_span!(
            "apply",
            execution_id = %m.execution_id,
            attempt = m.attempt,
            worker_id = %m.worker_id,
            trace_id = trace.map(|t| t.trace_id_hex()).unwrap_or_default(),
            traceparent = trace.map(|t| t.to_string()).unwrap_or_default(),
            parent = parent.map(|t| t.to_string()).unwrap_or_default(),
        );
        span.in_scope(|| {
            debug!(kind = ?m.kind, new_status = ?a.new_status.map(|s| s.as_str()), "result applied")
        });
    }
}

struct Logs {
    store: Arc<dyn LogStore>,
    limits: LogLimits,
}

#[async_trait::async_trait]
impl Sink for Logs {
    type Msg = LogMsg;
    const NAME: &'static str = "logs";
    async fn consume(&self, broker: &dyn Broker) -> BrokerResult<DeliveryStream> {
        broker.logs_consume(PREFETCH).await
    }
    fn version(msg: &LogMsg) -> u32 {
        msg.v
    }
    async fn apply(&self, msgs: &[LogMsg]) -> StoreResult<()> {
        self.store.logs_append(msgs, &self.limits, now_ms()).await
    }
}

/// Stores execution log lines, bounded by `limits`, until `shutdown`. A
/// batch redelivered after a crash between commit and ack is stored twice:
/// logs are at-least-once.
pub async fn run_logs(
    store: Arc<dyn LogStore>,
    broker: Arc<dyn Broker>,
    limits: LogLimits,
    shutdown: CancellationToken,
) {
    run(Logs { store, limits }, broker, shutdown).await
}

/// Applies worker results until `shutdown`. `on_applied` is notified when a
/// batch queued a callback (the in-process callback relay waits on it);
/// `slots_freed` when one ended or requeued an attempt (the leader's sweep
/// of work waiting for a concurrency slot waits on it); `due` is told when
/// one may have left next work pending.
pub async fn run_results(
    store: Arc<dyn Dispatch>,
    broker: Arc<dyn Broker>,
    on_applied: Option<Arc<Notify>>,
    slots_freed: Arc<Notify>,
    due: Option<Arc<dyn DueSignal>>,
    shutdown: CancellationToken,
) {
    run(
        Results {
            store,
            on_applied,
            slots_freed,
            due,
        },
        broker,
        shutdown,
    )
    .await
}

/// Records worker heartbeats until `shutdown`; when a worker id comes back
/// as a new process, recovers at once what the previous one held.
pub async fn run_heartbeats<S: Maintenance + WorkerStore + ?Sized + 'static>(
    store: Arc<S>,
    broker: Arc<dyn Broker>,
    attempts: Attempts,
    shutdown: CancellationToken,
) {
    run(Heartbeats { store, attempts }, broker, shutdown).await
}

async fn run<S: Sink + 'static>(sink: S, broker: Arc<dyn Broker>, shutdown: CancellationToken) {
    let batches = Batches {
        sink,
        broker,
        shutdown: shutdown.clone(),
    };
    supervise::consume(S::NAME, batches, Backoff::default(), &shutdown).await
}

/// A sink's queue, consumed in batches of whatever has arrived.
struct Batches<S> {
    sink: S,
    broker: Arc<dyn Broker>,
    shutdown: CancellationToken,
}

impl<S: Sink + 'static> Subscription for Batches<S> {
    type Item = Vec<Delivery>;
    type Stream = futures::stream::ReadyChunks<DeliveryStream>;
    type Error = kairos_core::broker::BrokerError;

    async fn open(&mut self) -> Result<Self::Stream, Self::Error> {
        Ok(self
            .sink
            .consume(self.broker.as_ref())
            .await?
            .ready_chunks(MAX_BATCH))
    }

    async fn handle(&mut self, batch: Vec<Delivery>) {
        handle_batch(&self.sink, batch, &self.shutdown).await
    }
}

async fn handle_batch<S: Sink>(sink: &S, batch: Vec<Delivery>, shutdown: &CancellationToken) {
    let mut msgs = Vec::with_capacity(batch.len());
    let mut good = Vec::with_capacity(batch.len());
    for d in batch {
        match S::decode(&d.payload) {
            Ok(decoded) => {
                let before = msgs.len();
                for m in decoded {
                    if S::version(&m) == PROTOCOL_VERSION {
                        msgs.push(m);
                    } else {
                        warn!(
                            queue = S::NAME,
                            version = S::version(&m),
                            "dropping a message of an unknown protocol version"
                        );
                    }
                }
                if msgs.len() > before {
                    good.push(d);
                } else {
                    let _ = d.acker.reject(false).await;
                }
            }
            Err(e) => {
                warn!(queue = S::NAME, error = %e, "dropping a malformed message");
                let _ = d.acker.reject(false).await;
            }
        }
    }
    if msgs.is_empty() {
        return;
    }
    let started = std::time::Instant::now();
    loop {
        match sink.apply(&msgs).await {
            Ok(()) => break,
            Err(e) => {
                warn!(queue = S::NAME, error = %e, count = msgs.len(), "cannot apply batch; holding it and retrying");
                if shutdown.is_cancelled() {
                    // Unacked deliveries go back to the queue when the consumer closes.
                    return;
                }
                pause(shutdown, RETRY_PAUSE).await;
            }
        }
    }
    let acks = futures::future::join_all(good.iter().map(|d| d.acker.ack())).await;
    let failed = acks.iter().filter(|r| r.is_err()).count();
    if failed > 0 {
        // Applied but not acked: redelivered later, and ignored as duplicates.
        warn!(queue = S::NAME, failed, "some acks failed");
    }
    debug!(
        queue = S::NAME,
        count = msgs.len(),
        took_ms = started.elapsed().as_millis() as u64,
        "applied batch"
    );
}

async fn pause(shutdown: &CancellationToken, d: Duration) {
    tokio::select! {
        _ = shutdown.cancelled() => {}
        _ = tokio::time::sleep(d) => {}
    }
}
