//! The broker suite's fixture: a broker per test in its own namespace, with
//! RabbitMQ cleanup on drop, and message factories.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use kairos_broker_rabbitmq::AmqpBroker;
use kairos_core::broker::{Broker, Delivery, DeliveryStream, QueueStats};
use kairos_core::protocol::{DispatchMsg, Names, PROTOCOL_VERSION, ResultKind, ResultMsg};
use kairos_inproc::MemoryBroker;
use kairos_testkit as testkit;

/// Deadline for conditions that should hold within milliseconds.
pub const WAIT: Duration = Duration::from_secs(20);

/// One test's broker, namespace and cleanup duty.
pub struct Fx {
    pub broker: Arc<dyn Broker>,
    pub names: Names,
    /// Set for RabbitMQ: where to delete this test's queues on drop.
    amqp_url: Option<String>,
    workers: Mutex<Vec<String>>,
}

impl Fx {
    /// An in-process broker.
    pub fn memory() -> Fx {
        let names = Names::new(testkit::unique("t"));
        Fx {
            broker: Arc::new(MemoryBroker::new(names.clone())),
            names,
            amqp_url: None,
            workers: Mutex::new(Vec::new()),
        }
    }

    /// A RabbitMQ broker, `None` when RabbitMQ is missing and that is allowed.
    pub async fn rabbit() -> Option<Fx> {
        let url = testkit::amqp_available().await?;
        let names = Names::new(testkit::unique("t"));
        let broker = AmqpBroker::connect(&url, names.clone())
            .await
            .expect("connect to RabbitMQ");
        Some(Fx {
            broker: Arc::new(broker),
            names,
            amqp_url: Some(url),
            workers: Mutex::new(Vec::new()),
        })
    }

    /// Declares a worker queue for this test.
    pub async fn worker(&self, tag: &str) -> String {
        let id = format!("{tag}-{}", self.names.namespace());
        self.broker
            .worker_queue_declare(&id)
            .await
            .expect("declare");
        self.workers.lock().unwrap().push(id.clone());
        id
    }

    /// The worker queue's figures.
    pub async fn stats(&self, worker: &str) -> Option<QueueStats> {
        self.broker.worker_queue_stats(worker).await.expect("stats")
    }

    /// Waits until the worker queue's figures are `(messages, consumers)`.
    pub async fn wait_stats(&self, worker: &str, messages: u32, consumers: u32) {
        let want = QueueStats {
            messages,
            consumers,
        };
        testkit::wait_for(&format!("{worker} stats {want:?}"), WAIT, || async {
            (self.stats(worker).await == Some(want)).then_some(())
        })
        .await;
    }
}

impl Drop for Fx {
    fn drop(&mut self) {
        let Some(url) = self.amqp_url.take() else {
            return;
        };
        let names = self.names.clone();
        let workers = std::mem::take(&mut *self.workers.lock().unwrap_or_else(|e| e.into_inner()));
        testkit::cleanup_blocking(Duration::from_secs(10), move || async move {
            let Ok(b) = AmqpBroker::connect(&url, names).await else {
                return;
            };
            for w in workers {
                let _ = b.worker_queue_delete(&w).await;
            }
            let _ = b.topology_delete().await;
        });
    }
}

/// A dispatch that differs in every field by `i`.
pub fn dispatch(i: u64) -> DispatchMsg {
    DispatchMsg {
        shard: None,
        immediate: false,
        parent_outputs: None,
        v: PROTOCOL_VERSION,
        execution_id: format!("exec-{i}"),
        job_id: "job-1".into(),
        attempt: 1 + (i % 3) as u32,
        handler: "noop".into(),
        params: serde_json::json!({ "i": i, "nested": { "s": "ünïcode" } }),
        scheduled_at: 1_760_000_000_000 + i as i64,
        timeout_ms: Some(5_000),
        group: None,
        trace: None,
        priority: None,
    }
}

/// The dispatch a delivery carries.
pub fn decode(d: &Delivery) -> DispatchMsg {
    serde_json::from_slice(&d.payload).expect("dispatch JSON")
}

/// The next delivery, or a panic if the stream ends or stays silent.
pub async fn next(stream: &mut DeliveryStream) -> Delivery {
    tokio::time::timeout(WAIT, stream.next())
        .await
        .expect("a delivery within the deadline")
        .expect("stream still open")
}

/// A result whose attempt number tells test messages apart.
pub fn result(i: u32) -> ResultMsg {
    ResultMsg {
        started_at: None,
        traceparent: None,
        v: PROTOCOL_VERSION,
        execution_id: format!("exec-{i}"),
        attempt: i,
        worker_id: "w".into(),
        kind: ResultKind::Succeeded,
        output: Some(serde_json::json!({ "i": i })),
        error: None,
        at: 1_760_000_000_000,
        retryable: None,
        incarnation: None,
    }
}
