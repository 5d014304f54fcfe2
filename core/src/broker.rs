//! The message broker port: per-worker dispatch queues (a main one and an
//! immediate one, see [`DispatchQueue`]), the shared result and heartbeat
//! queues, and the reroute queue behind the workers' dead-letter
//! exchange. `AmqpBroker` (RabbitMQ, crate `kairos-broker-rabbitmq`) and
//! `MemoryBroker` (in-process, crate `kairos-inproc`) implement it with the
//! same semantics: persistent messages, publisher confirms, manual
//! acks, reject-without-requeue → reroute, redelivery when a consumer goes away.

use async_trait::async_trait;
use futures::stream::BoxStream;

use crate::protocol::{DispatchMsg, HeartbeatMsg, LogMsg, ResultMsg};

/// Broker failures, at the crate boundary.
#[derive(Debug, thiserror::Error)]
pub enum BrokerError {
    /// The broker could not be reached, or the connection or channel broke.
    #[error("message broker unavailable: {0}")]
    Unavailable(String),
    /// The broker refused a publish (negative confirm, or unroutable).
    #[error("message broker refused the message: {0}")]
    Refused(String),
    /// A message could not be encoded.
    #[error("cannot encode message: {0}")]
    Encode(#[from] serde_json::Error),
}

/// Result alias for the port.
pub type BrokerResult<T> = Result<T, BrokerError>;

/// Settles one delivery. Exactly one of the methods should be called; a
/// delivery dropped unsettled is redelivered when its consumer goes away.
#[async_trait]
pub trait Acker: Send + Sync {
    /// The message is handled; remove it.
    async fn ack(&self) -> BrokerResult<()>;
    /// Refuse the message. Without `requeue`, a worker queue's message goes to
    /// the reroute queue (dead-letter), any other queue's is dropped.
    async fn reject(&self, requeue: bool) -> BrokerResult<()>;
}

/// One received message.
pub struct Delivery {
    /// Raw JSON body; decode with `serde_json::from_slice`.
    pub payload: Vec<u8>,
    /// Whether the broker delivered it before (a consumer died holding it).
    pub redelivered: bool,
    /// For reroute deliveries: the worker whose queue dead-lettered it.
    pub rejected_by: Option<String>,
    /// W3C trace context the publisher attached (AMQP header `traceparent`;
    /// dispatches carry the dispatcher's span, see [`crate::trace`]).
    pub traceparent: Option<String>,
    /// Settles the delivery.
    pub acker: Box<dyn Acker>,
}

impl std::fmt::Debug for Delivery {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Delivery")
            .field("bytes", &self.payload.len())
            .field("redelivered", &self.redelivered)
            .field("rejected_by", &self.rejected_by)
            .field("traceparent", &self.traceparent)
            .finish()
    }
}

/// A consumer's deliveries. The stream ends when the consumer is cancelled or
/// the connection is lost: callers consume again (with backoff) to resume.
pub type DeliveryStream = BoxStream<'static, Delivery>;

/// Which of a worker's two dispatch queues a message travels in.
///
/// A consumer's prefetch window is counted in messages and filled in
/// arrival order: during a flood, the main queue's window is full of
/// batches waiting for the worker's pool, and an urgent message behind
/// them waits in the broker until the oldest has been taken. The immediate
/// queue is consumed with a window of its own, so work someone waits for
/// reaches the worker's rank-ordered intake at once whatever the main queue
/// holds. Only workers whose heartbeats offer it
/// ([`crate::protocol::HeartbeatMsg::immediate_queue`]) get messages there.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum DispatchQueue {
    /// The worker's queue, routed by its id: everything for a worker
    /// without an immediate queue, the scheduled work of one with it.
    #[default]
    Main,
    /// The worker's immediate queue: dispatches marked `immediate` (an
    /// immediate-lane job or a retry).
    Immediate,
}

impl DispatchQueue {
    /// Where a dispatch (`immediate` or not, as
    /// [`DispatchMsg::immediate`] says) goes for a worker that does
    /// (`offered`) or does not offer an immediate queue.
    pub fn of(immediate: bool, offered: bool) -> DispatchQueue {
        if immediate && offered {
            DispatchQueue::Immediate
        } else {
            DispatchQueue::Main
        }
    }
}

/// Figures about a worker's queues, for the reaper's second opinion.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueueStats {
    /// Messages waiting.
    pub messages: u32,
    /// Consumers attached.
    pub consumers: u32,
}

