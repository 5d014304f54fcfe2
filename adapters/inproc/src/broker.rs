//! In-process broker for `kairos dev` and tests, with the RabbitMQ adapter's
//! semantics: worker queues exist only once declared, publishes to a missing
//! one are refused, consumers compete round-robin within their prefetch,
//! reject without requeue dead-letters a worker queue's message to the
//! reroute queue, and a consumer that goes away has its unacked messages
//! redelivered. Nothing survives the process (RabbitMQ's durability is the one
//! difference).

mod queue;
mod stream;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};

use async_trait::async_trait;

use kairos_core::broker::{
    Broker, BrokerError, BrokerResult, DeliveryStream, DispatchQueue, QueueStats,
};
use kairos_core::protocol::{DispatchMsg, HeartbeatMsg, LogMsg, Names, ResultMsg, batch_rank};

use queue::{Message, Queue, QueueKind};

/// RabbitMQ's limit on queue names, mirrored so both adapters refuse the same.
const MAX_NAME_BYTES: usize = 255;

/// The in-process broker. Cheap to clone; clones share the queues.
#[derive(Clone)]
pub struct MemoryBroker {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for MemoryBroker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryBroker")
            .field("namespace", &self.shared.names.namespace())
            .finish()
    }
}

/// What clones, streams and ackers share. Streams and ackers hold it weakly,
/// so a dropped broker frees its queues even while deliveries are held.
struct Shared {
    names: Names,
    /// A plain mutex: every critical section is short and synchronous, and
    /// stream drops must take it without a runtime.
    state: Mutex<State>,
}

/// All queues by name.
#[derive(Default)]
struct State {
    queues: HashMap<String, Queue>,
    next_consumer: u64,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl MemoryBroker {
    /// An empty broker with the shared queues of `names` declared.
    pub fn new(names: Names) -> MemoryBroker {
        let mut state = State::default();
        let shared_queues = [
            (names.reroute_queue(), QueueKind::Reroute),
            (names.results_queue(), QueueKind::Results),
            (names.heartbeats_queue(), QueueKind::Heartbeats),
            (names.logs_queue(), QueueKind::Logs),
        ];
        for (name, kind) in shared_queues {
            state.queues.insert(name.clone(), Queue::new(name, kind));
        }
        MemoryBroker {
            shared: Arc::new(Shared {
                names,
                state: Mutex::new(state),
            }),
        }
    }

    fn names(&self) -> &Names {
        &self.shared.names
    }

    /// Appends to an existing queue and hands out what consumers can take.
    /// `traceparent` travels with the message, as RabbitMQ's header does.
    fn publish(
        &self,
        queue: &str,
        payload: Vec<u8>,
        traceparent: Option<String>,
    ) -> BrokerResult<()> {
        self.publish_at(queue, Message::new(payload, traceparent))
    }

    /// Appends `msg` (with its priority) to an existing queue and hands out
    /// what consumers can take.
    fn publish_at(&self, queue: &str, msg: Message) -> BrokerResult<()> {
        let mut state = self.shared.lock();
        let Some(q) = state.queues.get_mut(queue) else {
            return Err(BrokerError::Refused(format!(
                "no queue {queue:?}: publish for a worker that never declared its queue"
            )));
        };
        q.push_back(msg);
        q.pump(&Arc::downgrade(&self.shared));
        Ok(())
    }

    fn consume(&self, queue: &str, prefetch: u16) -> BrokerResult<DeliveryStream> {
        let mut state = self.shared.lock();
        state.next_consumer += 1;
        let id = state.next_consumer;
        let Some(q) = state.queues.get_mut(queue) else {
            return Err(BrokerError::Refused(format!(
                "no queue {queue:?} to consume"
            )));
        };
        let rx = q.add_consumer(id, prefetch);
        q.pump(&Arc::downgrade(&self.shared));
        Ok(Box::pin(stream::MemoryStream::new(
            rx,
            Arc::downgrade(&self.shared),
            queue.to_string(),
            id,
        )))
    }

    /// One of a worker's dispatch queues, refused if its name is too long.
    fn worker_queue(&self, worker_id: &str, queue: DispatchQueue) -> BrokerResult<String> {
        let name = self.names().dispatch_queue(worker_id, queue);
        if name.len() > MAX_NAME_BYTES {
            return Err(BrokerError::Refused(format!(
                "queue name {:.40}… is longer than {MAX_NAME_BYTES} bytes",
                name
            )));
        }
        Ok(name)
    }
}

#[async_trait]
impl Broker for MemoryBroker {
    async fn worker_queue_declare(&self, worker_id: &str) -> BrokerResult<()> {
        let names = [
            self.worker_queue(worker_id, DispatchQueue::Main)?,
            self.worker_queue(worker_id, DispatchQueue::Immediate)?,
        ];
        let mut state = self.shared.lock();
        for name in names {
            state
                .queues
                .entry(name.clone())
                .or_insert_with(|| Queue::new(name, QueueKind::Worker(worker_id.to_string())));
        }
        Ok(())
    }

