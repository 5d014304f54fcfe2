//! RabbitMQ adapter of the broker port, on lapin: the topology of DESIGN.md
//! ("Broker contract"), persistent mandatory publishes with publisher confirms
//! kept in flight concurrently, manual-ack consumers on their own channels.
//!
//! # Failure behaviour
//!
//! Every call is bounded by a timeout and fails with
//! [`BrokerError::Unavailable`] when the connection is broken; consumer streams
//! end when their channel or connection goes. The next call after a break
//! reconnects (the `link` module), so callers only need to retry and re-consume.
//!
//! lapin's `enable_auto_recover()` is deliberately not used: it replays each
//! channel's consumers and declarations on the new connection, which would
//! resurrect consumers whose streams the port has already ended (their
//! prefetched deliveries would sit unacked with nobody reading them), and a
//! single failed replay (a consumer on a queue the reaper deleted) aborts the
//! whole recovery. Reconnecting lazily gives callers the same contract with no
//! hidden state.

mod consume;
mod link;
mod publish;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use lapin::options::{QueueBindOptions, QueueDeclareOptions, QueueDeleteOptions};
use lapin::types::{AMQPValue, FieldTable, ShortString};

use kairos_core::broker::{
    Broker, BrokerError, BrokerResult, DeliveryStream, DispatchQueue, QueueStats,
};
use kairos_core::priority::{DELIVERY_RANKS, Priority};
use kairos_core::protocol::{DispatchMsg, HeartbeatMsg, LogMsg, Names, ResultMsg, batch_rank};

use link::LinkHandle;

/// Bound on every broker round trip except publisher confirms.
const OP_TIMEOUT: Duration = Duration::from_secs(10);
/// Bound on [`Broker::is_healthy`], which a readiness probe calls.
const HEALTH_TIMEOUT: Duration = Duration::from_secs(3);

/// The RabbitMQ broker. Cheap to clone; clones share one connection.
#[derive(Clone)]
pub struct AmqpBroker {
    names: Names,
    link: Arc<LinkHandle>,
}

impl std::fmt::Debug for AmqpBroker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AmqpBroker")
            .field("url", &self.link.shown_url())
            .field("namespace", &self.names.namespace())
            .finish()
    }
}

/// The type of the shared queues (results, reroute, heartbeats). Worker
/// queues stay classic: each lives only as long as its worker.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum QueueType {
    /// Classic queues: one node, RabbitMQ's default.
    #[default]
    Classic,
    /// Quorum queues: replicated, the type RabbitMQ recommends for data safety.
    Quorum,
}

impl std::str::FromStr for QueueType {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "classic" => Ok(QueueType::Classic),
            "quorum" => Ok(QueueType::Quorum),
            other => Err(format!(
                "unknown queue type {other:?} (expected classic or quorum)"
            )),
        }
    }
}

impl AmqpBroker {
    /// Connects to `url` (`amqp://user:pass@host:port/vhost`) and declares the
    /// shared topology under `names`. The connection is named after the
    /// namespace in the management UI. Fails with
    /// [`BrokerError::Unavailable`] naming the URL (password masked).
    pub async fn connect(url: &str, names: Names) -> BrokerResult<AmqpBroker> {
        Self::connect_with(url, names, QueueType::Classic).await
    }

    /// Like [`AmqpBroker::connect`], declaring the shared queues (results,
    /// reroute, heartbeats) as `queue_type`. Every process of a deployment
    /// must use the same type: RabbitMQ refuses to redeclare a queue as
    /// another type.
    pub async fn connect_with(
        url: &str,
        names: Names,
        queue_type: QueueType,
    ) -> BrokerResult<AmqpBroker> {
        let link = LinkHandle::connect(url, names.clone(), queue_type).await?;
        Ok(AmqpBroker {
            names,
            link: Arc::new(link),
        })
    }

    /// The names this broker uses.
    pub fn names(&self) -> &Names {
        &self.names
    }

    /// Deletes the shared queues and exchanges of this namespace (not the
    /// worker queues: delete those with [`Broker::worker_queue_delete`]).
    /// For tests and uninstalling; running processes will fail to publish.
    pub async fn topology_delete(&self) -> BrokerResult<()> {
        let link = self.link.get().await?;
        let ch = link.temp_channel().await?;
        let queues = [
            self.names.reroute_queue(),
            self.names.results_queue(),
            self.names.heartbeats_queue(),
            self.names.logs_queue(),
        ];
        for queue in queues {
            let op = ch.queue_delete(short(&queue)?, QueueDeleteOptions::default());
            link.bounded("queue.delete", op).await?;
        }
        for exchange in [
            self.names.dispatch_exchange(),
            self.names.reroute_exchange(),
        ] {
            let op = ch.exchange_delete(short(&exchange)?, Default::default());
            link.bounded("exchange.delete", op).await?;
        }
        Ok(())
    }