/// The broker port.
#[async_trait]
pub trait Broker: Send + Sync {
    /// Declares the worker's durable queues: the main one, bound to the
    /// dispatch exchange with the worker id as routing key, and the
    /// immediate one (see [`DispatchQueue`]); both dead-letter to the
    /// reroute queue. Idempotent.
    async fn worker_queue_declare(&self, worker_id: &str) -> BrokerResult<()>;
    /// Figures of the worker's queues together (messages summed, the larger
    /// consumer count), `None` if the main queue does not exist.
    async fn worker_queue_stats(&self, worker_id: &str) -> BrokerResult<Option<QueueStats>>;
    /// Deletes a dead worker's queues (after their messages were moved away).
    async fn worker_queue_delete(&self, worker_id: &str) -> BrokerResult<()>;
    /// Publishes a persistent dispatch to a worker's queue and waits for the
    /// broker's confirm. Callers keep many of these in flight at once. The
    /// message carries a `traceparent` header: the dispatch span of the
    /// execution's trace ([`crate::trace::dispatch_traceparent`]).
    async fn dispatch_publish(&self, worker_id: &str, msg: &DispatchMsg) -> BrokerResult<()> {
        self.dispatch_publish_many(worker_id, std::slice::from_ref(msg))
            .await
    }
    /// [`Broker::dispatch_publish_to`] the worker's main queue.
    async fn dispatch_publish_many(
        &self,
        worker_id: &str,
        msgs: &[DispatchMsg],
    ) -> BrokerResult<()> {
        self.dispatch_publish_to(worker_id, DispatchQueue::Main, msgs)
            .await
    }
    /// Publishes dispatches to a worker's queue in one persistent message
    /// (body: [`crate::protocol::encode_dispatches`]) and waits for the
    /// confirm. Only for a worker whose heartbeats offer a
    /// `dispatch_batch` of at least `msgs.len()`. A single dispatch is sent
    /// as by [`Broker::dispatch_publish`], with its trace headers; a batch
    /// has none (each worker derives each dispatch's span the same way,
    /// [`crate::trace::dispatch_traceparent`]).
    ///
    /// Refused when `queue` does not exist: the immediate queue only for a
    /// worker whose heartbeats offer it.
    async fn dispatch_publish_to(
        &self,
        worker_id: &str,
        queue: DispatchQueue,
        msgs: &[DispatchMsg],
    ) -> BrokerResult<()>;
    /// Publishes results in one persistent message and waits for the
    /// confirm: the body is [`crate::protocol::encode_results`], one object
    /// for one result, an array for several.
    async fn results_publish(&self, msgs: &[ResultMsg]) -> BrokerResult<()>;
    /// Publishes a heartbeat (transient: a lost one is replaced by the next).
    async fn heartbeat_publish(&self, msg: &HeartbeatMsg) -> BrokerResult<()>;
    /// Publishes a batch of execution log lines (persistent, confirmed) to
    /// the shared logs queue.
    async fn log_publish(&self, msg: &LogMsg) -> BrokerResult<()>;
    /// Consumes a worker's main queue with manual acks and at most
    /// `prefetch` unsettled deliveries.
    async fn dispatch_consume(
        &self,
        worker_id: &str,
        prefetch: u16,
    ) -> BrokerResult<DeliveryStream> {
        self.dispatch_consume_from(worker_id, DispatchQueue::Main, prefetch)
            .await
    }
    /// Consumes one of a worker's queues with manual acks and at most
    /// `prefetch` unsettled deliveries.
    async fn dispatch_consume_from(
        &self,
        worker_id: &str,
        queue: DispatchQueue,
        prefetch: u16,
    ) -> BrokerResult<DeliveryStream>;
    /// Consumes the shared result queue (competing consumers).
    async fn results_consume(&self, prefetch: u16) -> BrokerResult<DeliveryStream>;
    /// Consumes the shared heartbeat queue (competing consumers).
    async fn heartbeats_consume(&self, prefetch: u16) -> BrokerResult<DeliveryStream>;
    /// Consumes the shared logs queue (competing consumers).
    async fn logs_consume(&self, prefetch: u16) -> BrokerResult<DeliveryStream>;
    /// Consumes dispatches that workers refused or left behind.
    async fn reroute_consume(&self, prefetch: u16) -> BrokerResult<DeliveryStream>;
    /// Whether the connection is up now (for `/readyz`).
    async fn is_healthy(&self) -> bool;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_urgent_work_for_a_worker_offering_it_takes_the_immediate_queue() {
        assert_eq!(DispatchQueue::of(true, true), DispatchQueue::Immediate);
        assert_eq!(DispatchQueue::of(true, false), DispatchQueue::Main);
        assert_eq!(DispatchQueue::of(false, true), DispatchQueue::Main);
        assert_eq!(DispatchQueue::of(false, false), DispatchQueue::Main);
    }
}