    /// Ready messages only, like RabbitMQ's passive declare: deliveries held
    /// unacked by consumers are not counted.
    async fn worker_queue_stats(&self, worker_id: &str) -> BrokerResult<Option<QueueStats>> {
        let main = self.worker_queue(worker_id, DispatchQueue::Main)?;
        let immediate = self.worker_queue(worker_id, DispatchQueue::Immediate)?;
        let mut state = self.shared.lock();
        let Some(stats) = state.queues.get_mut(&main).map(Queue::stats) else {
            return Ok(None);
        };
        Ok(Some(
            match state.queues.get_mut(&immediate).map(Queue::stats) {
                Some(i) => QueueStats {
                    messages: stats.messages.saturating_add(i.messages),
                    consumers: stats.consumers.max(i.consumers),
                },
                None => stats,
            },
        ))
    }

    /// Drops the queues with their messages; their consumers' streams end.
    async fn worker_queue_delete(&self, worker_id: &str) -> BrokerResult<()> {
        let main = self.worker_queue(worker_id, DispatchQueue::Main)?;
        let immediate = self.worker_queue(worker_id, DispatchQueue::Immediate)?;
        let mut state = self.shared.lock();
        state.queues.remove(&main);
        state.queues.remove(&immediate);
        Ok(())
    }

    async fn dispatch_publish_to(
        &self,
        worker_id: &str,
        queue: DispatchQueue,
        msgs: &[DispatchMsg],
    ) -> BrokerResult<()> {
        let body = kairos_core::protocol::encode_dispatches(msgs)?;
        let queue = self.worker_queue(worker_id, queue)?;
        let traceparent = match msgs {
            [msg] => kairos_core::trace::dispatch_traceparent(msg),
            _ => None,
        };
        let msg = Message::new(body, traceparent).with_priority(batch_rank(msgs));
        self.publish_at(&queue, msg)
    }

    async fn results_publish(&self, msgs: &[ResultMsg]) -> BrokerResult<()> {
        let body = kairos_core::protocol::encode_results(msgs)?;
        self.publish(&self.names().results_queue(), body, None)
    }

    async fn heartbeat_publish(&self, msg: &HeartbeatMsg) -> BrokerResult<()> {
        let body = serde_json::to_vec(msg)?;
        self.publish(&self.names().heartbeats_queue(), body, None)
    }

    async fn log_publish(&self, msg: &LogMsg) -> BrokerResult<()> {
        let body = serde_json::to_vec(msg)?;
        self.publish(&self.names().logs_queue(), body, None)
    }

    async fn dispatch_consume_from(
        &self,
        worker_id: &str,
        queue: DispatchQueue,
        prefetch: u16,
    ) -> BrokerResult<DeliveryStream> {
        let queue = self.worker_queue(worker_id, queue)?;
        self.consume(&queue, prefetch)
    }

    async fn results_consume(&self, prefetch: u16) -> BrokerResult<DeliveryStream> {
        self.consume(&self.names().results_queue(), prefetch)
    }

    async fn heartbeats_consume(&self, prefetch: u16) -> BrokerResult<DeliveryStream> {
        self.consume(&self.names().heartbeats_queue(), prefetch)
    }

    async fn logs_consume(&self, prefetch: u16) -> BrokerResult<DeliveryStream> {
        self.consume(&self.names().logs_queue(), prefetch)
    }

    async fn reroute_consume(&self, prefetch: u16) -> BrokerResult<DeliveryStream> {
        self.consume(&self.names().reroute_queue(), prefetch)
    }

    async fn is_healthy(&self) -> bool {
        true
    }
}

impl Shared {
    /// Applies an ack or reject; see [`kairos_core::broker::Acker`].
    fn settle(
        &self,
        me: &Weak<Shared>,
        queue: &str,
        consumer: u64,
        tag: u64,
        outcome: Settle,
    ) -> BrokerResult<()> {
        let mut state = self.lock();
        let taken = state
            .queues
            .get_mut(queue)
            .and_then(|q| q.take_unacked(consumer, tag).map(|m| (m, q.kind().clone())));
        let Some((mut msg, kind)) = taken else {
            return Err(BrokerError::Unavailable(format!(
                "delivery from {queue:?} can no longer be settled: it was settled already, \
                 or its consumer or queue went away (and it was requeued or deleted)"
            )));
        };
        match (outcome, kind) {
            (Settle::Ack, _) => {}
            (Settle::Reject { requeue: true }, _) => {
                msg.redelivered = true;
                if let Some(q) = state.queues.get_mut(queue) {
                    q.push_front(msg);
                }
            }
            (Settle::Reject { requeue: false }, QueueKind::Worker(worker)) => {
                let reroute = self.names.reroute_queue();
                if let Some(r) = state.queues.get_mut(&reroute) {
                    r.push_back(msg.dead_lettered(worker));
                    r.pump(me);
                }
            }
            // Queues without a dead-letter exchange drop what is rejected.
            (Settle::Reject { requeue: false }, _) => {}
        }
        if let Some(q) = state.queues.get_mut(queue) {
            q.pump(me);
        }
        Ok(())
    }