    /// Declares one of a worker's dispatch queues (durable, dead-lettering
    /// to the reroute exchange, ordered by delivery rank) and returns an
    /// open channel for what follows.
    async fn declare_dispatch_queue(
        &self,
        link: &link::Link,
        name: &str,
    ) -> BrokerResult<lapin::Channel> {
        let queue = short(name)?;
        let mut args = FieldTable::default();
        args.insert(
            "x-dead-letter-exchange".into(),
            AMQPValue::LongString(self.names.reroute_exchange().into()),
        );
        // Higher delivery ranks first (see `kairos_core::priority`): a
        // classic priority queue with one level per rank. A queue declared
        // earlier keeps its arguments (redeclaring with others fails), so
        // the older shapes are tried next: ten levels (priorities only),
        // then none (first come, first served).
        let shapes = [Some(DELIVERY_RANKS), Some(Priority::MAX.get()), None];
        let mut ch = link.temp_channel().await?;
        for (i, levels) in shapes.iter().enumerate() {
            let mut args = args.clone();
            if let Some(levels) = levels {
                args.insert("x-max-priority".into(), AMQPValue::ShortShortUInt(*levels));
            }
            let op = ch.queue_declare(queue.clone(), QueueDeclareOptions::durable(), args);
            match link.bounded_raw("queue.declare", op).await? {
                Ok(_) => {
                    if i > 0 {
                        tracing::warn!(
                            queue = %queue,
                            levels = levels.unwrap_or(0),
                            "worker queue predates the current delivery ranks; delete it (with the worker stopped) to serve immediate work first"
                        );
                    }
                    return Ok(ch);
                }
                // The channel is closed by the failed declare: the next
                // shape needs a new one.
                Err(e) if link::is_precondition_failed(&e) && i + 1 < shapes.len() => {
                    ch = link.temp_channel().await?;
                }
                Err(e) => return Err(link.unavailable("queue.declare", &e)),
            }
        }
        Ok(ch)
    }

    async fn consume(
        &self,
        queue: String,
        prefetch: u16,
        reroute: bool,
    ) -> BrokerResult<DeliveryStream> {
        let link = self.link.get().await?;
        let names = reroute.then(|| self.names.clone());
        consume::open(&link, &queue, prefetch, names).await
    }
}

/// Figures of `queue`, `None` if it does not exist.
async fn queue_stats(link: &link::Link, queue: &str) -> BrokerResult<Option<QueueStats>> {
    let ch = link.temp_channel().await?;
    let options = QueueDeclareOptions::default().passive();
    let op = ch.queue_declare(short(queue)?, options, FieldTable::default());
    // A missing queue answers 404, which also closes the channel.
    match link.bounded_raw("queue.declare", op).await? {
        Ok(q) => Ok(Some(QueueStats {
            messages: q.message_count(),
            consumers: q.consumer_count(),
        })),
        Err(e) if link::is_not_found(&e) => Ok(None),
        Err(e) => Err(link.unavailable("queue.declare", &e)),
    }
}

/// A name as AMQP wants it; RabbitMQ caps names at 255 bytes.
pub(crate) fn short(name: &str) -> BrokerResult<ShortString> {
    ShortString::try_new(name)
        .map_err(|e| BrokerError::Refused(format!("name {name:.40}… is too long: {e}")))
}

#[async_trait]
impl Broker for AmqpBroker {
    async fn worker_queue_declare(&self, worker_id: &str) -> BrokerResult<()> {
        let link = self.link.get().await?;
        let main = self.names.worker_queue(worker_id);
        let ch = self.declare_dispatch_queue(&link, &main).await?;
        let exchange = short(&self.names.dispatch_exchange())?;
        let op = ch.queue_bind(
            short(&main)?,
            exchange,
            short(worker_id)?,
            QueueBindOptions::default(),
            FieldTable::default(),
        );
        link.bounded("queue.bind", op).await?;
        // Published to through the default exchange: no binding.
        let immediate = self.names.immediate_queue(worker_id);
        self.declare_dispatch_queue(&link, &immediate).await?;
        Ok(())
    }

    /// RabbitMQ's passive declare counts ready messages only (not those
    /// delivered and unacked); the in-process broker reports the same.
    async fn worker_queue_stats(&self, worker_id: &str) -> BrokerResult<Option<QueueStats>> {
        let link = self.link.get().await?;
        let main = self.names.worker_queue(worker_id);
        let Some(stats) = queue_stats(&link, &main).await? else {
            return Ok(None);
        };
        let immediate = queue_stats(&link, &self.names.immediate_queue(worker_id)).await?;
        Ok(Some(match immediate {
            Some(i) => QueueStats {
                messages: stats.messages.saturating_add(i.messages),
                consumers: stats.consumers.max(i.consumers),
            },
            None => stats,
        }))
    }

    async fn worker_queue_delete(&self, worker_id: &str) -> BrokerResult<()> {
        let link = self.link.get().await?;
        for queue in [
            self.names.worker_queue(worker_id),
            self.names.immediate_queue(worker_id),
        ] {
            let ch = link.temp_channel().await?;
            let op = ch.queue_delete(short(&queue)?, QueueDeleteOptions::default());
            match link.bounded_raw("queue.delete", op).await? {
                Ok(_) => {}
                Err(e) if link::is_not_found(&e) => {}
                Err(e) => return Err(link.unavailable("queue.delete", &e)),
            }
        }
        Ok(())
    }

    async fn dispatch_publish_to(
        &self,
        worker_id: &str,
        queue: DispatchQueue,
        msgs: &[DispatchMsg],
    ) -> BrokerResult<()> {
        let body = kairos_core::protocol::encode_dispatches(msgs)?;
        let link = self.link.get().await?;
        // The main queue is routed by worker id through the dispatch
        // exchange, the immediate one by name through the default exchange.
        let (exchange, key) = match queue {
            DispatchQueue::Main => (self.names.dispatch_exchange(), worker_id.to_string()),
            DispatchQueue::Immediate => (String::new(), self.names.immediate_queue(worker_id)),
        };
        let mut headers = Vec::with_capacity(2);
        if let [msg] = msgs {
            if let Some(parent) = kairos_core::trace::dispatch_traceparent(msg) {
                headers.push((publish::TRACEPARENT, parent));
            }
            if let Some(state) = kairos_core::trace::dispatch_tracestate(msg) {
                headers.push((publish::TRACESTATE, state.to_string()));
            }
        }
        let priority = Some(batch_rank(msgs));
        publish::publish(&link, &exchange, &key, &body, true, &headers, priority).await
    }

    async fn results_publish(&self, msgs: &[ResultMsg]) -> BrokerResult<()> {
        let body = kairos_core::protocol::encode_results(msgs)?;
        let link = self.link.get().await?;
        publish::publish(
            &link,
            "",
            &self.names.results_queue(),
            &body,
            true,
            &[],
            None,
        )
        .await
    }

    async fn heartbeat_publish(&self, msg: &HeartbeatMsg) -> BrokerResult<()> {
        let body = serde_json::to_vec(msg)?;
        let link = self.link.get().await?;
        publish::publish(
            &link,
            "",
            &self.names.heartbeats_queue(),
            &body,
            false,
            &[],
            None,
        )
        .await
    }

    async fn log_publish(&self, msg: &LogMsg) -> BrokerResult<()> {
        let body = serde_json::to_vec(msg)?;
        let link = self.link.get().await?;
        publish::publish(&link, "", &self.names.logs_queue(), &body, true, &[], None).await
    }

    async fn dispatch_consume_from(
        &self,
        worker_id: &str,
        queue: DispatchQueue,
        prefetch: u16,
    ) -> BrokerResult<DeliveryStream> {
        self.consume(self.names.dispatch_queue(worker_id, queue), prefetch, false)
            .await
    }

    async fn results_consume(&self, prefetch: u16) -> BrokerResult<DeliveryStream> {
        self.consume(self.names.results_queue(), prefetch, false)
            .await
    }

    async fn heartbeats_consume(&self, prefetch: u16) -> BrokerResult<DeliveryStream> {
        self.consume(self.names.heartbeats_queue(), prefetch, false)
            .await
    }

    async fn logs_consume(&self, prefetch: u16) -> BrokerResult<DeliveryStream> {
        self.consume(self.names.logs_queue(), prefetch, false).await
    }

    async fn reroute_consume(&self, prefetch: u16) -> BrokerResult<DeliveryStream> {
        self.consume(self.names.reroute_queue(), prefetch, true)
            .await
    }

    /// Reconnects first if the connection broke, so `/readyz` recovers on its
    /// own once RabbitMQ is back; answers within `HEALTH_TIMEOUT` regardless.
    async fn is_healthy(&self) -> bool {
        let check = tokio::time::timeout(HEALTH_TIMEOUT, self.link.get());
        matches!(check.await, Ok(Ok(_)))
    }
}