    /// Detaches a consumer whose stream was dropped and redelivers what it
    /// held to the queue's other or later consumers.
    fn remove_consumer(&self, me: &Weak<Shared>, queue: &str, consumer: u64) {
        let mut state = self.lock();
        if let Some(q) = state.queues.get_mut(queue) {
            q.remove_consumer(consumer);
            q.pump(me);
        }
    }
}

/// How a delivery is settled.
#[derive(Debug, Clone, Copy)]
enum Settle {
    /// Handled: remove it.
    Ack,
    /// Refused: back to the head of its queue, or dead-lettered / dropped.
    Reject {
        /// Put it back instead of dead-lettering or dropping it.
        requeue: bool,
    },
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::{FutureExt, StreamExt};
    use kairos_core::protocol::HEARTBEAT_TTL;
    use kairos_core::protocol::PROTOCOL_VERSION;
    use kairos_core::worker::WorkerState;

    fn beat(at: i64) -> HeartbeatMsg {
        HeartbeatMsg {
            v: PROTOCOL_VERSION,
            worker_id: "w".into(),
            queue: "q".into(),
            capacity: 1,
            active: 0,
            avg_cost_ms: 0.0,
            cpu_idle: 100.0,
            state: WorkerState::Online,
            at,
            handlers: None,
            group: None,
            incarnation: None,
            held: None,
            dispatch_batch: None,
            immediate_queue: false,
        }
    }

    fn dispatch() -> DispatchMsg {
        DispatchMsg {
            shard: None,
            immediate: false,
            parent_outputs: None,
            v: PROTOCOL_VERSION,
            execution_id: "e".into(),
            job_id: "j".into(),
            attempt: 1,
            handler: "noop".into(),
            params: serde_json::Value::Null,
            scheduled_at: 0,
            timeout_ms: None,
            group: None,
            trace: None,
            priority: None,
        }
    }

    #[tokio::test(start_paused = true)]
    async fn unconsumed_heartbeats_expire() {
        let b = MemoryBroker::new(Names::new("t"));
        b.heartbeat_publish(&beat(1)).await.unwrap();
        tokio::time::advance(HEARTBEAT_TTL + std::time::Duration::from_secs(1)).await;
        b.heartbeat_publish(&beat(2)).await.unwrap();
        let mut s = b.heartbeats_consume(10).await.unwrap();
        let d = s.next().await.unwrap();
        let got: HeartbeatMsg = serde_json::from_slice(&d.payload).unwrap();
        assert_eq!(got.at, 2);
        assert!(s.next().now_or_never().is_none());
    }

    #[tokio::test]
    async fn settling_after_the_consumer_left_fails_and_redelivers_once() {
        let b = MemoryBroker::new(Names::new("t"));
        b.worker_queue_declare("w").await.unwrap();
        b.dispatch_publish("w", &dispatch()).await.unwrap();
        let mut s = b.dispatch_consume("w", 1).await.unwrap();
        let d = s.next().await.unwrap();
        drop(s);
        assert!(matches!(
            d.acker.ack().await,
            Err(BrokerError::Unavailable(_))
        ));
        let mut again = b.dispatch_consume("w", 1).await.unwrap();
        let d = again.next().await.unwrap();
        assert!(d.redelivered);
        d.acker.ack().await.unwrap();
        assert!(d.acker.ack().await.is_err(), "settled twice");
        let stats = b.worker_queue_stats("w").await.unwrap();
        assert_eq!(
            stats,
            Some(QueueStats {
                messages: 0,
                consumers: 1
            })
        );
    }

    #[tokio::test]
    async fn deleting_a_queue_ends_its_streams() {
        let b = MemoryBroker::new(Names::new("t"));
        b.worker_queue_declare("w").await.unwrap();
        let mut s = b.dispatch_consume("w", 1).await.unwrap();
        b.worker_queue_delete("w").await.unwrap();
        assert!(s.next().await.is_none());
        assert_eq!(b.worker_queue_stats("w").await.unwrap(), None);
    }
}
